package domain_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/google/uuid"

	"github.com/orderd/orderd/domain"
)

// placeOne places an unpaid order through Place and folds it.
func placeOne(t *testing.T, id string) domain.Order {
	t.Helper()
	events, err := domain.Place(domain.PlaceParams{
		OrderID: testID(id), MerchantID: merchantID, CustomerID: "alice",
		Lines: []domain.LineRequest{{ProductID: productID, Quantity: 1}}, Products: products(),
		PaymentDeadline: t0.Add(deadline),
	}, t0)
	require.NoError(t, err)
	return mustApply(t, domain.Order{}, events...)
}

func payOne(t *testing.T, o domain.Order, load domain.Load, now time.Time) (domain.Order, domain.Load) {
	t.Helper()
	events, load, err := domain.Pay(o, "ref-"+o.ID.String(), load, maxWait, now)
	require.NoError(t, err)
	require.Len(t, events, 2)
	require.Equal(t, domain.EventOrderPaid, events[0].Type)
	return mustApply(t, o, events...), load
}

func TestAdmitDecision(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		load     domain.Load
		accepted bool
		seq      int64
		after    domain.Load
	}{
		{"empty merchant", v1(domain.Load{Capacity: 1}), true, 0, v1(domain.Load{Capacity: 1, Active: 1})},
		{"last free unit", v1(domain.Load{Capacity: 3, Active: 2, NextSeq: 4}), true, 0, v1(domain.Load{Capacity: 3, Active: 3, NextSeq: 4})},
		{"full", v1(domain.Load{Capacity: 3, Active: 3, NextSeq: 4}), false, 4, v1(domain.Load{Capacity: 3, Active: 3, Queued: 1, NextSeq: 5})},
		{"free unit behind a queue", v1(domain.Load{Capacity: 3, Active: 0, Queued: 1, NextSeq: 4}), false, 4, v1(domain.Load{Capacity: 3, Queued: 2, NextSeq: 5})},
		{"capacity 0", v1(domain.Load{Capacity: 0}), false, 1, v1(domain.Load{Queued: 1, NextSeq: 2})},
		{"capacity lowered below active", v1(domain.Load{Capacity: 1, Active: 4, NextSeq: 9}), false, 9, v1(domain.Load{Capacity: 1, Active: 4, Queued: 1, NextSeq: 10})},
		{"next seq unset starts at 1", v1(domain.Load{Capacity: 1, Active: 1}), false, 1, v1(domain.Load{Capacity: 1, Active: 1, Queued: 1, NextSeq: 2})},
		{"next seq negative starts at 1", v1(domain.Load{Capacity: 1, Active: 1, NextSeq: -3}), false, 1, v1(domain.Load{Capacity: 1, Active: 1, Queued: 1, NextSeq: 2})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, after := domain.Admit(domain.Order{}, tc.load, maxWait, t0)
			require.Equal(t, tc.after, after)
			if tc.accepted {
				require.Equal(t, domain.EventOrderAccepted, e.Type)
				require.Equal(t, domain.OrderAccepted{AcceptedAt: t0, ActiveAfter: after.Active, Capacity: tc.load.Capacity}, e.Data)
				return
			}
			require.Equal(t, domain.EventOrderQueued, e.Type)
			require.Equal(t, domain.OrderQueued{
				Seq: tc.seq, QueuedAt: t0, ExpiresAt: t0.Add(maxWait),
				Active: tc.load.Active, Capacity: tc.load.Capacity, Queued: tc.load.Queued,
			}, e.Data)
		})
	}
}

func TestAdmissionCapacityZeroQueuesEverything(t *testing.T) {
	t.Parallel()
	load := v1(domain.Load{Capacity: 0, NextSeq: 1})
	var last int64
	for i := range 20 {
		o, l := payOne(t, placeOne(t, fmt.Sprint("o", i)), load, t0.Add(time.Duration(i)*time.Second))
		require.Equal(t, domain.StatusQueued, o.Status)
		require.Greater(t, o.QueueSeq, last, "sequence numbers increase")
		last, load = o.QueueSeq, l
		_, _, err := domain.AdmitQueued(o, load, t0)
		require.Equal(t, domain.CodeConflict, domain.ErrorCode(err), "nothing drains at capacity 0")
	}
	require.Equal(t, v1(domain.Load{Capacity: 0, Active: 0, Queued: 20, NextSeq: 21}), load)
}

