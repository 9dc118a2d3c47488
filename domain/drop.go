package domain

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
)

// A drop sells a product's limited units from a set time (API.md, Drops).
// Its stream holds the drop's own transitions; each entry is a stream of
// its own, so that customers join without queueing on the drop's stream.

// DropState is where a drop stands.
type DropState string

const (
	DropStateScheduled DropState = "scheduled"
	DropStateOpen      DropState = "open"
	DropStateSelling   DropState = "selling"
	DropStateSoldOut   DropState = "sold_out"
	DropStateEnded     DropState = "ended"
)

// Active reports whether the drop still governs its product: until it sells
// out or ends, only its invited customers may buy the product.
func (s DropState) Active() bool {
	return s == DropStateScheduled || s == DropStateOpen || s == DropStateSelling
}

// DropMode says how entries that joined before the start are ranked.
type DropMode string

const (
	DropLottery DropMode = "lottery"
	DropFIFO    DropMode = "fifo"
)

// EntryStatus is where an entry stands.
type EntryStatus string

const (
	EntryStatusWaiting   EntryStatus = "waiting"
	EntryStatusInvited   EntryStatus = "invited"
	EntryStatusPurchased EntryStatus = "purchased"
	EntryStatusLapsed    EntryStatus = "lapsed"
	EntryStatusSoldOut   EntryStatus = "sold_out"
)

// Drop limits.
const (
	MinPurchaseWindowSeconds     = 30
	MaxPurchaseWindowSeconds     = 3600
	DefaultPurchaseWindowSeconds = 300
	MaxDropUnits                 = 1_000_000
	// SeedBytes is the size of a drop's secret seed.
	SeedBytes = 32
)

// Reasons an entry lapses.
const (
	LapseWindowEnded    = "purchase_window_ended"
	LapseOrderClosed    = "order_closed"
	LapseOrderCancelled = "order_cancelled"
	LapseOrderExpired   = "order_expired"
)

// Event types of drop and entry streams.
const (
	EventDropCreated    = "drop.created"
	EventDropOpened     = "drop.opened"
	EventDropStarted    = "drop.started"
	EventDropSoldOut    = "drop.sold_out"
	EventDropEnded      = "drop.ended"
	EventEntryJoined    = "drop_entry.joined"
	EventEntryInvited   = "drop_entry.invited"
	EventEntryOrdered   = "drop_entry.ordered"
	EventEntryPurchased = "drop_entry.purchased"
	EventEntryLapsed    = "drop_entry.lapsed"
	EventEntrySoldOut   = "drop_entry.sold_out"
)

// DropCreated records a new drop. The seed itself is not in it: events are
// readable by auditors, and the seed is secret until the start.
type DropCreated struct {
	DropID                uuid.UUID `json:"drop_id"`
	ProductID             uuid.UUID `json:"product_id"`
	MerchantID            uuid.UUID `json:"merchant_id"`
	OpensAt               time.Time `json:"opens_at"`
	StartsAt              time.Time `json:"starts_at"`
	Mode                  DropMode  `json:"mode"`
	PurchaseWindowSeconds int       `json:"purchase_window_seconds"`
	Units                 int       `json:"units"`
	SeedCommitment        string    `json:"seed_commitment"`
	CreatedAt             time.Time `json:"created_at"`
}

type DropOpened struct {
	OpenedAt time.Time `json:"opened_at"`
}

// DropStarted publishes the seed (hex) at the start and, in a lottery,
// fixes the set of entries drawn: the digest (hex) of the entries that
// joined before starts_at, which every early entry's draw mixes in.
type DropStarted struct {
	Seed          string    `json:"seed"`
	EntriesDigest string    `json:"entries_digest,omitempty"`
	StartedAt     time.Time `json:"started_at"`
}

type DropSoldOut struct {
	Purchased int       `json:"purchased"`
	SoldOutAt time.Time `json:"sold_out_at"`
}

// DropEnded records that a drop stopped selling with units unsold: its
// line stayed empty for a purchase window.
type DropEnded struct {
	Purchased int       `json:"purchased"`
	EndedAt   time.Time `json:"ended_at"`
}

// Drop is a drop as its stream folds.
type Drop struct {
	DropCreated
	State DropState
	// Seed is nil until the drop starts.
	Seed []byte
	// EntriesDigest is nil until a lottery drop starts, and in the draws
	// made before digests were drawn in.
	EntriesDigest []byte
	Version       int
}

