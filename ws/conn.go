package ws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"golang.org/x/time/rate"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// conn is one client. Only writeLoop writes data to the socket (gorilla
// allows one writer). The tailer never queues messages: it leaves the latest
// state of each subscription in a pending slot and wakes the writer, so a
// client that reads slowly gets fewer, newer messages, its memory is bounded
// by its subscriptions, and fan-out never waits for it.
type conn struct {
	hub       *Hub
	ws        *websocket.Conn
	principal auth.Principal
	wake      chan struct{}
	done      chan struct{}
	closeOnce sync.Once

	mu        sync.Mutex
	orders    map[uuid.UUID]*orderSlot
	merchants map[uuid.UUID]*loadSlot
	entries   map[uuid.UUID]*entrySlot
	drops     map[uuid.UUID]*dropSlot
	errs      [][]byte

	// subscribes limits subscribe messages; nil means no limit. Only the
	// reader goroutine uses it.
	subscribes *rate.Limiter
}

type orderSlot struct {
	last    state // what the client has; zero before the first message
	sentAt  time.Time
	pending *store.Order
	// deferred: the writer put off a move in the line and will come back
	// for it, so further moves need not wake it.
	deferred bool
}

// positionEvery spaces the messages of a subscription whose order only moved
// in the line: in a burst the line moves on every commit, and a customer
// needs "number 12, about 4 minutes" a few times a second, not per commit.
// Status changes go out at once. Fewer messages keep fan-out cheap enough
// that every final state reaches its client well within API.md's second.
const positionEvery = 500 * time.Millisecond

type loadSlot struct {
	last    *merchantLoadMessage
	pending *merchantLoadMessage
}

// state is what decides whether an order message is newer than another.
type state struct {
	version  int
	position int // 0 when not queued
	eta      int
	lineSeq  int64
}

