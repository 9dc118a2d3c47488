package ws

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/orderd/orderd/store"
)

// batch is what one reading of the log, and the subscriptions waiting to be
// read once more, ask the hub to read.
type batch struct {
	orders   map[uuid.UUID]struct{} // watched orders to read whole
	loads    map[uuid.UUID]struct{} // merchants whose load watchers hear their load
	statuses map[uuid.UUID]struct{} // merchants whose status watchers hear it now
	// The refreshes taken, given back if the batch fails.
	refreshOrders, refreshLoads, refreshStatuses map[uuid.UUID]struct{}
}

// publish sends what one batch of changed streams, and the subscriptions
// waiting to be read once more, change for this process's watchers. On
// error the refreshes stay due and the caller reads the batch again.
func (h *Hub) publish(ctx context.Context, streams []store.StreamRef) error {
	if err := h.pushDrops(ctx, streams); err != nil {
		return err
	}
	b := h.collect(streams)
	err := h.push(ctx, b)
	if err != nil {
		h.mu.Lock()
		for _, pair := range [][2]map[uuid.UUID]struct{}{{h.refreshOrders, b.refreshOrders}, {h.refreshLoads, b.refreshLoads}, {h.refreshStatuses, b.refreshStatuses}} {
			for id := range pair[1] {
				pair[0][id] = struct{}{}
			}
		}
		h.mu.Unlock()
	}
	return err
}

// collect marks the lines that changed and says what to read.
func (h *Hub) collect(streams []store.StreamRef) batch {
	h.mu.Lock()
	defer h.mu.Unlock()
	b := batch{orders: map[uuid.UUID]struct{}{}, loads: map[uuid.UUID]struct{}{}, statuses: map[uuid.UUID]struct{}{},
		refreshOrders: h.refreshOrders, refreshLoads: h.refreshLoads, refreshStatuses: h.refreshStatuses}
	h.refreshOrders, h.refreshLoads, h.refreshStatuses = map[uuid.UUID]struct{}{}, map[uuid.UUID]struct{}{}, map[uuid.UUID]struct{}{}
	for id := range b.refreshOrders {
		b.orders[id] = struct{}{}
	}
	for id := range b.refreshLoads {
		b.loads[id] = struct{}{}
	}
	for id := range b.refreshStatuses {
		b.statuses[id] = struct{}{}
	}
	for _, st := range streams {
		m := st.MerchantID
		l := h.lines[m]
		switch st.Type {
		case store.StreamOrder:
			if _, ok := h.orders[st.ID]; ok {
				b.orders[st.ID] = struct{}{}
			}
			if l != nil {
				l.dirty = true
			}
		case store.StreamMerchant:
			// Pauses, resumptions and new settings: the status at once.
			if l != nil {
				l.dirty = true
				if len(l.statuses) > 0 {
					b.statuses[m] = struct{}{}
				}
			}
		default:
			continue
		}
		if len(h.loads[m]) > 0 {
			b.loads[m] = struct{}{}
		}
	}
	h.kickRanker()
	return b
}