// Evolve folds one event of the drop's stream.
func (d Drop) Evolve(e Event) (Drop, error) {
	switch ev := e.Data.(type) {
	case DropCreated:
		if d.Version != 0 {
			return d, fmt.Errorf("drop %s created twice", d.DropID)
		}
		d.DropCreated, d.State = ev, DropStateScheduled
	case DropOpened:
		d.State = DropStateOpen
	case DropStarted:
		seed, err := hex.DecodeString(ev.Seed)
		if err != nil {
			return d, fmt.Errorf("drop %s: seed: %w", d.DropID, err)
		}
		d.State, d.Seed = DropStateSelling, seed
		if ev.EntriesDigest != "" {
			if d.EntriesDigest, err = hex.DecodeString(ev.EntriesDigest); err != nil {
				return d, fmt.Errorf("drop %s: entries digest: %w", d.DropID, err)
			}
		}
	case DropSoldOut:
		d.State = DropStateSoldOut
	case DropEnded:
		d.State = DropStateEnded
	default:
		return d, fmt.Errorf("drop evolve: unknown event %q (%T)", e.Type, e.Data)
	}
	d.Version++
	return d, nil
}

// Apply folds events in order.
func (d Drop) Apply(events ...Event) (Drop, error) {
	var err error
	for _, e := range events {
		if d, err = d.Evolve(e); err != nil {
			return d, err
		}
	}
	return d, nil
}

// SeedCommitment is what a drop publishes at creation: hex SHA-256 of its seed.
func SeedCommitment(seed []byte) string {
	sum := sha256.Sum256(seed)
	return hex.EncodeToString(sum[:])
}

// NewDropParams is a drop request with what the caller looked up.
type NewDropParams struct {
	DropID, ProductID, MerchantID uuid.UUID
	OpensAt, StartsAt             time.Time
	Mode                          DropMode
	PurchaseWindowSeconds         *int
	Units                         *int
	// StockRemaining is the product's remaining stock; nil when unlimited.
	StockRemaining *int
	// ProductHasActiveDrop refuses a second drop of one product at a time.
	ProductHasActiveDrop bool
	Seed                 []byte
}

// CreateDrop validates a new drop and records it.
func CreateDrop(p NewDropParams, now time.Time) ([]Event, error) {
	if p.Mode != DropLottery && p.Mode != DropFIFO {
		return nil, Errorf(CodeValidation, "mode must be lottery or fifo")
	}
	if p.OpensAt.IsZero() || p.StartsAt.IsZero() {
		return nil, Errorf(CodeValidation, "opens_at and starts_at are required")
	}
	if !p.OpensAt.After(now) {
		return nil, Errorf(CodeValidation, "opens_at must be in the future")
	}
	if !p.OpensAt.Before(p.StartsAt) {
		return nil, Errorf(CodeValidation, "opens_at must be before starts_at")
	}
	window := DefaultPurchaseWindowSeconds
	if p.PurchaseWindowSeconds != nil {
		window = *p.PurchaseWindowSeconds
	}
	if window < MinPurchaseWindowSeconds || window > MaxPurchaseWindowSeconds {
		return nil, Errorf(CodeValidation, "purchase_window_seconds must be between %d and %d", MinPurchaseWindowSeconds, MaxPurchaseWindowSeconds)
	}
	if p.StockRemaining == nil {
		return nil, Errorf(CodeValidation, "a drop needs a product with limited stock")
	}
	units := *p.StockRemaining
	if p.Units != nil {
		units = *p.Units
	}
	if units < 1 || units > MaxDropUnits {
		return nil, Errorf(CodeValidation, "units must be between 1 and %d", MaxDropUnits)
	}
	if units > *p.StockRemaining {
		return nil, Errorf(CodeValidation, "units (%d) exceed the product's remaining stock (%d)", units, *p.StockRemaining)
	}
	if p.ProductHasActiveDrop {
		return nil, Errorf(CodeValidation, "the product already has a drop that has not ended")
	}
	if len(p.Seed) != SeedBytes {
		return nil, fmt.Errorf("create drop: seed of %d bytes, want %d", len(p.Seed), SeedBytes)
	}
	return []Event{{Type: EventDropCreated, Data: DropCreated{
		DropID: p.DropID, ProductID: p.ProductID, MerchantID: p.MerchantID,
		OpensAt: p.OpensAt, StartsAt: p.StartsAt, Mode: p.Mode, PurchaseWindowSeconds: window, Units: units,
		SeedCommitment: SeedCommitment(p.Seed), CreatedAt: now,
	}}}, nil
}

