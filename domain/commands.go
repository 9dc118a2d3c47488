package domain

import (
	"bytes"
	"fmt"
	"github.com/google/uuid"
	"strings"
	"time"
)

// Load is a merchant's admission state: the only input admission decisions
// need. Active and the capacity count units (orders, or items when the
// merchant counts items); Queued counts orders of both lanes.
type Load struct {
	Capacity       int
	Active         int
	ActiveOrders   int
	Queued         int
	QueuedPriority int
	QueuedUnits    int
	NextSeq        int64
	// Paused: nobody is admitted until the merchant resumes.
	Paused bool
}

// Fits reports whether an order of the given load at the head of the queue
// may be admitted now: when its units are free, or when the kitchen is
// empty (so an order larger than the whole capacity goes alone rather than
// never). A capacity of 0 admits nothing.
func (l Load) Fits(load int) bool {
	return !l.Paused && l.Capacity > 0 && (l.Active+max(load, 1) <= l.Capacity || l.Active == 0)
}

// CanAdmitNew reports whether a newly paid order of that load and lane may
// be accepted at once. A new order never overtakes a queued one of its lane,
// and a normal order none of either lane; a priority order goes before the
// normal lane's head.
func (l Load) CanAdmitNew(load int, lane Lane) bool {
	ahead := l.Queued
	if lane == LanePriority {
		ahead = l.QueuedPriority
	}
	return ahead == 0 && l.Fits(load)
}

// CanDrain reports whether the head of the queue, of headLoad, may be admitted.
func (l Load) CanDrain(headLoad int) bool { return l.Queued > 0 && l.Fits(headLoad) }

// HeadLane is the lane whose head is next: the priority lane's while it has
// orders.
func (l Load) HeadLane() Lane {
	if l.QueuedPriority > 0 {
		return LanePriority
	}
	return LaneNormal
}

// MaxAdmissible bounds how many queued orders may be admitted now: every
// order takes at least one unit, and an empty kitchen takes one oversized.
func (l Load) MaxAdmissible() int {
	if l.Paused || l.Capacity <= 0 {
		return 0
	}
	free := max(l.Capacity-l.Active, 0)
	if l.Active == 0 {
		free = max(free, 1)
	}
	return min(free, l.Queued)
}

func (l Load) enqueue(o Order) Load {
	l.Queued++
	l.QueuedUnits += o.load()
	if o.Lane == LanePriority {
		l.QueuedPriority++
	}
	return l
}

func (l Load) dequeue(o Order) Load {
	l.Queued--
	l.QueuedUnits -= o.load()
	if o.Lane == LanePriority {
		l.QueuedPriority--
	}
	return l
}

func (l Load) occupy(o Order) Load {
	l.Active += o.load()
	l.ActiveOrders++
	return l
}

func (l Load) release(o Order) Load {
	l.Active -= o.load()
	l.ActiveOrders--
	return l
}

// load is the order's load, 1 for an order folded before loads existed.
func (o Order) load() int { return max(o.Load, 1) }

// laneOrNormal is the order's lane, normal for one folded before lanes.
func (o Order) laneOrNormal() Lane {
	if o.Lane == "" {
		return LaneNormal
	}
	return o.Lane
}

// ProductRef is what placing an order needs to know about a product.
type ProductRef struct {
	ID           uuid.UUID
	Name         string
	MerchantID   uuid.UUID
	PriceCents   int64
	LoadUnits    int
	OptionGroups []OptionGroup
	// Unavailable is "sold out today"; Hidden is off the menu. Either
	// refuses a placement naming the product.
	Unavailable bool
	Hidden      bool
}

// LineRequest is one requested line before pricing.
type LineRequest struct {
	ProductID uuid.UUID
	Quantity  int
	// Options are the ids of the chosen options, at most once each.
	Options []string
}

// PlaceParams carries everything Place needs; products are looked up by the caller.
type PlaceParams struct {
	OrderID         uuid.UUID
	MerchantID      uuid.UUID
	CustomerID      string
	Lines           []LineRequest
	Products        map[uuid.UUID]ProductRef
	PaymentDeadline time.Time
	// Unit is the merchant's capacity unit, which fixes the order's load.
	Unit CapacityUnit
	Lane Lane
	// PickupAt is the order's pickup slot (nil: as soon as possible),
	// checked by the caller (CheckPlacementTime); the order joins the live
	// line PrepSeconds before it.
	PickupAt    *time.Time
	PrepSeconds int
}

