package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store/pgkit"
)

// Payment deadlines on Citus are what they are on one PostgreSQL: an unpaid
// order's row is its timer, committed with the order in its worker's
// one-phase transaction, and no River job is set for it. Every worker's
// shards of orders are read for the deadlines passed by one process at a
// time, the one holding the worker's timer lock, every TimerPollInterval,
// from where its last look got to; what it finds is closed in one
// transaction on that worker, as a placement batch is decided there
// (holdShards, then the orders locked shard by shard with SKIP LOCKED and
// the close's writes by the shards' names), with no coordinator in it.
// The backstop (CloseUnpaidOverdue) closes, the same way, what is still
// unpaid a grace period after its deadline, in every process.

// timerLockKey is the session advisory lock, on each worker, of the
// process that reads that worker's deadlines. Citus's own advisory locks
// are of other lock classes, so the key cannot meet one of theirs.
const timerLockKey int64 = 0x6f72646572642d74

// nodeTimers are a process's sessions on the workers for their timer
// locks, and where its next look at each worker's deadlines starts.
type nodeTimers struct {
	mu    sync.Mutex
	conns map[string]*pgx.Conn
	held  map[string]time.Time
	from  map[string]*fireFrom
}

// timerLockCheck is how often a process holding a worker's timer lock
// checks that its session, and so the lock, is still there.
const timerLockCheck = time.Second

// holdsTimers reports whether this process holds node's timer lock,
// taking it when free: a session of its own on the worker holds it, and
// releases it when the process dies or its connection breaks, so that the
// next process to ask takes the worker's deadlines over. Each look of a
// process without the lock asks again.
func (s *Store) holdsTimers(ctx context.Context, node string) (bool, error) {
	n := &s.timers
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conns == nil {
		n.conns, n.held, n.from = map[string]*pgx.Conn{}, map[string]time.Time{}, map[string]*fireFrom{}
	}
	conn := n.conns[node]
	if conn != nil {
		if checked, ok := n.held[node]; ok {
			if time.Since(checked) < timerLockCheck {
				return true, nil
			}
			if err := conn.Ping(ctx); err != nil {
				s.dropTimerSession(node)
				return false, fmt.Errorf("timer lock on %s: %w", node, err)
			}
			n.held[node] = time.Now()
			return true, nil
		}
	} else {
		pool, err := s.nodePool(node)
		if err != nil {
			return false, err
		}
		if conn, err = pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy()); err != nil {
			return false, fmt.Errorf("timer lock on %s: %w", node, err)
		}
		n.conns[node] = conn
	}
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, timerLockKey).Scan(&got); err != nil {
		s.dropTimerSession(node)
		return false, fmt.Errorf("timer lock on %s: %w", node, err)
	}
	if got {
		n.held[node] = time.Now()
		// Taken over from a process that died, or first: from the start.
		n.from[node] = &fireFrom{}
	}
	return got, nil
}

// dropTimerSession closes node's timer session, and with it the lock;
// s.timers.mu is held.
func (s *Store) dropTimerSession(node string) {
	n := &s.timers
	if conn := n.conns[node]; conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(ctx) // the session is gone or going either way
	}
	delete(n.conns, node)
	delete(n.held, node)
}

// closeTimerSessions closes every timer session of the process.
func (s *Store) closeTimerSessions() {
	s.timers.mu.Lock()
	defer s.timers.mu.Unlock()
	for node := range s.timers.conns {
		s.dropTimerSession(node)
	}
}

// closeDueOnWorkers is CloseDueUnpaid on Citus: on each worker whose timer
// lock this process holds, the unpaid orders past their deadline, from
// where the last look there got to, closed on that worker; the workers at
// once. A worker that fails is left to the next look.
func (s *Store) closeDueOnWorkers(ctx context.Context, limit int) ([]FiredTimer, error) {
	shards, err := s.nodeShards(ctx, "orders")
	if err != nil {
		return nil, mapErr(fmt.Errorf("overdue unpaid: %w", err))
	}
	var mu sync.Mutex
	var fired []FiredTimer
	var errs []error
	var wg sync.WaitGroup
	for node, ids := range shards {
		held, err := s.holdsTimers(ctx, node)
		if err != nil || !held {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
			continue
		}
		s.timers.mu.Lock()
		from := s.timers.from[node]
		s.timers.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			cutoff := s.now()
			found, err := s.closeOverdueOnNode(ctx, node, ids, from.at(), cutoff, limit)
			if err == nil {
				if len(found) >= limit {
					cutoff = found[len(found)-1].Deadline
				}
				from.set(cutoff.Add(-fireLookBack))
			}
			mu.Lock()
			defer mu.Unlock()
			for _, o := range found {
				fired = append(fired, FiredTimer{Kind: CloseUnpaidArgs{}.Kind(), ScheduledAt: o.Deadline})
			}
			errs = append(errs, err)
		}()
	}
	wg.Wait()
	return fired, errors.Join(errs...)
}