// A merchant with two units takes two orders, queues the rest in order and
// drains them head first as units free up.
func TestAdmissionQueueAndDrain(t *testing.T) {
	t.Parallel()
	load := v1(domain.Load{Capacity: 2, NextSeq: 1})
	var orders []domain.Order
	for i := range 6 {
		var o domain.Order
		o, load = payOne(t, placeOne(t, fmt.Sprint("o", i)), load, t0.Add(time.Duration(i)*time.Second))
		orders = append(orders, o)
		require.LessOrEqual(t, load.Active, load.Capacity)
	}
	for i, o := range orders {
		if i < 2 {
			require.Equal(t, domain.StatusAccepted, o.Status, i)
			require.Zero(t, o.QueueSeq)
		} else {
			require.Equal(t, domain.StatusQueued, o.Status, i)
			require.Equal(t, int64(i-1), o.QueueSeq, "seq 1, 2, 3, ... in payment order")
		}
	}
	require.Equal(t, v1(domain.Load{Capacity: 2, Active: 2, Queued: 4, NextSeq: 5}), load)

	// No free unit: the head waits and nothing changes.
	_, l, err := domain.AdmitQueued(orders[2], load, t0)
	require.Equal(t, domain.CodeConflict, domain.ErrorCode(err))
	require.Equal(t, load, l)

	// A completion frees a unit for exactly one queued order.
	ev, load, err := domain.Complete(orders[0], load, t0.Add(time.Minute))
	require.NoError(t, err)
	orders[0] = mustApply(t, orders[0], ev...)
	e, load, err := domain.AdmitQueued(orders[2], load, t0.Add(time.Minute))
	require.NoError(t, err)
	orders[2] = mustApply(t, orders[2], e)
	require.Equal(t, domain.StatusAccepted, orders[2].Status)
	require.Equal(t, domain.OrderAccepted{AcceptedAt: t0.Add(time.Minute), ActiveAfter: 2, Capacity: 2, FromQueue: true, Queued: 4}, e.Data)
	require.Equal(t, v1(domain.Load{Capacity: 2, Active: 2, Queued: 3, NextSeq: 5}), load)
	_, _, err = domain.AdmitQueued(orders[3], load, t0.Add(time.Minute))
	require.Equal(t, domain.CodeConflict, domain.ErrorCode(err))

	// A new payment never overtakes the queue even when a unit is free.
	load.Active, load.ActiveOrders = 1, 1
	o, load2 := payOne(t, placeOne(t, "late"), load, t0.Add(2*time.Minute))
	require.Equal(t, domain.StatusQueued, o.Status)
	require.Equal(t, int64(5), o.QueueSeq)
	require.Equal(t, v1(domain.Load{Capacity: 2, Active: 1, Queued: 4, NextSeq: 6}), load2)
}

func TestAdmitQueuedRefusals(t *testing.T) {
	t.Parallel()
	o, _ := payOne(t, placeOne(t, "q"), v1(domain.Load{Capacity: 1, Active: 1, NextSeq: 3}), t0)
	require.Equal(t, domain.StatusQueued, o.Status)
	for _, load := range []domain.Load{
		{Capacity: 1, Active: 1, Queued: 1},
		{Capacity: 1, Active: 5, Queued: 1}, // capacity lowered under active orders
		{Capacity: 0, Active: 0, Queued: 1},
		{Capacity: 3, Active: 0, Queued: 0}, // the load says nobody waits
	} {
		e, after, err := domain.AdmitQueued(o, load, t0)
		require.Equal(t, domain.CodeConflict, domain.ErrorCode(err), "%+v", load)
		require.Equal(t, domain.Event{}, e)
		require.Equal(t, load, after)
	}
}

func TestRequeueReturnsToOriginalPlace(t *testing.T) {
	t.Parallel()
	// o is queued with seq 7, two later orders get 8 and 9.
	load := v1(domain.Load{Capacity: 1, Active: 1, NextSeq: 7})
	o, load := payOne(t, placeOne(t, "o"), load, t0)
	_, load = payOne(t, placeOne(t, "p"), load, t0.Add(time.Second))
	_, load = payOne(t, placeOne(t, "q"), load, t0.Add(2*time.Second))
	require.Equal(t, int64(7), o.QueueSeq)
	require.Equal(t, v1(domain.Load{Capacity: 1, Active: 1, Queued: 3, NextSeq: 10}), load)

	ev, load := domain.Expire(o, load, t0.Add(maxWait))
	o = mustApply(t, o, ev...)
	require.Equal(t, domain.StatusExpired, o.Status)
	require.Equal(t, 2, load.Queued)

	later := t0.Add(3 * time.Hour)
	ev, load, err := domain.Requeue(o, load, maxWait, later)
	require.NoError(t, err)
	require.Equal(t, []domain.Event{{Type: domain.EventOrderRequeued, Data: domain.OrderRequeued{Seq: 7, QueuedAt: later, ExpiresAt: later.Add(maxWait)}}}, ev)
	o = mustApply(t, o, ev...)
	require.Equal(t, domain.StatusQueued, o.Status)
	require.Equal(t, int64(7), o.QueueSeq, "ahead of 8 and 9")
	require.Equal(t, v1(domain.Load{Capacity: 1, Active: 1, Queued: 3, NextSeq: 10}), load, "no new sequence number is drawn")
	require.Nil(t, o.EndedAt)
	require.Empty(t, o.StatusReason)
	require.Equal(t, later, *o.QueuedAt)
	require.Equal(t, later.Add(maxWait), *o.QueueExpiresAt)
	require.Equal(t, 5, o.Version, "placed, paid, queued, expired, requeued")

	// The fresh expiry applies: not expired just before it, expired at it.
	ev, _ = domain.Expire(o, load, later.Add(maxWait-time.Nanosecond))
	require.Empty(t, ev)
	ev, _ = domain.Expire(o, load, later.Add(maxWait))
	require.Len(t, ev, 1)
}

