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

var t0 = time.Date(2026, 9, 23, 10, 0, 0, 0, time.UTC)

var (
	merchantID = uuid.MustParse("01a20323-29ef-7c9f-b04a-d3dda0647dbb")
	productID  = uuid.MustParse("01a20323-29f3-75f8-9a1e-178b1d232851")
)

// testID is the id a test calls name, the same on every call.
func testID(name string) uuid.UUID { return uuid.NewSHA1(uuid.NameSpaceURL, []byte(name)) }

const (
	deadline = 15 * time.Minute
	maxWait  = 30 * time.Minute
)

func products() map[uuid.UUID]domain.ProductRef {
	return map[uuid.UUID]domain.ProductRef{productID: {ID: productID, MerchantID: merchantID, PriceCents: 450}}
}

func mustApply(t *testing.T, o domain.Order, events ...domain.Event) domain.Order {
	t.Helper()
	o, err := o.Apply(events...)
	require.NoError(t, err)
	return o
}

// orderIn builds an order in the given status by running the real commands.
func orderIn(t *testing.T, status domain.OrderStatus) (domain.Order, domain.Load) {
	t.Helper()
	events, err := domain.Place(domain.PlaceParams{
		OrderID: testID("o1"), MerchantID: merchantID, CustomerID: "alice",
		Lines: []domain.LineRequest{{ProductID: productID, Quantity: 2}}, Products: products(),
		PaymentDeadline: t0.Add(deadline),
	}, t0)
	require.NoError(t, err)
	o := mustApply(t, domain.Order{}, events...)
	load := v1(domain.Load{Capacity: 1, NextSeq: 1})
	pay := func(l domain.Load) (domain.Order, domain.Load) {
		ev, l, err := domain.Pay(o, "ref", l, maxWait, t0.Add(time.Minute))
		require.NoError(t, err)
		return mustApply(t, o, ev...), l
	}
	switch status {
	case domain.StatusAwaitingPayment:
		return o, load
	case domain.StatusAccepted:
		return pay(load)
	case domain.StatusQueued:
		return pay(v1(domain.Load{Capacity: 1, Active: 1, NextSeq: 7}))
	case domain.StatusCompleted:
		o, load = pay(load)
		ev, load, err := domain.Complete(o, load, t0.Add(2*time.Minute))
		require.NoError(t, err)
		return mustApply(t, o, ev...), load
	case domain.StatusCancelled:
		ev, load, err := domain.Cancel(o, domain.ActorCustomer, "no", load, t0.Add(time.Minute))
		require.NoError(t, err)
		return mustApply(t, o, ev...), load
	case domain.StatusClosed:
		return mustApply(t, o, domain.Close(o, t0.Add(deadline))...), load
	case domain.StatusExpired:
		o, load = pay(v1(domain.Load{Capacity: 1, Active: 1, NextSeq: 7}))
		ev, load := domain.Expire(o, load, t0.Add(time.Minute+maxWait))
		require.Len(t, ev, 1)
		return mustApply(t, o, ev...), load
	}
	t.Fatalf("no recipe for %s", status)
	return o, load
}

type outcome struct {
	status domain.OrderStatus // expected status after, when the command succeeds
	code   domain.Code        // expected error code, "" for success
	noop   bool               // success without events
}

// command runs one command on an order and returns its events, the new load and the error.
type command func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error)

var commands = map[string]command{
	"pay same ref": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		return domain.Pay(o, "ref", l, maxWait, t0.Add(5*time.Minute))
	},
	"pay other ref": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		return domain.Pay(o, "other", l, maxWait, t0.Add(5*time.Minute))
	},
	"pay at deadline": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		return domain.Pay(o, "late", l, maxWait, t0.Add(deadline))
	},
	"admit queued": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		l.Active = 0
		e, l, err := domain.AdmitQueued(o, l, t0.Add(5*time.Minute))
		if err != nil {
			return nil, l, err
		}
		return []domain.Event{e}, l, nil
	},
	"complete": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		return domain.Complete(o, l, t0.Add(5*time.Minute))
	},
	"cancel by customer": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		return domain.Cancel(o, domain.ActorCustomer, "", l, t0.Add(5*time.Minute))
	},
	"cancel by merchant": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		return domain.Cancel(o, domain.ActorMerchant, "out of milk", l, t0.Add(5*time.Minute))
	},
	"close before deadline": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		return domain.Close(o, t0.Add(deadline-time.Second)), l, nil
	},
	"close at deadline": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		return domain.Close(o, t0.Add(deadline)), l, nil
	},
	"expire before limit": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		ev, l := domain.Expire(o, l, t0.Add(maxWait))
		return ev, l, nil
	},
	"expire after limit": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		ev, l := domain.Expire(o, l, t0.Add(time.Minute+maxWait))
		return ev, l, nil
	},
	"requeue": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		return domain.Requeue(o, l, maxWait, t0.Add(time.Hour))
	},
}

