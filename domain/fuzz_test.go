package domain_test

import (
	"testing"
	"time"

	"github.com/orderd/orderd/domain"
)

// FuzzOrderCommands reads the input as a sequence of commands on one order
// and its merchant's load, with time moving forward, and checks after every
// step that no sequence breaks the state machine's invariants.
func FuzzOrderCommands(f *testing.F) {
	f.Add([]byte{0, 1, 3})
	f.Add([]byte{0, 2, 2, 2})
	f.Add([]byte{1, 4, 5, 6, 7})
	f.Add([]byte{9, 0, 8, 10, 1, 3, 3})
	f.Add([]byte{255, 128, 64, 32, 16, 8, 4, 2, 1})
	f.Fuzz(func(t *testing.T, program []byte) {
		events, err := domain.Place(domain.PlaceParams{
			OrderID: "o", MerchantID: merchantID, CustomerID: "c",
			Lines: []domain.LineRequest{{ProductID: productID, Quantity: 1}}, Products: products(),
			PaymentDeadline: t0.Add(deadline),
		}, t0)
		if err != nil {
			t.Fatal(err)
		}
		o, err := domain.Order{}.Apply(events...)
		if err != nil {
			t.Fatal(err)
		}
		applied := len(events)
		load := domain.Load{Capacity: 2, NextSeq: 1}
		now := t0
		for _, op := range program {
			now = now.Add(time.Duration(op%16) * time.Minute)
			before, beforeLoad := o, load
			var evs []domain.Event
			var err error
			switch op % 11 {
			case 0:
				evs, load, err = domain.Pay(o, "ref", load, maxWait, now)
			case 1:
				evs, load, err = domain.Pay(o, "other", load, maxWait, now)
			case 2:
				var e domain.Event
				e, load, err = domain.AdmitQueued(o, load, now)
				if err == nil {
					evs = []domain.Event{e}
				}
			case 3:
				evs, load, err = domain.Complete(o, load, now)
			case 4:
				evs, load, err = domain.Cancel(o, domain.ActorCustomer, "", load, now)
			case 5:
				evs, load, err = domain.Cancel(o, domain.ActorMerchant, "", load, now)
			case 6:
				evs = domain.Close(o, now)
			case 7:
				evs, load = domain.Expire(o, load, now)
			case 8:
				evs, load, err = domain.Requeue(o, load, maxWait, now)
			case 9:
				load.Capacity = int(op) % 4
			case 10:
				load.Active++ // another order of the merchant was admitted
			}
			if err != nil {
				if len(evs) != 0 || load != beforeLoad {
					t.Fatalf("op %d failed (%v) but returned events or changed the load", op, err)
				}
				continue
			}
			if o, err = o.Apply(evs...); err != nil {
				t.Fatalf("apply: %v", err)
			}
			applied += len(evs)
			switch {
			case o.Version != applied:
				t.Fatalf("version %d after %d events", o.Version, applied)
			case load.Active < 0 || load.Queued < 0:
				t.Fatalf("negative load %+v", load)
			case before.PaidAt != nil && o.PaidAt == nil:
				t.Fatal("a paid order lost its payment")
			case before.Status.Terminal() && before.Status != o.Status &&
				!(before.Status == domain.StatusExpired && o.Status == domain.StatusQueued):
				t.Fatalf("terminal %s changed to %s", before.Status, o.Status)
			}
			for _, e := range evs {
				if a, ok := e.Data.(domain.OrderAccepted); ok && a.ActiveAfter > a.Capacity {
					t.Fatalf("accepted over capacity: %+v", a)
				}
			}
		}
	})
}