// closesAtOnce bounds the transactions in which a worker's look closes
// what it found, at once, each on a connection of its own and with the
// orders of its own shards: one look per worker at a time must keep up
// with every process's placements there, where on one PostgreSQL every
// process's look closes its share.
const closesAtOnce = 4

// closePartMin is the fewest orders a look closes in a transaction of
// their own: a look that finds fewer closes them in one.
const closePartMin = 64

// closeOverdueOnNode closes, on the Citus worker node, up to limit unpaid
// orders of its shards of orders (ids) whose payment deadline is from from
// and before cutoff, and returns those it found: read on the worker by the
// shards' names, then locked and closed in one transaction there
// (closeOnNode); those another transaction holds are passed over. A batch
// that fails is closed order by order, as on one PostgreSQL
// (closeOverdueUnpaid).
func (s *Store) closeOverdueOnNode(ctx context.Context, node string, ids []int64, from, cutoff time.Time, limit int) ([]overdueOrder, error) {
	pool, err := s.nodePool(node)
	if err != nil {
		return nil, err
	}
	rows, err := pool.Query(ctx, shardsUnion(ids, func(id int64) string {
		return `(SELECT id, merchant_id, payment_deadline FROM ` + shardName("orders", id) + `
			WHERE status = 'awaiting_payment' AND payment_deadline >= $1 AND payment_deadline < $2 AND id <> ALL($4)
			ORDER BY payment_deadline LIMIT $3)`
	})+` ORDER BY 3 LIMIT $3`, from, cutoff, limit, s.failedCloses.held(time.Now()))
	if err != nil {
		s.nodeFailed()
		return nil, mapErr(fmt.Errorf("overdue unpaid on %s: %w", node, err))
	}
	found, err := pgx.CollectRows(rows, pgx.RowToStructByPos[overdueOrder])
	if err != nil || len(found) == 0 {
		return nil, mapErr(err)
	}
	reqs := make([]*closeRequest, len(found))
	for i, o := range found {
		reqs[i] = &closeRequest{merchantID: o.MerchantID, orderID: o.ID}
	}
	err = s.closeInParts(ctx, node, reqs)
	if err == nil || domain.ErrorCode(err) == domain.CodeUnavailable || ctx.Err() != nil {
		return found, err
	}
	var closed []overdueOrder
	var errs []error
	for i, o := range found {
		if err := s.closeOnNode(ctx, node, reqs[i:i+1]); err != nil {
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

// closeInParts closes reqs, orders of node's shards, in transactions on
// that worker at once (closeOnNode), each with the orders of some of the
// shards: one for each closePartMin orders, up to closesAtOnce.
func (s *Store) closeInParts(ctx context.Context, node string, reqs []*closeRequest) error {
	s.nodes.mu.Lock()
	shards := s.nodes.shards
	s.nodes.mu.Unlock()
	groups := pgkit.GroupBy(reqs, func(r *closeRequest) int64 { return shardOf(shards, merchantHash(r.merchantID)).id })
	parts := make([][]*closeRequest, max(1, min(len(groups), closesAtOnce, len(reqs)/closePartMin)))
	for i, g := range groups {
		parts[i%len(parts)] = append(parts[i%len(parts)], g...)
	}
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, part := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.closeOnNode(ctx, node, part)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// closeOnNode closes reqs, orders of node's shards, in one transaction on
// that worker: Citus's placement lock on their merchants' shards and the
// check that the worker has them (holdShards), then closeInTx, whose
// statements name those shards. One phase, no coordinator.
func (s *Store) closeOnNode(ctx context.Context, node string, reqs []*closeRequest) error {
	merchants := make([][16]byte, len(reqs))
	for i, req := range reqs {
		merchants[i] = req.merchantID
	}
	return s.inNodeTx(ctx, node, func(tx *txn, pt *pgkit.PipelinedTx) error {
		b := &pgx.Batch{}
		holdShards(tx, b, merchants)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("hold shards: %w", err)
		}
		if err := s.closeInTx(ctx, tx, reqs); err != nil {
			return err
		}
		return pt.CommitWith(ctx, nil)
	})
}