const (
	invalid = domain.CodeInvalidTransition
)

// transitions is every status × every command.
var transitions = map[domain.OrderStatus]map[string]outcome{
	domain.StatusAwaitingPayment: {
		"pay same ref": {status: domain.StatusAccepted}, "pay other ref": {status: domain.StatusAccepted},
		"pay at deadline": {code: invalid}, "admit queued": {code: invalid}, "complete": {code: invalid},
		"cancel by customer": {status: domain.StatusCancelled}, "cancel by merchant": {status: domain.StatusCancelled},
		"close before deadline": {noop: true}, "close at deadline": {status: domain.StatusClosed},
		"expire before limit": {noop: true}, "expire after limit": {noop: true}, "requeue": {code: invalid},
	},
	domain.StatusQueued: {
		"pay same ref": {noop: true}, "pay other ref": {code: invalid}, "pay at deadline": {code: invalid},
		"admit queued": {status: domain.StatusAccepted}, "complete": {code: invalid},
		"cancel by customer": {status: domain.StatusCancelled}, "cancel by merchant": {status: domain.StatusCancelled},
		"close before deadline": {noop: true}, "close at deadline": {noop: true},
		"expire before limit": {noop: true}, "expire after limit": {status: domain.StatusExpired}, "requeue": {code: invalid},
	},
	domain.StatusAccepted: {
		"pay same ref": {noop: true}, "pay other ref": {code: invalid}, "pay at deadline": {code: invalid},
		"admit queued": {code: invalid}, "complete": {status: domain.StatusCompleted},
		"cancel by customer": {code: invalid}, "cancel by merchant": {status: domain.StatusCancelled},
		"close before deadline": {noop: true}, "close at deadline": {noop: true},
		"expire before limit": {noop: true}, "expire after limit": {noop: true}, "requeue": {code: invalid},
	},
	domain.StatusCompleted: terminal(true),
	domain.StatusCancelled: terminal(false),
	domain.StatusClosed:    terminal(false),
	domain.StatusExpired: func() map[string]outcome {
		m := terminal(false)
		m["requeue"] = outcome{status: domain.StatusQueued}
		return m
	}(),
}

func terminal(paid bool) map[string]outcome {
	m := map[string]outcome{}
	for name := range commands {
		m[name] = outcome{code: invalid}
	}
	for _, name := range []string{"close before deadline", "close at deadline", "expire before limit", "expire after limit"} {
		m[name] = outcome{noop: true}
	}
	if paid {
		m["pay same ref"] = outcome{noop: true}
	}
	return m
}

func TestEveryTransition(t *testing.T) {
	t.Parallel()
	for status, outcomes := range transitions {
		require.Len(t, outcomes, len(commands), "status %s must list every command", status)
		for name, want := range outcomes {
			t.Run(string(status)+"/"+name, func(t *testing.T) {
				t.Parallel()
				o, load := orderIn(t, status)
				require.Equal(t, status, o.Status)
				events, newLoad, err := commands[name](o, load)
				if want.code != "" {
					require.Error(t, err)
					require.Equal(t, want.code, domain.ErrorCode(err))
					require.Empty(t, events)
					return
				}
				require.NoError(t, err)
				if want.noop {
					require.Empty(t, events)
					return
				}
				require.NotEmpty(t, events)
				after := mustApply(t, o, events...)
				require.Equal(t, want.status, after.Status)
				require.Equal(t, o.Version+len(events), after.Version)
				require.GreaterOrEqual(t, newLoad.Active, 0)
				require.GreaterOrEqual(t, newLoad.Queued, 0)
			})
		}
	}
}

