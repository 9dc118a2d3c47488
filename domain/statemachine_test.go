package domain_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
)

// Times of the state-machine fixture: placed at t0, paid at smPaidAt, the
// payment deadline at t0+deadline, the queue expiry maxWait after the payment.
var (
	smPaidAt   = t0.Add(time.Minute)
	smDeadline = t0.Add(deadline)
	smExpiry   = smPaidAt.Add(maxWait)
	smNow      = t0.Add(5 * time.Minute) // before both the deadline and the expiry
)

const smRef = "pay-1"

// smFixture is an order folded from the real events of real commands,
// together with its merchant's load and the number of events applied.
type smFixture struct {
	order  domain.Order
	load   domain.Load
	events int
}

func (f *smFixture) run(t *testing.T, events []domain.Event, load domain.Load, err error) {
	t.Helper()
	require.NoError(t, err)
	require.NotEmpty(t, events)
	f.order = mustApply(t, f.order, events...)
	f.load = load
	f.events += len(events)
}

func smPlace(t *testing.T) *smFixture {
	t.Helper()
	events, err := domain.Place(domain.PlaceParams{
		OrderID: testID("o1"), MerchantID: merchantID, CustomerID: "alice",
		Lines: []domain.LineRequest{{ProductID: productID, Quantity: 2}}, Products: products(),
		PaymentDeadline: smDeadline,
	}, t0)
	require.NoError(t, err)
	f := &smFixture{order: domain.Order{}, load: v1(domain.Load{Capacity: 2, Active: 0, NextSeq: 5})}
	f.run(t, events, f.load, nil)
	return f
}

// smStates names every reachable state the table covers; several statuses are
// reached along more than one path because the path matters (paid or not,
// holding a unit or a queue slot).
var smStates = []string{
	"awaiting_payment",
	"queued",
	"queued/requeued",
	"accepted",
	"accepted/from_queue",
	"completed",
	"closed",
	"cancelled/unpaid",
	"cancelled/from_queued",
	"cancelled/from_accepted",
	"expired",
}

// smBuild reaches the named state from Place by running the real commands.
// The merchant has capacity 2; when the order must queue, another order holds
// both units.
func smBuild(t *testing.T, state string) *smFixture {
	t.Helper()
	f := smPlace(t)
	payAccepted := func() {
		ev, l, err := domain.Pay(f.order, smRef, v1(domain.Load{Capacity: 2, Active: 1, NextSeq: 5}), maxWait, smPaidAt)
		f.run(t, ev, l, err)
		require.Equal(t, domain.StatusAccepted, f.order.Status)
	}
	payQueued := func() {
		ev, l, err := domain.Pay(f.order, smRef, v1(domain.Load{Capacity: 2, Active: 2, NextSeq: 5}), maxWait, smPaidAt)
		f.run(t, ev, l, err)
		require.Equal(t, domain.StatusQueued, f.order.Status)
	}
	expire := func() {
		ev, l := domain.Expire(f.order, f.load, smExpiry)
		f.run(t, ev, l, nil)
	}
	switch state {
	case "awaiting_payment":
	case "queued":
		payQueued()
	case "queued/requeued":
		payQueued()
		expire()
		ev, l, err := domain.Requeue(f.order, f.load, maxWait, smExpiry.Add(time.Minute))
		f.run(t, ev, l, err)
	case "accepted":
		payAccepted()
	case "accepted/from_queue":
		payQueued()
		f.load.Active, f.load.ActiveOrders = f.load.Active-1, f.load.ActiveOrders-1 // the other order completed
		e, l, err := domain.AdmitQueued(f.order, f.load, smPaidAt.Add(time.Minute))
		f.run(t, []domain.Event{e}, l, err)
	case "completed":
		payAccepted()
		ev, l, err := domain.Complete(f.order, f.load, smPaidAt.Add(time.Minute))
		f.run(t, ev, l, err)
	case "closed":
		f.run(t, domain.Close(f.order, smDeadline), f.load, nil)
	case "cancelled/unpaid":
		ev, l, err := domain.Cancel(f.order, domain.ActorCustomer, "changed my mind", f.load, smPaidAt)
		f.run(t, ev, l, err)
	case "cancelled/from_queued":
		payQueued()
		ev, l, err := domain.Cancel(f.order, domain.ActorCustomer, "too slow", f.load, smPaidAt.Add(time.Minute))
		f.run(t, ev, l, err)
	case "cancelled/from_accepted":
		payAccepted()
		ev, l, err := domain.Cancel(f.order, domain.ActorMerchant, "out of milk", f.load, smPaidAt.Add(time.Minute))
		f.run(t, ev, l, err)
	case "expired":
		payQueued()
		expire()
	default:
		t.Fatalf("no recipe for %s", state)
	}
	require.Equal(t, f.events, f.order.Version, "version counts the events folded")
	return f
}

