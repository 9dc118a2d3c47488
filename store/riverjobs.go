package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store/pgkit"
)

// expiryJobs are the jobs that expire a queued order past its wait limit:
// none on one PostgreSQL, where the order's limit in
// orders_queue_expiry_idx is its timer (ExpireDueQueued); on Citus the
// orders' shards are not read for it, and a River job is.
func (s *Store) expiryJobs(o domain.Order) []river.InsertManyParams {
	if !s.splitOnCitus() {
		return nil
	}
	return []river.InsertManyParams{{
		Args:       ExpireQueuedArgs{OrderID: o.ID, QueuedAt: *o.QueuedAt},
		InsertOpts: &river.InsertOpts{ScheduledAt: *o.QueueExpiresAt},
	}}
}

func (s *Store) insertJobs(ctx context.Context, tx pgx.Tx, jobs []river.InsertManyParams) error {
	if len(jobs) == 0 {
		return nil
	}
	if t, ok := tx.(*txn); ok && t.node != "" {
		// River's tables are not on a worker (insertJobsWithCommit).
		t.jobsAfter = append(t.jobsAfter, jobs...)
		return nil
	}
	if s.cfg.Jobs == nil {
		return errors.New("insert jobs: store has no job inserter")
	}
	if _, err := s.cfg.Jobs.InsertManyTx(ctx, tx, jobs); err != nil {
		return fmt.Errorf("insert jobs: %w", err)
	}
	return nil
}

// insertJobsWithCommit inserts jobs in tx, whose pipelined transaction is
// pt, so that those River may insert by copy travel with pt's next batch,
// its commit, instead of taking a round trip while the transaction holds
// its locks. Unique jobs, whose conflicts a copy cannot settle, go at once.
// A transaction on a Citus worker, where River's tables are not, leaves its
// jobs to be inserted on the coordinator once it commits (insertJobsAfter).
func (s *Store) insertJobsWithCommit(ctx context.Context, tx pgx.Tx, pt *pgkit.PipelinedTx, jobs []river.InsertManyParams) error {
	if t, ok := tx.(*txn); ok && t.node != "" {
		t.jobsAfter = append(t.jobsAfter, jobs...)
		return nil
	}
	var copied, unique []river.InsertManyParams
	for _, j := range jobs {
		if isUniqueJob(j) {
			unique = append(unique, j)
		} else {
			copied = append(copied, j)
		}
	}
	if err := s.insertJobs(ctx, tx, unique); err != nil {
		return err
	}
	if len(copied) == 0 {
		return nil
	}
	if s.cfg.Jobs == nil {
		return errors.New("insert jobs: store has no job inserter")
	}
	return pt.Deferring(func() error {
		if _, err := s.cfg.Jobs.InsertManyFastTx(ctx, tx, copied); err != nil {
			return fmt.Errorf("insert jobs: %w", err)
		}
		return nil
	})
}

// isUniqueJob reports whether River keeps j unique, by its own options or
// its args' defaults.
func isUniqueJob(j river.InsertManyParams) bool {
	unique := func(u river.UniqueOpts) bool {
		return u.ByArgs || u.ByPeriod != 0 || u.ByQueue || len(u.ByState) > 0
	}
	if j.InsertOpts != nil && unique(j.InsertOpts.UniqueOpts) {
		return true
	}
	withOpts, ok := j.Args.(river.JobArgsWithInsertOpts)
	return ok && unique(withOpts.InsertOpts().UniqueOpts)
}