func TestPlaceValidationBounds(t *testing.T) {
	t.Parallel()
	other := testID("prod-of-another-merchant")
	prods := products()
	prods[other] = domain.ProductRef{ID: other, MerchantID: testID("someone-else"), PriceCents: 1}
	prods[testID("cheap")] = domain.ProductRef{ID: testID("cheap"), MerchantID: merchantID, PriceCents: 199}
	prods[testID("free")] = domain.ProductRef{ID: testID("free"), MerchantID: merchantID, PriceCents: 0}
	many := func(n int) []domain.LineRequest {
		out := make([]domain.LineRequest, n)
		for i := range out {
			id := testID(fmt.Sprintf("p%02d", i))
			prods[id] = domain.ProductRef{ID: id, MerchantID: merchantID, PriceCents: int64(i + 1)}
			out[i] = domain.LineRequest{ProductID: id, Quantity: 1}
		}
		return out
	}
	fifty, fiftyOne := many(50), many(51)
	line := func(id uuid.UUID, q int) domain.LineRequest { return domain.LineRequest{ProductID: id, Quantity: q} }
	cases := []struct {
		name     string
		customer string
		lines    []domain.LineRequest
		code     domain.Code
		total    int64
	}{
		{"no lines (nil)", "c", nil, domain.CodeValidation, 0},
		{"no lines (empty)", "c", []domain.LineRequest{}, domain.CodeValidation, 0},
		{"50 lines", "c", fifty, "", 50 * 51 / 2},
		{"51 lines", "c", fiftyOne, domain.CodeValidation, 0},
		{"quantity 0", "c", []domain.LineRequest{line(productID, 0)}, domain.CodeValidation, 0},
		{"quantity -1", "c", []domain.LineRequest{line(productID, -1)}, domain.CodeValidation, 0},
		{"quantity 1", "c", []domain.LineRequest{line(productID, 1)}, "", 450},
		{"quantity 100", "c", []domain.LineRequest{line(productID, 100)}, "", 45000},
		{"quantity 101", "c", []domain.LineRequest{line(productID, 101)}, domain.CodeValidation, 0},
		{"quantity 101 on a later line", "c", []domain.LineRequest{line(productID, 1), line(testID("cheap"), 101)}, domain.CodeValidation, 0},
		{"repeated product", "c", []domain.LineRequest{line(productID, 1), line(testID("cheap"), 1), line(productID, 2)}, domain.CodeValidation, 0},
		{"product of another merchant", "c", []domain.LineRequest{line(productID, 1), line(other, 1)}, domain.CodeValidation, 0},
		{"unknown product", "c", []domain.LineRequest{line(productID, 1), line(testID("nope"), 1)}, domain.CodeNotFound, 0},
		{"empty customer", "", []domain.LineRequest{line(productID, 1)}, domain.CodeValidation, 0},
		{"customer id too long", strings.Repeat("c", domain.MaxIDLength+1), []domain.LineRequest{line(productID, 1)}, domain.CodeValidation, 0},
		{"customer id at the limit", strings.Repeat("c", domain.MaxIDLength), []domain.LineRequest{line(productID, 1)}, "", 450},
		{"total in cents", "c", []domain.LineRequest{line(productID, 3), line(testID("cheap"), 2), line(testID("free"), 7)}, "", 3*450 + 2*199},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			events, err := domain.Place(domain.PlaceParams{
				OrderID: testID("o"), MerchantID: merchantID, CustomerID: tc.customer,
				Lines: tc.lines, Products: prods, PaymentDeadline: t0.Add(deadline),
			}, t0)
			if tc.code != "" {
				require.Equal(t, tc.code, domain.ErrorCode(err), "error: %v", err)
				require.Empty(t, events)
				return
			}
			require.NoError(t, err)
			require.Len(t, events, 1)
			placed := events[0].Data.(domain.OrderPlaced)
			require.Equal(t, tc.total, placed.TotalCents)
			require.Len(t, placed.Items, len(tc.lines))
			for i, it := range placed.Items {
				require.Equal(t, tc.lines[i].ProductID, it.ProductID)
				require.Equal(t, tc.lines[i].Quantity, it.Quantity)
				require.Equal(t, prods[it.ProductID].PriceCents, it.PriceCents, "priced at placing time")
			}
			o := mustApply(t, domain.Order{}, events...)
			require.Equal(t, domain.StatusAwaitingPayment, o.Status)
			require.Equal(t, 1, o.Version)
			require.Equal(t, tc.total, o.TotalCents)
			require.Equal(t, t0, o.PlacedAt)
			require.Equal(t, t0.Add(deadline), o.PaymentDeadline)
			require.Nil(t, o.PaidAt)
			require.Nil(t, o.EndedAt)
		})
	}
}

func TestPlacedItemsDoNotAliasTheEvent(t *testing.T) {
	t.Parallel()
	events, err := domain.Place(domain.PlaceParams{
		OrderID: testID("o"), MerchantID: merchantID, CustomerID: "c",
		Lines: []domain.LineRequest{{ProductID: productID, Quantity: 1}}, Products: products(),
	}, t0)
	require.NoError(t, err)
	o := mustApply(t, domain.Order{}, events...)
	o.Items[0].Quantity = 99
	require.Equal(t, 1, events[0].Data.(domain.OrderPlaced).Items[0].Quantity)
}

func validSettings() domain.MerchantSettings {
	return domain.MerchantSettings{
		Name: "Tea House", Capacity: 3,
		PrepSeconds:           domain.DefaultPrepSeconds,
		MaxQueueWaitSeconds:   domain.DefaultMaxQueueWaitSeconds,
		PaymentTimeoutSeconds: domain.DefaultPaymentTimeoutSeconds,
	}
}

