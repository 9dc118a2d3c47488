package domain_test

import (
	"testing"
	"time"

	"github.com/orderd/orderd/domain"
)

// Fuzz program opcodes: the low four bits of a byte pick the command, the high
// four bits move the clock forward by that many fuzzStep before it runs (and
// parametrise a few commands).
const (
	opPay = iota
	opPayOther
	opPayBlank
	opAdmitQueued
	opComplete
	opCancelCustomer
	opCancelMerchant
	opCancelAdmin
	opCancelSystem
	opClose
	opExpire
	opRequeue
	opOtherPaid       // another order of the merchant is paid: Admit decides for it
	opOtherCompleted  // another accepted order completes
	opOtherLeavesLine // another queued order is cancelled (even) or admitted (odd)
	opSetCapacity     // an admin changes the capacity to (high bits % 4)
)

const fuzzStep = 2 * time.Minute

// FuzzOrderCommands reads its input as a merchant's starting load (three
// bytes: capacity, other active orders, other queued orders; the first
// byte's high bit pays the order as it is placed) followed by a
// program of commands on one order and on the merchant's other orders, with
// time moving forward. After every step it checks the state machine's
// invariants, including that the load always equals what the orders hold.
func FuzzOrderCommands(f *testing.F) {
	b := func(op, wait int) byte { return byte(wait<<4 | op) }
	// Pay and accept, complete.
	f.Add([]byte{2, 0, 0, b(opPay, 0), b(opComplete, 1)})
	// Pay into a queue, drain, complete; repeat payments are no-ops.
	f.Add([]byte{1, 1, 0, b(opPay, 1), b(opPay, 0), b(opPayOther, 0), b(opOtherCompleted, 1), b(opAdmitQueued, 0), b(opComplete, 2)})
	// Queue, expire, requeue, expire again, requeue, cancel by customer.
	f.Add([]byte{1, 1, 2, b(opPay, 1), b(opExpire, 15), b(opExpire, 1), b(opRequeue, 3), b(opExpire, 15), b(opRequeue, 0), b(opCancelCustomer, 0)})
	// Unpaid: close too early, pay at the deadline, close.
	f.Add([]byte{3, 0, 0, b(opClose, 7), b(opPay, 1), b(opClose, 0), b(opPay, 0), b(opRequeue, 0)})
	// Capacity 0 queues; raising it lets the queue drain.
	f.Add([]byte{0, 0, 1, b(opPay, 0), b(opAdmitQueued, 0), b(opSetCapacity, 2), b(opOtherLeavesLine, 1), b(opAdmitQueued, 0), b(opCancelMerchant, 0)})
	// Capacity lowered under active orders, completions, new payments by others.
	f.Add([]byte{4, 4, 0, b(opSetCapacity, 1), b(opPay, 0), b(opOtherPaid, 0), b(opOtherCompleted, 0), b(opOtherCompleted, 0), b(opAdmitQueued, 0), b(opCancelAdmin, 0)})
	// Cancels by every actor on every status; a blank payment reference.
	f.Add([]byte{2, 0, 0, b(opPayBlank, 0), b(opCancelSystem, 0), b(opCancelCustomer, 0), b(opPay, 0), b(opCancelMerchant, 0)})
	f.Add([]byte{1, 0, 0, b(opPay, 0), b(opCancelCustomer, 0), b(opCancelAdmin, 0), b(opComplete, 0)})
	f.Add([]byte{255, 128, 64, 32, 16, 8, 4, 2, 1, 0, 255, 254, 253, 252})
	// The high bit of the first byte pays at placement: into a free unit,
	// then into a queue that drains.
	f.Add([]byte{0x82, 0, 0, b(opPay, 0), b(opComplete, 1)})
	f.Add([]byte{0x81, 1, 1, b(opPay, 0), b(opOtherCompleted, 1), b(opOtherLeavesLine, 1), b(opAdmitQueued, 0), b(opComplete, 2)})
	f.Fuzz(func(t *testing.T, program []byte) {
		for len(program) < 3 {
			program = append(program, 0)
		}
		program0 := program[0]
		othersActive, othersQueued := int(program[1]%6), int(program[2]%4)
		load := v1(domain.Load{Capacity: int(program[0] % 5), Active: othersActive, Queued: othersQueued, NextSeq: 1 + int64(othersQueued)})
		program = program[3:]

		now := t0
		events, err := domain.Place(domain.PlaceParams{
			OrderID: testID("o"), MerchantID: merchantID, CustomerID: "c",
			Lines: []domain.LineRequest{{ProductID: productID, Quantity: 1}}, Products: products(),
			PaymentDeadline: now.Add(deadline),
		}, now)
		if err != nil {
			t.Fatal(err)
		}
		if program0&0x80 != 0 {
			// Paid by the request that places it: the payment rides in
			// order.placed, followed by the admission decision.
			if events, load, err = domain.PayAtPlacement(events[0], "ref", load, maxWait, now); err != nil {
				t.Fatal(err)
			}
		}
		o, err := domain.Order{}.Apply(events...)
		if err != nil {
			t.Fatal(err)
		}
		applied := len(events)

		for step, op := range program {
			now = now.Add(time.Duration(op>>4) * fuzzStep)
			arg := int(op >> 4)
			before, beforeLoad := o, load
			var evs []domain.Event
			var err error
			ours := true // the command is on o; otherwise on another order
			one := func(e domain.Event, l domain.Load, err2 error) {
				load, err = l, err2
				if err2 == nil {
					evs = []domain.Event{e}
				}
			}
			switch op & 0x0f {
			case opPay:
				evs, load, err = domain.Pay(o, "ref", load, maxWait, now)
			case opPayOther:
				evs, load, err = domain.Pay(o, "other", load, maxWait, now)
			case opPayBlank:
				evs, load, err = domain.Pay(o, " ", load, maxWait, now)
			case opAdmitQueued:
				one(domain.AdmitQueued(o, load, now))
			case opComplete:
				evs, load, err = domain.Complete(o, load, now)
			case opCancelCustomer:
				evs, load, err = domain.Cancel(o, domain.ActorCustomer, "", load, now)
			case opCancelMerchant:
				evs, load, err = domain.Cancel(o, domain.ActorMerchant, "busy", load, now)
			case opCancelAdmin:
				evs, load, err = domain.Cancel(o, domain.ActorAdmin, "fraud", load, now)
			case opCancelSystem:
				evs, load, err = domain.Cancel(o, domain.ActorSystem, "", load, now)
			case opClose:
				evs = domain.Close(o, now)
			case opExpire:
				evs, load = domain.Expire(o, load, now)
			case opRequeue:
				evs, load, err = domain.Requeue(o, load, maxWait, now)
			case opOtherPaid:
				ours = false
				var e domain.Event
				e, load = domain.Admit(domain.Order{}, load, maxWait, now)
				evs = []domain.Event{e}
				if e.Type == domain.EventOrderAccepted {
					othersActive++
				} else {
					othersQueued++
				}
			case opOtherCompleted:
				ours = false
				if othersActive > 0 {
					evs, load, err = domain.Complete(domain.Order{Status: domain.StatusAccepted}, load, now)
					othersActive--
				}
			case opOtherLeavesLine:
				ours = false
				if othersQueued == 0 {
					break
				}
				if arg%2 == 0 {
					evs, load, err = domain.Cancel(domain.Order{Status: domain.StatusQueued}, domain.ActorCustomer, "", load, now)
					othersQueued--
				} else {
					one(domain.AdmitQueued(domain.Order{Status: domain.StatusQueued}, load, now))
					if err == nil {
						othersQueued--
						othersActive++
					}
				}
			case opSetCapacity:
				ours = false
				load.Capacity = arg % 4
			}
			if err != nil {
				if len(evs) != 0 || load != beforeLoad {
					t.Fatalf("step %d op %#x failed (%v) but returned %d events or changed the load %+v → %+v", step, op, err, len(evs), beforeLoad, load)
				}
				if code := domain.ErrorCode(err); code == domain.CodeInternal {
					t.Fatalf("step %d op %#x: error without a code: %v", step, op, err)
				}
				continue
			}
			if len(evs) == 0 && load != beforeLoad && op&0x0f != opSetCapacity {
				t.Fatalf("step %d op %#x: a no-op changed the load %+v → %+v", step, op, beforeLoad, load)
			}
			for _, e := range evs {
				if a, ok := e.Data.(domain.OrderAccepted); ok {
					if a.ActiveAfter > a.Capacity || load.Active > load.Capacity || a.ActiveAfter != load.Active {
						t.Fatalf("step %d op %#x: admission over capacity: %+v, load %+v", step, op, a, load)
					}
					if ours && a.FromQueue != (before.Status == domain.StatusQueued) {
						t.Fatalf("step %d op %#x: from_queue %v for an order that was %s", step, op, a.FromQueue, before.Status)
					}
				}
			}
			if ours {
				if o, err = o.Apply(evs...); err != nil {
					t.Fatalf("step %d op %#x: apply: %v", step, op, err)
				}
				applied += len(evs)
			}
			checkFuzzInvariants(t, step, op, before, o, applied)
			held := func(s domain.OrderStatus) int {
				if o.Status == s {
					return 1
				}
				return 0
			}
			switch {
			case load.Active < 0 || load.Queued < 0:
				t.Fatalf("step %d op %#x: negative load %+v", step, op, load)
			case load.Active != othersActive+held(domain.StatusAccepted):
				t.Fatalf("step %d op %#x: load.Active %d but %d other accepted orders and this one %s", step, op, load.Active, othersActive, o.Status)
			case load.Queued != othersQueued+held(domain.StatusQueued):
				t.Fatalf("step %d op %#x: load.Queued %d but %d other queued orders and this one %s", step, op, load.Queued, othersQueued, o.Status)
			case load.NextSeq < beforeLoad.NextSeq:
				t.Fatalf("step %d op %#x: next_seq went back %d → %d", step, op, beforeLoad.NextSeq, load.NextSeq)
			}
		}
	})
}

