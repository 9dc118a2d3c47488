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
// and the drains that admit from it when units free up.

// drainLocked admits the head of the queue while it fits (the priority
// lane's head first), up to limit orders, with the merchant's lock held; it
// always saves the load. When more could be admitted than limit allows, it
// leaves a drain job.
func (s *Store) drainLocked(ctx context.Context, tx pgx.Tx, m *merchantRow, now time.Time, limit int) error {
	w, err := s.drain(ctx, tx, m, now, limit, writeSet{loads: []*merchantRow{m}})
	if err != nil {
		return err
	}
	return s.commit(ctx, tx, w, now)
}

// drain is drainLocked for a caller with writes of its own, w (changes that
// may move the queue, and m's load): when the merchant has room it admits
// from the head w brought (queueHead) if that covers it, else sends w with
// its read of the queue's head; it returns the admissions and m's load, for
// the caller to send with its answer (else w).
func (s *Store) drain(ctx context.Context, tx pgx.Tx, m *merchantRow, now time.Time, limit int, w writeSet) (writeSet, error) {
	n := min(m.load().MaxAdmissible(), limit)
	if n == 0 {
		return w, nil
	}
	if head, ok := w.head.covering(n, w.changes); ok {
		return s.admitHead(ctx, tx, m, now, limit, w, head)
	}
	var head []domain.Order
	// The load is saved once, with the admissions.
	w.loads = nil
	w.readBack = func(b *pgx.Batch) {
		addLineHeadRead(b, m.ID, n, &head)
	}
	if err := s.commit(ctx, tx, w, now); err != nil {
		return w, err
	}
	return s.admitHead(ctx, tx, m, now, limit, writeSet{loads: []*merchantRow{m}}, head)
}

// admitHead adds to w the admission of head's orders, in order, while they
// fit, and returns it.
func (s *Store) admitHead(ctx context.Context, tx pgx.Tx, m *merchantRow, now time.Time, limit int, w writeSet, head []domain.Order) (writeSet, error) {
	for _, o := range head {
		// Nothing behind a head that does not fit overtakes it.
		if !m.load().CanDrain(o.Load) {
			break
		}
		e, load, err := domain.AdmitQueued(o, m.load(), now)
		if err != nil {
			return w, err
		}
		after, err := o.Apply(e)
		if err != nil {
			return w, err
		}
		m.setLoad(load)
		if err := w.add(m, change{before: o, after: after, events: []domain.Event{e}, meta: Meta{Actor: domain.ActorSystem}}, now); err != nil {
			return w, err
		}
	}
	if limit < m.load().MaxAdmissible() {
		return w, s.insertJobs(ctx, tx, []river.InsertManyParams{{Args: DrainMerchantArgs{MerchantID: m.ID}}})
	}
	return w, nil
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
			if err := s.drainLocked(ctx, tx, m, now, batch); err != nil {
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
	rows, err := s.pool.Query(ctx, `SELECT id FROM merchants
		WHERE queued > 0 AND pause_mode IS NULL AND coalesce(period_capacity, capacity) > 0
			AND (active < coalesce(period_capacity, capacity) OR active = 0) LIMIT $1`, limit)
	if err != nil {
		return nil, mapErr(fmt.Errorf("merchants to drain: %w", err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	return ids, mapErr(err)
}