func TestMerchantSettingsBounds(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		mutate func(*domain.MerchantSettings)
		ok     bool
	}{
		{"defaults", func(*domain.MerchantSettings) {}, true},
		{"capacity 0 pauses intake", func(s *domain.MerchantSettings) { s.Capacity = 0 }, true},
		{"capacity -1", func(s *domain.MerchantSettings) { s.Capacity = -1 }, false},
		{"capacity 100000", func(s *domain.MerchantSettings) { s.Capacity = domain.MaxCapacity }, true},
		{"capacity 100001", func(s *domain.MerchantSettings) { s.Capacity = 100_001 }, false},
		{"empty name", func(s *domain.MerchantSettings) { s.Name = "" }, false},
		{"blank name", func(s *domain.MerchantSettings) { s.Name = " \t " }, false},
		{"name 200", func(s *domain.MerchantSettings) { s.Name = strings.Repeat("n", domain.MaxNameLength) }, true},
		{"name 201", func(s *domain.MerchantSettings) { s.Name = strings.Repeat("n", domain.MaxNameLength+1) }, false},
		{"prep 0", func(s *domain.MerchantSettings) { s.PrepSeconds = 0 }, false},
		{"prep 1", func(s *domain.MerchantSettings) { s.PrepSeconds = 1 }, true},
		{"prep a week", func(s *domain.MerchantSettings) { s.PrepSeconds = domain.MaxSettingSeconds }, true},
		{"prep a week and a second", func(s *domain.MerchantSettings) { s.PrepSeconds = domain.MaxSettingSeconds + 1 }, false},
		{"queue wait 0", func(s *domain.MerchantSettings) { s.MaxQueueWaitSeconds = 0 }, false},
		{"queue wait too long", func(s *domain.MerchantSettings) { s.MaxQueueWaitSeconds = domain.MaxSettingSeconds + 1 }, false},
		{"payment timeout -5", func(s *domain.MerchantSettings) { s.PaymentTimeoutSeconds = -5 }, false},
		{"payment timeout too long", func(s *domain.MerchantSettings) { s.PaymentTimeoutSeconds = domain.MaxSettingSeconds + 1 }, false},
		{"https webhook", func(s *domain.MerchantSettings) { s.WebhookURL = "https://hooks.example.com/orderd?x=1" }, true},
		{"http webhook with port", func(s *domain.MerchantSettings) { s.WebhookURL = "http://hooks.example.com:8080/h" }, true},
		{"upper-case scheme", func(s *domain.MerchantSettings) { s.WebhookURL = "HTTPS://hooks.example.com/h" }, true},
		{"ftp webhook", func(s *domain.MerchantSettings) { s.WebhookURL = "ftp://hooks.example.com/h" }, false},
		{"relative webhook", func(s *domain.MerchantSettings) { s.WebhookURL = "/hooks/orderd" }, false},
		{"scheme-relative webhook", func(s *domain.MerchantSettings) { s.WebhookURL = "//hooks.example.com/h" }, false},
		{"no host", func(s *domain.MerchantSettings) { s.WebhookURL = "https:///h" }, false},
		{"port only", func(s *domain.MerchantSettings) { s.WebhookURL = "https://:443/h" }, false},
		{"opaque", func(s *domain.MerchantSettings) { s.WebhookURL = "https:hooks.example.com" }, false},
		{"user and password", func(s *domain.MerchantSettings) { s.WebhookURL = "https://u:p@hooks.example.com/h" }, false},
		{"user only", func(s *domain.MerchantSettings) { s.WebhookURL = "https://u@hooks.example.com/h" }, false},
		{"empty user info", func(s *domain.MerchantSettings) { s.WebhookURL = "https://@hooks.example.com/h" }, false},
		{"unparsable", func(s *domain.MerchantSettings) { s.WebhookURL = "https://hooks.example.com:port/h" }, false},
		{"leading space", func(s *domain.MerchantSettings) { s.WebhookURL = " https://hooks.example.com/h" }, false},
		{"webhook at the length limit", func(s *domain.MerchantSettings) {
			s.WebhookURL = "https://hooks.example.com/" + strings.Repeat("a", domain.MaxURLLength-len("https://hooks.example.com/"))
		}, true},
		{"webhook too long", func(s *domain.MerchantSettings) {
			s.WebhookURL = "https://hooks.example.com/" + strings.Repeat("a", domain.MaxURLLength+1-len("https://hooks.example.com/"))
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := validSettings()
			tc.mutate(&s)
			err := s.Validate()
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.Equal(t, domain.CodeValidation, domain.ErrorCode(err), "error: %v", err)
			require.ErrorIs(t, err, &domain.Error{Code: domain.CodeValidation})
			if s.WebhookURL != "" && s.WebhookURL != validSettings().WebhookURL {
				require.Equal(t, err, domain.ValidateWebhookURL(s.WebhookURL), "Validate reports the URL's own error")
			}
		})
	}
}

func TestProductAndRestockBounds(t *testing.T) {
	t.Parallel()
	n := func(v int) *int { return &v }
	cases := []struct {
		name          string
		pname         string
		price         int64
		stock, perUsr *int
		ok            bool
	}{
		{"unlimited, no limit", "Tea", 450, nil, nil, true},
		{"free", "Water", 0, nil, nil, true},
		{"negative price", "Tea", -1, nil, nil, false},
		{"max price", "Tea", domain.MaxPriceCents, nil, nil, true},
		{"price too high", "Tea", domain.MaxPriceCents + 1, nil, nil, false},
		{"stock 0", "Tea", 1, n(0), nil, true},
		{"stock -1", "Tea", 1, n(-1), nil, false},
		{"max stock", "Tea", 1, n(domain.MaxStock), nil, true},
		{"stock too high", "Tea", 1, n(domain.MaxStock + 1), nil, false},
		{"per user 0", "Tea", 1, nil, n(0), false},
		{"per user 1", "Tea", 1, nil, n(1), true},
		{"per user max", "Tea", 1, nil, n(domain.MaxPerUserLimit), true},
		{"per user too high", "Tea", 1, nil, n(domain.MaxPerUserLimit + 1), false},
		{"blank name", "  ", 1, nil, nil, false},
		{"name 200", strings.Repeat("x", 200), 1, nil, nil, true},
		{"name 201", strings.Repeat("x", 201), 1, nil, nil, false},
	}
	for _, tc := range cases {
		err := domain.ValidateProduct(tc.pname, tc.price, tc.stock, tc.perUsr)
		if tc.ok {
			require.NoError(t, err, tc.name)
		} else {
			require.Equal(t, domain.CodeValidation, domain.ErrorCode(err), tc.name)
		}
	}
	for q, ok := range map[int]bool{-1: false, 0: false, 1: true, domain.MaxRestock: true, domain.MaxRestock + 1: false} {
		err := domain.ValidateRestock(q)
		if ok {
			require.NoError(t, err, q)
		} else {
			require.Equal(t, domain.CodeValidation, domain.ErrorCode(err), q)
		}
	}
}