type smCommand func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error)

func smOne(e domain.Event, l domain.Load, err error) ([]domain.Event, domain.Load, error) {
	if err != nil {
		return nil, l, err
	}
	return []domain.Event{e}, l, nil
}

// expiryOf is the queue expiry the expire commands aim around; orders that
// never queued get the fixture's expiry so the command still runs.
func expiryOf(o domain.Order) time.Time {
	if o.QueueExpiresAt != nil {
		return *o.QueueExpiresAt
	}
	return smExpiry
}

var smCommands = map[string]smCommand{
	"pay same ref": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		return domain.Pay(o, smRef, l, maxWait, smNow)
	},
	"pay same ref padded": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		return domain.Pay(o, "  "+smRef+"\t", l, maxWait, smNow)
	},
	"pay other ref": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		return domain.Pay(o, "pay-2", l, maxWait, smNow)
	},
	"pay just before deadline": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		return domain.Pay(o, smRef, l, maxWait, smDeadline.Add(-time.Nanosecond))
	},
	"pay at deadline": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		return domain.Pay(o, smRef, l, maxWait, smDeadline)
	},
	"pay after deadline": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		return domain.Pay(o, smRef, l, maxWait, smDeadline.Add(time.Hour))
	},
	"pay blank ref": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		return domain.Pay(o, "   ", l, maxWait, smNow)
	},
	"admit queued with a free unit": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		return smOne(domain.AdmitQueued(o, l, smNow))
	},
	"admit queued without a free unit": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		return smOne(domain.AdmitQueued(o, l, smNow))
	},
	"complete": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		return domain.Complete(o, l, smNow)
	},
	"cancel by customer": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		return domain.Cancel(o, domain.ActorCustomer, "", l, smNow)
	},
	"cancel by merchant": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		return domain.Cancel(o, domain.ActorMerchant, "out of milk", l, smNow)
	},
	"cancel by admin": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		return domain.Cancel(o, domain.ActorAdmin, "fraud", l, smNow)
	},
	"close before deadline": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		return domain.Close(o, smDeadline.Add(-time.Nanosecond)), l, nil
	},
	"close at deadline": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		return domain.Close(o, smDeadline), l, nil
	},
	"close after deadline": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		return domain.Close(o, smDeadline.Add(time.Hour)), l, nil
	},
	"expire before expiry": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		ev, l := domain.Expire(o, l, expiryOf(o).Add(-time.Nanosecond))
		return ev, l, nil
	},
	"expire at expiry": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		ev, l := domain.Expire(o, l, expiryOf(o))
		return ev, l, nil
	},
	"expire after expiry": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		ev, l := domain.Expire(o, l, expiryOf(o).Add(time.Hour))
		return ev, l, nil
	},
	"requeue": func(o domain.Order, l domain.Load) ([]domain.Event, domain.Load, error) {
		return domain.Requeue(o, l, maxWait, smExpiry.Add(time.Hour))
	},
}

// smWant is the expected outcome of one command on one state.
type smWant struct {
	status domain.OrderStatus // status afterwards; "" = unchanged (no-op or error)
	code   domain.Code        // error code; "" = success
	// Changes to the load on success.
	dActive, dQueued int
	dNextSeq         int64
	events           int // events appended on success
}

var (
	smNoop     = smWant{}
	smInvalid  = smWant{code: domain.CodeInvalidTransition}
	smBadInput = smWant{code: domain.CodeValidation}
	smConflict = smWant{code: domain.CodeConflict}
)

