package ws

import (
	"time"

	"github.com/google/uuid"
)

// What the hub knows of its subscriptions; hub.mu guards all of it.

// watchedOrder is an order someone watches here.
type watchedOrder struct {
	conns    map[*conn]struct{}
	merchant uuid.UUID
	// last is the newest state offered to its watchers (view nil before
	// the first), which a later reading of the line moves.
	last orderOffer
}

// line is a merchant whose queue (through watched orders) or public status
// someone watches here. A line is ranked, and its status read, at most
// every positionEvery while it changes: its watchers hear of moves at that
// pace, and of new statuses (accepted, paused) at once.
type line struct {
	orders   map[uuid.UUID]*watchedOrder
	statuses map[*conn]struct{}
	// status is the newest status offered to its watchers.
	status *encoded[merchantStatusMessage]
	// dirty: an order or the merchant changed since the line was last
	// ranked, at rankedAt.
	dirty    bool
	rankedAt time.Time
	// held: a watcher was not sent a move worth too little yet; the newest
	// states are offered again once the line settled: read settleAfter ago
	// and not changed since.
	held bool
}

// positionEvery is the pace of a line's readings while it changes: in a
// burst the line moves on every commit, and a customer needs "number 12,
// about 4 minutes" a few times a second, not per commit.
const positionEvery = 500 * time.Millisecond

func (l *line) empty() bool { return len(l.orders) == 0 && len(l.statuses) == 0 }

// due says when the line is next read or offered again; zero when nothing
// is waiting.
func (l *line) due() time.Time {
	switch {
	case l.dirty:
		return l.rankedAt.Add(positionEvery)
	case l.held:
		return l.rankedAt.Add(settleAfter)
	}
	return time.Time{}
}

func (h *Hub) line(merchant uuid.UUID) *line {
	l := h.lines[merchant]
	if l == nil {
		l = &line{orders: map[uuid.UUID]*watchedOrder{}, statuses: map[*conn]struct{}{}}
		h.lines[merchant] = l
	}
	return l
}

func (h *Hub) dropLineIfEmpty(merchant uuid.UUID) {
	if l := h.lines[merchant]; l != nil && l.empty() {
		delete(h.lines, merchant)
	}
}

// watchOrder registers c as a watcher of order id. The line is marked
// changed, so that its next reading corrects a snapshot that moves made
// stale before the registration.
func (h *Hub) watchOrder(c *conn, id, merchant uuid.UUID) {
	w := h.orders[id]
	if w == nil {
		w = &watchedOrder{conns: map[*conn]struct{}{}, merchant: merchant}
		h.orders[id] = w
		h.line(merchant).orders[id] = w
	}
	w.conns[c] = struct{}{}
	h.lines[merchant].dirty = true
}

// snapshotOrder answers c's new subscription: with the newest state the hub
// holds when that is at least as new as the snapshot (it has a place in
// line), else with the snapshot unless it is queued; the tailer reads the
// order once more, and ranks its line if it is queued.
func (h *Hub) snapshotOrder(c *conn, o orderOffer) {
	w := h.orders[o.view.id]
	if w == nil {
		return
	}
	h.refreshOrders[o.view.id] = struct{}{}
	h.wakeUp()
	switch {
	case w.last.view != nil && w.last.view.version >= o.view.version:
		c.offerOrder(w.last, false, nil)
	case !o.view.queued:
		w.last = o
		c.offerOrder(o, false, nil)
	}
}

func (h *Hub) unwatchOrder(c *conn, id uuid.UUID) {
	w := h.orders[id]
	if w == nil {
		return
	}
	delete(w.conns, c)
	if len(w.conns) > 0 {
		return
	}
	delete(h.orders, id)
	delete(h.lines[w.merchant].orders, id)
	h.dropLineIfEmpty(w.merchant)
}

func (h *Hub) watchStatus(c *conn, merchant uuid.UUID) {
	h.line(merchant).statuses[c] = struct{}{}
}

func (h *Hub) unwatchStatus(c *conn, merchant uuid.UUID) {
	if l := h.lines[merchant]; l != nil {
		delete(l.statuses, c)
		h.dropLineIfEmpty(merchant)
	}
}

func (h *Hub) watchLoad(c *conn, merchant uuid.UUID) {
	if h.loads[merchant] == nil {
		h.loads[merchant] = map[*conn]struct{}{}
	}
	h.loads[merchant][c] = struct{}{}
}

func (h *Hub) unwatchLoad(c *conn, merchant uuid.UUID) {
	delete(h.loads[merchant], c)
	if len(h.loads[merchant]) == 0 {
		delete(h.loads, merchant)
	}
}

// merchants lists the merchants whose streams this process's clients need:
// the tailer reads no other part of the log. Never nil, so that nobody
// watching reads nothing.
func (h *Hub) merchants() []uuid.UUID {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := make(map[uuid.UUID]struct{}, len(h.lines)+len(h.loads)+len(h.drops.merchants))
	for m := range h.lines {
		seen[m] = struct{}{}
	}
	for m := range h.loads {
		seen[m] = struct{}{}
	}
	for m := range h.drops.merchants {
		seen[m] = struct{}{}
	}
	out := make([]uuid.UUID, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	return out
}

func (h *Hub) remove(c *conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.conns, c)
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.orders {
		h.unwatchOrder(c, id)
	}
	for id := range c.merchants {
		h.unwatchLoad(c, id)
	}
	for id := range c.statuses {
		h.unwatchStatus(c, id)
	}
	for id := range c.entries {
		h.drops.unwatchEntry(c, id)
	}
	for id := range c.drops {
		h.drops.unwatchDrop(c, id)
	}
}

// unsubscribe forgets id from one of c's subscriptions (slots) and from the
// hub's index of it (unwatch), taking the hub's lock, then the connection's.
// An id c does not hold is no error: the client may ask twice.
func unsubscribe[S any](h *Hub, c *conn, slots *map[uuid.UUID]S, id uuid.UUID, unwatch func(*conn, uuid.UUID)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := (*slots)[id]; ok {
		delete(*slots, id)
		unwatch(c, id)
	}
}
