package domain_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/google/uuid"

	"github.com/orderd/orderd/domain"
)

func TestWhoMaySeeAndActFor(t *testing.T) {
	t.Parallel()
	shop, other := uuid.New(), uuid.New()
	cases := []struct {
		name      string
		party     domain.Party
		seesOwn   bool // an order of customer "alice" at shop
		actsFor   bool // shop
		seesOther bool // an order of "bob" at other
		ownList   string
	}{
		{"admin", domain.Party{Actor: domain.ActorAdmin, Subject: "root"}, true, true, true, ""},
		{"system", domain.Party{Actor: domain.ActorSystem}, true, false, true, ""},
		{"auditor", domain.Party{Actor: domain.ActorAuditor, Subject: "inspector"}, true, false, true, ""},
		{"the merchant", domain.Party{Actor: domain.ActorMerchant, Subject: "s", MerchantID: shop}, true, true, false, ""},
		{"another merchant", domain.Party{Actor: domain.ActorMerchant, Subject: "s", MerchantID: other}, false, false, true, ""},
		{"a merchant without a merchant", domain.Party{Actor: domain.ActorMerchant, Subject: "s"}, false, false, false, ""},
		{"the customer", domain.Party{Actor: domain.ActorCustomer, Subject: "alice"}, true, false, false, "alice"},
		{"another customer", domain.Party{Actor: domain.ActorCustomer, Subject: "bob"}, false, false, true, "bob"},
		{"a customer without a subject", domain.Party{Actor: domain.ActorCustomer}, false, false, false, ""},
		{"an unknown actor", domain.Party{Actor: "root", Subject: "alice", MerchantID: shop}, false, false, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.seesOwn, tc.party.MaySeeOrder("alice", shop))
			require.Equal(t, tc.actsFor, tc.party.MayActForMerchant(shop))
			require.Equal(t, tc.seesOther, tc.party.MaySeeOrder("bob", other))
			owner, ok := tc.party.OwnOrderList()
			require.Equal(t, tc.ownList, owner)
			require.Equal(t, tc.ownList != "", ok)
		})
	}
	require.False(t, domain.Party{Actor: domain.ActorMerchant}.MayActForMerchant(uuid.Nil), "no merchant never matches no merchant")
}

func TestWhoMayAudit(t *testing.T) {
	t.Parallel()
	for actor, may := range map[domain.Actor]bool{domain.ActorAdmin: true, domain.ActorAuditor: true,
		domain.ActorMerchant: false, domain.ActorCustomer: false, domain.ActorSystem: false} {
		require.Equal(t, may, domain.Party{Actor: actor, Subject: "s"}.MayAudit(), actor)
	}
	for method, may := range map[string]bool{"GET": true, "HEAD": true, "POST": false, "PATCH": false, "DELETE": false, "PUT": false} {
		require.Equal(t, may, domain.AuditorMayCall(method), method)
	}
}

func TestWhoMayBuyAndAdminister(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		actor                      domain.Actor
		buys, administers, changes bool // changes: some merchant's settings
	}{
		{domain.ActorCustomer, true, false, false},
		{domain.ActorMerchant, false, false, true},
		{domain.ActorAdmin, false, true, true},
		{domain.ActorAuditor, false, false, false},
		{domain.ActorSystem, false, false, false},
		{"root", false, false, false},
	} {
		party := domain.Party{Actor: tc.actor, Subject: "s", MerchantID: uuid.New()}
		require.Equal(t, tc.buys, party.MayBuy(), tc.actor)
		require.Equal(t, tc.administers, party.MayAdminister(), tc.actor)
		require.Equal(t, tc.changes, party.MayChangeSomeMerchantSettings(), tc.actor)
	}
}

func TestPaymentDeadline(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	window := func(d ...time.Duration) []time.Time {
		var ends []time.Time
		for _, d := range d {
			ends = append(ends, at.Add(d))
		}
		return ends
	}
	for _, tc := range []struct {
		name       string
		timeout    int
		windowEnds []time.Time
		want       time.Time
	}{
		{"the merchant's timeout", 900, nil, at.Add(15 * time.Minute)},
		{"a drop's window ends first", 900, window(2 * time.Minute), at.Add(2 * time.Minute)},
		{"the timeout ends first", 60, window(10 * time.Minute), at.Add(time.Minute)},
		{"both at once", 120, window(2 * time.Minute), at.Add(2 * time.Minute)},
		{"a window already over", 900, window(-time.Second), at.Add(-time.Second)},
		{"the earliest of two drops' windows", 900, window(5*time.Minute, 3*time.Minute), at.Add(3 * time.Minute)},
		{"two windows, the timeout first", 60, window(5*time.Minute, 3*time.Minute), at.Add(time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, domain.PaymentDeadline(at, tc.timeout, tc.windowEnds...))
		})
	}
}