// smTable is every state × every command. Commands run with the load the state
// was built with, except that the admit commands first free a unit, or take it.
func smTable() map[string]map[string]smWant {
	payAccepts := smWant{status: domain.StatusAccepted, dActive: 1, events: 2}
	cancel := func(dActive, dQueued int) smWant {
		return smWant{status: domain.StatusCancelled, dActive: dActive, dQueued: dQueued, events: 1}
	}
	// live paid orders: paying again with the same reference is a no-op at any
	// time, another reference is refused.
	paidPays := map[string]smWant{
		"pay same ref": smNoop, "pay same ref padded": smNoop, "pay other ref": smInvalid,
		"pay just before deadline": smNoop, "pay at deadline": smNoop, "pay after deadline": smNoop,
		"pay blank ref": smBadInput,
	}
	// orders that ended unserved take no payment, paid before or not.
	unpaidEndedPays := map[string]smWant{
		"pay same ref": smInvalid, "pay same ref padded": smInvalid, "pay other ref": smInvalid,
		"pay just before deadline": smInvalid, "pay at deadline": smInvalid, "pay after deadline": smInvalid,
		"pay blank ref": smBadInput,
	}
	noTimers := map[string]smWant{
		"close before deadline": smNoop, "close at deadline": smNoop, "close after deadline": smNoop,
		"expire before expiry": smNoop, "expire at expiry": smNoop, "expire after expiry": smNoop,
	}
	merge := func(ms ...map[string]smWant) map[string]smWant {
		out := map[string]smWant{}
		for _, m := range ms {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	terminal := func(pays map[string]smWant) map[string]smWant {
		return merge(pays, noTimers, map[string]smWant{
			"admit queued with a free unit": smInvalid, "admit queued without a free unit": smInvalid,
			"complete": smInvalid, "cancel by customer": smInvalid, "cancel by merchant": smInvalid,
			"cancel by admin": smInvalid, "requeue": smInvalid,
		})
	}
	queued := merge(paidPays, noTimers, map[string]smWant{
		"admit queued with a free unit":    {status: domain.StatusAccepted, dActive: 1, dQueued: -1, events: 1},
		"admit queued without a free unit": smConflict,
		"complete":                         smInvalid,
		"cancel by customer":               cancel(0, -1),
		"cancel by merchant":               cancel(0, -1),
		"cancel by admin":                  cancel(0, -1),
		"expire at expiry":                 {status: domain.StatusExpired, dQueued: -1, events: 1},
		"expire after expiry":              {status: domain.StatusExpired, dQueued: -1, events: 1},
		"requeue":                          smInvalid,
	})
	accepted := merge(paidPays, noTimers, map[string]smWant{
		"admit queued with a free unit": smInvalid, "admit queued without a free unit": smInvalid,
		"complete":           {status: domain.StatusCompleted, dActive: -1, events: 1},
		"cancel by customer": smInvalid,
		"cancel by merchant": cancel(-1, 0),
		"cancel by admin":    cancel(-1, 0),
		"requeue":            smInvalid,
	})
	expired := terminal(unpaidEndedPays)
	expired["requeue"] = smWant{status: domain.StatusQueued, dQueued: 1, events: 1}
	return map[string]map[string]smWant{
		"awaiting_payment": {
			"pay same ref": payAccepts, "pay same ref padded": payAccepts, "pay other ref": payAccepts,
			"pay just before deadline": payAccepts, "pay at deadline": smInvalid, "pay after deadline": smInvalid,
			"pay blank ref":                 smBadInput,
			"admit queued with a free unit": smInvalid, "admit queued without a free unit": smInvalid,
			"complete":           smInvalid,
			"cancel by customer": cancel(0, 0), "cancel by merchant": cancel(0, 0), "cancel by admin": cancel(0, 0),
			"close before deadline": smNoop,
			"close at deadline":     {status: domain.StatusClosed, events: 1},
			"close after deadline":  {status: domain.StatusClosed, events: 1},
			"expire before expiry":  smNoop, "expire at expiry": smNoop, "expire after expiry": smNoop,
			"requeue": smInvalid,
		},
		"queued":                  queued,
		"queued/requeued":         queued,
		"accepted":                accepted,
		"accepted/from_queue":     accepted,
		"completed":               terminal(paidPays),
		"closed":                  terminal(unpaidEndedPays),
		"cancelled/unpaid":        terminal(unpaidEndedPays),
		"cancelled/from_queued":   terminal(unpaidEndedPays),
		"cancelled/from_accepted": terminal(unpaidEndedPays),
		"expired":                 expired,
	}
}

func TestStateMachineEveryStatusTimesEveryCommand(t *testing.T) {
	t.Parallel()
	table := smTable()
	require.Len(t, table, len(smStates))
	for _, state := range smStates {
		wants := table[state]
		require.Len(t, wants, len(smCommands), "state %s must list every command", state)
		for name, want := range wants {
			cmd, ok := smCommands[name]
			require.True(t, ok, "unknown command %q", name)
			t.Run(state+"/"+name, func(t *testing.T) {
				t.Parallel()
				f := smBuild(t, state)
				before, load := f.order, f.load
				if name == "admit queued with a free unit" {
					load.Active, load.ActiveOrders = load.Capacity-1, load.Capacity-1 // the other order completed
				}
				if name == "admit queued without a free unit" {
					load.Active, load.ActiveOrders = load.Capacity, load.Capacity
				}
				events, after, err := cmd(before, load)
				if before.Status.Final() {
					require.Empty(t, events, "a final order changes under no command")
				}
				if want.code != "" {
					require.Error(t, err)
					require.Equal(t, want.code, domain.ErrorCode(err), "error: %v", err)
					require.Empty(t, events)
					require.Equal(t, load, after, "a refused command leaves the load alone")
					return
				}
				require.NoError(t, err)
				require.Len(t, events, want.events)
				got := mustApply(t, before, events...)
				require.Equal(t, before.Version+want.events, got.Version, "version rises by the number of events")
				if want.events == 0 {
					require.Equal(t, load, after, "a no-op leaves the load alone")
					require.Equal(t, before, got)
					return
				}
				require.Equal(t, want.status, got.Status)
				require.Equal(t, v1(domain.Load{
					Capacity: load.Capacity,
					Active:   load.Active + want.dActive,
					Queued:   load.Queued + want.dQueued,
					NextSeq:  load.NextSeq + want.dNextSeq,
				}), after)
				require.GreaterOrEqual(t, after.Active, 0)
				require.GreaterOrEqual(t, after.Queued, 0)
				require.Equal(t, got.Status.Terminal(), got.EndedAt != nil, "ended_at is set exactly when terminal")
				if before.PaidAt != nil {
					require.Equal(t, before.PaidAt, got.PaidAt, "a payment is never undone")
				}
				for _, e := range events {
					if a, ok := e.Data.(domain.OrderAccepted); ok {
						require.LessOrEqual(t, a.ActiveAfter, a.Capacity)
						require.Equal(t, after.Active, a.ActiveAfter)
					}
				}
			})
		}
	}
}

// The built states themselves carry the expected facts.
func TestStateMachineBuiltStates(t *testing.T) {
	t.Parallel()
	cases := []struct {
		state  string
		status domain.OrderStatus
		load   domain.Load
		paid   bool
		reason string
	}{
		{"awaiting_payment", domain.StatusAwaitingPayment, v1(domain.Load{Capacity: 2, NextSeq: 5}), false, ""},
		{"queued", domain.StatusQueued, v1(domain.Load{Capacity: 2, Active: 2, Queued: 1, NextSeq: 6}), true, ""},
		{"queued/requeued", domain.StatusQueued, v1(domain.Load{Capacity: 2, Active: 2, Queued: 1, NextSeq: 6}), true, ""},
		{"accepted", domain.StatusAccepted, v1(domain.Load{Capacity: 2, Active: 2, NextSeq: 5}), true, ""},
		{"accepted/from_queue", domain.StatusAccepted, v1(domain.Load{Capacity: 2, Active: 2, NextSeq: 6}), true, ""},
		{"completed", domain.StatusCompleted, v1(domain.Load{Capacity: 2, Active: 1, NextSeq: 5}), true, ""},
		{"closed", domain.StatusClosed, v1(domain.Load{Capacity: 2, NextSeq: 5}), false, domain.ReasonPaymentTimeout},
		{"cancelled/unpaid", domain.StatusCancelled, v1(domain.Load{Capacity: 2, NextSeq: 5}), false, "changed my mind"},
		{"cancelled/from_queued", domain.StatusCancelled, v1(domain.Load{Capacity: 2, Active: 2, NextSeq: 6}), true, "too slow"},
		{"cancelled/from_accepted", domain.StatusCancelled, v1(domain.Load{Capacity: 2, Active: 1, NextSeq: 5}), true, "out of milk"},
		{"expired", domain.StatusExpired, v1(domain.Load{Capacity: 2, Active: 2, NextSeq: 6}), true, domain.ReasonQueueTimeout},
	}
	require.Len(t, cases, len(smStates))
	for _, tc := range cases {
		t.Run(tc.state, func(t *testing.T) {
			t.Parallel()
			f := smBuild(t, tc.state)
			o := f.order
			require.Equal(t, tc.status, o.Status)
			require.Equal(t, tc.load, f.load)
			require.Equal(t, tc.paid, o.PaidAt != nil)
			require.Equal(t, tc.reason, o.StatusReason)
			require.Equal(t, tc.status.Terminal(), o.EndedAt != nil)
			require.Equal(t, testID("o1"), o.ID)
			require.Equal(t, int64(900), o.TotalCents)
			if tc.paid {
				require.Equal(t, smRef, o.PaymentRef)
				require.Equal(t, smPaidAt, *o.PaidAt)
			}
			if o.QueuedAt != nil {
				require.Equal(t, int64(5), o.QueueSeq)
			}
		})
	}
}