func TestDecodeEveryEventType(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 9, 23, 10, 11, 12, 123456789, time.UTC)
	stock, limit := 5, 2
	events := []domain.Event{
		{Type: domain.EventOrderPlaced, Data: domain.OrderPlaced{OrderID: testID("o"), MerchantID: testID("m"), CustomerID: "c",
			Items: []domain.Item{{ProductID: testID("p"), Quantity: 2, PriceCents: 450}, {ProductID: testID("q"), Quantity: 1, PriceCents: 0,
				Options: []domain.ChosenOption{{ID: "large", Name: "Large", PriceDeltaCents: 80}, {ID: "none", Name: "No sugar", PriceDeltaCents: -10}}}},
			TotalCents: 900, PlacedAt: at, PaymentDeadline: at.Add(deadline)}},
		{Type: domain.EventOrderPaid, Data: domain.OrderPaid{PaymentRef: "ref", PaidAt: at}},
		{Type: domain.EventOrderQueued, Data: domain.OrderQueued{Seq: 42, QueuedAt: at, ExpiresAt: at.Add(maxWait), Active: 3, Capacity: 3, Queued: 7}},
		{Type: domain.EventOrderAccepted, Data: domain.OrderAccepted{AcceptedAt: at, ActiveAfter: 2, Capacity: 3}},
		{Type: domain.EventOrderAccepted, Data: domain.OrderAccepted{AcceptedAt: at, ActiveAfter: 3, Capacity: 3, FromQueue: true}},
		{Type: domain.EventOrderCompleted, Data: domain.OrderCompleted{CompletedAt: at}},
		{Type: domain.EventOrderCancelled, Data: domain.OrderCancelled{By: domain.ActorCustomer, From: domain.StatusQueued, CancelledAt: at}},
		{Type: domain.EventOrderCancelled, Data: domain.OrderCancelled{Reason: "out of milk", By: domain.ActorMerchant, From: domain.StatusAccepted, CancelledAt: at}},
		{Type: domain.EventOrderClosed, Data: domain.OrderClosed{Reason: domain.ReasonPaymentTimeout, ClosedAt: at}},
		{Type: domain.EventOrderExpired, Data: domain.OrderExpired{Reason: domain.ReasonQueueTimeout, ExpiredAt: at}},
		{Type: domain.EventOrderRequeued, Data: domain.OrderRequeued{Seq: 42, QueuedAt: at, ExpiresAt: at.Add(maxWait)}},
		{Type: domain.EventOrderScheduled, Data: domain.OrderScheduled{Seq: 7, ScheduledAt: at, ReleaseAt: at.Add(time.Hour)}},
		{Type: domain.EventMerchantPeriodChanged, Data: domain.MerchantPeriodChanged{Capacity: &limit, NextEdge: &at, ChangedAt: at}},
		{Type: domain.EventMerchantCreated, Data: domain.MerchantCreated{MerchantID: merchantID, MerchantSettings: domain.MerchantSettings{
			Name: "Tea", Capacity: 2, PrepSeconds: 120, MaxQueueWaitSeconds: 1800, PaymentTimeoutSeconds: 900, WebhookURL: "https://h.example/x"}, CreatedAt: at}},
		{Type: domain.EventMerchantUpdated, Data: domain.MerchantUpdated{Before: validSettings(), After: domain.MerchantSettings{Name: "Tea", Capacity: 0}, UpdatedAt: at}},
		{Type: domain.EventMerchantSecretRotated, Data: domain.MerchantSecretRotated{RotatedAt: at}},
		{Type: domain.EventProductCreated, Data: domain.ProductCreated{ProductID: testID("p"), MerchantID: testID("m"), Name: "Tea", PriceCents: 450, Stock: &stock, PerUserLimit: &limit, CreatedAt: at}},
		{Type: domain.EventProductCreated, Data: domain.ProductCreated{ProductID: testID("p"), MerchantID: testID("m"), Name: "Tea", CreatedAt: at}},
		{Type: domain.EventProductRestocked, Data: domain.ProductRestocked{Quantity: 4, RestockedAt: at}},
		{Type: domain.EventProductCreated, Data: domain.ProductCreated{ProductID: testID("t"), MerchantID: testID("m"), Name: "Milk tea", PriceCents: 450, OptionGroups: teaGroups(), CreatedAt: at}},
		{Type: domain.EventProductUpdated, Data: domain.ProductUpdated{Name: ptrTo("Tea"), PriceCents: ptrTo(int64(500)), OptionGroups: &[]domain.OptionGroup{}, Available: ptrTo(false), UpdatedAt: at}},
		{Type: domain.EventProductHidden, Data: domain.ProductHidden{HiddenAt: at}},
		{Type: domain.EventOrderPickedUp, Data: domain.OrderPickedUp{PickedUpAt: at}},
		{Type: domain.EventOrderReopened, Data: domain.OrderReopened{ReopenedAt: at, ActiveAfter: 4, Capacity: 3, Load: 2}},
	}
	seen := map[string]bool{}
	for _, e := range events {
		t.Run(e.Type, func(t *testing.T) {
			b, err := json.Marshal(e.Data)
			require.NoError(t, err)
			got, err := domain.DecodeEvent(e.Type, b)
			require.NoError(t, err)
			require.Equal(t, e, got)
			require.IsType(t, e.Data, got.Data, "decoded to the value type, not a pointer")
			_, err = domain.DecodeEvent(e.Type, []byte(`{"broken`))
			require.Error(t, err)
		})
		seen[e.Type] = true
	}
	require.Len(t, seen, 20, "every event type")
	for _, typ := range []string{"order.teleported", "", "ORDER.PLACED", "order.placed "} {
		got, err := domain.DecodeEvent(typ, []byte(`{}`))
		require.Error(t, err, typ)
		require.Equal(t, domain.Event{}, got)
	}
	// Decoded order events fold like the originals.
	o, err := domain.Order{}.Apply(events[:3]...)
	require.NoError(t, err)
	require.Equal(t, domain.StatusQueued, o.Status)
	require.Equal(t, int64(42), o.QueueSeq)
}

