package ws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"golang.org/x/time/rate"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// conn is one client. An idle connection holds no goroutine and no buffer:
// its socket waits in the hub's poller, and a reader runs only while the
// client sends (read); a writer goroutine runs only while messages wait
// (flush), and takes a buffer from the pool for the length of one message;
// pings are a timer that starts the writer. Only the writer writes data
// frames (gorilla allows one writer). The tailer never queues messages: it
// leaves the latest state of each subscription in a pending slot, so a
// client that reads slowly gets fewer, newer messages, its memory is bounded
// by its subscriptions, and fan-out never waits for it.
type conn struct {
	hub       *Hub
	ws        *websocket.Conn
	frames    *frameConn
	principal auth.Principal
	// poll watches the socket while the connection is idle; nil where it
	// cannot, and the reader then waits in its read.
	poll *poller
	// Only the reader, or the poller while the connection is parked.
	pollID uint64
	polled bool

	mu      sync.Mutex
	closed  bool
	parked  bool // in the poller, with no reader: whoever unparks it reads or finishes it
	writing bool // a writer goroutine runs
	pingDue bool
	ping    *time.Timer
	// Subscriptions by kind, made when the first is.
	orders    map[uuid.UUID]*orderSlot
	merchants map[uuid.UUID]*loadSlot
	statuses  map[uuid.UUID]*statusSlot
	entries   map[uuid.UUID]*entrySlot
	drops     map[uuid.UUID]*dropSlot
	errs      [][]byte

	// subscribes limits subscribe messages; nil means no limit. Only the
	// reader goroutine uses it.
	subscribes *rate.Limiter
	// wrote is when a data message was last written, in Unix nanoseconds.
	wrote atomic.Int64
}

type orderSlot struct {
	last       state // what the client has; zero before the first message
	pending    orderOffer
	hasPending bool
}

type loadSlot struct {
	last    *encoded[merchantLoadMessage]
	pending *encoded[merchantLoadMessage]
}

type statusSlot struct {
	last    *encoded[merchantStatusMessage]
	pending *encoded[merchantStatusMessage]
}

// offerOrder leaves o for the writer if it is newer than what the client has
// or is about to get. A move in the line that is not worth a message yet is
// held back, unless the line settled: offerOrder then reports true, and the
// hub offers the order again once the line settles. A new estimate alone
// takes one of estimates (nil: no bound) and is held back like a move when
// none is left. The caller holds hub.mu.
func (c *conn) offerOrder(o orderOffer, settled bool, estimates *int) (held bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	slot, ok := c.orders[o.view.id]
	if !ok {
		return false
	}
	against := slot.last
	if slot.hasPending {
		against = slot.pending.state()
	}
	next := o.state()
	if !newer(against, next) {
		return false
	}
	if !slot.hasPending && slot.last.version == next.version {
		if !worthSending(slot.last, next, settled) {
			return true
		}
		if estimates != nil && estimateAlone(slot.last, next, settled) {
			if *estimates <= 0 {
				return true
			}
			*estimates--
		}
	}
	slot.pending, slot.hasPending = o, true
	c.signal()
	return false
}

// offerLoad leaves a merchant's load for the writer. Loads carry no version:
// only the tailer offers them after the snapshot, one batch at a time, so the
// latest offer is the newest.
func (c *conn) offerLoad(id uuid.UUID, m *encoded[merchantLoadMessage]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	slot, ok := c.merchants[id]
	if !ok {
		return
	}
	if slot.pending == nil && slot.last != nil && slot.last.value == m.value {
		return
	}
	slot.pending = m
	c.signal()
}

// offerStatus leaves a merchant's status for the writer, or holds it back
// (reporting true) while only its numbers moved, and by little, unless the
// line settled. Like loads, the latest offer is the newest.
func (c *conn) offerStatus(id uuid.UUID, m *encoded[merchantStatusMessage], settled bool) (held bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	slot, ok := c.statuses[id]
	if !ok {
		return false
	}
	if slot.pending == nil && slot.last != nil && !statusWorthSending(slot.last.value, m.value, settled) {
		return slot.last.value != m.value
	}
	slot.pending = m
	c.signal()
	return false
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
		c.close(websocket.ClosePolicyViolation, "too slow: replies were not read in time")
	}
}