func TestAdmission(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		load       domain.Load
		wantStatus domain.OrderStatus
		wantLoad   domain.Load
	}{
		{"free unit, empty queue", v1(domain.Load{Capacity: 2, Active: 1, NextSeq: 1}), domain.StatusAccepted, v1(domain.Load{Capacity: 2, Active: 2, NextSeq: 1})},
		{"full", v1(domain.Load{Capacity: 2, Active: 2, NextSeq: 4}), domain.StatusQueued, v1(domain.Load{Capacity: 2, Active: 2, Queued: 1, NextSeq: 5})},
		{"free unit but a queue: never overtake", v1(domain.Load{Capacity: 3, Active: 1, Queued: 2, NextSeq: 9}), domain.StatusQueued, v1(domain.Load{Capacity: 3, Active: 1, Queued: 3, NextSeq: 10})},
		{"capacity 0 pauses intake", v1(domain.Load{Capacity: 0, NextSeq: 1}), domain.StatusQueued, v1(domain.Load{Capacity: 0, Queued: 1, NextSeq: 2})},
		{"over capacity after a decrease", v1(domain.Load{Capacity: 1, Active: 3, NextSeq: 1}), domain.StatusQueued, v1(domain.Load{Capacity: 1, Active: 3, Queued: 1, NextSeq: 2})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o, _ := orderIn(t, domain.StatusAwaitingPayment)
			events, load, err := domain.Pay(o, "r", tc.load, maxWait, t0)
			require.NoError(t, err)
			after := mustApply(t, o, events...)
			require.Equal(t, tc.wantStatus, after.Status)
			require.Equal(t, tc.wantLoad, load)
			if after.Status == domain.StatusQueued {
				require.Equal(t, tc.load.NextSeq, after.QueueSeq)
				require.Equal(t, t0.Add(maxWait), *after.QueueExpiresAt)
			} else {
				accepted := events[len(events)-1].Data.(domain.OrderAccepted)
				require.LessOrEqual(t, accepted.ActiveAfter, accepted.Capacity)
			}
		})
	}
}

func TestAdmitQueuedNeedsAFreeUnit(t *testing.T) {
	t.Parallel()
	o, _ := orderIn(t, domain.StatusQueued)
	_, _, err := domain.AdmitQueued(o, v1(domain.Load{Capacity: 1, Active: 1, Queued: 1}), t0)
	require.Equal(t, domain.CodeConflict, domain.ErrorCode(err))
	e, load, err := domain.AdmitQueued(o, v1(domain.Load{Capacity: 2, Active: 1, Queued: 1}), t0)
	require.NoError(t, err)
	require.Equal(t, v1(domain.Load{Capacity: 2, Active: 2}), load)
	require.True(t, e.Data.(domain.OrderAccepted).FromQueue)
}

func TestRequeueKeepsOriginalPlace(t *testing.T) {
	t.Parallel()
	o, load := orderIn(t, domain.StatusExpired)
	seq := o.QueueSeq
	events, load2, err := domain.Requeue(o, load, maxWait, t0.Add(time.Hour))
	require.NoError(t, err)
	after := mustApply(t, o, events...)
	require.Equal(t, seq, after.QueueSeq)
	require.Equal(t, load.Queued+1, load2.Queued)
	require.Nil(t, after.EndedAt)
	require.Equal(t, t0.Add(time.Hour+maxWait), *after.QueueExpiresAt)
}

