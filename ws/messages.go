package ws

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// Messages are encoded once per state and shared: an order's message once
// per version, a merchant's load and status once per reading, whoever and
// however many watch them. A move in the line changes only an order's
// position and estimate, which are spliced into the order's encoding for
// each client rather than encoding the whole order again.

type orderMessage struct {
	Type  string          `json:"type"`
	Order store.OrderView `json:"order"`
}

// unplaced is how an order without a place in line encodes its position and
// estimate; orderView finds it to splice a place in.
var unplaced = []byte(`"queue_position":null,"eta_seconds":null`)

// orderView is one version of an order, encoded once. Its place in line is
// not part of it: that comes with each offer.
type orderView struct {
	id      uuid.UUID
	version int
	queued  bool
	msg     []byte // {"type":"order","order":…} without a place in line
	at      int    // where unplaced starts in msg
}

func newOrderView(o store.OrderView) (*orderView, error) {
	o.QueuePosition, o.EtaSeconds = nil, nil
	msg, err := json.Marshal(orderMessage{Type: "order", Order: o})
	if err != nil {
		return nil, fmt.Errorf("encode order %s: %w", o.ID, err)
	}
	// The pair is the order's own: earlier fields hold no unescaped quote
	// outside their keys, so the first match is it.
	at := bytes.Index(msg, unplaced)
	if at < 0 {
		return nil, fmt.Errorf("encode order %s: no place for the position", o.ID)
	}
	return &orderView{id: o.ID, version: o.Version, queued: o.Status == domain.StatusQueued, msg: msg, at: at}, nil
}

// orderOffer is an order's state as offered to its watchers: a version and,
// while queued, its place in line from one reading of the line.
type orderOffer struct {
	view     *orderView
	position int // 0 when not queued
	eta      int
	lineSeq  int64
}

func (o orderOffer) state() state {
	return state{version: o.view.version, position: o.position, eta: o.eta, lineSeq: o.lineSeq}
}

// encode is the message a client receives for o.
func (o orderOffer) encode() []byte {
	if o.position == 0 {
		return o.view.msg
	}
	msg := o.view.msg
	out := make([]byte, 0, len(msg)+32)
	out = append(out, msg[:o.view.at]...)
	out = append(out, `"queue_position":`...)
	out = strconv.AppendInt(out, int64(o.position), 10)
	out = append(out, `,"eta_seconds":`...)
	out = strconv.AppendInt(out, int64(o.eta), 10)
	return append(out, msg[o.view.at+len(unplaced):]...)
}

// offerOf is an order as read whole, with its place in line when queued.
func offerOf(o store.OrderView) (orderOffer, error) {
	view, err := newOrderView(o)
	if err != nil {
		return orderOffer{}, err
	}
	offer := orderOffer{view: view, lineSeq: o.LineSeq}
	if o.QueuePosition != nil {
		offer.position = *o.QueuePosition
	}
	if o.EtaSeconds != nil {
		offer.eta = *o.EtaSeconds
	}
	return offer, nil
}

// state is what decides whether an order message is newer than another.
type state struct {
	version  int
	position int // 0 when not queued
	eta      int
	lineSeq  int64
}

// newer reports whether next may follow last: a higher version, or the same
// version with the line moved forward, or back because a priority order
// joined ahead (a later read of the line, which every join moves on), or
// the estimate changed. Reads made by different goroutines can finish out
// of order; this keeps a client's view monotonic whatever order they arrive
// in.
func newer(last, next state) bool {
	switch {
	case last.version == 0:
		return true
	case next.version != last.version:
		return next.version > last.version
	case next.position != 0 && last.position != 0 && next.lineSeq < last.lineSeq:
		return false // an earlier read of the line
	case next.position != last.position:
		return next.position != 0 && (next.position < last.position || next.lineSeq > last.lineSeq)
	default:
		return next.eta != last.eta
	}
}

// Moves in the line are coalesced so that what the hub sends grows with what
// a person would notice, not with how many orders the line moves by: a
// place among the first exactPositions is sent as it changes, a larger one
// once it changed by a sixteenth of itself; the estimate, which every move
// carries, on its own once it changed by a quarter of itself (it follows
// the measured pace of completions, which jitters from one reading of the
// line to the next for every watcher at once); and once the line stood
// still for settleAfter, any change at all, so that a line that stops
// leaves each watcher its exact place. A watcher far back in a fast line
// thus hears of it a few times as its place halves, not on every
// completion nor every few seconds; the fan-out of a line of n watchers
// costs O(log n) messages per completion instead of O(n). A time-based
// refresh while the line moves would cost n messages per period, whatever
// the line's pace.
const (
	moveFraction   = 16
	etaFraction    = 4
	exactPositions = 16
	settleAfter    = 5 * time.Second
)

// moved reports whether a number changed enough from last to next to be
// worth a message: by a fraction of itself, or at all up to exact.
func moved(last, next, exact, fraction int) bool {
	if last == next {
		return false
	}
	diff := next - last
	if diff < 0 {
		diff = -diff
	}
	return min(last, next) <= exact || diff*fraction >= last
}

