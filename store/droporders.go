package store

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orderd/orderd/domain"
)

// orderEntry is a drop entry, locked, and the change of its order that may
// change it.
type orderEntry struct {
	entry domain.Entry
	order change
}

// lockOrderEntries locks the drop entries of the orders whose changes
// domain.ChangesEntry says may change them, after the orders' own locks (the
// store's lock order), so that the store file deciding the orders asks
// domain.EntryAfterOrder what becomes of each (writeSet.addEntry).
func lockOrderEntries(ctx context.Context, tx pgx.Tx, changes []change) ([]orderEntry, error) {
	relevant := map[uuid.UUID]change{}
	var merchants, ids []uuid.UUID
	for _, c := range changes {
		if !domain.ChangesEntry(c.before, c.after) {
			continue
		}
		relevant[c.after.ID] = c
		merchants, ids = append(merchants, c.after.MerchantID), append(ids, c.after.ID)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	entries, err := lockEntries(ctx, tx, `e.merchant_id = ANY($1) AND e.order_id = ANY($2) ORDER BY e.id FOR UPDATE`, merchants, ids)
	if err != nil {
		return nil, err
	}
	locked := make([]orderEntry, len(entries))
	for i, e := range entries {
		locked[i] = orderEntry{entry: e, order: relevant[e.OrderID]}
	}
	return locked, nil
}