// signal starts the writer unless it runs; the caller holds c.mu. The
// reader's goroutine is counted in hub.wg until the connection is closed,
// and no writer starts after that, so the writer's Add never races the
// hub's Wait from zero.
func (c *conn) signal() {
	if c.writing || c.closed {
		return
	}
	c.writing = true
	c.hub.wg.Add(1)
	go c.flush()
}

// pingNow asks the writer for a ping; it runs on the ping timer.
// A client that sent nothing, not even a pong, for PongWait is gone, unless
// it is only behind in reading: a ping waits in its socket behind every
// message it has not read yet, so a client that was written to within
// PongWait and whose host acknowledged what it was sent within PongWait
// is slow, not gone. A client that stops reading altogether is cut off by
// the write timeout once its buffers fill; one sent nothing, by this.
func (c *conn) pingNow() {
	wait := c.hub.opts.PongWait
	if time.Since(time.Unix(0, c.frames.heard.Load())) > wait && !c.behindButAlive(wait) {
		if c.close(websocket.ClosePolicyViolation, "pings were not answered") {
			c.hub.Stats.Unanswered.Add(1)
		}
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.pingDue = true
	c.signal()
	c.ping.Reset(c.hub.opts.PingEvery)
}

// take empties the pending slots into messages, in a fixed order per call;
// the writer writes them before taking again, so what the client receives
// follows what take recorded as sent. With nothing to write, the writer is
// done: take records that, so the next offer starts another.
func (c *conn) take() (msgs [][]byte, ping bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	msgs, ping = c.errs, c.pingDue
	c.errs, c.pingDue = nil, false
	for _, slot := range c.orders {
		if !slot.hasPending {
			continue
		}
		o := slot.pending
		slot.pending, slot.hasPending = orderOffer{}, false
		slot.last = o.state()
		msgs = append(msgs, o.encode())
	}
	for _, slot := range c.merchants {
		if slot.pending != nil {
			msgs = append(msgs, slot.pending.msg)
			slot.last, slot.pending = slot.pending, nil
		}
	}
	for _, slot := range c.statuses {
		if slot.pending != nil {
			msgs = append(msgs, slot.pending.msg)
			slot.last, slot.pending = slot.pending, nil
		}
	}
	msgs = c.takeDrops(msgs)
	if len(msgs) == 0 && !ping {
		c.writing = false
	}
	return msgs, ping
}

// behindButAlive reports whether the client was written to within wait
// and its host acknowledged what it was sent within wait.
func (c *conn) behindButAlive(wait time.Duration) bool {
	if time.Since(time.Unix(0, c.wrote.Load())) > wait {
		return false
	}
	acked, ok := sinceAcknowledged(c.frames.Conn)
	return ok && acked <= wait
}

// close closes the connection once, reporting whether this call did.
func (c *conn) close(code int, reason string) bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	c.closed = true
	if c.ping != nil {
		c.ping.Stop()
	}
	parked := c.parked
	c.parked = false
	c.mu.Unlock()
	// A client that stopped reading cannot take a close frame either: try
	// briefly, then cut the connection.
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(closeWait))
	_ = c.ws.Close()
	// No reader is left to see the socket end.
	if parked {
		c.finish()
	}
	return true
}

// finish forgets a closed connection; its reader's, or its closer's when it
// was parked.
func (c *conn) finish() {
	c.hub.remove(c)
	if c.poll != nil {
		c.poll.forget(c)
	}
	c.hub.wg.Done()
}

// park leaves the idle connection to the poller, which wakes it when its
// client sends. It reports false when the reader must go on reading: the
// connection closed, or its socket could not be watched.
func (c *conn) park() bool {
	c.frames.idle()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	c.parked = true
	c.mu.Unlock()
	if err := c.poll.arm(c); err != nil {
		c.mu.Lock()
		mine := c.parked
		c.parked = false
		c.mu.Unlock()
		// Unless close took it over, the read that follows fails or waits.
		return !mine
	}
	return true
}