// AdvanceDrop returns the transitions whose time has come: open at opens_at,
// start (publishing seed, which must match the commitment) at starts_at. A
// lottery's start also records digest, the EntriesDigest of the entries
// that joined before starts_at, read under the drop's lock that every join
// waits for.
func AdvanceDrop(d Drop, seed, digest []byte, now time.Time) ([]Event, error) {
	var events []Event
	if d.State == DropStateScheduled && !now.Before(d.OpensAt) {
		events = append(events, Event{Type: EventDropOpened, Data: DropOpened{OpenedAt: now}})
	}
	if (d.State == DropStateScheduled || d.State == DropStateOpen) && !now.Before(d.StartsAt) {
		if SeedCommitment(seed) != d.SeedCommitment {
			return nil, fmt.Errorf("drop %s: the seed does not match its commitment", d.DropID)
		}
		started := DropStarted{Seed: hex.EncodeToString(seed), StartedAt: now}
		if d.Mode == DropLottery {
			if len(digest) != sha256.Size {
				return nil, fmt.Errorf("drop %s: a lottery starts with the digest of its entries", d.DropID)
			}
			started.EntriesDigest = hex.EncodeToString(digest)
		}
		events = append(events, Event{Type: EventDropStarted, Data: started})
	}
	return events, nil
}

// SellOut ends a selling drop whose every unit is purchased.
func SellOut(d Drop, purchased int, now time.Time) []Event {
	if d.State != DropStateSelling || purchased < d.Units {
		return nil
	}
	return []Event{{Type: EventDropSoldOut, Data: DropSoldOut{Purchased: purchased, SoldOutAt: now}}}
}

// DropLine is what a selling drop's end depends on.
type DropLine struct {
	Waiting, Outstanding, Purchased int
	// LastActivity is the latest of the drop's start, its last join and
	// its last purchase deadline.
	LastActivity time.Time
}

// EndsAt is when a selling drop whose line is empty ends: one purchase
// window after its last activity, so that a customer arriving in that
// time is still served through the line. It is zero while an entry waits
// or holds an invitation, or when every unit is bought (the drop sells
// out instead).
func EndsAt(d Drop, l DropLine) time.Time {
	if d.State != DropStateSelling || l.Waiting > 0 || l.Outstanding > 0 || l.Purchased >= d.Units {
		return time.Time{}
	}
	return l.LastActivity.Add(time.Duration(d.PurchaseWindowSeconds) * time.Second)
}

// End ends a selling drop that no customer is in line for, a purchase
// window after its last activity: its remaining units sell as the product's
// other stock does, and it takes no more entries.
func End(d Drop, l DropLine, now time.Time) []Event {
	at := EndsAt(d, l)
	if at.IsZero() || now.Before(at) {
		return nil
	}
	return []Event{{Type: EventDropEnded, Data: DropEnded{Purchased: l.Purchased, EndedAt: now}}}
}

// InvitationsDue is how many waiting entries may be invited now: invited
// (and not yet lapsed) plus purchased entries never exceed units.
func InvitationsDue(d Drop, outstanding, purchased int) int {
	if d.State != DropStateSelling {
		return 0
	}
	return max(0, d.Units-outstanding-purchased)
}

// Ranking. An entry's order key sorts entries in rank order, bytewise:
//
//   - lottery entries that joined before starts_at: 0x00 followed by
//     SHA-256(seed ‖ digest ‖ the entry id's 16 bytes), known once the seed
//     is, where digest is the EntriesDigest of those entries: the set is
//     closed at the start, and every entry in it moves every rank, so that
//     whoever knows the seed early cannot pick entries that win without
//     knowing every other entry (draws made before digests, SHA-256(seed ‖
//     the entry id's 16 bytes));
//   - every other entry: 0x01 followed by joined_at in microseconds since
//     the Unix epoch (8 bytes, big-endian) and the entry id's 16 bytes.
//
// So early entries come first in the order of their hash, and later ones
// follow by joined_at (the id breaking ties).
const (
	earlyKeyPrefix byte = 0x00
	lateKeyPrefix  byte = 0x01
)

