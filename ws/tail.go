package ws

import (
	"context"
	"time"

	"github.com/orderd/orderd/store"
)

// Run tails the committed log until ctx ends and fans each batch out; the
// lines it finds changed are ranked by a goroutine of their own (rankLines),
// so that no new status waits for a ranking. It reads when a process hints
// that it committed events (store.LogChannel, sent by each process's
// store.RunLogHints), and otherwise every Poll, since hints can be lost; a
// read is one index range scan of the log's tail, limited to the merchants
// this process's clients watch. Reads are at least MinInterval apart.
func (h *Hub) Run(ctx context.Context) {
	listenCtx, stopListening := context.WithCancel(ctx)
	listening, ranking := make(chan struct{}), make(chan struct{})
	go func() { defer close(listening); h.listen(listenCtx) }()
	go func() { defer close(ranking); h.rankLines(listenCtx) }()
	defer func() { stopListening(); <-listening; <-ranking }()

	var since store.LogSnapshot
	for {
		_, now, err := h.store.ChangedStreams(ctx, "", nil)
		if err == nil {
			since = now
			break
		}
		h.log.Warn("live updates: log snapshot", "err", err)
		if !sleep(ctx, retryAfter) {
			return
		}
	}
	// Whoever subscribed before the first snapshot may have missed a change
	// in between: read them all once more.
	h.refreshAll()
	failed := false
	var lastRead time.Time
	for {
		if !sleep(ctx, h.opts.MinInterval-time.Since(lastRead)) {
			return
		}
		lastRead = time.Now()
		streams, next, err := h.store.ChangedStreams(ctx, since, h.merchants())
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !failed {
				h.log.Warn("live updates: read log", "err", err)
			}
			failed = true
			if !sleep(ctx, retryAfter) {
				return
			}
			continue
		}
		if failed {
			// The snapshot alone makes sure nothing is skipped; sending
			// everyone their current state again also repairs a fan-out
			// that failed half-way while the database was away.
			h.log.Info("live updates: log readable again")
			failed = false
			h.refreshAll()
		}
		if err := h.publish(ctx, streams); err != nil {
			if ctx.Err() != nil {
				return
			}
			h.log.Warn("live updates: fan-out", "err", err)
			failed = true
			// Stay on the snapshot: the changes are read again.
			if !sleep(ctx, retryAfter) {
				return
			}
			continue
		}
		since = next
		if !h.awaitChange(ctx, h.nextDue()) {
			return
		}
	}
}

// nextDue is when the tailer must run again without a hint: now when a
// subscription waits to be read once more, else never (zero).
func (h *Hub) nextDue() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.refreshOrders) > 0 || len(h.refreshLoads) > 0 || len(h.refreshStatuses) > 0 || h.drops.refreshing() {
		return time.Now()
	}
	return time.Time{}
}

// wakeUp makes the tailer read the log now rather than at its next poll.
func (h *Hub) wakeUp() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// awaitChange waits for a hint, the next poll or due (when not zero); false
// when ctx ended.
func (h *Hub) awaitChange(ctx context.Context, due time.Time) bool {
	wait := h.opts.Poll
	if !due.IsZero() {
		wait = min(wait, time.Until(due))
	}
	if wait <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-h.wake:
	case <-t.C:
	}
	return true
}

// listen turns every process's log hints into wake-ups, reconnecting after
// failures; polling covers the gaps.
func (h *Hub) listen(ctx context.Context) {
	failing := false
	for {
		listened := false
		err := h.store.ListenLog(ctx, func() {
			listened = true
			h.wakeUp()
			if h.opts.OnHint != nil {
				h.opts.OnHint()
			}
		})
		if ctx.Err() != nil {
			return
		}
		// Once per outage, not once per retry.
		if listened || !failing {
			h.log.Warn("live updates: log hints lost; polling until they are back", "err", err)
		}
		failing = true
		if !sleep(ctx, retryAfter) {
			return
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (h *Hub) refreshAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id := range h.orders {
		h.refreshOrders[id] = struct{}{}
	}
	for id := range h.loads {
		h.refreshLoads[id] = struct{}{}
	}
	for id, l := range h.lines {
		l.dirty = true
		if len(l.statuses) > 0 {
			h.refreshStatuses[id] = struct{}{}
		}
	}
	h.drops.refreshAll()
}