// wake gives the parked connection a reader again; the poller calls it
// once the socket has something to read.
func (c *conn) wake() {
	c.mu.Lock()
	if !c.parked {
		c.mu.Unlock()
		return
	}
	c.parked = false
	c.mu.Unlock()
	go func() {
		// The socket is readable: this does not wait, and an error is
		// kept for the read that follows.
		_ = c.frames.fill()
		c.read()
	}()
}

// flush writes what waits until nothing does. A write that fails or times
// out closes the connection, which is never written again.
func (c *conn) flush() {
	defer c.hub.wg.Done()
	for {
		msgs, ping := c.take()
		if len(msgs) == 0 && !ping {
			return
		}
		if ping {
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.hub.opts.WriteTimeout)); err != nil {
				c.cutOff(err, "too slow: a ping was not read in time")
				return
			}
		}
		for _, msg := range msgs {
			_ = c.ws.SetWriteDeadline(time.Now().Add(c.hub.opts.WriteTimeout))
			if err := c.ws.WriteMessage(websocket.TextMessage, msg); err != nil {
				c.cutOff(err, "too slow: updates were not read in time")
				return
			}
			c.hub.Stats.Sent.Add(1)
			c.wrote.Store(time.Now().UnixNano())
		}
	}
}

// cutOff closes the connection after a write failed, counting it dropped
// when the write timed out: a client that left is not one cut off for
// reading slowly. gorilla returns a timeout error of its own.
func (c *conn) cutOff(err error, reason string) {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.hub.Stats.Dropped.Add(1)
	}
	c.close(websocket.ClosePolicyViolation, reason)
}

type clientMessage struct {
	Op             string `json:"op"`
	OrderID        string `json:"order_id"`
	MerchantID     string `json:"merchant_id"`
	MerchantStatus string `json:"merchant_status"`
	EntryID        string `json:"entry_id"`
	DropID         string `json:"drop_id"`
}

// read handles the client's messages while it sends them, then parks the
// connection. The hub counted it in wg until it is finished.
func (c *conn) read() {
	for {
		if c.poll != nil && !c.frames.ready() && c.park() {
			return
		}
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			if errors.Is(err, websocket.ErrReadLimit) {
				c.close(websocket.CloseMessageTooBig, "messages are limited to 4 KiB")
			}
			break
		}
		var m clientMessage
		if err := json.Unmarshal(data, &m); err != nil {
			c.sendError(domain.CodeMalformedJSON, `messages must be JSON objects like {"op":"subscribe","order_id":"..."}`)
			continue
		}
		c.handle(m)
	}
	c.close(websocket.CloseNormalClosure, "")
	c.finish()
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
	for _, f := range []string{m.OrderID, m.MerchantID, m.MerchantStatus, m.EntryID, m.DropID} {
		if f != "" {
			named++
		}
	}
	switch {
	case named != 1:
		c.sendError(domain.CodeValidation, "give exactly one of order_id, merchant_id, merchant_status, entry_id and drop_id")
	case m.EntryID != "" || m.DropID != "":
		c.handleDrop(m)
	case m.OrderID != "":
		id, err := uuid.Parse(m.OrderID)
		if err != nil {
			c.sendError(domain.CodeNotFound, "order not found")
			return
		}
		if m.Op == "unsubscribe" {
			unsubscribe(c.hub, c, &c.orders, id, c.hub.unwatchOrder)
			return
		}
		c.subscribeOrder(id)
	case m.MerchantStatus != "":
		id, err := uuid.Parse(m.MerchantStatus)
		if err != nil {
			c.sendError(domain.CodeNotFound, "merchant not found")
			return
		}
		if m.Op == "unsubscribe" {
			unsubscribe(c.hub, c, &c.statuses, id, c.hub.unwatchStatus)
			return
		}
		c.subscribeStatus(id)
	default:
		id, err := uuid.Parse(m.MerchantID)
		if err != nil {
			c.sendError(domain.CodeNotFound, "merchant not found")
			return
		}
		if m.Op == "unsubscribe" {
			unsubscribe(c.hub, c, &c.merchants, id, c.hub.unwatchLoad)
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

func accessOf(p auth.Principal) domain.Party { return p.Party() }

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
		if len(c.orders)+len(c.merchants)+len(c.statuses)+len(c.entries)+len(c.drops) >= maxSubscriptions {
			c.mu.Unlock()
			c.sendError(domain.CodeValidation, "too many subscriptions on one connection")
			return
		}
		add()
	}
	c.mu.Unlock()
	offer()
}