func TestEvolveRejectsUnknownEvents(t *testing.T) {
	t.Parallel()
	o := placeOne(t, "o")
	for _, e := range []domain.Event{
		{Type: domain.EventOrderPaid, Data: &domain.OrderPaid{PaymentRef: "r"}}, // a pointer, not the value
		{Type: domain.EventMerchantSecretRotated, Data: domain.MerchantSecretRotated{}},
		{Type: "x", Data: nil},
	} {
		_, err := o.Apply(e)
		require.Error(t, err, "%T", e.Data)
	}
}

func TestEstimateWaitFallback(t *testing.T) {
	t.Parallel()
	none := domain.CompletionStats{}
	cases := []struct{ pos, capacity, prep, want int }{
		{1, 1, 120, 120},
		{4, 2, 120, 240},
		{5, 3, 100, 167}, // 166.67 rounded up
		{3, 0, 120, 360}, // capacity 0 counts as 1
		{3, -2, 120, 360},
		{10, 100000, 120, 1}, // a fraction of a second still shows as one
		{0, 2, 120, 0},
		{-1, 2, 120, 0},
		{1_000_000, 1, domain.MaxSettingSeconds, 7 * 24 * 3600}, // capped at a week
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, domain.EstimateWait(tc.pos, tc.capacity, tc.prep, none), "%+v", tc)
	}
	// Two measured gaps are not enough: still the fallback.
	var stats domain.CompletionStats
	for i := range 3 {
		stats = stats.ObserveCompletion(t0.Add(time.Duration(i)*2*time.Second), true, 1)
	}
	require.Equal(t, 2, stats.Samples)
	require.Equal(t, 240, domain.EstimateWait(4, 2, 120, stats))
}

func TestWaitBasis(t *testing.T) {
	t.Parallel()
	var measured domain.CompletionStats
	for i := range 10 {
		measured = measured.ObserveCompletion(t0.Add(time.Duration(i)*2*time.Second), true, 1)
	}
	cases := []struct {
		name             string
		basis            domain.WaitBasis
		unitsAhead, load int
		want             int
	}{
		{"the kitchen full, one order ahead: two to complete", domain.WaitBasis{Capacity: 2, Active: 2, PrepSeconds: 120}, 1, 1, 120},
		{"room for it but a line ahead: one to complete", domain.WaitBasis{Capacity: 2, Active: 1, PrepSeconds: 120}, 1, 1, 60},
		{"larger than the kitchen: everything before it", domain.WaitBasis{Capacity: 2, Active: 1, PrepSeconds: 120}, 1, 5, 120},
		{"a measured kitchen", domain.WaitBasis{Capacity: 2, Active: 2, PrepSeconds: 120, Stats: measured}, 3, 1, domain.EstimateWait(4, 2, 120, measured)},
	}
	for _, tc := range cases {
		want := domain.EstimateWait(domain.UnitsToWaitFor(tc.basis.Active, tc.basis.Capacity, tc.unitsAhead, tc.load), tc.basis.Capacity, tc.basis.PrepSeconds, tc.basis.Stats)
		require.Equal(t, want, tc.want, tc.name)
		require.Equal(t, tc.want, tc.basis.Wait(tc.unitsAhead, tc.load), tc.name)
	}
}

// merchantSim completes one order every gap while orders are waiting.
type merchantSim struct {
	stats domain.CompletionStats
	now   time.Time
}

func (m *merchantSim) complete(gap time.Duration, saturated bool) {
	m.now = m.now.Add(gap)
	m.stats = m.stats.ObserveCompletion(m.now, saturated, 1)
}

func requireETANear(t *testing.T, stats domain.CompletionStats, perOrder float64) {
	t.Helper()
	for p := 1; p <= 50; p++ {
		want := float64(p) * perOrder
		got := domain.EstimateWait(p, 4, 120, stats)
		require.InDelta(t, want, float64(got), 0.25*want+1, "position %d", p) // +1 for the rounding up
	}
}

