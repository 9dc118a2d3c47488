package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// riverPriorities lists River's priorities as rows, for a read of River's
// fetch index (state, queue, priority, scheduled_at, id) up to a moment:
// with state, queue and one priority equal, scheduled_at bounds the range.
// Naming the priorities in one IN list does not: PostgreSQL checks the list
// against each entry of the state and queue's whole range, so the read
// visits every timer set, however far ahead.
const riverPriorities = `unnest('{1,2,3,4}'::smallint[])`

// TimerLook is what a look at River's timers queue found (LookAtTimers).
type TimerLook struct {
	// Promoted is how many pending jobs it made available.
	Promoted int
	// Overdue are the kinds of timer with a job still pending at the
	// cutoff: pending, scheduled, available, running (in a process that
	// may have died with it) or retryable with an earlier scheduled_at.
	Overdue []string
	// Next is how long until a job falls due, or until one due or running
	// is a grace period past its deadline, by the database's clock; 0
	// when the queue holds none.
	Next time.Duration
}

// LookAtTimers makes the jobs of queue that wait pending and are due by
// the database's clock available, up to limit of them, wakes River's fetch
// of the queue in every process (River's insert notification) when a job
// is due there, and reports what it found, in one statement: on Citus,
// where River's tables are the coordinator's, a process looks when a timer
// falls due, or a grace period after, rather than River's fetch, the
// promotion and the backstop's read of overdue kinds each polling it
// several times a second (jobs.Backstop).
func (s *Store) LookAtTimers(ctx context.Context, queue string, cutoff time.Time, grace time.Duration, limit int) (TimerLook, error) {
	var look TimerLook
	var next *time.Duration
	if err := s.pool.QueryRow(ctx, lookAtTimersSQL, queue, time.Duration(0), limit, cutoff, grace).Scan(&look.Promoted, &look.Overdue, &next); err != nil {
		return TimerLook{}, mapErr(fmt.Errorf("look at timers: %w", err))
	}
	if next != nil {
		look.Next = max(*next, time.Millisecond)
	}
	return look, nil
}

// lookAtTimersSQL promotes as promoteTimersSQL does; reads the kinds with
// a job pending at $4 and the next moment, each by a read of River's fetch
// index for every state and priority up to a moment (riverPriorities): the
// next deadline, or a moment past the next deadline plus the grace $5, so
// that the next look's cutoff has passed it; and
// notifies River's producers of queue (their insert notification, which
// each answers with a fetch) when a job is due. The statement's parts share
// its snapshot, which the promotion's update does not change, so a promoted
// job still counts as pending and due.
const lookAtTimersSQL = `WITH promoted AS (` + promoteTimersSQL + ` RETURNING 1),
look AS (
	SELECT (SELECT count(*) FROM promoted)::int AS promoted,
		EXISTS (SELECT FROM unnest('{pending,available}'::river_job_state[]) st, ` + riverPriorities + ` p,
			LATERAL (SELECT FROM river_job WHERE state = st AND queue = $1 AND priority = p AND scheduled_at <= now() LIMIT 1) j) AS due,
		ARRAY(SELECT DISTINCT j.kind FROM unnest('{pending,scheduled,available,running,retryable}'::river_job_state[]) st, ` + riverPriorities + ` p,
			LATERAL (SELECT kind FROM river_job WHERE state = st AND queue = $1 AND priority = p AND scheduled_at < $4) j) AS overdue,
		least(
			(SELECT min(j.at) FROM unnest('{pending,available}'::river_job_state[]) st, ` + riverPriorities + ` p,
				LATERAL (SELECT scheduled_at AS at FROM river_job WHERE state = st AND queue = $1 AND priority = p AND scheduled_at > now()
					ORDER BY scheduled_at LIMIT 1) j),
			(SELECT min(j.at) FROM unnest('{pending,scheduled,available,running,retryable}'::river_job_state[]) st, ` + riverPriorities + ` p,
				LATERAL (SELECT scheduled_at AS at FROM river_job WHERE state = st AND queue = $1 AND priority = p AND scheduled_at >= now() - $5::interval
					ORDER BY scheduled_at LIMIT 1) j) + $5::interval + interval '10 milliseconds'
		) - now() AS next
	FROM (SELECT) one
)
SELECT promoted, overdue, next FROM look
	LEFT JOIN LATERAL (SELECT pg_notify(current_schema() || '.river_insert', json_build_object('queue', $1::text)::text) WHERE look.due) woken ON true`

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
	return sweepOverdueJoined(ctx, s, what, table, func(name func(string) string) string { return query(name(table)) }, cutoff, limit, act)
}

// sweepOverdueJoined is sweepOverdue for a query that joins table to tables
// co-located with it, each named by name (readEachNodeJoined).
func sweepOverdueJoined[T any](ctx context.Context, s *Store, what, table string, query func(name func(string) string) string, cutoff time.Time, limit int, act func(T) error) (int, error) {
	due, err := readEachNodeJoined(ctx, s, table, query, limit, pgx.RowToStructByPos[T], cutoff, limit)
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
