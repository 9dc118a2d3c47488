package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store/pgkit"
)

type closeRequest struct {
	// merchantID is the order's merchant when the caller knows it.
	merchantID uuid.UUID
	orderID    uuid.UUID
	closed     bool
	err        error
	done       chan struct{}
}

// CloseUnpaid closes an order still unpaid at its deadline and releases its
// stock and claims; it does nothing for any other order, so the timer may
// fire late, twice, or after payment. It reports whether the order was
// closed: not when another transaction holds the order (closeInTx).
// Concurrent calls share transactions: a burst of deadlines closes
// as a few batches. merchantID may be uuid.Nil when the caller does not know
// it; the batch then looks it up.
func (s *Store) CloseUnpaid(ctx context.Context, merchantID, orderID uuid.UUID) (bool, error) {
	req := &closeRequest{merchantID: merchantID, orderID: orderID, done: make(chan struct{})}
	s.closer.Submit(req)
	select {
	case <-req.done:
		return req.closed, req.err
	case <-ctx.Done():
		return false, mapErr(ctx.Err())
	}
}

func (s *Store) closeBatch(batch []*closeRequest) {
	ctx, cancel := context.WithTimeout(context.Background(), placeBatchTimeout)
	defer cancel()
	if batch[0].merchantID == uuid.Nil && s.splitOnCitus() {
		s.closeFindingMerchants(ctx, batch)
		return
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error { return s.closeInTx(ctx, tx, batch) })
	if err != nil && len(batch) > 1 && domain.ErrorCode(err) != domain.CodeUnavailable {
		for _, req := range batch {
			s.closeBatch([]*closeRequest{req})
		}
		return
	}
	answerCloses(batch, err)
}

// closeFindingMerchants closes, on Citus, the requests whose callers named
// no merchant, which a batch split by merchant hands over together: it
// reads their merchants, then closes each merchant's in a transaction of
// its own (jobs from before timers carried their merchant; few).
func (s *Store) closeFindingMerchants(ctx context.Context, batch []*closeRequest) {
	if err := findMerchants(ctx, s.pool, batch); err != nil {
		answerCloses(batch, mapErr(err))
		return
	}
	for _, g := range pgkit.GroupBy(batch, closeMerchant) {
		if g[0].merchantID == uuid.Nil {
			answerCloses(g, nil) // no such order: nothing to close
			continue
		}
		s.closeBatch(g)
	}
}

// answerCloses answers a batch's callers: with err, as not closed.
func answerCloses(batch []*closeRequest, err error) {
	for _, req := range batch {
		if err != nil {
			req.closed, req.err = false, err
		}
		close(req.done)
	}
}

func closeMerchant(r *closeRequest) uuid.UUID { return r.merchantID }

// closeInTx locks the batch's orders in id order, closes those still unpaid
// past their deadline, and releases what they held, a few statements for
// the whole batch. It skips an order another transaction holds: a payment
// deciding it, or another close (a River job's batch and a backstop's round
// find the same overdue orders), which would otherwise make each batch wait
// for every one before it, all of it then held by the first batch's writes.
// A skipped order that the holder leaves unpaid is still overdue, and the
// backstop of its timer closes it a grace period later.
func (s *Store) closeInTx(ctx context.Context, tx pgx.Tx, batch []*closeRequest) error {
	if err := findMerchants(ctx, tx, batch); err != nil {
		return err
	}
	for _, req := range batch {
		req.closed = false
	}
	orders, err := lockToClose(ctx, tx, batch)
	if err != nil {
		return err
	}
	// The decisions' time, read once the orders' locks are held.
	now := s.now()
	for _, o := range orders {
		now = domain.DecisionTime(now, o.LastDecidedAt())
	}
	closed := map[uuid.UUID]bool{}
	var released releasedUnits
	var w writeSet
	for _, o := range orders {
		events := domain.Close(o, now)
		if len(events) == 0 {
			continue
		}
		after, err := o.Apply(events...)
		if err != nil {
			return err
		}
		w.changes = append(w.changes, change{before: o, after: after, events: events, meta: Meta{Actor: domain.ActorSystem}})
		released.add(o)
		if at, load, ok := domain.SlotReturn(o, after); ok {
			w.returnSlot(o.MerchantID, at, load)
		}
		closed[o.ID] = true
	}
	if len(w.changes) > 0 {
		for _, part := range byShard(tx, w.changes, func(c change) uuid.UUID { return c.after.MerchantID }) {
			entries, err := lockOrderEntries(ctx, tx, part)
			if err != nil {
				return err
			}
			for _, oe := range entries {
				if err := w.addEntry(oe, domain.LapseForOrder(oe.entry, oe.order.after, now), now); err != nil {
					return err
				}
			}
		}
		if err := s.commit(ctx, tx, w, now); err != nil {
			return fmt.Errorf("close orders: %w", err)
		}
		if err := releaseUnits(ctx, tx, released); err != nil {
			return err
		}
	}
	for _, req := range batch {
		req.closed = closed[req.orderID]
	}
	return nil
}

