package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
)

// LiveOrders returns the current view of each order, for subscribers who
// just arrived or whose connection to the log was interrupted.
func (s *Store) LiveOrders(ctx context.Context, ids []uuid.UUID) ([]Order, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, orderViewQuery+` WHERE o.id = ANY($1)`, ids)
	if err != nil {
		return nil, mapErr(fmt.Errorf("live orders: %w", err))
	}
	views, err := scanOrderViews(rows, false)
	return views, mapErr(err)
}

// QueueRankings returns every queued order of the given merchants with its
// position and ETA: one query ranks each merchant's whole line, however
// many people watch it.
func (s *Store) QueueRankings(ctx context.Context, merchantIDs []uuid.UUID) ([]Order, error) {
	if len(merchantIDs) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+orderColumns+`,
		row_number() OVER (PARTITION BY o.merchant_id ORDER BY o.queue_seq)::int,
		m.capacity, m.prep_seconds, m.completion_interval_s, m.completion_samples
		FROM orders o JOIN merchants m ON m.id = o.merchant_id
		WHERE o.merchant_id = ANY($1) AND o.status = 'queued'`, merchantIDs)
	if err != nil {
		return nil, mapErr(fmt.Errorf("queue rankings: %w", err))
	}
	views, err := scanOrderViews(rows, false)
	return views, mapErr(err)
}

// OrderMerchants maps orders to their merchants.
func (s *Store) OrderMerchants(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]uuid.UUID, error) {
	out := map[uuid.UUID]uuid.UUID{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id, merchant_id FROM orders WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, mapErr(fmt.Errorf("order merchants: %w", err))
	}
	defer rows.Close()
	for rows.Next() {
		var o, m uuid.UUID
		if err := rows.Scan(&o, &m); err != nil {
			return nil, mapErr(err)
		}
		out[o] = m
	}
	return out, mapErr(rows.Err())
}

// MerchantLoads returns the live load of each merchant.
func (s *Store) MerchantLoads(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]Load, error) {
	out := map[uuid.UUID]Load{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+merchantColumns+` FROM merchants WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, mapErr(fmt.Errorf("merchant loads: %w", err))
	}
	defer rows.Close()
	for rows.Next() {
		m, err := scanMerchant(rows)
		if err != nil {
			return nil, mapErr(err)
		}
		out[m.ID] = m.Load
	}
	return out, mapErr(rows.Err())
}
