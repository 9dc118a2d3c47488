package store

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/orderd/orderd/domain"
)

// dropEffects are what order changes do to drop entries: a paid drop order
// purchases its entry (a lapsed entry refuses the payment), one that ends
// unserved lapses it. It locks the entries after their orders, and leaves a
// nudge for each drop touched, which invites the next or sells out.
func (s *Store) dropEffects(ctx context.Context, tx pgx.Tx, changes []change, now time.Time) error {
	relevant := map[uuid.UUID]change{}
	var merchants, ids []uuid.UUID
	for _, c := range changes {
		paid := c.before.Version > 0 && c.before.PaidAt == nil && c.after.PaidAt != nil
		ended := c.before.Status.HoldsStock() && !c.after.Status.HoldsStock()
		if !paid && !ended {
			continue
		}
		relevant[c.after.ID] = c
		merchants, ids = append(merchants, c.after.MerchantID), append(ids, c.after.ID)
	}
	if len(ids) == 0 {
		return nil
	}
	entries, err := lockEntries(ctx, tx, `e.merchant_id = ANY($1) AND e.order_id = ANY($2) ORDER BY e.id FOR UPDATE`, merchants, ids)
	if err != nil || len(entries) == 0 {
		return err
	}
	var entryChanges []entryChange
	var jobs []river.InsertManyParams
	for _, e := range entries {
		c := relevant[e.OrderID]
		var events []domain.Event
		if c.after.PaidAt != nil && c.before.PaidAt == nil {
			if events, err = domain.PurchaseEntry(e, e.OrderID, now); err != nil {
				return err
			}
		}
		after, err := e.Apply(events...)
		if err != nil {
			return err
		}
		events = append(events, domain.LapseForOrder(after, c.after, now)...)
		ec, ok, err := newEntryChange(e, events, c.meta)
		if err != nil {
			return err
		}
		if ok {
			entryChanges = append(entryChanges, ec)
			jobs = append(jobs, settleJob(e.MerchantID, e.DropID, now))
		}
	}
	if err := writeEntries(ctx, tx, entryChanges, now); err != nil {
		return err
	}
	return s.insertJobs(ctx, tx, jobs)
}