func stateOf(o store.Order) state {
	s := state{version: o.Version, lineSeq: o.LineSeq}
	if o.QueuePosition != nil {
		s.position = *o.QueuePosition
	}
	if o.EtaSeconds != nil {
		s.eta = *o.EtaSeconds
	}
	return s
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

// offerOrder leaves o for the writer if it is newer than what the client has
// or is about to get. The caller holds hub.mu.
func (c *conn) offerOrder(o store.Order) {
	c.mu.Lock()
	defer c.mu.Unlock()
	slot, ok := c.orders[o.ID]
	if !ok {
		return
	}
	against := slot.last
	if slot.pending != nil {
		against = stateOf(*slot.pending)
	}
	if !newer(against, stateOf(o)) {
		return
	}
	slot.pending = &o
	if slot.deferred && o.Version == slot.last.version {
		return // the writer holds a timer for this subscription's next move
	}
	c.signal()
}

// offerLoad leaves a merchant's load for the writer. Loads carry no version:
// only the tailer offers them after the snapshot, one batch at a time, so the
// latest offer is the newest.
func (c *conn) offerLoad(m merchantLoadMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	slot, ok := c.merchants[m.MerchantID]
	if !ok {
		return
	}
	if slot.pending == nil && slot.last != nil && *slot.last == m {
		return
	}
	slot.pending = &m
	c.signal()
}

// sendError queues an answer to a bad message. Errors cannot be coalesced, so
// a client that keeps sending bad messages without reading the answers is
// dropped once a few are waiting.
func (c *conn) sendError(code domain.Code, detail string) {
	c.sendErrorMessage(errorMessage{Type: "error", Code: code, Detail: detail})
}

func (c *conn) sendErrorMessage(m errorMessage) {
	msg, err := json.Marshal(m)
	if err != nil {
		return
	}
	c.mu.Lock()
	full := len(c.errs) >= maxPendingErrors
	if !full {
		c.errs = append(c.errs, msg)
		c.signal()
	}
	c.mu.Unlock()
	if full {
		c.hub.Stats.Dropped.Add(1)
		go c.close(websocket.ClosePolicyViolation, "too slow: replies were not read in time")
	}
}

// signal wakes the writer; the caller holds c.mu.
func (c *conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// take empties the pending slots into messages, in a fixed order per wake-up;
// the caller writes them before taking again, so what the client receives
// follows what take recorded as sent. A move in the line that comes too soon
// after the previous message stays pending; next says when to take it.
func (c *conn) take(now time.Time) (msgs [][]byte, next time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	msgs = c.errs
	c.errs = nil
	for _, slot := range c.orders {
		if slot.pending == nil {
			continue
		}
		o := *slot.pending
		if due := slot.sentAt.Add(positionEvery); o.Version == slot.last.version && now.Before(due) {
			if next.IsZero() || due.Before(next) {
				next = due
			}
			slot.deferred = true
			continue
		}
		slot.pending, slot.deferred = nil, false
		slot.last, slot.sentAt = stateOf(o), now
		if msg, err := json.Marshal(orderMessage{Type: "order", Order: o}); err == nil {
			msgs = append(msgs, msg)
		}
	}
	for _, slot := range c.merchants {
		if slot.pending == nil {
			continue
		}
		m := *slot.pending
		slot.pending = nil
		slot.last = &m
		if msg, err := json.Marshal(m); err == nil {
			msgs = append(msgs, msg)
		}
	}
	return c.takeDrops(msgs), next
}

func (c *conn) close(code int, reason string) {
	c.closeOnce.Do(func() {
		close(c.done)
		// A client that stopped reading cannot take a close frame either:
		// try briefly, then cut the connection.
		_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(closeWait))
		_ = c.ws.Close()
	})
}

func (c *conn) writeLoop() {
	defer c.hub.wg.Done()
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	// Only connections with a deferred move in the line hold a timer.
	var later *time.Timer
	var laterC <-chan time.Time
	defer func() {
		if later != nil {
			later.Stop()
		}
	}()
	for {
		select {
		case <-c.done:
			return
		case <-c.wake:
		case <-laterC:
		case <-ping.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.hub.opts.WriteTimeout)); err != nil {
				c.close(websocket.ClosePolicyViolation, "ping failed")
				return
			}
			continue
		}
		msgs, next := c.take(time.Now())
		for _, msg := range msgs {
			_ = c.ws.SetWriteDeadline(time.Now().Add(c.hub.opts.WriteTimeout))
			if err := c.ws.WriteMessage(websocket.TextMessage, msg); err != nil {
				c.hub.Stats.Dropped.Add(1)
				c.close(websocket.ClosePolicyViolation, "too slow: updates were not read in time")
				return
			}
			c.hub.Stats.Sent.Add(1)
		}
		laterC = nil
		if !next.IsZero() {
			if later == nil {
				later = time.NewTimer(time.Until(next))
			} else {
				later.Reset(time.Until(next))
			}
			laterC = later.C
		}
	}
}

type clientMessage struct {
	Op         string `json:"op"`
	OrderID    string `json:"order_id"`
	MerchantID string `json:"merchant_id"`
	EntryID    string `json:"entry_id"`
	DropID     string `json:"drop_id"`
}

func (c *conn) readLoop() {
	defer c.hub.wg.Done()
	defer c.hub.remove(c)
	defer c.close(websocket.CloseNormalClosure, "")
	c.ws.SetReadLimit(maxMessageBytes)
	_ = c.ws.SetReadDeadline(time.Now().Add(pongWait))
	c.ws.SetPongHandler(func(string) error { return c.ws.SetReadDeadline(time.Now().Add(pongWait)) })
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			if errors.Is(err, websocket.ErrReadLimit) {
				c.close(websocket.CloseMessageTooBig, "messages are limited to 4 KiB")
			}
			return
		}
		_ = c.ws.SetReadDeadline(time.Now().Add(pongWait))
		var m clientMessage
		if err := json.Unmarshal(data, &m); err != nil {
			c.sendError(domain.CodeMalformedJSON, `messages must be JSON objects like {"op":"subscribe","order_id":"..."}`)
			continue
		}
		// The subscribe path (a database read, auth) would grow this
		// goroutine's stack, and an idle connection keeps its stack for
		// good; a short-lived goroutine takes that growth and frees it.
		handled := make(chan struct{})
		go func() { defer close(handled); c.handle(m) }()
		<-handled
	}
}