// findMerchants reads, without a lock, the merchant of the orders whose
// caller named none, so that the orders' locks name their merchants (an
// order never changes merchant).
func findMerchants(ctx context.Context, tx querier, batch []*closeRequest) error {
	var unknown [][16]byte
	for _, req := range batch {
		if req.merchantID == uuid.Nil {
			unknown = append(unknown, req.orderID)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT id, merchant_id FROM orders WHERE id = ANY($1)`, unknown)
	if err != nil {
		return fmt.Errorf("find orders' merchants: %w", err)
	}
	found := map[uuid.UUID]uuid.UUID{}
	for rows.Next() {
		var id, merchant uuid.UUID
		if err := rows.Scan(&id, &merchant); err != nil {
			rows.Close()
			return fmt.Errorf("find orders' merchants: %w", err)
		}
		found[id] = merchant
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("find orders' merchants: %w", err)
	}
	for _, req := range batch {
		if req.merchantID == uuid.Nil {
			req.merchantID = found[req.orderID]
		}
	}
	return nil
}

// lockToClose locks the batch's orders in id order, passing over those
// another transaction holds, and reads them: one statement, or on a Citus
// worker, which takes row locks only in statements of one shard, one per
// shard (byShard), by the shard's name when the transaction holds it
// (heldTable), all in one round trip.
func lockToClose(ctx context.Context, tx pgx.Tx, batch []*closeRequest) ([]domain.Order, error) {
	b := &pgx.Batch{}
	var orders []domain.Order
	for _, part := range byShard(tx, batch, closeMerchant) {
		ids, merchants := make([][16]byte, len(part)), make([][16]byte, len(part))
		for i, req := range part {
			ids[i], merchants[i] = req.orderID, req.merchantID
		}
		b.Queue(`SELECT `+orderColumns+` FROM `+heldTable(tx, "orders", part[0].merchantID)+` o WHERE o.id = ANY($1) AND o.merchant_id = ANY($2)
		ORDER BY o.id FOR UPDATE SKIP LOCKED`, ids, merchants).Query(func(rows pgx.Rows) error {
			locked, err := scanOrders(rows)
			orders = append(orders, locked...)
			return err
		})
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("lock orders: %w", err)
	}
	return orders, nil
}

// CloseDueUnpaid closes up to limit unpaid orders past their payment
// deadline, on one PostgreSQL read and locked in their close's transaction,
// and reports them as fired timers: an unpaid order is its own payment
// timer, its deadline in orders_unpaid_deadline_idx (placement sets no
// River job for it), which every process reads every TimerPollInterval (on
// Citus, one process per worker, on that worker: closeDueOnWorkers). A River job
// per deadline cost each placement a row and seven index entries in River's
// table that nothing read but the firing, and each close its delete. A
// process that dies before committing leaves the orders unpaid, and the
// next look of any process closes them.
func (s *Store) CloseDueUnpaid(ctx context.Context, limit int) ([]FiredTimer, error) {
	if s.splitOnCitus() {
		return s.closeDueOnWorkers(ctx, limit)
	}
	from, cutoff := s.fireFrom.at(), s.now()
	closed, err := s.closeOverdueUnpaid(ctx, from, cutoff, limit)
	if err == nil {
		if len(closed) >= limit {
			cutoff = closed[len(closed)-1].Deadline
		}
		s.fireFrom.set(cutoff.Add(-fireLookBack))
	}
	fired := make([]FiredTimer, len(closed))
	for i, o := range closed {
		fired[i] = FiredTimer{Kind: CloseUnpaidArgs{}.Kind(), ScheduledAt: o.Deadline}
	}
	return fired, err
}

// QueuedStay is an order's stay in its merchant's queue, which ends at its
// wait limit (ExpiresAt) unless the order leaves the queue before.
type QueuedStay struct {
	ID, MerchantID      uuid.UUID
	QueuedAt, ExpiresAt time.Time
}

// QueuedDue reads, on one PostgreSQL, up to limit queued orders past their
// wait limit but those of the merchants in skip, without a lock: a queued
// order is its own expiry timer, its limit in orders_queue_expiry_idx
// (nothing sets a River job for it there), which every process reads every
// TimerPollInterval. ExpireQueued expires each: it locks the merchant
// before the order, as every command does (a lock taken here on the order
// first would invert that order), and acts only on the stay the read saw,
// so an order every process reads at once expires once, and one that left
// the queue meanwhile, or came back to it, is left alone. A River job per
// queued order cost each placement a row and seven index entries in River's
// table that nothing read but the firing. Each look starts where the last
// one got to (expireFrom, as CloseDueUnpaid's); an order it passed over,
// because its merchant was in skip or its expiry failed, is its merchant's
// next read (MerchantQueuedDue) or the backstop's, a grace period after its
// limit.
func (s *Store) QueuedDue(ctx context.Context, limit int, skip []uuid.UUID) ([]QueuedStay, error) {
	from, cutoff := s.expireFrom.at(), s.now()
	if skip == nil {
		skip = []uuid.UUID{}
	}
	due, err := s.queuedStays(ctx, "queued orders due", `SELECT id, merchant_id, queued_at, queue_expires_at FROM orders
		WHERE status = 'queued' AND queue_expires_at >= $1 AND queue_expires_at < $2 AND merchant_id <> ALL($4)
		ORDER BY queue_expires_at LIMIT $3`, from, cutoff, limit, skip)
	if err != nil {
		return nil, err
	}
	if len(due) >= limit {
		cutoff = due[len(due)-1].ExpiresAt
	}
	s.expireFrom.set(cutoff.Add(-fireLookBack))
	return due, nil
}

// MerchantQueuedDue reads up to limit of a merchant's queued orders past
// their wait limit, without a lock (QueuedDue).
func (s *Store) MerchantQueuedDue(ctx context.Context, merchantID uuid.UUID, limit int) ([]QueuedStay, error) {
	return s.queuedStays(ctx, "merchant's queued orders due", `SELECT id, merchant_id, queued_at, queue_expires_at FROM orders
		WHERE status = 'queued' AND queue_expires_at < $2 AND merchant_id = $1
		ORDER BY queue_expires_at LIMIT $3`, merchantID, s.now(), limit)
}

// queuedStays reads the stays that query selects, named what in its errors.
func (s *Store) queuedStays(ctx context.Context, what, query string, args ...any) ([]QueuedStay, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, mapErr(fmt.Errorf("%s: %w", what, err))
	}
	due, err := pgx.CollectRows(rows, pgx.RowToStructByPos[QueuedStay])
	if err != nil {
		return nil, mapErr(fmt.Errorf("%s: %w", what, err))
	}
	return due, nil
}

// fireLookBack is how far before the last look's cutoff (or, its batch full,
// its last deadline) a process's next look at the orders past their
// deadline starts (fireFrom). Each close leaves its order's entry in
// orders_unpaid_deadline_idx dead, and while any snapshot from before the
// close stays open (the periodic audit's, for seconds) PostgreSQL cannot
// mark it so: a read from the index's start visited the heap for every
// order closed meanwhile, ten times a second in every process. An order
// the look passed over (held by another look or a payment that let it go,
// or committed that late) is the backstop's, which reads from the start a
// grace period after each deadline.
const fireLookBack = 2 * time.Second

// fireFrom is the deadline a process's next look at the orders past their
// deadline or wait limit starts from (CloseDueUnpaid, QueuedDue): zero, the
// first, from the start.
type fireFrom struct{ ns atomic.Int64 }

func (f *fireFrom) at() time.Time {
	if ns := f.ns.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

func (f *fireFrom) set(t time.Time) { f.ns.Store(t.UnixNano()) }

// CloseUnpaidOverdue closes up to limit unpaid orders whose payment deadline
// is before cutoff, in one batch, and reports how many it found: the
// backstop behind the payment timers, which should have closed them already.
// On one PostgreSQL it finds and locks them in its close's transaction,
// passing over those another transaction holds (a River job's close batch,
// another process's backstop, a payment): read apart from the locks, every
// process's round found the same first orders, closed none of those another
// held, and, its batch full, looked again at once, again and again, while the
// overdue orders behind them waited.
func (s *Store) CloseUnpaidOverdue(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	if s.splitOnCitus() {
		// On each worker, its own shards, closed there (closeOverdueOnNode).
		shards, err := s.nodeShards(ctx, "orders")
		if err != nil {
			return 0, mapErr(fmt.Errorf("overdue unpaid: %w", err))
		}
		found := 0
		err = s.onEachNode(ctx, shards, func(node string, _ *pgxpool.Pool, ids []int64) error {
			overdue, err := s.closeOverdueOnNode(ctx, node, ids, time.Time{}, cutoff, limit)
			found = max(found, len(overdue))
			return err
		})
		return found, err
	}
	found, err := s.closeOverdueUnpaid(ctx, time.Time{}, cutoff, limit)
	return len(found), err
}

// closeOverdueUnpaid closes, on one PostgreSQL, up to limit unpaid orders
// whose payment deadline is from from and before cutoff, found and locked
// in the close's transaction (CloseUnpaidOverdue), and returns those it
// closed. A batch
// that fails is closed order by order, so that an order whose close fails
// holds up no other; such an order is left out of the batches for
// closeRetryAfter (failedCloses), and its error is returned with the
// orders closed.
func (s *Store) closeOverdueUnpaid(ctx context.Context, from, cutoff time.Time, limit int) ([]overdueOrder, error) {
	var found []overdueOrder
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, overdueUnpaidSQL, from, cutoff, limit, s.failedCloses.held(time.Now()))
		if err != nil {
			return fmt.Errorf("overdue unpaid: %w", err)
		}
		found, err = pgx.CollectRows(rows, pgx.RowToStructByPos[overdueOrder])
		if err != nil {
			return fmt.Errorf("overdue unpaid: %w", err)
		}
		if len(found) == 0 {
			return nil
		}
		reqs := make([]*closeRequest, len(found))
		for i, o := range found {
			reqs[i] = &closeRequest{merchantID: o.MerchantID, orderID: o.ID}
		}
		return s.closeInTx(ctx, tx, reqs)
	})
	if err = mapErr(err); err == nil {
		return found, nil
	}
	if len(found) == 0 || domain.ErrorCode(err) == domain.CodeUnavailable || ctx.Err() != nil {
		return nil, err
	}
	var closed []overdueOrder
	var errs []error
	for _, o := range found {
		err := s.inTx(ctx, func(tx pgx.Tx) error {
			return s.closeInTx(ctx, tx, []*closeRequest{{merchantID: o.MerchantID, orderID: o.ID}})
		})
		if err = mapErr(err); err != nil {
			if domain.ErrorCode(err) != domain.CodeUnavailable && ctx.Err() == nil {
				s.failedCloses.hold(o.ID, time.Now())
			}
			errs = append(errs, fmt.Errorf("close order %s: %w", o.ID, err))
			continue
		}
		closed = append(closed, o)
	}
	return closed, errors.Join(errs...)
}

// overdueUnpaidSQL locks the unpaid orders whose deadline is in [$1, $2),
// up to $3 of them, but those of $4.
const overdueUnpaidSQL = `SELECT id, merchant_id, payment_deadline FROM orders
	WHERE status = 'awaiting_payment' AND payment_deadline >= $1 AND payment_deadline < $2 AND id <> ALL($4)
	ORDER BY payment_deadline LIMIT $3 FOR UPDATE SKIP LOCKED`

// closeRetryAfter is how long an order whose close failed is left out of
// the batches that close the overdue orders.
const closeRetryAfter = time.Minute

// failedCloses are the orders whose close failed on its own, each until it
// may be tried again: left in, one would fail every batch it came first in.
type failedCloses struct {
	mu    sync.Mutex
	until map[uuid.UUID]time.Time
}

// held lists the orders to leave out at now, forgetting those whose wait
// is over.
func (f *failedCloses) held(now time.Time) []uuid.UUID {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := []uuid.UUID{}
	for id, until := range f.until {
		if now.After(until) {
			delete(f.until, id)
			continue
		}
		ids = append(ids, id)
	}
	return ids
}

func (f *failedCloses) hold(id uuid.UUID, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.until == nil {
		f.until = map[uuid.UUID]time.Time{}
	}
	f.until[id] = now.Add(closeRetryAfter)
}

// overdueOrder is an unpaid order past its payment deadline.
type overdueOrder struct {
	ID, MerchantID uuid.UUID
	Deadline       time.Time
}
