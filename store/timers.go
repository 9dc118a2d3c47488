package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// CloseUnpaidOverdue closes up to limit unpaid orders whose payment deadline
// is before cutoff, in one batch, and reports how many it found: the
// backstop behind the payment timers, which should have closed them already.
func (s *Store) CloseUnpaidOverdue(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, merchant_id FROM orders WHERE status = 'awaiting_payment' AND payment_deadline < $1
		ORDER BY payment_deadline LIMIT $2`, cutoff, limit)
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

// OverdueTimerKinds lists the kinds of timer that have a job in River's
// queue still pending at cutoff (available, running or retryable with an
// earlier scheduled_at): a timer River has not fired in time, or fired in a
// process that died with it. It reads River's table, on one node, where a
// backstop's own reads would visit every shard of a cluster.
func (s *Store) OverdueTimerKinds(ctx context.Context, queue string, cutoff time.Time) ([]string, error) {
	// Naming every priority lets the fetch index bound scheduled_at, so
	// that the timers not yet due are not read.
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT kind FROM river_job
		WHERE state IN ('available', 'running', 'retryable') AND queue = $1 AND priority IN (1, 2, 3, 4) AND scheduled_at < $2`, queue, cutoff)
	if err != nil {
		return nil, mapErr(fmt.Errorf("overdue timer jobs: %w", err))
	}
	kinds, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, mapErr(fmt.Errorf("overdue timer jobs: %w", err))
	}
	return kinds, nil
}

// PromoteTimers makes the timer jobs of queue that wait `scheduled` and fall
// due within ahead of the database's clock available, keeping their
// scheduled_at, up to limit of them, and reports how many it promoted.
// River's fetch takes an available job only once its scheduled_at has
// passed, but it reads every available job of its queue on each fetch: its
// index orders by priority before scheduled_at, so its range cannot stop at
// now. Timers set further ahead therefore wait scheduled, outside that
// range, until they come within ahead of their deadline. Rows another
// process is promoting are skipped, not waited for.
func (s *Store) PromoteTimers(ctx context.Context, queue string, ahead time.Duration, limit int) (int, error) {
	// Naming every priority bounds the index range by scheduled_at, as in
	// OverdueTimerKinds. River's own rule for unique jobs holds: their
	// unique states always include both scheduled and available, so a
	// promotion cannot collide with another job's key.
	tag, err := s.pool.Exec(ctx, `UPDATE river_job j SET state = 'available'
		FROM (SELECT id FROM river_job WHERE state = 'scheduled' AND queue = $1 AND priority IN (1, 2, 3, 4)
		        AND scheduled_at <= now() + $2::interval
		      ORDER BY priority, scheduled_at, id LIMIT $3 FOR UPDATE SKIP LOCKED) due
		WHERE j.id = due.id`, queue, ahead, limit)
	if err != nil {
		return 0, mapErr(fmt.Errorf("promote timers: %w", err))
	}
	return int(tag.RowsAffected()), nil
}

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
