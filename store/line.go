package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/orderd/orderd/domain"
)

// The line: the head of a merchant's queue, read under the merchant's lock,
// and the drains that admit from it when units free up. A route that may
// let the line in (a completion, a cancellation, a capacity raise, a
// resumption, a release, a retry, the drain job) reads the line's head
// (readLineHead), asks domain.DrainLine itself, so that the rule is one
// call from the store file the route enters, and hands the answer back to
// the head read (lineHead.admit, or commit).

// lineHead is the line's first orders as a drain of at most limit
// admissions reads them, locked, with what is left to send of the writes
// the route came with (w) and what the admissions need to join them.
type lineHead struct {
	s      *Store
	ctx    context.Context
	tx     pgx.Tx
	m      *merchantRow
	limit  int
	w      writeSet
	now    time.Time
	orders []domain.Order
}

// readLineHead reads the line's first orders that a drain of at most limit
// admissions needs (domain.Load.LineHeadToRead): those of the head that the
// merchant's lock read with w's command (w.head) when they are all there,
// else in the round trip that sends w, which then leaves m's load alone to
// send (the load is saved once, with the admissions).
func (s *Store) readLineHead(ctx context.Context, tx pgx.Tx, m *merchantRow, limit int, w writeSet, now time.Time) (*lineHead, error) {
	h := &lineHead{s: s, ctx: ctx, tx: tx, m: m, limit: limit, w: w, now: now}
	n := m.load().LineHeadToRead(limit)
	if n == 0 {
		return h, nil
	}
	if orders, ok := w.head.covering(n, w.changes); ok {
		h.orders = orders
		return h, nil
	}
	w.loads = nil
	w.readBack = func(b *pgx.Batch) {
		addLineHeadRead(b, m.ID, n, &h.orders)
	}
	if err := s.commit(ctx, tx, w, now); err != nil {
		return nil, err
	}
	h.w = writeSet{loads: []*merchantRow{m}}
	return h, nil
}

// admit returns the writes left to send with the admissions a drain of the
// head decided (domain.DrainLine's answer, d and err) and the merchant's
// load after them. When the drain's limit left room (d.More), it leaves a
// drain job for the rest.
func (h *lineHead) admit(d domain.Drain, err error) (writeSet, error) {
	w := h.w
	if err != nil {
		return w, err
	}
	for _, a := range d.Admissions {
		after, err := a.Order.Apply(a.Event)
		if err != nil {
			return w, err
		}
		if err := w.add(h.m, change{before: a.Order, after: after, events: []domain.Event{a.Event}, meta: Meta{Actor: domain.ActorSystem}}, h.now); err != nil {
			return w, err
		}
	}
	h.m.setLoad(d.Load)
	if d.More {
		return w, h.s.insertJobs(h.ctx, h.tx, []river.InsertManyParams{{Args: DrainMerchantArgs{MerchantID: h.m.ID}}})
	}
	return w, nil
}

// commit is admit for a route with nothing else to send: it sends the
// admissions and the merchant's load.
func (h *lineHead) commit(d domain.Drain, err error) error {
	w, err := h.admit(d, err)
	if err != nil {
		return err
	}
	return h.s.commit(h.ctx, h.tx, w, h.now)
}

// addLineHeadRead adds to b the read of the first n queued orders of the
// merchant, the priority lane's first, locked, into head. The read is
// planned for each execution: a connection caches a generic plan made from
// the statistics of the moment, and one made while orders looked empty (a
// new database before its first ANALYZE) sorts every queued order of every
// merchant on each read, for the rest of the connection's life.
func addLineHeadRead(b *pgx.Batch, merchantID uuid.UUID, n int, head *[]domain.Order) {
	b.Queue(`SET LOCAL plan_cache_mode = force_custom_plan`)
	b.Queue(`SELECT `+orderColumns+` FROM orders o
		WHERE o.merchant_id = $1 AND o.status = 'queued' ORDER BY o.lane DESC, o.queue_seq LIMIT $2 FOR UPDATE`, [16]byte(merchantID), n).
		Query(func(rows pgx.Rows) (err error) {
			if *head, err = scanOrders(rows); err != nil {
				return fmt.Errorf("read queue head: %w", err)
			}
			return nil
		})
	b.Queue(`SET LOCAL plan_cache_mode TO DEFAULT`)
}

// queueHead is the head of a merchant's queue read in the round trip that
// takes the merchant's lock, before the command decides: as many orders as
// the command's order would let in by leaving (its load), and one more when
// it is queued itself, so that the command's admissions need no round trip
// of their own. The rows read are locked, and the merchant's lock keeps the
// queue as it was read.
type queueHead struct {
	limit  int
	orders []domain.Order
}

func newQueueHead(o domain.Order) *queueHead {
	limit := max(o.Load, 1)
	if o.Status == domain.StatusQueued {
		limit++
	}
	return &queueHead{limit: limit}
}

// covering returns the head's first n orders, leaving out those changed
// (they left the queue), if the head read holds them all: n of them, or
// the whole queue.
func (h *queueHead) covering(n int, changed []change) ([]domain.Order, bool) {
	if h == nil {
		return nil, false
	}
	left := map[uuid.UUID]bool{}
	for _, c := range changed {
		left[c.after.ID] = true
	}
	var head []domain.Order
	for _, o := range h.orders {
		if !left[o.ID] {
			head = append(head, o)
		}
	}
	if len(head) >= n {
		return head[:n], true
	}
	return head, len(h.orders) < h.limit
}

// DrainMerchant admits a merchant's queued orders while units are free. It
// skips the merchant when another transaction holds its lock (that one will
// decide, and the sweep comes back), so processes never block on or
// double-admit one merchant. It reports how many orders it admitted.
func (s *Store) DrainMerchant(ctx context.Context, merchantID uuid.UUID) (int, error) {
	const batch = 500
	total := 0
	for {
		admitted := 0
		err := s.inTx(ctx, func(tx pgx.Tx) error {
			m, err := s.lockMerchant(ctx, tx, merchantLock{id: merchantID, skipLocked: true})
			if errors.Is(err, domain.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			now := domain.DecisionTime(s.now(), m.lastDecision())
			before := m.Load.Queued
			if m.load().MaxAdmissible() == 0 {
				return nil
			}
			head, err := s.readLineHead(ctx, tx, m, batch, writeSet{loads: []*merchantRow{m}}, now)
			if err != nil {
				return err
			}
			if err := head.commit(domain.DrainLine(head.orders, m.load(), batch, now)); err != nil {
				return err
			}
			admitted = before - m.Load.Queued
			return nil
		})
		if err != nil {
			return total, err
		}
		total += admitted
		if admitted < batch {
			return total, nil
		}
	}
}

// MerchantsToDrain lists merchants with queued orders and a free unit.
func (s *Store) MerchantsToDrain(ctx context.Context, limit int) ([]uuid.UUID, error) {
	ids, err := readEachNode(ctx, s, "merchants", func(from string) string {
		return `SELECT id FROM ` + from + `
		WHERE queued > 0 AND pause_mode IS NULL AND coalesce(period_capacity, capacity) > 0
			AND (active < coalesce(period_capacity, capacity) OR active = 0) LIMIT $1`
	}, limit, pgx.RowTo[uuid.UUID], limit)
	if err != nil {
		return nil, mapErr(fmt.Errorf("merchants to drain: %w", err))
	}
	return ids, nil
}