// worthSending reports whether a move from last to next is worth a message
// now: any is once the line settled.
func worthSending(last, next state, settled bool) bool {
	return settled || moved(last.position, next.position, exactPositions, moveFraction) || moved(last.eta, next.eta, 0, etaFraction)
}

// estimateAlone reports whether the message worth sending from last to next
// is worth it for its estimate only.
func estimateAlone(last, next state, settled bool) bool {
	return !settled && !moved(last.position, next.position, exactPositions, moveFraction)
}

// estimatesPerRanking bounds the watchers of one line that one ranking sends
// a new estimate alone, front of the line first. Every estimate of a line
// follows the kitchen's measured pace, so when the pace changes by a quarter
// every watcher's estimate does at once: unbounded, that is one message to
// every watcher in the same instant, thousands of writers that held the CPU
// while new statuses (an order accepted) waited behind them; bounded, the
// new estimates reach a long line over a few rankings.
const estimatesPerRanking = 1000

// merchantLoadMessage holds values only, so that two can be compared with ==.
type merchantLoadMessage struct {
	Type           string              `json:"type"`
	MerchantID     uuid.UUID           `json:"merchant_id"`
	Capacity       int                 `json:"capacity"`
	CapacityUnit   domain.CapacityUnit `json:"capacity_unit"`
	Active         int                 `json:"active"`
	ActiveOrders   int                 `json:"active_orders"`
	Queued         int                 `json:"queued"`
	QueuedUnits    int                 `json:"queued_units"`
	EstWaitSeconds int                 `json:"est_wait_seconds"`
	Paused         bool                `json:"paused"`
	PauseMode      nullString          `json:"pause_mode"`
	PausedUntil    nullString          `json:"paused_until"`
}

// nullString is a string that is null in JSON when empty.
type nullString string

func (n nullString) MarshalJSON() ([]byte, error) {
	if n == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(n))
}

func pauseFields(l store.LoadView) (mode, until nullString) {
	if l.PauseMode != nil {
		mode = nullString(*l.PauseMode)
	}
	if l.PausedUntil != nil {
		until = nullString(l.PausedUntil.UTC().Format(time.RFC3339Nano))
	}
	return mode, until
}

func loadMessage(id uuid.UUID, l store.LoadView) merchantLoadMessage {
	m := merchantLoadMessage{
		Type: "merchant_load", MerchantID: id, Capacity: l.Capacity, CapacityUnit: l.CapacityUnit,
		Active: l.Active, ActiveOrders: l.ActiveOrders, Queued: l.Queued, QueuedUnits: l.QueuedUnits,
		EstWaitSeconds: l.EstWaitSeconds, Paused: l.Paused,
	}
	m.PauseMode, m.PausedUntil = pauseFields(l)
	return m
}

// merchantStatusMessage is a merchant's public status (docs/websocket.md):
// what a customer deciding whether to order, or waiting, needs to know.
type merchantStatusMessage struct {
	Type           string     `json:"type"`
	MerchantID     uuid.UUID  `json:"merchant_id"`
	Open           bool       `json:"open"`
	Paused         bool       `json:"paused"`
	PauseMode      nullString `json:"pause_mode"`
	PausedUntil    nullString `json:"paused_until"`
	Busy           bool       `json:"busy"`
	Queued         int        `json:"queued"`
	EstWaitSeconds int        `json:"est_wait_seconds"`
}

func statusMessage(id uuid.UUID, l store.LoadView) merchantStatusMessage {
	m := merchantStatusMessage{Type: "merchant_status", MerchantID: id, Open: l.Open, Paused: l.Paused,
		Busy: l.Busy, Queued: l.Queued, EstWaitSeconds: l.EstWaitSeconds}
	m.PauseMode, m.PausedUntil = pauseFields(l)
	return m
}

// statusWorthSending: a change of whether the merchant is open, paused or
// busy goes out at once; the line's length and estimate are coalesced like
// an order's place in line.
func statusWorthSending(last, next merchantStatusMessage, settled bool) bool {
	if next == last {
		return false
	}
	lastNumbers, nextNumbers := last, next
	lastNumbers.Queued, lastNumbers.EstWaitSeconds = 0, 0
	nextNumbers.Queued, nextNumbers.EstWaitSeconds = 0, 0
	return lastNumbers != nextNumbers || settled ||
		moved(last.Queued, next.Queued, exactPositions, moveFraction) || moved(last.EstWaitSeconds, next.EstWaitSeconds, 0, etaFraction)
}

// encoded is a message with its encoding, shared by every client it goes to.
type encoded[T comparable] struct {
	value T
	msg   []byte
}

func encode[T comparable](v T) (*encoded[T], error) {
	msg, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode message: %w", err)
	}
	return &encoded[T]{value: v, msg: msg}, nil
}

type errorMessage struct {
	Type   string      `json:"type"`
	Code   domain.Code `json:"code"`
	Detail string      `json:"detail"`
	// RetryAfterSeconds is the websocket's Retry-After, on rate_limited.
	RetryAfterSeconds int `json:"retry_after_seconds,omitempty"`
}
