package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

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

// FiredTimer is a timer fired on one PostgreSQL (FireDueTimers,
// CloseDueUnpaid): its kind and its deadline.
type FiredTimer struct {
	Kind        string
	ScheduledAt time.Time
}

// FireDueTimers fires, on one PostgreSQL, the River jobs of queue that wait
// pending and are due by the database's clock, up to limit: it makes them
// available for River's workers, as PromoteTimers does on Citus ahead of
// their deadline, and reports them. A process that dies before committing
// leaves them pending, and the next look of any process fires them. A
// payment deadline has no job here (its order is its own timer,
// CloseDueUnpaid); one set before it was is fired like any other, and its
// worker, like that, closes the order only if still unpaid past its
// deadline.
func (s *Store) FireDueTimers(ctx context.Context, queue string, limit int) ([]FiredTimer, error) {
	rows, err := s.pool.Query(ctx, promoteTimersSQL+` RETURNING kind, scheduled_at`, queue, time.Duration(0), limit)
	if err != nil {
		return nil, mapErr(fmt.Errorf("fire due timers: %w", err))
	}
	fired, err := pgx.CollectRows(rows, pgx.RowToStructByPos[FiredTimer])
	if err != nil {
		return nil, mapErr(fmt.Errorf("fire due timers: %w", err))
	}
	return fired, nil
}

// sweepOverdue is a backstop's round: it reads up to limit rows that query
// (given the name of table, or on Citus of each of a worker's shards of it:
// readEachNode) finds overdue at cutoff, hands each to act in order and
// reports how many it found. Each act commits on its own, so a round
// stopped by an error keeps what it did.
func sweepOverdue[T any](ctx context.Context, s *Store, what, table string, query func(from string) string, cutoff time.Time, limit int, act func(T) error) (int, error) {
	due, err := readEachNode(ctx, s, table, query, limit, pgx.RowToStructByPos[T], cutoff, limit)
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