func (c *conn) handle(m clientMessage) {
	if m.Op != "subscribe" && m.Op != "unsubscribe" {
		c.sendError(domain.CodeValidation, "op must be subscribe or unsubscribe")
		return
	}
	if m.Op == "subscribe" && !c.allowSubscribe(time.Now()) {
		return
	}
	named := 0
	for _, f := range []string{m.OrderID, m.MerchantID, m.EntryID, m.DropID} {
		if f != "" {
			named++
		}
	}
	switch {
	case named != 1:
		c.sendError(domain.CodeValidation, "give exactly one of order_id, merchant_id, entry_id and drop_id")
	case m.EntryID != "" || m.DropID != "":
		c.handleDrop(m)
	case m.OrderID != "":
		id, err := uuid.Parse(m.OrderID)
		if err != nil {
			c.sendError(domain.CodeNotFound, "order not found")
			return
		}
		if m.Op == "unsubscribe" {
			c.hub.unsubscribeOrder(c, id)
			return
		}
		c.subscribeOrder(id)
	default:
		id, err := uuid.Parse(m.MerchantID)
		if err != nil {
			c.sendError(domain.CodeNotFound, "merchant not found")
			return
		}
		if m.Op == "unsubscribe" {
			c.hub.unsubscribeMerchant(c, id)
			return
		}
		c.subscribeMerchant(id)
	}
}

// allowSubscribe reports whether the connection is within its subscribe
// limit, and if not answers rate_limited with how long to wait. A refused
// subscribe consumes nothing.
func (c *conn) allowSubscribe(now time.Time) bool {
	if c.subscribes == nil {
		return true
	}
	res := c.subscribes.ReserveN(now, 1)
	wait := res.DelayFrom(now)
	if wait <= 0 {
		return true
	}
	res.CancelAt(now)
	seconds := max(1, int((wait+time.Second-1)/time.Second))
	c.sendErrorMessage(errorMessage{Type: "error", Code: domain.CodeRateLimited, RetryAfterSeconds: seconds,
		Detail: fmt.Sprintf("too many subscribes on this connection; retry in %d s", seconds)})
	return false
}

func accessOf(p auth.Principal) store.Access {
	return store.Access{Actor: p.Actor(), Subject: p.Subject, MerchantID: p.MerchantID}
}

// subscribeOrder checks access with a read of the order, which is also the
// snapshot. A change committed between that read and the registration would
// reach nobody, so the tailer's next poll reads the new subscription again.
func (c *conn) subscribeOrder(id uuid.UUID) {
	ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
	defer cancel()
	o, err := c.hub.store.GetOrder(ctx, id, accessOf(c.principal))
	if err != nil {
		c.sendError(domain.ErrorCode(err), domain.ErrorMessage(err))
		return
	}
	h := c.hub
	c.register(func() bool { _, known := c.orders[id]; return known }, func() {
		c.orders[id] = &orderSlot{}
		h.watchOrder(c, id, o.MerchantID)
	}, func() {
		c.offerOrder(*o)
		h.refreshOrders[id] = struct{}{}
	})
}

// register adds a subscription unless the connection has as many as it may
// have, then offers its snapshot. known and add run under the hub's and the
// connection's locks, offer under the hub's only: offers take the
// connection's lock themselves.
func (c *conn) register(known func() bool, add, offer func()) {
	h := c.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	c.mu.Lock()
	if !known() {
		if len(c.orders)+len(c.merchants)+len(c.entries)+len(c.drops) >= maxSubscriptions {
			c.mu.Unlock()
			c.sendError(domain.CodeValidation, "too many subscriptions on one connection")
			return
		}
		add()
	}
	c.mu.Unlock()
	offer()
}

func (c *conn) subscribeMerchant(id uuid.UUID) {
	if !c.principal.ActsForMerchant(id) {
		c.sendError(domain.CodeForbidden, "only that merchant or an admin may watch its load")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
	defer cancel()
	m, err := c.hub.store.GetMerchant(ctx, id)
	if err != nil {
		c.sendError(domain.ErrorCode(err), domain.ErrorMessage(err))
		return
	}
	h := c.hub
	c.register(func() bool { _, known := c.merchants[id]; return known }, func() {
		c.merchants[id] = &loadSlot{}
		if h.byMerch[id] == nil {
			h.byMerch[id] = map[*conn]struct{}{}
		}
		h.byMerch[id][c] = struct{}{}
	}, func() {
		c.offerLoad(loadMessage(id, m.Load))
		h.refreshMerch[id] = struct{}{}
	})
}
