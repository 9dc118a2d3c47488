package store

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/orderd/orderd/domain"
)

// claimInvitations attaches the order being placed to the customer's
// invitation in the drop of every product that has one, or refuses it: a
// drop's product is sold only to its invited customers, one unit, one order
// per invitation, before the window ends. It returns the entries' changes
// and the earliest purchase deadline, which bounds the order's payment
// deadline (nil when no product is in a drop).
func claimInvitations(ctx context.Context, tx pgx.Tx, merchantID uuid.UUID, products map[string]productInfo,
	lines []domain.LineRequest, customerID string, orderID uuid.UUID, now time.Time,
) ([]entryChange, *time.Time, error) {
	var changes []entryChange
	var deadline *time.Time
	for _, l := range lines {
		dropID := products[l.ProductID].dropID
		if dropID == uuid.Nil {
			continue
		}
		if l.Quantity != 1 {
			return nil, nil, domain.Errorf(domain.CodeValidation, "a drop sells one unit of product %s per order", l.ProductID)
		}
		entries, err := lockEntries(ctx, tx, `e.merchant_id = $1 AND e.drop_id = $2 AND e.customer_id = $3 FOR UPDATE`,
			merchantID, dropID, customerID)
		if err != nil {
			return nil, nil, err
		}
		if len(entries) == 0 {
			return nil, nil, domain.ErrNotInvited
		}
		events, err := domain.OrderForEntry(entries[0], customerID, orderID, now)
		if err != nil {
			return nil, nil, err
		}
		c, _, err := newEntryChange(entries[0], events, Meta{Actor: domain.ActorCustomer, Subject: customerID})
		if err != nil {
			return nil, nil, err
		}
		changes = append(changes, c)
		if deadline == nil || c.after.PurchaseDeadline.Before(*deadline) {
			deadline = c.after.PurchaseDeadline
		}
	}
	return changes, deadline, nil
}

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
		id := uuid.MustParse(c.after.ID)
		relevant[id] = c
		merchants, ids = append(merchants, uuid.MustParse(c.after.MerchantID)), append(ids, id)
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