// ValidateLines checks an order's shape before anything is looked up.
func ValidateLines(lines []LineRequest) error {
	if len(lines) == 0 || len(lines) > MaxOrderLines {
		return Errorf(CodeValidation, "items must have between 1 and %d lines", MaxOrderLines)
	}
	seen := make(map[uuid.UUID]bool, len(lines))
	for i, l := range lines {
		if l.Quantity < 1 || l.Quantity > MaxLineQuantity {
			return Errorf(CodeValidation, "items[%d].quantity must be between 1 and %d", i, MaxLineQuantity)
		}
		if seen[l.ProductID] {
			return Errorf(CodeValidation, "items[%d].product_id repeats an earlier line; combine the quantities", i)
		}
		seen[l.ProductID] = true
		if err := validateLineOptions(i, l.Options); err != nil {
			return err
		}
	}
	return nil
}

// CheckReplay decides a placement whose idempotency key the customer used
// before, with a body that hashed to firstHash: the same body is answered
// as the first request was, another is refused, so that one key never
// stands for two orders.
func CheckReplay(firstHash, requestHash []byte) error {
	if !bytes.Equal(firstHash, requestHash) {
		return Errorf(CodeIdempotencyReused, "this Idempotency-Key was used with a different request body")
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
	if p.Lane != "" && !p.Lane.Valid() {
		return nil, Errorf(CodeValidation, `lane must be "normal" or "priority"`)
	}
	items := make([]Item, 0, len(p.Lines))
	lineUnits := make([]int, 0, len(p.Lines))
	var total int64
	for i, l := range p.Lines {
		prod, ok := p.Products[l.ProductID]
		if !ok {
			return nil, Errorf(CodeNotFound, "product %s not found", l.ProductID)
		}
		if prod.MerchantID != p.MerchantID {
			return nil, Errorf(CodeValidation, "items[%d].product_id belongs to another merchant", i)
		}
		if prod.Unavailable || prod.Hidden {
			return nil, Errorf(CodeProductUnavailable, "items[%d].product_id: product %s is not available", i, l.ProductID)
		}
		chosen, delta, err := chooseOptions(i, prod.OptionGroups, l.Options)
		if err != nil {
			return nil, err
		}
		// The product's validation keeps every choice at or above 0; a
		// price lowered since is held to it too.
		unit := max(prod.PriceCents+delta, 0)
		items = append(items, Item{ProductID: l.ProductID, Name: prod.Name, Quantity: l.Quantity, PriceCents: unit, Options: chosen})
		lineUnits = append(lineUnits, unitLoad(prod, l.Options))
		total += unit * int64(l.Quantity)
	}
	lane := p.Lane
	if lane == "" {
		lane = LaneNormal
	}
	placed := OrderPlaced{
		OrderID: p.OrderID, MerchantID: p.MerchantID, CustomerID: p.CustomerID,
		Items: items, TotalCents: total, PlacedAt: now, PaymentDeadline: p.PaymentDeadline,
		Load: OrderLoad(p.Unit, items, lineUnits), Lane: lane,
	}
	if p.PickupAt != nil {
		pickup, release := p.PickupAt.UTC(), ReleaseAt(*p.PickupAt, p.PrepSeconds).UTC()
		placed.PickupAt, placed.ReleaseAt = &pickup, &release
	}
	return []Event{{Type: EventOrderPlaced, Data: placed}}, nil
}

// Pay records the payment and the admission decision it triggers: accepted
// when the merchant's queue is empty and a unit is free, queued otherwise;
// an order for a pickup slot whose release has not come is scheduled.
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
	if scheduled, load, ok := schedule(o, load, now); ok {
		return append(events, scheduled), load, nil
	}
	admission, load := Admit(o, load, maxQueueWait, now)
	return append(events, admission), load, nil
}