func TestPlaceValidation(t *testing.T) {
	t.Parallel()
	other := uuid.MustParse("01a20323-0000-7000-8000-000000000000")
	prods := products()
	prods[other] = domain.ProductRef{ID: other, MerchantID: testID("someone-else"), PriceCents: 1}
	lines := func(n, qty int) []domain.LineRequest {
		out := make([]domain.LineRequest, n)
		for i := range out {
			out[i] = domain.LineRequest{ProductID: testID(fmt.Sprintf("line %d", i)), Quantity: qty}
		}
		return out
	}
	cases := []struct {
		name  string
		lines []domain.LineRequest
		code  domain.Code
	}{
		{"no lines", nil, domain.CodeValidation},
		{"51 lines", lines(51, 1), domain.CodeValidation},
		{"quantity 0", []domain.LineRequest{{ProductID: productID, Quantity: 0}}, domain.CodeValidation},
		{"quantity 101", []domain.LineRequest{{ProductID: productID, Quantity: 101}}, domain.CodeValidation},
		{"repeated product", []domain.LineRequest{{ProductID: productID, Quantity: 1}, {ProductID: productID, Quantity: 1}}, domain.CodeValidation},
		{"other merchant's product", []domain.LineRequest{{ProductID: other, Quantity: 1}}, domain.CodeValidation},
		{"unknown product", []domain.LineRequest{{ProductID: testID("nope"), Quantity: 1}}, domain.CodeNotFound},
	}
	for _, tc := range cases {
		_, err := domain.Place(domain.PlaceParams{OrderID: testID("o"), MerchantID: merchantID, CustomerID: "c", Lines: tc.lines, Products: prods}, t0)
		require.Equal(t, tc.code, domain.ErrorCode(err), tc.name)
	}
	events, err := domain.Place(domain.PlaceParams{OrderID: testID("o"), MerchantID: merchantID, CustomerID: "c",
		Lines: []domain.LineRequest{{ProductID: productID, Quantity: 3}}, Products: prods, PaymentDeadline: t0.Add(time.Minute)}, t0)
	require.NoError(t, err)
	require.Equal(t, int64(1350), events[0].Data.(domain.OrderPlaced).TotalCents)
}

func TestDecodeEventRoundTrip(t *testing.T) {
	t.Parallel()
	stock := 5
	events := []domain.Event{
		{Type: domain.EventOrderPlaced, Data: domain.OrderPlaced{OrderID: testID("o"), MerchantID: testID("m"), CustomerID: "c", Items: []domain.Item{{ProductID: testID("p"), Quantity: 1, PriceCents: 2}}, TotalCents: 2, PlacedAt: t0, PaymentDeadline: t0}},
		{Type: domain.EventOrderPaid, Data: domain.OrderPaid{PaymentRef: "r", PaidAt: t0}},
		{Type: domain.EventOrderQueued, Data: domain.OrderQueued{Seq: 3, QueuedAt: t0, ExpiresAt: t0, Active: 1, Capacity: 1, Queued: 2}},
		{Type: domain.EventOrderAccepted, Data: domain.OrderAccepted{AcceptedAt: t0, ActiveAfter: 1, Capacity: 2, FromQueue: true}},
		{Type: domain.EventOrderCompleted, Data: domain.OrderCompleted{CompletedAt: t0}},
		{Type: domain.EventOrderCancelled, Data: domain.OrderCancelled{Reason: "x", By: domain.ActorMerchant, From: domain.StatusAccepted, CancelledAt: t0}},
		{Type: domain.EventOrderClosed, Data: domain.OrderClosed{Reason: domain.ReasonPaymentTimeout, ClosedAt: t0}},
		{Type: domain.EventOrderExpired, Data: domain.OrderExpired{Reason: domain.ReasonQueueTimeout, ExpiredAt: t0}},
		{Type: domain.EventOrderRequeued, Data: domain.OrderRequeued{Seq: 3, QueuedAt: t0, ExpiresAt: t0}},
		{Type: domain.EventMerchantCreated, Data: domain.MerchantCreated{MerchantID: merchantID, MerchantSettings: domain.MerchantSettings{Name: "n", Capacity: 1}, CreatedAt: t0}},
		{Type: domain.EventMerchantUpdated, Data: domain.MerchantUpdated{Before: domain.MerchantSettings{Capacity: 1}, After: domain.MerchantSettings{Capacity: 2}, UpdatedAt: t0}},
		{Type: domain.EventMerchantSecretRotated, Data: domain.MerchantSecretRotated{RotatedAt: t0}},
		{Type: domain.EventProductCreated, Data: domain.ProductCreated{ProductID: testID("p"), MerchantID: testID("m"), Name: "n", PriceCents: 1, Stock: &stock, CreatedAt: t0}},
		{Type: domain.EventProductRestocked, Data: domain.ProductRestocked{Quantity: 4, RestockedAt: t0}},
	}
	for _, e := range events {
		b, err := json.Marshal(e.Data)
		require.NoError(t, err)
		got, err := domain.DecodeEvent(e.Type, b)
		require.NoError(t, err)
		require.Equal(t, e, got)
	}
	_, err := domain.DecodeEvent("order.teleported", []byte(`{}`))
	require.Error(t, err)
}