// DrawHash is SHA-256(seed ‖ digest ‖ entry id), the lottery's draw for
// one entry; digest is nil in the draws made before digests.
func DrawHash(seed, digest []byte, entryID [16]byte) [32]byte {
	h := sha256.New()
	h.Write(seed)
	h.Write(digest)
	h.Write(entryID[:])
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// EntriesDigest is SHA-256 of the 16-byte ids of the entries drawn, in
// ascending byte order, concatenated: the set of a lottery's early entries
// as its start closes it.
func EntriesDigest(ids [][16]byte) []byte {
	sorted := append([][16]byte(nil), ids...)
	slices.SortFunc(sorted, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) })
	h := sha256.New()
	for _, id := range sorted {
		h.Write(id[:])
	}
	return h.Sum(nil)
}

// EarlyEntry reports whether an entry is ranked by the lottery draw.
func EarlyEntry(mode DropMode, startsAt, joinedAt time.Time) bool {
	return mode == DropLottery && joinedAt.Before(startsAt)
}

// OrderKey is an entry's rank key in drop d; nil for an early lottery
// entry before the seed is published.
func (d Drop) OrderKey(entryID [16]byte, joinedAt time.Time) []byte {
	return OrderKey(d.Mode, d.StartsAt, d.Seed, d.EntriesDigest, entryID, joinedAt)
}

// OrderKey is an entry's rank key; nil for an early lottery entry before
// the seed is published (seed nil).
func OrderKey(mode DropMode, startsAt time.Time, seed, digest []byte, entryID [16]byte, joinedAt time.Time) []byte {
	if EarlyEntry(mode, startsAt, joinedAt) {
		if seed == nil {
			return nil
		}
		sum := DrawHash(seed, digest, entryID)
		return append([]byte{earlyKeyPrefix}, sum[:]...)
	}
	key := make([]byte, 0, 25)
	key = append(key, lateKeyPrefix)
	key = binary.BigEndian.AppendUint64(key, uint64(joinedAt.UnixMicro()))
	return append(key, entryID[:]...)
}

// Ranked reports whether the drop's entries have ranks: a fifo drop's from
// their join, a lottery drop's once the draw at its start has ranked the
// early ones. An entry's rank is its place in the order of the keys.
func (d Drop) Ranked() bool {
	return d.Mode == DropFIFO || d.Seed != nil
}

// CompareOrderKeys orders two keys; a nil key (not yet drawn) sorts last.
func CompareOrderKeys(a, b []byte) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	case b == nil:
		return -1
	}
	return bytes.Compare(a, b)
}

// EntryID is the id of a customer's entry in a drop: derived from the two,
// so that finding whether a customer is in a drop is a lookup by id, and a
// second entry for the customer is the same row. It is a version 8 UUID
// (RFC 9562) of the first bytes of SHA-256("orderd drop entry" ‖ the drop
// id's 16 bytes ‖ the customer id). Nobody learns a rank from it: the rank
// is drawn from the seed, published only at the start.
func EntryID(dropID uuid.UUID, customerID string) uuid.UUID {
	h := sha256.New()
	h.Write([]byte("orderd drop entry"))
	h.Write(dropID[:])
	h.Write([]byte(customerID))
	var id uuid.UUID
	copy(id[:], h.Sum(nil))
	id[6] = id[6]&0x0f | 0x80
	id[8] = id[8]&0x3f | 0x80
	return id
}

// Entry events.

type EntryJoined struct {
	EntryID    uuid.UUID `json:"entry_id"`
	DropID     uuid.UUID `json:"drop_id"`
	MerchantID uuid.UUID `json:"merchant_id"`
	CustomerID string    `json:"customer_id"`
	JoinedAt   time.Time `json:"joined_at"`
}

type EntryInvited struct {
	InvitedAt        time.Time `json:"invited_at"`
	PurchaseDeadline time.Time `json:"purchase_deadline"`
}

// EntryOrdered records the one order an invitation allows.
type EntryOrdered struct {
	OrderID   uuid.UUID `json:"order_id"`
	OrderedAt time.Time `json:"ordered_at"`
}

type EntryPurchased struct {
	OrderID     uuid.UUID `json:"order_id"`
	PurchasedAt time.Time `json:"purchased_at"`
}

type EntryLapsed struct {
	Reason   string    `json:"reason"`
	LapsedAt time.Time `json:"lapsed_at"`
}

type EntrySoldOutEvent struct {
	SoldOutAt time.Time `json:"sold_out_at"`
}

// Entry is one customer's place in a drop, as its stream folds.
type Entry struct {
	ID, DropID, MerchantID      uuid.UUID
	CustomerID                  string
	JoinedAt                    time.Time
	Status                      EntryStatus
	InvitedAt, PurchaseDeadline *time.Time
	// OrderID is uuid.Nil until the invitation's order is placed.
	OrderID uuid.UUID
	Version int
}