// PayAtPlacement is Pay for an order paid by the request that places it:
// placed is the order.placed event of Place, and the payment goes into it
// rather than into an order.paid event of its own. An order accepted or
// queued at once is then one event, order.accepted or order.queued carrying
// its placement (Placed); one scheduled starts with two (placed and paid,
// then scheduled). Every event is a row, a chain link and an entry in each
// of the log's indexes, and paid placement is the busiest write there is.
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
	switch d := events[1].Data.(type) {
	case OrderAccepted:
		d.Placed = &p
		return []Event{{Type: EventOrderAccepted, Data: d}}, load, nil
	case OrderQueued:
		d.Placed = &p
		return []Event{{Type: EventOrderQueued, Data: d}}, load, nil
	}
	return []Event{{Type: EventOrderPlaced, Data: p}, events[1]}, load, nil
}

// Admit decides for a newly paid order and returns the event and the new load.
func Admit(o Order, load Load, maxQueueWait time.Duration, now time.Time) (Event, Load) {
	lane := o.laneOrNormal()
	if load.CanAdmitNew(o.load(), lane) {
		queued := load.Queued
		load = load.occupy(o)
		return Event{Type: EventOrderAccepted, Data: OrderAccepted{
			AcceptedAt: now, ActiveAfter: load.Active, Capacity: load.Capacity, Queued: queued, Load: loadField(o),
		}}, load
	}
	seq := load.NextSeq
	if seq < 1 {
		seq = 1
	}
	e := Event{Type: EventOrderQueued, Data: OrderQueued{
		Seq: seq, QueuedAt: now, ExpiresAt: now.Add(maxQueueWait),
		Active: load.Active, Capacity: load.Capacity, Queued: load.Queued, Lane: laneField(lane),
	}}
	load.NextSeq = seq + 1
	return e, load.enqueue(o)
}

// loadField and laneField leave out of events the values that events
// recorded before weighted capacity and lanes imply by their absence.
func loadField(o Order) int {
	if o.load() == 1 {
		return 0
	}
	return o.load()
}

func laneField(l Lane) Lane {
	if l == LaneNormal {
		return ""
	}
	return l
}

// LineHeadToRead is how many of the line's first orders a drain of at most
// limit admissions needs to see: no more than it may admit (MaxAdmissible).
func (l Load) LineHeadToRead(limit int) int { return max(min(l.MaxAdmissible(), limit), 0) }

// Admission is a queued order let in from the line by a drain: the order
// as it waited, and its EventOrderAccepted.
type Admission struct {
	Order Order
	Event Event
}

// Drain is what a drain of the line decided.
type Drain struct {
	// Admissions are in the line's order.
	Admissions []Admission
	// Load is the merchant's load after them.
	Load Load
	// More says the limit stopped the drain while the load still has room:
	// the rest is a drain job's.
	More bool
}

// DrainLine admits the line's head while it fits, in order, at most limit
// orders: head is the line's first orders, the priority lane's first (at
// least LineHeadToRead of them, or the whole line). Nothing behind a head
// that does not fit overtakes it.
func DrainLine(head []Order, load Load, limit int, now time.Time) (Drain, error) {
	d := Drain{Load: load}
	for _, o := range head {
		if len(d.Admissions) >= limit || !d.Load.CanDrain(o.load()) {
			break
		}
		e, after, err := AdmitQueued(o, d.Load, now)
		if err != nil {
			return Drain{Load: load}, err
		}
		d.Admissions = append(d.Admissions, Admission{Order: o, Event: e})
		d.Load = after
	}
	d.More = len(d.Admissions) >= limit && d.Load.MaxAdmissible() > 0
	return d, nil
}

// AdmitQueued admits the head of the queue; the caller guarantees o is the
// head (of the priority lane while it has orders, else of the normal lane).
func AdmitQueued(o Order, load Load, now time.Time) (Event, Load, error) {
	if o.Status != StatusQueued {
		return Event{}, load, Errorf(CodeInvalidTransition, "cannot admit an order that is %s", o.Status)
	}
	if o.laneOrNormal() != load.HeadLane() {
		return Event{}, load, Errorf(CodeConflict, "order is not at the head of the queue")
	}
	if !load.CanDrain(o.load()) {
		return Event{}, load, Errorf(CodeConflict, "merchant has no room for the head of its queue")
	}
	queued := load.Queued
	load = load.dequeue(o).occupy(o)
	return Event{Type: EventOrderAccepted, Data: OrderAccepted{
		AcceptedAt: now, ActiveAfter: load.Active, Capacity: load.Capacity, FromQueue: true, Queued: queued, Load: loadField(o),
	}}, load, nil
}

