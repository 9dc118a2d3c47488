package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orderd/orderd/domain"
)

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
	const overdue = `SELECT id, merchant_id FROM orders WHERE status = 'awaiting_payment' AND payment_deadline < $1
		ORDER BY payment_deadline LIMIT $2`
	if s.splitOnCitus() {
		// Citus locks rows only in a statement of one shard: the orders
		// are read first and locked merchant by merchant.
		rows, err := s.pool.Query(ctx, overdue, cutoff, limit)
		if err != nil {
			return 0, mapErr(fmt.Errorf("overdue unpaid: %w", err))
		}
		unpaid, err := pgx.CollectRows(rows, pgx.RowToStructByPos[orderRef])
		if err != nil {
			return 0, mapErr(fmt.Errorf("overdue unpaid: %w", err))
		}
		if len(unpaid) == 0 {
			return 0, nil
		}
		return len(unpaid), s.closeOverdueBatch(ctx, unpaid)
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

// OverdueTimerKinds lists the kinds of timer that have a job in River's
// queue still pending at cutoff (pending, scheduled, available, running or
// retryable with an earlier scheduled_at): a timer River has not fired in
// time, or fired in a process that died with it. It reads River's table, on
// one node, where a backstop's own reads would visit every shard of a
// cluster.
func (s *Store) OverdueTimerKinds(ctx context.Context, queue string, cutoff time.Time) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT j.kind FROM unnest('{pending,scheduled,available,running,retryable}'::river_job_state[]) st,
		`+riverPriorities+` p, LATERAL (SELECT kind FROM river_job
			WHERE state = st AND queue = $1 AND priority = p AND scheduled_at < $2) j`, queue, cutoff)
	if err != nil {
		return nil, mapErr(fmt.Errorf("overdue timer jobs: %w", err))
	}
	kinds, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, mapErr(fmt.Errorf("overdue timer jobs: %w", err))
	}
	return kinds, nil
}

// riverPriorities lists River's priorities as rows, for a read of River's
// fetch index (state, queue, priority, scheduled_at, id) up to a moment:
// with state, queue and one priority equal, scheduled_at bounds the range.
// Naming the priorities in one IN list does not: PostgreSQL checks the list
// against each entry of the state and queue's whole range, so the read
// visits every timer set, however far ahead.
const riverPriorities = `unnest('{1,2,3,4}'::smallint[])`

// PromoteTimers makes the timer jobs of queue that wait `pending` and fall
// due within ahead of the database's clock available, keeping their
// scheduled_at, up to limit of them, and reports how many it promoted.
// River's fetch takes an available job only once its scheduled_at has
// passed, but it reads every available job of its queue on each fetch: its
// index orders by priority before scheduled_at, so its range cannot stop at
// now. Timers set further ahead therefore wait outside that range until
// they come within ahead of their deadline, and they wait pending, which
// River leaves to its user, rather than scheduled, which its leader's
// scheduler promotes: that statement locks the jobs due within its 5 s
// look-ahead and holds them for as long as it runs, which grows with all of
// River's table, so every timer falling due meanwhile fired that much
// late. Rows another process is promoting are skipped, not waited for.
func (s *Store) PromoteTimers(ctx context.Context, queue string, ahead time.Duration, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, promoteTimersSQL, queue, ahead, limit)
	if err != nil {
		return 0, mapErr(fmt.Errorf("promote timers: %w", err))
	}
	return int(tag.RowsAffected()), nil
}

// promoteTimersSQL reads each priority's range of the timers due within
// ahead (riverPriorities) and updates the rows it found by their ids, an
// array, which the primary key probes: joined to the read, whose estimate
// is the limit, the update read all of River's table by hash. River's own
// rule for unique jobs holds: their unique states always include both
// pending and available, so a promotion cannot collide with another job's
// key.
const promoteTimersSQL = `UPDATE river_job SET state = 'available'
	WHERE id = ANY(ARRAY(SELECT due.id FROM ` + riverPriorities + ` p, LATERAL (SELECT id FROM river_job
			WHERE state = 'pending' AND queue = $1 AND priority = p AND scheduled_at <= now() + $2::interval
			ORDER BY scheduled_at, id LIMIT $3 FOR UPDATE SKIP LOCKED) due
		LIMIT $3))`

// FiredTimer is a timer FireDueTimers fired: its kind and its deadline.
type FiredTimer struct {
	Kind        string
	ScheduledAt time.Time
}

// FireDueTimers fires the timers of queue that are due, and reports them.
// A payment deadline is its order's own row in orders_unpaid_deadline_idx
// (placement sets no River job for it on one PostgreSQL): the orders past
// it are closed, up to limit, read and locked in their close's
// transaction. The jobs that wait pending and are due by the database's
// clock, up to limit of each priority, are fired in a second transaction:
// one of a payment deadline (set before its order was its own timer) is
// closed there, its job deleted in the close's transaction, and any other
// kind is made available for River's workers. A River job per payment
// deadline cost each placement a row and seven index entries in River's
// table that nothing read but this, and each close its delete, while the
// order already held the deadline in an index of its own. A process that
// dies before committing leaves the orders unpaid and the jobs pending,
// which the next look of any process fires. Rows another process is firing
// are skipped, not waited for. One PostgreSQL only: on Citus the jobs and
// the orders live on different nodes.
func (s *Store) FireDueTimers(ctx context.Context, queue string, limit int) ([]FiredTimer, error) {
	var fired []FiredTimer
	var errs []error
	if queue == QueueTimers {
		from, cutoff := s.fireFrom.at(), s.now()
		closed, err := s.closeOverdueUnpaid(ctx, from, cutoff, limit)
		if err == nil {
			if len(closed) >= limit {
				cutoff = closed[len(closed)-1].Deadline
			}
			s.fireFrom.set(cutoff.Add(-fireLookBack))
		}
		for _, o := range closed {
			fired = append(fired, FiredTimer{Kind: CloseUnpaidArgs{}.Kind(), ScheduledAt: o.Deadline})
		}
		errs = append(errs, err)
	}
	jobs, err := s.fireDueJobs(ctx, queue, limit)
	return append(fired, jobs...), errors.Join(append(errs, err)...)
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
// deadline starts from (FireDueTimers): zero, the first, from the start.
type fireFrom struct{ ns atomic.Int64 }

func (f *fireFrom) at() time.Time {
	if ns := f.ns.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

func (f *fireFrom) set(t time.Time) { f.ns.Store(t.UnixNano()) }

// fireDueJobs is FireDueTimers's second transaction: the due jobs of queue
// that wait pending.
func (s *Store) fireDueJobs(ctx context.Context, queue string, limit int) ([]FiredTimer, error) {
	var fired []FiredTimer
	var closeIDs []int64
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		fired, closeIDs = nil, nil
		rows, err := tx.Query(ctx, dueTimersSQL, queue, limit)
		if err != nil {
			return fmt.Errorf("due timers: %w", err)
		}
		type due struct {
			ID          int64
			Kind        string
			Args        []byte
			ScheduledAt time.Time
		}
		jobs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[due])
		if err != nil {
			return fmt.Errorf("due timers: %w", err)
		}
		var closes []*closeRequest
		var others []int64
		for _, j := range jobs {
			fired = append(fired, FiredTimer{Kind: j.Kind, ScheduledAt: j.ScheduledAt})
			var args CloseUnpaidArgs
			if j.Kind != args.Kind() || json.Unmarshal(j.Args, &args) != nil {
				others = append(others, j.ID)
				continue
			}
			closes = append(closes, &closeRequest{merchantID: args.MerchantID, orderID: args.OrderID})
			closeIDs = append(closeIDs, j.ID)
		}
		if len(others) > 0 {
			if _, err := tx.Exec(ctx, `UPDATE river_job SET state = 'available' WHERE id = ANY($1)`, others); err != nil {
				return fmt.Errorf("make due timers available: %w", err)
			}
		}
		if len(closes) == 0 {
			return nil
		}
		if err := s.closeInTx(ctx, tx, closes); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM river_job WHERE id = ANY($1)`, closeIDs); err != nil {
			return fmt.Errorf("delete fired timers: %w", err)
		}
		return nil
	})
	if err != nil && len(closeIDs) > 0 {
		// River's workers close them one by one, with River's retries,
		// so that an order whose close fails holds up no other.
		if _, aerr := s.pool.Exec(ctx, `UPDATE river_job SET state = 'available' WHERE id = ANY($1) AND state = 'pending'`, closeIDs); aerr != nil {
			return nil, mapErr(fmt.Errorf("fire due timers: %w (handing them to River: %w)", err, aerr))
		}
	}
	if err != nil {
		return nil, mapErr(fmt.Errorf("fire due timers: %w", err))
	}
	return fired, nil
}