func TestMerchantSettingsValidation(t *testing.T) {
	t.Parallel()
	valid := domain.MerchantSettings{Name: "Tea", Capacity: 5, PrepSeconds: 60, MaxQueueWaitSeconds: 600, PaymentTimeoutSeconds: 900}
	require.NoError(t, valid.Validate())
	accented := valid
	accented.Name = strings.Repeat("é", domain.MaxNameLength)
	require.NoError(t, accented.Validate(), "the limit counts characters, not bytes")
	require.NoError(t, domain.ValidateProduct(accented.Name, 1, nil, nil))
	for name, mutate := range map[string]func(*domain.MerchantSettings){
		"empty name":        func(s *domain.MerchantSettings) { s.Name = " " },
		"capacity -1":       func(s *domain.MerchantSettings) { s.Capacity = -1 },
		"capacity 100001":   func(s *domain.MerchantSettings) { s.Capacity = 100001 },
		"prep 0":            func(s *domain.MerchantSettings) { s.PrepSeconds = 0 },
		"wait too long":     func(s *domain.MerchantSettings) { s.MaxQueueWaitSeconds = domain.MaxSettingSeconds + 1 },
		"ftp webhook":       func(s *domain.MerchantSettings) { s.WebhookURL = "ftp://x.example/hook" },
		"relative webhook":  func(s *domain.MerchantSettings) { s.WebhookURL = "/hook" },
		"webhook with user": func(s *domain.MerchantSettings) { s.WebhookURL = "https://u:p@x.example/hook" },
	} {
		s := valid
		mutate(&s)
		require.Equal(t, domain.CodeValidation, domain.ErrorCode(s.Validate()), name)
	}
	require.Equal(t, domain.CodeValidation, domain.ErrorCode(domain.ValidateRestock(0)))
	require.Equal(t, domain.CodeValidation, domain.ErrorCode(domain.ValidateRestock(domain.MaxRestock+1)))
	neg := -1
	require.Equal(t, domain.CodeValidation, domain.ErrorCode(domain.ValidateProduct("p", 1, &neg, nil)))
}

func TestEstimateWait(t *testing.T) {
	t.Parallel()
	require.Equal(t, 240, domain.EstimateWait(4, 2, 120, domain.CompletionStats{}), "fallback prep × position / capacity")
	require.Equal(t, 360, domain.EstimateWait(3, 0, 120, domain.CompletionStats{}), "capacity 0 counts as 1")

	var stats domain.CompletionStats
	now := t0
	for range 10 {
		now = now.Add(2 * time.Second)
		stats = stats.ObserveCompletion(now, true, 1)
	}
	// A lull with nobody waiting says nothing about the merchant's pace.
	stats = stats.ObserveCompletion(now.Add(10*time.Minute), false, 1)
	got := domain.EstimateWait(10, 2, 120, stats)
	require.InDelta(t, 20, got, 5, "10 positions at one completion every 2 s")
}

func TestDecisionTimeNeverRunsBackwards(t *testing.T) {
	later, earlier := t0.Add(2*time.Second), t0.Add(-2*time.Second)
	cases := []struct {
		name    string
		clock   time.Time
		follows []time.Time
		want    time.Time
	}{
		{"nothing to follow", t0, nil, t0},
		{"the clock is after what it follows", t0, []time.Time{earlier}, t0},
		{"a decision recorded ahead of the clock", t0, []time.Time{earlier, later}, later},
		{"a zero time follows nothing", t0, []time.Time{{}}, t0},
	}
	for _, c := range cases {
		if got := domain.DecisionTime(c.clock, c.follows...); !got.Equal(c.want) {
			t.Errorf("%s: DecisionTime = %s, want %s", c.name, got, c.want)
		}
	}
	paid, accepted := t0.Add(time.Second), t0.Add(3*time.Second)
	for _, c := range []struct {
		name  string
		order domain.Order
		want  time.Time
	}{
		{"placed only", domain.Order{PlacedAt: t0}, t0},
		{"paid and accepted", domain.Order{PlacedAt: t0, PaidAt: &paid, AcceptedAt: &accepted}, accepted},
		{"paid by a clock behind the placement's", domain.Order{PlacedAt: t0, PaidAt: &earlier}, t0},
	} {
		if got := c.order.LastDecidedAt(); !got.Equal(c.want) {
			t.Errorf("%s: LastDecidedAt = %s, want %s", c.name, got, c.want)
		}
	}
}
