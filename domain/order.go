package domain

import (
	"encoding/json"
	"fmt"
	"github.com/google/uuid"
	"time"
)

// OrderStatus is where an order stands in its lifecycle.
type OrderStatus string

const (
	StatusAwaitingPayment OrderStatus = "awaiting_payment"
	// StatusScheduled: paid for a pickup slot, waiting apart from the live
	// line until the slot's release.
	StatusScheduled OrderStatus = "scheduled"
	StatusQueued    OrderStatus = "queued"
	StatusAccepted  OrderStatus = "accepted"
	StatusCompleted OrderStatus = "completed"
	StatusClosed    OrderStatus = "closed"
	StatusCancelled OrderStatus = "cancelled"
	StatusExpired   OrderStatus = "expired"
)

// OrderStatuses are every status an order can be in.
var OrderStatuses = []OrderStatus{StatusAwaitingPayment, StatusScheduled, StatusQueued, StatusAccepted, StatusCompleted, StatusClosed, StatusCancelled, StatusExpired}

// Known reports whether s is one of OrderStatuses.
func (s OrderStatus) Known() bool {
	for _, k := range OrderStatuses {
		if s == k {
			return true
		}
	}
	return false
}

// ListedInQueueOrder reports whether a list of orders in status s runs in
// queue order, next to be admitted first; lists of any other status run
// newest first.
func (s OrderStatus) ListedInQueueOrder() bool { return s == StatusQueued }

// Terminal reports whether no further transition may leave s. An expired order
// is terminal for customers; an operator may still requeue it from its dead letter.
func (s OrderStatus) Terminal() bool {
	switch s {
	case StatusCompleted, StatusClosed, StatusCancelled, StatusExpired:
		return true
	}
	return false
}

// Final reports whether no command but those on finished orders changes an
// order in status s: completed, closed and cancelled (an expired order may
// still be requeued). A command that is not one of those (PickUp, Reopen)
// is answered from an order read in a final status without holding its
// merchant's lock: read before any reopening, it is decided before it.
func (s OrderStatus) Final() bool {
	switch s {
	case StatusCompleted, StatusClosed, StatusCancelled:
		return true
	}
	return false
}

// HoldsStock reports whether an order in status s keeps its reserved stock.
func (s OrderStatus) HoldsStock() bool {
	switch s {
	case StatusClosed, StatusCancelled, StatusExpired:
		return false
	}
	return true
}

// HoldsSlot reports whether an order for a pickup slot in status s keeps
// its load of the slot's room. Only a cancellation or a close gives it
// back: an expired order may be retried into the line, and a completed one
// was served in its slot.
func (s OrderStatus) HoldsSlot() bool {
	return s != StatusCancelled && s != StatusClosed
}

// Actor says who asks for a change; the rules for cancelling depend on it.
type Actor string

const (
	ActorCustomer Actor = "customer"
	ActorMerchant Actor = "merchant"
	ActorAdmin    Actor = "admin"
	ActorSystem   Actor = "system"
	// ActorAuditor reads every order, its events and its proof, and the
	// audit endpoints, and changes nothing.
	ActorAuditor Actor = "auditor"
)

// Reasons recorded in status_reason.
const (
	ReasonPaymentTimeout = "payment_timeout"
	ReasonQueueTimeout   = "queue_wait_exceeded"
)

// Limits on an order's shape.
const (
	MaxOrderLines   = 50
	MaxLineQuantity = 100
	MaxIDLength     = 255
	MaxReasonLength = 500
)

// Item is one line of an order, priced when the order was placed.
type Item struct {
	ProductID uuid.UUID `json:"product_id"`
	// Name is the product's name at placement (absent from orders placed
	// before lines kept it): the ticket reads the same after a rename.
	Name     string `json:"name,omitempty"`
	Quantity int    `json:"quantity"`
	// PriceCents is a unit's price with its options' deltas.
	PriceCents int64 `json:"price_cents"`
	// Options are the chosen options as they were at placement.
	Options []ChosenOption `json:"options,omitempty"`
}