// dueTimersSQL locks the timers due by the database's clock, each
// priority's range of River's fetch index up to now (riverPriorities).
const dueTimersSQL = `SELECT due.id, due.kind, due.args, due.scheduled_at FROM ` + riverPriorities + ` p, LATERAL (
		SELECT id, kind, args, scheduled_at FROM river_job
		WHERE state = 'pending' AND queue = $1 AND priority = p AND scheduled_at <= now()
		ORDER BY scheduled_at, id LIMIT $2 FOR UPDATE SKIP LOCKED) due`

// ExpireQueuedOverdue expires up to limit queued orders whose wait limit is
// before cutoff and reports how many it found: the backstop behind the
// queue expiry timers.
func (s *Store) ExpireQueuedOverdue(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	type stay struct {
		ID       uuid.UUID
		QueuedAt time.Time
	}
	return sweepOverdue(ctx, s, "overdue queued", `SELECT id, queued_at FROM orders WHERE status = 'queued' AND queue_expires_at < $1
		ORDER BY queue_expires_at LIMIT $2`, cutoff, limit, func(q stay) error {
		_, err := s.ExpireQueued(ctx, q.ID, q.QueuedAt)
		return err
	})
}

// sweepOverdue is a backstop's round: it reads up to limit rows that query
// finds overdue at cutoff, hands each to act in order and reports how many
// it found. Each act commits on its own, so a round stopped by an error
// keeps what it did.
func sweepOverdue[T any](ctx context.Context, s *Store, what, query string, cutoff time.Time, limit int, act func(T) error) (int, error) {
	rows, err := s.pool.Query(ctx, query, cutoff, limit)
	if err != nil {
		return 0, mapErr(fmt.Errorf("%s: %w", what, err))
	}
	due, err := pgx.CollectRows(rows, pgx.RowToStructByPos[T])
	if err != nil {
		return 0, mapErr(fmt.Errorf("%s: %w", what, err))
	}
	for _, it := range due {
		if err := act(it); err != nil {
			return 0, err
		}
	}
	return len(due), nil
}