func TestEstimateWaitLearnsTheMerchantsPace(t *testing.T) {
	t.Parallel()
	m := merchantSim{now: t0}
	m.complete(0, true) // the first completion has nothing to measure against
	require.Zero(t, m.stats.Samples)
	require.Zero(t, m.stats.IntervalSeconds)
	for range 3 {
		m.complete(2*time.Second, true)
	}
	require.Equal(t, 3, m.stats.Samples)
	requireETANear(t, m.stats, 2)
	for range 20 {
		m.complete(2*time.Second, true)
	}
	require.InDelta(t, 2, m.stats.IntervalSeconds, 1e-9)
	requireETANear(t, m.stats, 2)

	// Quiet spells with nobody waiting say nothing about the pace.
	before := m.stats
	m.complete(10*time.Minute, false)
	m.complete(45*time.Minute, false)
	require.Equal(t, before.Samples, m.stats.Samples)
	require.Equal(t, before.IntervalSeconds, m.stats.IntervalSeconds)
	require.Nil(t, m.stats.LastCompletion, "a completion with nobody waiting starts no gap")
	// Busy again: a gap from the lull's last completion would count its
	// idle time, so the first busy completion starts the next gap.
	m.complete(2*time.Second, true)
	require.Equal(t, before.Samples, m.stats.Samples)
	m.complete(2*time.Second, true)
	require.Equal(t, before.Samples+1, m.stats.Samples)
	require.InDelta(t, 2, m.stats.IntervalSeconds, 1e-9)
	requireETANear(t, m.stats, 2)

	// The merchant slows down; the estimate follows, over a few dozen
	// completions (ewmaAlpha).
	for range 50 {
		m.complete(4*time.Second, true)
	}
	requireETANear(t, m.stats, 4)
}

func TestObserveCompletionClampsGaps(t *testing.T) {
	t.Parallel()
	var s domain.CompletionStats
	s = s.ObserveCompletion(t0, true, 1)
	s = s.ObserveCompletion(t0.Add(5*time.Hour), true, 1)
	require.Equal(t, 3600.0, s.IntervalSeconds, "at most an hour")
	var z domain.CompletionStats
	z = z.ObserveCompletion(t0, true, 1)
	z = z.ObserveCompletion(t0, true, 1)
	require.Equal(t, 0.01, z.IntervalSeconds, "simultaneous completions still count as a tiny gap")
	// Caller's time going backwards must not make a negative interval.
	z = z.ObserveCompletion(t0.Add(-time.Minute), true, 1)
	require.Greater(t, z.IntervalSeconds, 0.0)
}

// Real kitchens are uneven: one order after 1 s, the next after 3 s. The
// estimate smooths them to the mean pace rather than following the last gap.
func TestEstimateWaitSmoothsJitter(t *testing.T) {
	t.Parallel()
	m := merchantSim{now: t0}
	m.complete(0, true)
	for i := range 40 {
		m.complete(time.Duration(1+2*(i%2))*time.Second, true)
		if m.stats.Samples >= 10 {
			requireETANear(t, m.stats, 2)
		}
	}
}

// Paying at placement folds the payment into order.placed, and an order
// accepted at once its placement into order.accepted: events whose fold, and
// whose round trip through JSON, equal placing and then paying, except for
// the version, which counts the events fewer.
func TestPayAtPlacement(t *testing.T) {
	t.Parallel()
	placed, err := domain.Place(domain.PlaceParams{
		OrderID: testID("o-1"), MerchantID: merchantID, CustomerID: "alice",
		Lines: []domain.LineRequest{{ProductID: productID, Quantity: 2}}, Products: products(),
		PaymentDeadline: t0.Add(deadline),
	}, t0)
	require.NoError(t, err)
	cases := []struct {
		name   string
		load   domain.Load
		status domain.OrderStatus
		types  []string
	}{
		{"accepted", v1(domain.Load{Capacity: 1}), domain.StatusAccepted, []string{domain.EventOrderAccepted}},
		{"queued", v1(domain.Load{Capacity: 1, Active: 1, NextSeq: 7}), domain.StatusQueued, []string{domain.EventOrderQueued}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			events, load, err := domain.PayAtPlacement(placed[0], " ref-1 ", tc.load, maxWait, t0)
			require.NoError(t, err)
			var types []string
			for _, e := range events {
				types = append(types, e.Type)
			}
			require.Equal(t, tc.types, types)
			got := mustApply(t, domain.Order{}, events...)

			want, wantLoad := payOne(t, mustApply(t, domain.Order{}, placed...), tc.load, t0)
			require.Equal(t, wantLoad, load)
			require.Equal(t, tc.status, got.Status)
			require.Equal(t, "ref-1", got.PaymentRef)
			want.PaymentRef = "ref-1"
			want.Version = len(events)
			require.Equal(t, want, got)

			var stored []domain.Event
			for _, e := range events {
				data, err := json.Marshal(e.Data)
				require.NoError(t, err)
				back, err := domain.DecodeEvent(e.Type, data)
				require.NoError(t, err)
				stored = append(stored, back)
			}
			require.Equal(t, got, mustApply(t, domain.Order{}, stored...))
		})
	}

	_, _, err = domain.PayAtPlacement(placed[0], "", v1(domain.Load{Capacity: 1}), maxWait, t0)
	require.Equal(t, domain.CodeValidation, domain.ErrorCode(err))
	_, _, err = domain.PayAtPlacement(domain.Event{Type: domain.EventOrderPaid, Data: domain.OrderPaid{}}, "r", v1(domain.Load{Capacity: 1}), maxWait, t0)
	require.Error(t, err)
	paidPlacement := placed[0].Data.(domain.OrderPlaced)
	paidPlacement.PaymentRef, paidPlacement.PaidAt = "r", &t0
	_, _, err = domain.PayAtPlacement(domain.Event{Type: domain.EventOrderPlaced, Data: paidPlacement}, "r", v1(domain.Load{Capacity: 1}), maxWait, t0)
	require.Error(t, err, "a placement that carries its payment is not paid again")
	for _, load := range []domain.Load{v1(domain.Load{Capacity: 1}), v1(domain.Load{Capacity: 1, Active: 1})} {
		decided, _, err := domain.PayAtPlacement(placed[0], "r", load, maxWait, t0)
		require.NoError(t, err)
		_, _, err = domain.PayAtPlacement(decided[0], "r", load, maxWait, t0)
		require.Error(t, err, "a decision that carries its placement is not paid again")
		_, err = mustApply(t, domain.Order{}, placed...).Evolve(decided[0])
		require.Error(t, err, "a %s that carries a placement starts its stream", decided[0].Type)
	}
	_, _, err = domain.PayAtPlacement(placed[0], "r", v1(domain.Load{Capacity: 1}), maxWait, t0.Add(deadline))
	require.ErrorIs(t, err, domain.ErrInvalidTransition, "a payment at or after the deadline is refused")
}