// Order is the state of one order stream, folded from its events by Evolve.
type Order struct {
	ID              uuid.UUID
	MerchantID      uuid.UUID
	CustomerID      string
	Items           []Item
	TotalCents      int64
	Status          OrderStatus
	Version         int
	PlacedAt        time.Time
	PaymentDeadline time.Time
	PaymentRef      string
	PaidAt          *time.Time
	AcceptedAt      *time.Time
	CompletedAt     *time.Time
	EndedAt         *time.Time
	StatusReason    string
	// QueueSeq orders the merchant's line; it is kept after leaving the queue so
	// that a requeued order returns to its original place.
	QueueSeq       int64
	QueuedAt       *time.Time
	QueueExpiresAt *time.Time
	// Load is the capacity the order holds while accepted, fixed at placement.
	Load       int
	Lane       Lane
	PickupCode string
	// PickupAt is the start of the order's pickup slot (nil: as soon as
	// possible); ReleaseAt is when it joins the live line.
	PickupAt, ReleaseAt *time.Time
	// PickedUpAt is when the customer took a completed order away.
	PickedUpAt *time.Time
	// ReopenedAt is when a completion was last undone.
	ReopenedAt *time.Time
}

// Event types of an order stream.
const (
	EventOrderPlaced    = "order.placed"
	EventOrderPaid      = "order.paid"
	EventOrderQueued    = "order.queued"
	EventOrderAccepted  = "order.accepted"
	EventOrderCompleted = "order.completed"
	EventOrderCancelled = "order.cancelled"
	EventOrderClosed    = "order.closed"
	EventOrderExpired   = "order.expired"
	EventOrderRequeued  = "order.requeued"
	// EventOrderPrioritized moves a queued order to the priority lane.
	EventOrderPrioritized = "order.prioritized"
	// EventOrderPickedUp records that a completed order left the counter.
	EventOrderPickedUp = "order.picked_up"
	// EventOrderReopened undoes a completion tapped by mistake.
	EventOrderReopened = "order.reopened"
)

// Event is one fact, ready to be appended to a stream.
type Event struct {
	Type string
	Data any
}

type OrderPlaced struct {
	OrderID         uuid.UUID `json:"order_id"`
	MerchantID      uuid.UUID `json:"merchant_id"`
	CustomerID      string    `json:"customer_id"`
	Items           []Item    `json:"items"`
	TotalCents      int64     `json:"total_cents"`
	PlacedAt        time.Time `json:"placed_at"`
	PaymentDeadline time.Time `json:"payment_deadline"`
	// An order paid in the request that places it carries its payment
	// here, instead of in an order.paid event of its own (PayAtPlacement).
	PaymentRef string     `json:"payment_ref,omitempty"`
	PaidAt     *time.Time `json:"paid_at,omitempty"`
	// Absent from events recorded before they existed: load 1, the normal
	// lane, no pickup code.
	Load       int    `json:"load,omitempty"`
	Lane       Lane   `json:"lane,omitempty"`
	PickupCode string `json:"pickup_code,omitempty"`
	// An order for a pickup slot: the slot's start and its release into
	// the live line (ReleaseAt).
	PickupAt  *time.Time `json:"pickup_at,omitempty"`
	ReleaseAt *time.Time `json:"release_at,omitempty"`
}

type OrderPaid struct {
	PaymentRef string    `json:"payment_ref"`
	PaidAt     time.Time `json:"paid_at"`
	// PickupCode is set only in events recorded while codes were issued at
	// payment; an order is numbered at placement now (StampPickupCode).
	PickupCode string `json:"pickup_code,omitempty"`
}