// Evolve folds one event of the entry's stream.
func (e Entry) Evolve(ev Event) (Entry, error) {
	switch d := ev.Data.(type) {
	case EntryJoined:
		if e.Version != 0 {
			return e, fmt.Errorf("entry %s joined twice", e.ID)
		}
		e.ID, e.DropID, e.MerchantID, e.CustomerID, e.JoinedAt = d.EntryID, d.DropID, d.MerchantID, d.CustomerID, d.JoinedAt
		e.Status = EntryStatusWaiting
	case EntryInvited:
		e.Status = EntryStatusInvited
		e.InvitedAt, e.PurchaseDeadline = ptr(d.InvitedAt), ptr(d.PurchaseDeadline)
	case EntryOrdered:
		e.OrderID = d.OrderID
	case EntryPurchased:
		e.Status, e.OrderID = EntryStatusPurchased, d.OrderID
	case EntryLapsed:
		e.Status = EntryStatusLapsed
	case EntrySoldOutEvent:
		e.Status = EntryStatusSoldOut
	default:
		return e, fmt.Errorf("entry evolve: unknown event %q (%T)", ev.Type, ev.Data)
	}
	e.Version++
	return e, nil
}

// Apply folds events in order.
func (e Entry) Apply(events ...Event) (Entry, error) {
	var err error
	for _, ev := range events {
		if e, err = e.Evolve(ev); err != nil {
			return e, err
		}
	}
	return e, nil
}

// Join records a customer's entry. A drop takes entries from opens_at (its
// timer may not have opened it yet) until it sells out or ends.
func Join(d Drop, entryID uuid.UUID, customerID string, now time.Time) ([]Event, error) {
	if customerID == "" || len(customerID) > MaxIDLength {
		return nil, Errorf(CodeValidation, "customer id must be 1-%d characters", MaxIDLength)
	}
	switch {
	case d.State == DropStateSoldOut:
		return nil, Errorf(CodeSoldOut, "every unit of this drop is sold")
	case d.State == DropStateEnded:
		return nil, Errorf(CodeDropEnded, "this drop has ended")
	case now.Before(d.OpensAt):
		return nil, Errorf(CodeDropNotOpen, "this drop opens at %s", d.OpensAt.UTC().Format(time.RFC3339))
	}
	return []Event{{Type: EventEntryJoined, Data: EntryJoined{
		EntryID: entryID, DropID: d.DropID, MerchantID: d.MerchantID, CustomerID: customerID, JoinedAt: now,
	}}}, nil
}

// Invite opens a waiting entry's purchase window.
func Invite(d Drop, e Entry, now time.Time) ([]Event, error) {
	if e.Status != EntryStatusWaiting {
		return nil, Errorf(CodeInvalidTransition, "cannot invite an entry that is %s", e.Status)
	}
	return []Event{{Type: EventEntryInvited, Data: EntryInvited{
		InvitedAt: now, PurchaseDeadline: now.Add(time.Duration(d.PurchaseWindowSeconds) * time.Second),
	}}}, nil
}

// OrderForEntry attaches an order to an invitation: the customer's own,
// invited, with no order yet, before its deadline. Anything else is not an
// invitation to buy.
func OrderForEntry(e Entry, customerID string, orderID uuid.UUID, now time.Time) ([]Event, error) {
	if e.CustomerID != customerID || e.Status != EntryStatusInvited || e.OrderID != uuid.Nil ||
		e.PurchaseDeadline == nil || !now.Before(*e.PurchaseDeadline) {
		return nil, errNotInvited
	}
	return []Event{{Type: EventEntryOrdered, Data: EntryOrdered{OrderID: orderID, OrderedAt: now}}}, nil
}

var errNotInvited = Errorf(CodeNotInvited, "this product is sold in a drop, and only its invited customers may buy it now")

// ErrNotInvited matches a refused purchase of a drop's product.
var ErrNotInvited = &Error{Code: CodeNotInvited}

// ClaimInvitation decides a placement's line for a drop's product, given
// the customer's entries in the drop (none if it never joined): a drop
// sells one unit per order, and only on the customer's own invitation
// (OrderForEntry).
func ClaimInvitation(l LineRequest, entries []Entry, customerID string, orderID uuid.UUID, now time.Time) ([]Event, error) {
	if l.Quantity != 1 {
		return nil, Errorf(CodeValidation, "a drop sells one unit of product %s per order", l.ProductID)
	}
	if len(entries) == 0 {
		return nil, errNotInvited
	}
	return OrderForEntry(entries[0], customerID, orderID, now)
}