// v1 is a load as v1 kept it, every order of load 1 in the normal lane: its
// units are its orders.
func v1(l domain.Load) domain.Load {
	l.ActiveOrders, l.QueuedUnits = l.Active, l.Queued
	return l
}

func TestCheckReplay(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name         string
		first, again []byte
		code         domain.Code
	}{
		{"the same body replays", []byte{1, 2, 3}, []byte{1, 2, 3}, ""},
		{"another body is refused", []byte{1, 2, 3}, []byte{1, 2, 4}, domain.CodeIdempotencyReused},
		{"a body where the first had none is refused", nil, []byte{1}, domain.CodeIdempotencyReused},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := domain.CheckReplay(c.first, c.again)
			if c.code == "" {
				require.NoError(t, err)
				return
			}
			require.Equal(t, c.code, domain.ErrorCode(err))
		})
	}
}

func TestDrainLine(t *testing.T) {
	t.Parallel()
	queued := func(id string, load int, lane domain.Lane) domain.Order {
		return domain.Order{ID: uuid.NewSHA1(uuid.Nil, []byte(id)), Status: domain.StatusQueued, Load: load, Lane: lane}
	}
	a, b, c := queued("a", 1, domain.LaneNormal), queued("b", 1, domain.LaneNormal), queued("c", 1, domain.LaneNormal)
	big := queued("big", 3, domain.LaneNormal)
	vip := queued("vip", 1, domain.LanePriority)
	cases := []struct {
		name     string
		head     []domain.Order
		load     domain.Load
		limit    int
		admitted []domain.Order
		more     bool
		code     domain.Code
	}{
		{name: "room for two of three", head: []domain.Order{a, b}, load: v1(domain.Load{Capacity: 3, Active: 1, Queued: 3}), limit: 100, admitted: []domain.Order{a, b}},
		{name: "no room", head: nil, load: v1(domain.Load{Capacity: 1, Active: 1, Queued: 3}), limit: 100},
		{name: "a head that does not fit holds back the line", head: []domain.Order{big, a}, load: domain.Load{Capacity: 3, Active: 1, ActiveOrders: 1, Queued: 2, QueuedUnits: 4}, limit: 100},
		{name: "an empty kitchen takes an oversized head alone", head: []domain.Order{big, a}, load: domain.Load{Capacity: 2, Queued: 2, QueuedUnits: 4}, limit: 100, admitted: []domain.Order{big}},
		{name: "the limit leaves the rest to a drain job", head: []domain.Order{a, b}, load: v1(domain.Load{Capacity: 3, Queued: 5}), limit: 2, admitted: []domain.Order{a, b}, more: true},
		{name: "a limit met as the room ends leaves nothing", head: []domain.Order{a, b}, load: v1(domain.Load{Capacity: 2, Queued: 5}), limit: 2, admitted: []domain.Order{a, b}},
		{name: "no inline admissions: all is the job's", head: nil, load: v1(domain.Load{Capacity: 2, Queued: 1}), limit: 0, more: true},
		{name: "the priority lane first", head: []domain.Order{vip, a}, load: domain.Load{Capacity: 2, Queued: 2, QueuedUnits: 2, QueuedPriority: 1}, limit: 100, admitted: []domain.Order{vip, a}},
		{name: "paused", head: nil, load: v1(domain.Load{Capacity: 2, Queued: 1, Paused: true}), limit: 100},
		{name: "a normal order read ahead of the priority lane's", head: []domain.Order{c, vip}, load: domain.Load{Capacity: 2, Queued: 2, QueuedUnits: 2, QueuedPriority: 1}, limit: 100, code: domain.CodeConflict},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, err := domain.DrainLine(tc.head, tc.load, tc.limit, t0)
			if tc.code != "" {
				require.Equal(t, tc.code, domain.ErrorCode(err))
				require.Equal(t, domain.Drain{Load: tc.load}, d, "a refused drain admits nobody")
				return
			}
			require.NoError(t, err)
			var admitted []domain.Order
			load := tc.load
			for _, ad := range d.Admissions {
				admitted = append(admitted, ad.Order)
				e, after, err := domain.AdmitQueued(ad.Order, load, t0)
				require.NoError(t, err)
				require.Equal(t, e, ad.Event)
				load = after
			}
			require.Equal(t, tc.admitted, admitted)
			require.Equal(t, load, d.Load)
			require.Equal(t, tc.more, d.More)
		})
	}
}

func TestLineHeadToRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		load  domain.Load
		limit int
		want  int
	}{
		{v1(domain.Load{Capacity: 5, Active: 1, Queued: 10}), 100, 4},
		{v1(domain.Load{Capacity: 5, Active: 1, Queued: 2}), 100, 2},
		{v1(domain.Load{Capacity: 5, Active: 1, Queued: 10}), 3, 3},
		{v1(domain.Load{Capacity: 5, Active: 5, Queued: 10}), 100, 0},
		{v1(domain.Load{Capacity: 5, Active: 1, Queued: 10}), -1, 0},
	} {
		require.Equal(t, tc.want, tc.load.LineHeadToRead(tc.limit), "%+v limit %d", tc.load, tc.limit)
	}
}