type OrderQueued struct {
	Seq       int64     `json:"seq"`
	QueuedAt  time.Time `json:"queued_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// Position and load at the decision, so audits can replay it.
	Active   int `json:"active"`
	Capacity int `json:"capacity"`
	Queued   int `json:"queued"`
	// Lane is the line the order waits in (absent before lanes: normal).
	Lane Lane `json:"lane,omitempty"`
	// Released: a scheduled order joining the line at its slot's release,
	// at the place it took when paid (Seq).
	Released bool `json:"released,omitempty"`
	// Placed is the placement of an order paid and queued by the request
	// that placed it, whose stream starts with this one event
	// (PayAtPlacement); nil for an order placed before, or one queued later.
	Placed *OrderPlaced `json:"placed,omitempty"`
}

type OrderAccepted struct {
	AcceptedAt time.Time `json:"accepted_at"`
	// ActiveAfter and Capacity record the decision: audits check ActiveAfter <= Capacity.
	ActiveAfter int  `json:"active_after"`
	Capacity    int  `json:"capacity"`
	FromQueue   bool `json:"from_queue"`
	// Queued is how many orders of the merchant were queued when it was
	// decided: an order admitted directly saw none (audits check it).
	Queued int `json:"queued"`
	// Load is the order's load (absent before weighted capacity: 1); an
	// order alone in the kitchen may exceed Capacity.
	Load int `json:"load,omitempty"`
	// Placed is the placement of an order paid and accepted by the request
	// that placed it, whose stream starts with this one event
	// (PayAtPlacement); nil for an order placed before, or one accepted later.
	Placed *OrderPlaced `json:"placed,omitempty"`
}

type OrderCompleted struct {
	CompletedAt time.Time `json:"completed_at"`
}

type OrderCancelled struct {
	Reason      string      `json:"reason,omitempty"`
	By          Actor       `json:"by"`
	From        OrderStatus `json:"from"`
	CancelledAt time.Time   `json:"cancelled_at"`
}

type OrderClosed struct {
	Reason   string    `json:"reason"`
	ClosedAt time.Time `json:"closed_at"`
}

type OrderExpired struct {
	Reason    string    `json:"reason"`
	ExpiredAt time.Time `json:"expired_at"`
}

type OrderRequeued struct {
	Seq       int64     `json:"seq"`
	QueuedAt  time.Time `json:"queued_at"`
	ExpiresAt time.Time `json:"expires_at"`
	Lane      Lane      `json:"lane,omitempty"`
}

// OrderPrioritized moves a queued order to the tail of the priority lane,
// with a new sequence number; its stay in the queue (and its expiry) goes on.
type OrderPrioritized struct {
	Seq           int64     `json:"seq"`
	Reason        string    `json:"reason,omitempty"`
	By            Actor     `json:"by"`
	PrioritizedAt time.Time `json:"prioritized_at"`
}

// OrderPickedUp records that the customer took a completed order away.
type OrderPickedUp struct {
	PickedUpAt time.Time `json:"picked_up_at"`
}

// OrderReopened puts a completed order back to accepted, holding its load
// again; ActiveAfter and Capacity record the merchant's load after it (a
// reopened order is let in ahead of the line, even over capacity).
type OrderReopened struct {
	ReopenedAt  time.Time `json:"reopened_at"`
	ActiveAfter int       `json:"active_after"`
	Capacity    int       `json:"capacity"`
	Load        int       `json:"load,omitempty"`
}

// Evolve folds one event into an order. It never fails on events the
// commands produced; an unknown type is a programming error.
func (o Order) Evolve(e Event) (Order, error) {
	o.Version++
	switch d := e.Data.(type) {
	case OrderPlaced:
		o = o.place(d)
	case OrderPaid:
		o.PaymentRef = d.PaymentRef
		o.PaidAt = ptr(d.PaidAt)
		if o.PickupCode == "" {
			o.PickupCode = d.PickupCode
		}
	case OrderQueued:
		if d.Placed != nil {
			if o.ID != uuid.Nil {
				return o, fmt.Errorf("order evolve: %s places order %s again", e.Type, o.ID)
			}
			o = o.place(*d.Placed)
		}
		o.Status = StatusQueued
		o.QueueSeq = d.Seq
		o.QueuedAt, o.QueueExpiresAt = ptr(d.QueuedAt), ptr(d.ExpiresAt)
	case OrderScheduled:
		o.Status = StatusScheduled
		o.QueueSeq = d.Seq
	case OrderRequeued:
		o.Status = StatusQueued
		o.QueueSeq = d.Seq
		o.QueuedAt, o.QueueExpiresAt = ptr(d.QueuedAt), ptr(d.ExpiresAt)
		o.EndedAt, o.StatusReason = nil, ""
	case OrderPrioritized:
		o.Lane, o.QueueSeq = LanePriority, d.Seq
	case OrderAccepted:
		if d.Placed != nil {
			if o.ID != uuid.Nil {
				return o, fmt.Errorf("order evolve: %s places order %s again", e.Type, o.ID)
			}
			o = o.place(*d.Placed)
		}
		o.Status = StatusAccepted
		o.AcceptedAt = ptr(d.AcceptedAt)
	case OrderCompleted:
		o.Status = StatusCompleted
		o.CompletedAt, o.EndedAt = ptr(d.CompletedAt), ptr(d.CompletedAt)
	case OrderPickedUp:
		o.PickedUpAt = ptr(d.PickedUpAt)
	case OrderReopened:
		o.Status = StatusAccepted
		o.CompletedAt, o.EndedAt, o.ReopenedAt = nil, nil, ptr(d.ReopenedAt)
	case OrderCancelled:
		o.Status = StatusCancelled
		o.EndedAt, o.StatusReason = ptr(d.CancelledAt), d.Reason
	case OrderClosed:
		o.Status = StatusClosed
		o.EndedAt, o.StatusReason = ptr(d.ClosedAt), d.Reason
	case OrderExpired:
		o.Status = StatusExpired
		o.EndedAt, o.StatusReason = ptr(d.ExpiredAt), d.Reason
	default:
		return o, fmt.Errorf("order evolve: unknown event %q (%T)", e.Type, e.Data)
	}
	return o, nil
}

// place is the order as its placement makes it.
func (o Order) place(d OrderPlaced) Order {
	o.ID, o.MerchantID, o.CustomerID = d.OrderID, d.MerchantID, d.CustomerID
	o.Items = append([]Item(nil), d.Items...)
	o.TotalCents = d.TotalCents
	o.Status = StatusAwaitingPayment
	o.PlacedAt, o.PaymentDeadline = d.PlacedAt, d.PaymentDeadline
	if d.PaidAt != nil {
		o.PaymentRef, o.PaidAt = d.PaymentRef, ptr(*d.PaidAt)
	}
	o.Load, o.Lane, o.PickupCode = max(d.Load, 1), d.Lane, d.PickupCode
	o.PickupAt, o.ReleaseAt = d.PickupAt, d.ReleaseAt
	if o.Lane == "" {
		o.Lane = LaneNormal
	}
	return o
}

// LastDecidedAt is the latest time recorded on the order.
func (o Order) LastDecidedAt() time.Time {
	last := o.PlacedAt
	for _, t := range []*time.Time{o.PaidAt, o.QueuedAt, o.AcceptedAt, o.CompletedAt, o.EndedAt, o.PickedUpAt, o.ReopenedAt} {
		if t != nil && t.After(last) {
			last = *t
		}
	}
	return last
}

// DecisionTime is the time a decision records: the clock's reading under
// its locks, unless a decision it follows (the order's last, the merchant's
// last admission) was recorded later, by a process whose clock runs ahead;
// then that time. So an order's times and a merchant's admissions never run
// backwards, whichever process decides.
func DecisionTime(clock time.Time, follows ...time.Time) time.Time {
	for _, t := range follows {
		if t.After(clock) {
			clock = t
		}
	}
	return clock
}

// Apply folds events in order.
func (o Order) Apply(events ...Event) (Order, error) {
	var err error
	for _, e := range events {
		if o, err = o.Evolve(e); err != nil {
			return o, err
		}
	}
	return o, nil
}

// DecodeEvent turns a stored event back into its typed form.
func DecodeEvent(typ string, data []byte) (Event, error) {
	var v any
	switch typ {
	case EventOrderPlaced:
		v = &OrderPlaced{}
	case EventOrderPaid:
		v = &OrderPaid{}
	case EventOrderQueued:
		v = &OrderQueued{}
	case EventOrderAccepted:
		v = &OrderAccepted{}
	case EventOrderCompleted:
		v = &OrderCompleted{}
	case EventOrderCancelled:
		v = &OrderCancelled{}
	case EventOrderClosed:
		v = &OrderClosed{}
	case EventOrderExpired:
		v = &OrderExpired{}
	case EventOrderRequeued:
		v = &OrderRequeued{}
	case EventOrderScheduled:
		v = &OrderScheduled{}
	case EventMerchantPeriodChanged:
		v = &MerchantPeriodChanged{}
	case EventOrderPrioritized:
		v = &OrderPrioritized{}
	case EventOrderPickedUp:
		v = &OrderPickedUp{}
	case EventOrderReopened:
		v = &OrderReopened{}
	case EventMerchantPaused:
		v = &MerchantPaused{}
	case EventMerchantResumed:
		v = &MerchantResumed{}
	case EventMerchantCreated:
		v = &MerchantCreated{}
	case EventMerchantUpdated:
		v = &MerchantUpdated{}
	case EventMerchantSecretRotated:
		v = &MerchantSecretRotated{}
	case EventProductCreated:
		v = &ProductCreated{}
	case EventProductRestocked:
		v = &ProductRestocked{}
	case EventProductUpdated:
		v = &ProductUpdated{}
	case EventProductHidden:
		v = &ProductHidden{}
	case EventDropCreated:
		v = &DropCreated{}
	case EventDropOpened:
		v = &DropOpened{}
	case EventDropStarted:
		v = &DropStarted{}
	case EventDropSoldOut:
		v = &DropSoldOut{}
	case EventDropEnded:
		v = &DropEnded{}
	case EventEntryJoined:
		v = &EntryJoined{}
	case EventEntryInvited:
		v = &EntryInvited{}
	case EventEntryOrdered:
		v = &EntryOrdered{}
	case EventEntryPurchased:
		v = &EntryPurchased{}
	case EventEntryLapsed:
		v = &EntryLapsed{}
	case EventEntrySoldOut:
		v = &EntrySoldOutEvent{}
	default:
		return Event{}, fmt.Errorf("decode event: unknown type %q", typ)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return Event{}, fmt.Errorf("decode event %s: %w", typ, err)
	}
	return Event{Type: typ, Data: deref(v)}, nil
}

func deref(v any) any {
	switch p := v.(type) {
	case *OrderPlaced:
		return *p
	case *OrderPaid:
		return *p
	case *OrderQueued:
		return *p
	case *OrderAccepted:
		return *p
	case *OrderCompleted:
		return *p
	case *OrderCancelled:
		return *p
	case *OrderClosed:
		return *p
	case *OrderExpired:
		return *p
	case *OrderRequeued:
		return *p
	case *OrderScheduled:
		return *p
	case *MerchantPeriodChanged:
		return *p
	case *OrderPrioritized:
		return *p
	case *OrderPickedUp:
		return *p
	case *OrderReopened:
		return *p
	case *MerchantPaused:
		return *p
	case *MerchantResumed:
		return *p
	case *MerchantCreated:
		return *p
	case *MerchantUpdated:
		return *p
	case *MerchantSecretRotated:
		return *p
	case *ProductCreated:
		return *p
	case *ProductRestocked:
		return *p
	case *ProductUpdated:
		return *p
	case *ProductHidden:
		return *p
	case *DropCreated:
		return *p
	case *DropOpened:
		return *p
	case *DropStarted:
		return *p
	case *DropSoldOut:
		return *p
	case *DropEnded:
		return *p
	case *EntryJoined:
		return *p
	case *EntryInvited:
		return *p
	case *EntryOrdered:
		return *p
	case *EntryPurchased:
		return *p
	case *EntryLapsed:
		return *p
	case *EntrySoldOutEvent:
		return *p
	}
	return v
}

func ptr[T any](v T) *T { return &v }
