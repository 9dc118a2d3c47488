package domain

import (
	"fmt"
	"strings"
	"time"
)

// Load is a merchant's admission state: the only input admission decisions need.
type Load struct {
	Capacity int
	Active   int
	Queued   int
	NextSeq  int64
}

// CanAdmitNew reports whether a newly paid order may be accepted at once. A
// new order never overtakes a queued one, so the queue must be empty.
func (l Load) CanAdmitNew() bool { return l.Queued == 0 && l.Active < l.Capacity }

// CanDrain reports whether the head of the queue may be admitted.
func (l Load) CanDrain() bool { return l.Queued > 0 && l.Active < l.Capacity }

// ProductRef is what placing an order needs to know about a product.
type ProductRef struct {
	ID         string
	MerchantID string
	PriceCents int64
}

// LineRequest is one requested line before pricing.
type LineRequest struct {
	ProductID string
	Quantity  int
}

// PlaceParams carries everything Place needs; products are looked up by the caller.
type PlaceParams struct {
	OrderID         string
	MerchantID      string
	CustomerID      string
	Lines           []LineRequest
	Products        map[string]ProductRef
	PaymentDeadline time.Time
}

// ValidateLines checks an order's shape before anything is looked up.
func ValidateLines(lines []LineRequest) error {
	if len(lines) == 0 || len(lines) > MaxOrderLines {
		return Errorf(CodeValidation, "items must have between 1 and %d lines", MaxOrderLines)
	}
	seen := make(map[string]bool, len(lines))
	for i, l := range lines {
		if l.Quantity < 1 || l.Quantity > MaxLineQuantity {
			return Errorf(CodeValidation, "items[%d].quantity must be between 1 and %d", i, MaxLineQuantity)
		}
		if seen[l.ProductID] {
			return Errorf(CodeValidation, "items[%d].product_id repeats an earlier line; combine the quantities", i)
		}
		seen[l.ProductID] = true
	}
	return nil
}

// Place prices the lines and records the new order.
func Place(p PlaceParams, now time.Time) ([]Event, error) {
	if err := ValidateLines(p.Lines); err != nil {
		return nil, err
	}
	if p.CustomerID == "" || len(p.CustomerID) > MaxIDLength {
		return nil, Errorf(CodeValidation, "customer id must be 1-%d characters", MaxIDLength)
	}
	items := make([]Item, 0, len(p.Lines))
	var total int64
	for i, l := range p.Lines {
		prod, ok := p.Products[l.ProductID]
		if !ok {
			return nil, Errorf(CodeNotFound, "product %s not found", l.ProductID)
		}
		if prod.MerchantID != p.MerchantID {
			return nil, Errorf(CodeValidation, "items[%d].product_id belongs to another merchant", i)
		}
		items = append(items, Item{ProductID: l.ProductID, Quantity: l.Quantity, PriceCents: prod.PriceCents})
		total += prod.PriceCents * int64(l.Quantity)
	}
	return []Event{{Type: EventOrderPlaced, Data: OrderPlaced{
		OrderID: p.OrderID, MerchantID: p.MerchantID, CustomerID: p.CustomerID,
		Items: items, TotalCents: total, PlacedAt: now, PaymentDeadline: p.PaymentDeadline,
	}}}, nil
}

// Pay records the payment and the admission decision it triggers: accepted
// when the merchant's queue is empty and a unit is free, queued otherwise.
// Paying again with the same reference is a no-op (no events, load unchanged).
func Pay(o Order, ref string, load Load, maxQueueWait time.Duration, now time.Time) ([]Event, Load, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" || len(ref) > MaxIDLength {
		return nil, load, Errorf(CodeValidation, "payment_ref must be 1-%d characters", MaxIDLength)
	}
	switch o.Status {
	case StatusClosed, StatusCancelled, StatusExpired:
		// An order that ended without being served takes no payment, not
		// even a repeat of the one it had (API.md: 409 after cancelled).
		return nil, load, Errorf(CodeInvalidTransition, "cannot pay an order that is %s", o.Status)
	}
	if o.PaidAt != nil {
		if o.PaymentRef == ref {
			return nil, load, nil
		}
		return nil, load, Errorf(CodeInvalidTransition, "order is already paid with another payment_ref")
	}
	if o.Status != StatusAwaitingPayment {
		return nil, load, Errorf(CodeInvalidTransition, "cannot pay an order that is %s", o.Status)
	}
	if !now.Before(o.PaymentDeadline) {
		return nil, load, Errorf(CodeInvalidTransition, "payment deadline %s has passed", o.PaymentDeadline.UTC().Format(time.RFC3339))
	}
	events := []Event{{Type: EventOrderPaid, Data: OrderPaid{PaymentRef: ref, PaidAt: now}}}
	admission, load := Admit(load, maxQueueWait, now)
	return append(events, admission), load, nil
}