// subscribeOrder checks access with a read of the order, which is also the
// snapshot, without its place in line: a queued order's first message waits
// for the tailer's next batch, which ranks its line once for every order
// subscribed meanwhile, rather than counting the line ahead of each. A
// change committed between that read and the registration would reach
// nobody, so the tailer's next read takes the new subscription again.
func (c *conn) subscribeOrder(id uuid.UUID) {
	ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
	defer cancel()
	o, err := c.hub.store.GetUnrankedOrder(ctx, id, accessOf(c.principal))
	if err != nil {
		c.sendError(domain.ErrorCode(err), domain.ErrorMessage(err))
		return
	}
	offer, err := offerOf(*o)
	if err != nil {
		c.sendError(domain.CodeInternal, "the order could not be sent")
		return
	}
	h := c.hub
	c.register(func() bool { _, known := c.orders[id]; return known }, func() {
		if c.orders == nil {
			c.orders = map[uuid.UUID]*orderSlot{}
		}
		c.orders[id] = &orderSlot{}
		h.watchOrder(c, id, o.MerchantID)
	}, func() {
		h.snapshotOrder(c, offer)
	})
}

func (c *conn) subscribeMerchant(id uuid.UUID) {
	if !c.principal.ActsForMerchant(id) {
		c.sendError(domain.CodeForbidden, "only that merchant or an admin may watch its load")
		return
	}
	msg, ok := merchantSnapshot(c, id, loadMessage, "the load")
	if !ok {
		return
	}
	h := c.hub
	c.register(func() bool { _, known := c.merchants[id]; return known }, func() {
		if c.merchants == nil {
			c.merchants = map[uuid.UUID]*loadSlot{}
		}
		c.merchants[id] = &loadSlot{}
		h.watchLoad(c, id)
	}, func() {
		c.offerLoad(id, msg)
		h.refreshLoads[id] = struct{}{}
	})
}

// merchantSnapshot is a merchant subscription's first message, made by
// message from the merchant's load as it reads now; a failure is answered
// to the client, naming what could not be sent, and reported as not ok.
func merchantSnapshot[M comparable](c *conn, id uuid.UUID, message func(uuid.UUID, store.LoadView) M, what string) (*encoded[M], bool) {
	ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
	defer cancel()
	m, err := c.hub.store.GetMerchant(ctx, id)
	if err != nil {
		c.sendError(domain.ErrorCode(err), domain.ErrorMessage(err))
		return nil, false
	}
	msg, err := encode(message(id, m.Load))
	if err != nil {
		c.sendError(domain.CodeInternal, what+" could not be sent")
		return nil, false
	}
	return msg, true
}

// subscribeStatus: any authenticated caller may watch a merchant's public
// status, as anyone may read the merchant.
func (c *conn) subscribeStatus(id uuid.UUID) {
	msg, ok := merchantSnapshot(c, id, statusMessage, "the status")
	if !ok {
		return
	}
	h := c.hub
	c.register(func() bool { _, known := c.statuses[id]; return known }, func() {
		if c.statuses == nil {
			c.statuses = map[uuid.UUID]*statusSlot{}
		}
		c.statuses[id] = &statusSlot{}
		h.watchStatus(c, id)
	}, func() {
		c.offerStatus(id, msg, false)
		h.refreshStatuses[id] = struct{}{}
	})
}