// ErrDropOrderNotRequeued refuses to put a drop's order back in its line:
// its entry lapsed when it expired and the unit went to the next in line,
// so serving it would sell more than the drop's units.
var ErrDropOrderNotRequeued = Errorf(CodeInvalidTransition, "this order was a drop's purchase; its unit went to the next entry when it expired")

// PurchaseEntry records that the invitation's order was paid. An entry
// that lapsed meanwhile refuses the payment.
func PurchaseEntry(e Entry, orderID uuid.UUID, now time.Time) ([]Event, error) {
	if e.Status == EntryStatusPurchased && e.OrderID == orderID {
		return nil, nil
	}
	if e.Status != EntryStatusInvited || e.OrderID != orderID {
		return nil, Errorf(CodeInvalidTransition, "the purchase window of this drop entry has ended")
	}
	return []Event{{Type: EventEntryPurchased, Data: EntryPurchased{OrderID: orderID, PurchasedAt: now}}}, nil
}

// LapseAtDeadline lapses an invitation whose window has ended unpurchased;
// a no-op otherwise, so the timer may fire late or twice.
func LapseAtDeadline(e Entry, now time.Time) []Event {
	if e.Status != EntryStatusInvited || e.PurchaseDeadline == nil || now.Before(*e.PurchaseDeadline) {
		return nil
	}
	return []Event{{Type: EventEntryLapsed, Data: EntryLapsed{Reason: LapseWindowEnded, LapsedAt: now}}}
}

// LapseForOrder lapses the entry of an order that ended without being
// served (closed unpaid, cancelled, expired): its unit goes to the next.
func LapseForOrder(e Entry, o Order, now time.Time) []Event {
	if e.Status != EntryStatusInvited && e.Status != EntryStatusPurchased {
		return nil
	}
	var reason string
	switch o.Status {
	case StatusClosed:
		reason = LapseOrderClosed
	case StatusCancelled:
		reason = LapseOrderCancelled
	case StatusExpired:
		reason = LapseOrderExpired
	default:
		return nil
	}
	return []Event{{Type: EventEntryLapsed, Data: EntryLapsed{Reason: reason, LapsedAt: now}}}
}

// ChangesEntry reports whether an order's change from before to after can
// change its drop entry, if it has one: a payment or an end that gives back
// its stock. Only these orders' entries are read for EntryAfterOrder.
func ChangesEntry(before, after Order) bool {
	paid := before.Version > 0 && before.PaidAt == nil && after.PaidAt != nil
	ended := before.Status.HoldsStock() && !after.Status.HoldsStock()
	return paid || ended
}

// EntryAfterOrder decides what an order's change from before to after does
// to its drop entry e: a payment purchases it (a lapsed entry refuses the
// payment), an end without being served lapses it.
func EntryAfterOrder(e Entry, before, after Order, now time.Time) ([]Event, error) {
	var events []Event
	if before.Version > 0 && before.PaidAt == nil && after.PaidAt != nil {
		bought, err := PurchaseEntry(e, after.ID, now)
		if err != nil {
			return nil, err
		}
		events = bought
	}
	e, err := e.Apply(events...)
	if err != nil {
		return nil, err
	}
	return append(events, LapseForOrder(e, after, now)...), nil
}

// SellOutEntry turns a waiting entry sold_out when its drop sells out.
func SellOutEntry(e Entry, now time.Time) []Event {
	if e.Status != EntryStatusWaiting {
		return nil
	}
	return []Event{{Type: EventEntrySoldOut, Data: EntrySoldOutEvent{SoldOutAt: now}}}
}

// StatusIn is the entry's status in a drop in state d. A drop's sell-out
// writes its waiting entries sold_out in transactions of bounded size, one
// after another; an entry still recorded as waiting in a sold-out drop is
// sold out all the same, as every waiting entry is from the sell-out on.
func (e Entry) StatusIn(d DropState) EntryStatus {
	if e.Status == EntryStatusWaiting && d == DropStateSoldOut {
		return EntryStatusSoldOut
	}
	return e.Status
}

// MaySeeEntry reports whether the party may see an entry: its customer, the
// drop's merchant, admins and the system.
func (p Party) MaySeeEntry(customerID string, merchantID uuid.UUID) bool {
	return p.MaySeeOrder(customerID, merchantID)
}