// Prioritize moves a queued order to the tail of the priority lane. An
// order already there stays (no events).
func Prioritize(o Order, by Actor, reason string, load Load, now time.Time) ([]Event, Load, error) {
	if len(reason) > MaxReasonLength {
		return nil, load, Errorf(CodeValidation, "reason must be at most %d characters", MaxReasonLength)
	}
	if o.Status != StatusQueued {
		return nil, load, Errorf(CodeInvalidTransition, "only a queued order can be prioritized; this one is %s", o.Status)
	}
	if o.laneOrNormal() == LanePriority {
		return nil, load, nil
	}
	seq := max(load.NextSeq, 1)
	load.NextSeq = seq + 1
	load.QueuedPriority++
	return []Event{{Type: EventOrderPrioritized, Data: OrderPrioritized{
		Seq: seq, Reason: reason, By: by, PrioritizedAt: now,
	}}}, load, nil
}

// Complete finishes an accepted order and frees its unit.
func Complete(o Order, load Load, now time.Time) ([]Event, Load, error) {
	if o.Status != StatusAccepted {
		return nil, load, Errorf(CodeInvalidTransition, "only an accepted order can be completed; this one is %s", o.Status)
	}
	load = load.release(o)
	return []Event{{Type: EventOrderCompleted, Data: OrderCompleted{CompletedAt: now}}}, load, nil
}

// ReopenWindow is how long after its completion an order may be reopened:
// long enough to undo a mistaken tap, short enough that the customer has
// not left with it.
const ReopenWindow = 60 * time.Second

// PickUp records that the customer took a completed order away. Picking it
// up again changes nothing.
func PickUp(o Order, now time.Time) ([]Event, error) {
	if o.Status != StatusCompleted {
		return nil, Errorf(CodeInvalidTransition, "only a completed order can be picked up; this one is %s", o.Status)
	}
	if o.PickedUpAt != nil {
		return nil, nil
	}
	return []Event{{Type: EventOrderPickedUp, Data: OrderPickedUp{PickedUpAt: now}}}, nil
}

// Reopen undoes a completion within ReopenWindow, before pickup: the order
// is accepted again and takes its load back at once, ahead of the line and
// whatever the room (it was being made a minute ago).
func Reopen(o Order, load Load, now time.Time) ([]Event, Load, error) {
	if o.Status != StatusCompleted {
		return nil, load, Errorf(CodeInvalidTransition, "only a completed order can be reopened; this one is %s", o.Status)
	}
	if o.PickedUpAt != nil {
		return nil, load, Errorf(CodeInvalidTransition, "the order was picked up; it cannot be reopened")
	}
	if o.CompletedAt == nil || now.Sub(*o.CompletedAt) > ReopenWindow {
		return nil, load, Errorf(CodeInvalidTransition, "a completion can be undone within %d s only", int(ReopenWindow/time.Second))
	}
	load = load.occupy(o)
	return []Event{{Type: EventOrderReopened, Data: OrderReopened{
		ReopenedAt: now, ActiveAfter: load.Active, Capacity: load.Capacity, Load: loadField(o),
	}}}, load, nil
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
	if by == ActorCustomer && o.Status != StatusAwaitingPayment && o.Status != StatusQueued && o.Status != StatusScheduled {
		return nil, load, Errorf(CodeInvalidTransition, "a customer cannot cancel an order that is %s", o.Status)
	}
	switch o.Status {
	case StatusAccepted:
		load = load.release(o)
	case StatusQueued:
		load = load.dequeue(o)
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
	load = load.dequeue(o)
	return []Event{{Type: EventOrderExpired, Data: OrderExpired{Reason: ReasonQueueTimeout, ExpiredAt: now}}}, load
}

// Requeue puts an expired order back in line at its original sequence number,
// so it goes ahead of every order queued after it, with a fresh expiry.
func Requeue(o Order, load Load, maxQueueWait time.Duration, now time.Time) ([]Event, Load, error) {
	if o.Status != StatusExpired {
		return nil, load, Errorf(CodeInvalidTransition, "only an expired order can be requeued; this one is %s", o.Status)
	}
	load = load.enqueue(o)
	return []Event{{Type: EventOrderRequeued, Data: OrderRequeued{
		Seq: o.QueueSeq, QueuedAt: now, ExpiresAt: now.Add(maxQueueWait), Lane: laneField(o.laneOrNormal()),
	}}}, load, nil
}