// push reads what b asks for and offers it: the new states of watched
// orders, loads and statuses at once, whatever the lines' pace. A watched
// order that joined a line (paid, or prioritized) is ranked with its line
// here, so that its message carries its place; the line's other watchers
// hear of moves from the ranker (rankLines), at its pace.
func (h *Hub) push(ctx context.Context, b batch) error {
	whole, err := h.store.UnrankedOrders(ctx, setKeys(b.orders))
	if err != nil {
		return fmt.Errorf("orders: %w", err)
	}
	offers := make([]orderOffer, 0, len(whole))
	for _, o := range whole {
		offer, err := offerOf(o)
		if err != nil {
			return err
		}
		offers = append(offers, offer)
	}

	h.mu.Lock()
	waiting := map[uuid.UUID]orderOffer{} // queued: offered once ranked
	joined := map[uuid.UUID]struct{}{}    // the lines they wait in
	for _, o := range offers {
		w := h.orders[o.view.id]
		if w == nil || (w.last.view != nil && o.view.version <= w.last.view.version) {
			continue
		}
		if o.view.queued {
			waiting[o.view.id] = o
			joined[w.merchant] = struct{}{}
			continue
		}
		h.offerOrder(w, o, nil)
	}
	h.mu.Unlock()

	read := map[uuid.UUID]struct{}{}
	for _, set := range []map[uuid.UUID]struct{}{b.loads, b.statuses} {
		for m := range set {
			read[m] = struct{}{}
		}
	}
	loads, err := h.store.MerchantLoads(ctx, setKeys(read))
	if err != nil {
		return fmt.Errorf("merchant loads: %w", err)
	}
	positions, err := h.store.QueuePositions(ctx, setKeys(joined))
	if err != nil {
		return fmt.Errorf("queue positions: %w", err)
	}
	encodedLoads := map[uuid.UUID]*encoded[merchantLoadMessage]{}
	for m := range b.loads {
		if load, ok := loads[m]; ok {
			if encodedLoads[m], err = encode(loadMessage(m, load)); err != nil {
				return err
			}
		}
	}
	encodedStatuses, err := encodeStatuses(loads, b.statuses)
	if err != nil {
		return err
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range positions {
		o, ok := waiting[p.OrderID]
		w := h.orders[p.OrderID]
		if !ok || w == nil {
			continue
		}
		delete(waiting, p.OrderID)
		if p.Version != o.view.version {
			// It changed between the two reads: the next batch, which
			// that change is part of, reads it again.
			h.refreshOrders[p.OrderID] = struct{}{}
			continue
		}
		o.position, o.eta, o.lineSeq = p.Position, p.EtaSeconds, p.LineSeq
		h.offerOrder(w, o, nil)
	}
	// A queued order missing from its line's ranking left the line in
	// between: read it again.
	for id := range waiting {
		h.refreshOrders[id] = struct{}{}
	}
	for m, msg := range encodedLoads {
		for c := range h.loads[m] {
			c.offerLoad(m, msg)
		}
	}
	h.offerStatuses(encodedStatuses)
	return nil
}

func encodeStatuses(loads map[uuid.UUID]store.LoadView, of map[uuid.UUID]struct{}) (map[uuid.UUID]*encoded[merchantStatusMessage], error) {
	out := map[uuid.UUID]*encoded[merchantStatusMessage]{}
	for m := range of {
		if load, ok := loads[m]; ok {
			msg, err := encode(statusMessage(m, load))
			if err != nil {
				return nil, err
			}
			out[m] = msg
		}
	}
	return out, nil
}

// offerStatuses offers each merchant's status to its watchers; a line
// whose watchers hold a change back is offered it again once it settles.
// The caller holds h.mu.
func (h *Hub) offerStatuses(statuses map[uuid.UUID]*encoded[merchantStatusMessage]) {
	for m, msg := range statuses {
		l := h.lines[m]
		if l == nil {
			continue
		}
		l.status = msg
		held := false
		for c := range l.statuses {
			if c.offerStatus(m, msg, false) {
				held = true
			}
		}
		l.held = l.held || held
	}
}

// offerOrder keeps o as the order's newest state when it is, and offers the
// newest to the order's watchers: each takes it only when it is newer than
// what it has. It reports whether any held a move back.
func (h *Hub) offerOrder(w *watchedOrder, o orderOffer, estimates *int) (held bool) {
	if w.last.view == nil || newer(w.last.state(), o.state()) {
		w.last = o
	}
	for c := range w.conns {
		if c.offerOrder(w.last, false, estimates) {
			held = true
		}
	}
	return held
}

// offerSettled offers a line that settled its newest states once more, to
// the watchers that held a move back: any move is worth sending now.
func (h *Hub) offerSettled(l *line) {
	for _, w := range l.orders {
		if w.last.view == nil {
			continue
		}
		for c := range w.conns {
			c.offerOrder(w.last, true, nil)
		}
	}
	if l.status != nil {
		for c := range l.statuses {
			c.offerStatus(l.status.value.MerchantID, l.status, true)
		}
	}
	l.held = false
}

func setKeys(m map[uuid.UUID]struct{}) []uuid.UUID {
	out := make([]uuid.UUID, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