func checkFuzzInvariants(t *testing.T, step int, op byte, before, o domain.Order, applied int) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("step %d op %#x: "+format, append([]any{step, op}, args...)...)
	}
	if o.Version != applied {
		fail("version %d after %d events", o.Version, applied)
	}
	if before.Status.Terminal() && before.Status != o.Status &&
		!(before.Status == domain.StatusExpired && o.Status == domain.StatusQueued) {
		fail("terminal %s changed to %s", before.Status, o.Status)
	}
	if before.PaidAt != nil && (o.PaidAt == nil || !o.PaidAt.Equal(*before.PaidAt) || o.PaymentRef != before.PaymentRef) {
		fail("a payment changed or was lost: %v %q → %v %q", before.PaidAt, before.PaymentRef, o.PaidAt, o.PaymentRef)
	}
	if before.QueueSeq != 0 && o.QueueSeq != before.QueueSeq {
		fail("queue seq changed %d → %d", before.QueueSeq, o.QueueSeq)
	}
	if o.Status.Terminal() != (o.EndedAt != nil) {
		fail("status %s with ended_at %v", o.Status, o.EndedAt)
	}
	switch o.Status {
	case domain.StatusAwaitingPayment, domain.StatusClosed:
		if o.PaidAt != nil {
			fail("%s order is paid", o.Status)
		}
	case domain.StatusQueued, domain.StatusAccepted, domain.StatusCompleted, domain.StatusExpired:
		if o.PaidAt == nil {
			fail("%s order is not paid", o.Status)
		}
	}
	if o.Status == domain.StatusQueued && (o.QueueSeq < 1 || o.QueueExpiresAt == nil) {
		fail("queued without a place: seq %d, expires %v", o.QueueSeq, o.QueueExpiresAt)
	}
	if o.Status == domain.StatusAccepted && o.AcceptedAt == nil {
		fail("accepted without accepted_at")
	}
}
