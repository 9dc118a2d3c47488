package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// QueueStat is one merchant's line as operators watch it.
type QueueStat struct {
	MerchantID uuid.UUID
	Queued     int
	// OldestWait is how long the longest-waiting queued order has waited.
	OldestWait time.Duration
}

// BusiestQueues returns the limit merchants with the most queued orders,
// most first. Metrics label by merchant, so a bounded list keeps the series
// count bounded however many merchants there are.
func (s *Store) BusiestQueues(ctx context.Context, limit int) ([]QueueStat, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT m.id, m.queued, COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - w.oldest), 0)::float8
		FROM (SELECT id, queued FROM merchants WHERE queued > 0 ORDER BY queued DESC, id LIMIT $1) m
		CROSS JOIN LATERAL (SELECT min(o.queued_at) AS oldest FROM orders o
			WHERE o.merchant_id = m.id AND o.status = 'queued') w
		ORDER BY m.queued DESC, m.id`, limit)
	if err != nil {
		return nil, mapErr(fmt.Errorf("busiest queues: %w", err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (QueueStat, error) {
		var q QueueStat
		var seconds float64
		err := row.Scan(&q.MerchantID, &q.Queued, &seconds)
		q.OldestWait = time.Duration(seconds * float64(time.Second))
		return q, err
	})
	return out, mapErr(err)
}

// QueueTotals are every merchant's lines together.
type QueueTotals struct {
	Queued    int
	Merchants int
}

// AllQueues sums the queued orders of every merchant, and counts the
// merchants with a line.
func (s *Store) AllQueues(ctx context.Context) (QueueTotals, error) {
	var t QueueTotals
	err := s.pool.QueryRow(ctx, `SELECT COALESCE(sum(queued), 0), count(*) FROM merchants WHERE queued > 0`).Scan(&t.Queued, &t.Merchants)
	return t, mapErr(err)
}

// JobCount is how many River jobs of one queue are in one state.
type JobCount struct {
	Queue string
	State string
	Count int
}

// UnfinishedJobs counts River's jobs that are still to run, running or
// waiting to be retried, per queue and state; finished jobs are counted as
// they finish (jobs.Metrics), not by scanning what River keeps of them.
func (s *Store) UnfinishedJobs(ctx context.Context) ([]JobCount, error) {
	rows, err := s.pool.Query(ctx, `SELECT queue, state::text, count(*) FROM river_job
		WHERE state IN ('available', 'pending', 'retryable', 'running', 'scheduled') GROUP BY 1, 2 ORDER BY 1, 2`)
	if err != nil {
		return nil, mapErr(fmt.Errorf("count jobs: %w", err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[JobCount])
	return out, mapErr(err)
}