// PayAtPlacement is Pay for an order paid by the request that places it:
// placed is the order.placed event of Place, and the payment goes into it
// rather than into an order.paid event of its own, so that the order's
// stream starts with two events (placed and paid, then accepted or queued)
// instead of three. Every event is a row and an entry in each of the log's
// indexes, and paid placement is the busiest write there is.
func PayAtPlacement(placed Event, ref string, load Load, maxQueueWait time.Duration, now time.Time) ([]Event, Load, error) {
	p, ok := placed.Data.(OrderPlaced)
	if !ok || placed.Type != EventOrderPlaced || p.PaidAt != nil {
		return nil, load, fmt.Errorf("pay at placement: %q is not the event of an unpaid placement", placed.Type)
	}
	o, err := Order{}.Evolve(placed)
	if err != nil {
		return nil, load, err
	}
	events, load, err := Pay(o, ref, load, maxQueueWait, now)
	if err != nil {
		return nil, load, err
	}
	paid := events[0].Data.(OrderPaid)
	p.PaymentRef, p.PaidAt = paid.PaymentRef, &paid.PaidAt
	return []Event{{Type: EventOrderPlaced, Data: p}, events[1]}, load, nil
}

// Admit decides for a newly paid order and returns the event and the new load.
func Admit(load Load, maxQueueWait time.Duration, now time.Time) (Event, Load) {
	if load.CanAdmitNew() {
		load.Active++
		return Event{Type: EventOrderAccepted, Data: OrderAccepted{
			AcceptedAt: now, ActiveAfter: load.Active, Capacity: load.Capacity, Queued: load.Queued,
		}}, load
	}
	seq := load.NextSeq
	if seq < 1 {
		seq = 1
	}
	e := Event{Type: EventOrderQueued, Data: OrderQueued{
		Seq: seq, QueuedAt: now, ExpiresAt: now.Add(maxQueueWait),
		Active: load.Active, Capacity: load.Capacity, Queued: load.Queued,
	}}
	load.NextSeq = seq + 1
	load.Queued++
	return e, load
}

// AdmitQueued admits the head of the queue; the caller guarantees o is the head.
func AdmitQueued(o Order, load Load, now time.Time) (Event, Load, error) {
	if o.Status != StatusQueued {
		return Event{}, load, Errorf(CodeInvalidTransition, "cannot admit an order that is %s", o.Status)
	}
	if !load.CanDrain() {
		return Event{}, load, Errorf(CodeConflict, "merchant has no free unit")
	}
	queued := load.Queued
	load.Active++
	load.Queued--
	return Event{Type: EventOrderAccepted, Data: OrderAccepted{
		AcceptedAt: now, ActiveAfter: load.Active, Capacity: load.Capacity, FromQueue: true, Queued: queued,
	}}, load, nil
}

// Complete finishes an accepted order and frees its unit.
func Complete(o Order, load Load, now time.Time) ([]Event, Load, error) {
	if o.Status != StatusAccepted {
		return nil, load, Errorf(CodeInvalidTransition, "only an accepted order can be completed; this one is %s", o.Status)
	}
	load.Active--
	return []Event{{Type: EventOrderCompleted, Data: OrderCompleted{CompletedAt: now}}}, load, nil
}

// Cancel ends an order on request. Customers may cancel only before the
// merchant starts on it; merchants and admins may cancel any live order.
func Cancel(o Order, by Actor, reason string, load Load, now time.Time) ([]Event, Load, error) {
	if len(reason) > MaxReasonLength {
		return nil, load, Errorf(CodeValidation, "reason must be at most %d characters", MaxReasonLength)
	}
	if o.Status.Terminal() {
		return nil, load, Errorf(CodeInvalidTransition, "cannot cancel an order that is %s", o.Status)
	}
	if by == ActorCustomer && o.Status != StatusAwaitingPayment && o.Status != StatusQueued {
		return nil, load, Errorf(CodeInvalidTransition, "a customer cannot cancel an order that is %s", o.Status)
	}
	switch o.Status {
	case StatusAccepted:
		load.Active--
	case StatusQueued:
		load.Queued--
	}
	return []Event{{Type: EventOrderCancelled, Data: OrderCancelled{
		Reason: reason, By: by, From: o.Status, CancelledAt: now,
	}}}, load, nil
}

// Close ends an unpaid order at its deadline. It is a no-op for an order that
// was paid or ended, or whose deadline has not come: the timer may run late,
// twice, or after a payment.
func Close(o Order, now time.Time) []Event {
	if o.Status != StatusAwaitingPayment || now.Before(o.PaymentDeadline) {
		return nil
	}
	return []Event{{Type: EventOrderClosed, Data: OrderClosed{Reason: ReasonPaymentTimeout, ClosedAt: now}}}
}

// Expire ends an order that waited in the queue past its merchant's limit; a
// no-op otherwise.
func Expire(o Order, load Load, now time.Time) ([]Event, Load) {
	if o.Status != StatusQueued || o.QueueExpiresAt == nil || now.Before(*o.QueueExpiresAt) {
		return nil, load
	}
	load.Queued--
	return []Event{{Type: EventOrderExpired, Data: OrderExpired{Reason: ReasonQueueTimeout, ExpiredAt: now}}}, load
}

// Requeue puts an expired order back in line at its original sequence number,
// so it goes ahead of every order queued after it, with a fresh expiry.
func Requeue(o Order, load Load, maxQueueWait time.Duration, now time.Time) ([]Event, Load, error) {
	if o.Status != StatusExpired {
		return nil, load, Errorf(CodeInvalidTransition, "only an expired order can be requeued; this one is %s", o.Status)
	}
	load.Queued++
	return []Event{{Type: EventOrderRequeued, Data: OrderRequeued{
		Seq: o.QueueSeq, QueuedAt: now, ExpiresAt: now.Add(maxQueueWait),
	}}}, load, nil
}