func TestPlacementRules(t *testing.T) {
	t.Parallel()
	require.True(t, domain.PlacementTakesMerchantLock("pay-1"))
	require.False(t, domain.PlacementTakesMerchantLock(""))
}

func TestMerchantAndProductFold(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	before := domain.MerchantSettings{Name: "Tea", Capacity: 2}
	after := domain.MerchantSettings{Name: "Tea", Capacity: 5}
	id := uuid.New()
	m, err := domain.Merchant{}.Evolve(domain.Event{Type: domain.EventMerchantCreated, Data: domain.MerchantCreated{MerchantID: id, MerchantSettings: before, CreatedAt: at}})
	require.NoError(t, err)
	m, err = m.Evolve(domain.Event{Type: domain.EventMerchantSecretRotated, Data: domain.MerchantSecretRotated{RotatedAt: at}})
	require.NoError(t, err)
	m, err = m.Evolve(domain.Event{Type: domain.EventMerchantUpdated, Data: domain.MerchantUpdated{Before: before, After: after, UpdatedAt: at}})
	require.NoError(t, err)
	require.Equal(t, domain.Merchant{ID: id, Settings: after.WithDefaults(), CreatedAt: at, Version: 3}, m, "settings recorded before units and time zones fold to the defaults")
	_, err = m.Evolve(domain.Event{Type: domain.EventMerchantCreated, Data: domain.MerchantCreated{MerchantID: id}})
	require.Error(t, err, "created twice")

	stock := 10
	p, err := domain.Product{}.Evolve(domain.Event{Type: domain.EventProductCreated, Data: domain.ProductCreated{ProductID: testID("p"), Stock: &stock}})
	require.NoError(t, err)
	p, err = p.Evolve(domain.Event{Type: domain.EventProductRestocked, Data: domain.ProductRestocked{Quantity: 5}})
	require.NoError(t, err)
	require.Equal(t, 15, *p.StockTotal)
	require.Equal(t, 10, stock, "the created event is not changed")
	require.Equal(t, 2, p.Version)
	unlimited, err := domain.Product{}.Evolve(domain.Event{Type: domain.EventProductCreated, Data: domain.ProductCreated{ProductID: testID("q")}})
	require.NoError(t, err)
	unlimited, err = unlimited.Evolve(domain.Event{Type: domain.EventProductRestocked, Data: domain.ProductRestocked{Quantity: 5}})
	require.NoError(t, err)
	require.Nil(t, unlimited.StockTotal)
}

func TestProductDecisions(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	n := func(v int) *int { return &v }
	created := domain.ProductCreated{ProductID: testID("p"), MerchantID: testID("m"), Name: "Tea", PriceCents: 450, Stock: n(10), CreatedAt: at}
	events, err := domain.CreateProduct(created)
	require.NoError(t, err)
	require.Equal(t, []domain.Event{{Type: domain.EventProductCreated, Data: created}}, events)
	p, err := domain.Product{}.Apply(events...)
	require.NoError(t, err)

	events, err = p.Restock(5, at.Add(time.Minute))
	require.NoError(t, err)
	p, err = p.Apply(events...)
	require.NoError(t, err)
	require.Equal(t, 15, *p.StockTotal)
	require.Equal(t, 2, p.Version)

	for name, tc := range map[string]struct {
		p        domain.Product
		quantity int
	}{
		"nothing":        {p, 0},
		"too many":       {p, domain.MaxRestock + 1},
		"unlimited":      {domain.Product{Version: 1}, 1},
		"past max stock": {domain.Product{StockTotal: n(domain.MaxStock - 4), Version: 1}, 5},
	} {
		_, err := tc.p.Restock(tc.quantity, at)
		require.Equal(t, domain.CodeValidation, domain.ErrorCode(err), name)
	}
	_, err = domain.CreateProduct(domain.ProductCreated{Name: " ", PriceCents: 1})
	require.Equal(t, domain.CodeValidation, domain.ErrorCode(err))
	_, err = p.Apply(domain.Event{Type: domain.EventProductCreated, Data: created})
	require.Error(t, err, "created twice")
}
