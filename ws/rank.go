package ws

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/orderd/orderd/store"
)

// rankLines ranks the lines that changed, each at most every positionEvery,
// once however many watch it, and offers their watchers the moves and the
// merchants' statuses; and offers again what watchers held back. It runs
// beside the tailer until ctx ends.
func (h *Hub) rankLines(ctx context.Context) {
	for {
		due := h.nextLineDue()
		if due.IsZero() || time.Until(due) > 0 {
			if !h.awaitRanker(ctx, due) {
				return
			}
			continue
		}
		if err := h.rankDue(ctx, time.Now()); err != nil {
			if ctx.Err() != nil {
				return
			}
			h.log.Warn("live updates: rank lines", "err", err)
			if !sleep(ctx, retryAfter) {
				return
			}
		}
	}
}

// kickRanker tells the ranker that a line changed.
func (h *Hub) kickRanker() {
	select {
	case h.rankWake <- struct{}{}:
	default:
	}
}

// awaitRanker waits for a kick or until due (when not zero); false when ctx
// ended.
func (h *Hub) awaitRanker(ctx context.Context, due time.Time) bool {
	var timer <-chan time.Time
	if !due.IsZero() {
		t := time.NewTimer(time.Until(due))
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-h.rankWake:
	case <-timer:
	}
	return true
}

// nextLineDue is when the first line is due; zero when none is.
func (h *Hub) nextLineDue() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	var at time.Time
	for _, l := range h.lines {
		if due := l.due(); !due.IsZero() && (at.IsZero() || due.Before(at)) {
			at = due
		}
	}
	return at
}

// rankDue reads every due line: its ranking when orders in it are watched,
// its merchant's status when that is. A line is marked read before the
// reads, so that a change the tailer finds meanwhile makes it due again.
func (h *Hub) rankDue(ctx context.Context, now time.Time) error {
	due := map[uuid.UUID]bool{}
	var rank []uuid.UUID
	statuses := map[uuid.UUID]struct{}{}
	h.mu.Lock()
	for m, l := range h.lines {
		switch {
		case l.dirty && !now.Before(l.rankedAt.Add(positionEvery)):
			due[m] = true
			l.dirty, l.rankedAt = false, now
			if len(l.orders) > 0 {
				rank = append(rank, m)
			}
			if len(l.statuses) > 0 {
				statuses[m] = struct{}{}
			}
		case l.held && !l.dirty && !now.Before(l.rankedAt.Add(settleAfter)):
			h.offerSettled(l)
		}
	}
	h.mu.Unlock()
	if len(due) == 0 {
		return nil
	}
	err := h.rankLinesNow(ctx, due, rank, statuses)
	if err != nil {
		h.mu.Lock()
		for m := range due {
			if l := h.lines[m]; l != nil {
				l.dirty = true
			}
		}
		h.mu.Unlock()
	}
	return err
}

func (h *Hub) rankLinesNow(ctx context.Context, due map[uuid.UUID]bool, rank []uuid.UUID, statuses map[uuid.UUID]struct{}) error {
	loads, err := h.store.MerchantLoads(ctx, setKeys(statuses))
	if err != nil {
		return fmt.Errorf("merchant loads: %w", err)
	}
	positions, err := h.store.QueuePositions(ctx, rank)
	if err != nil {
		return fmt.Errorf("queue positions: %w", err)
	}
	encoded, err := encodeStatuses(loads, statuses)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	stale := h.offerRanking(due, positions)
	h.offerStatuses(encoded)
	if stale {
		h.wakeUp()
	}
	return nil
}

// offerRanking offers the due lines' watchers their places, front of each
// line first, so that the new estimates a ranking may send (a line's
// estimatesPerRanking) go to those nearest their turn; it reports whether
// the ranking saw orders the tailer has not offered yet. The caller holds
// h.mu.
func (h *Hub) offerRanking(due map[uuid.UUID]bool, positions []store.QueuePosition) (stale bool) {
	slices.SortFunc(positions, func(a, b store.QueuePosition) int { return cmp.Compare(a.Position, b.Position) })
	held := map[uuid.UUID]bool{}
	estimates := map[uuid.UUID]*int{}
	for _, p := range positions {
		w := h.orders[p.OrderID]
		if w == nil || w.last.view == nil || !due[w.merchant] {
			continue
		}
		if p.Version != w.last.view.version {
			// A change the tailer has not offered yet: it reads the order.
			if p.Version > w.last.view.version {
				h.refreshOrders[p.OrderID] = struct{}{}
				stale = true
			}
			continue
		}
		left := estimates[w.merchant]
		if left == nil {
			left = new(int)
			*left = estimatesPerRanking
			estimates[w.merchant] = left
		}
		if h.offerOrder(w, orderOffer{view: w.last.view, position: p.Position, eta: p.EtaSeconds, lineSeq: p.LineSeq}, left) {
			held[w.merchant] = true
		}
	}
	for m := range due {
		if l := h.lines[m]; l != nil {
			l.held = held[m]
		}
	}
	return stale
}
