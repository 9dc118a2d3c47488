package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/orderd/orderd/domain"
)

// UnrankedOrders returns the current view of each order without its place
// in line, for readers that rank lines themselves (QueuePositions): counting
// the orders ahead of each one costs a scan of the line per order.
func (s *Store) UnrankedOrders(ctx context.Context, ids []uuid.UUID) ([]OrderView, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+orderColumns+`, NULL::int, NULL::int, `+etaColumns+`
		FROM orders o JOIN merchants m ON m.id = o.merchant_id WHERE o.id = ANY($1)`, ids)
	if err != nil {
		return nil, mapErr(fmt.Errorf("unranked orders: %w", err))
	}
	views, err := scanOrderViews(rows, false)
	return views, mapErr(err)
}

// GetUnrankedOrder is GetOrder without the order's place in line, for
// readers that take it from a ranking of the whole line: counting the
// orders ahead of one far back in a long line reads every one of them.
func (s *Store) GetUnrankedOrder(ctx context.Context, id uuid.UUID, access domain.Party) (*OrderView, error) {
	views, err := s.UnrankedOrders(ctx, []uuid.UUID{id})
	if err != nil {
		return nil, err
	}
	if len(views) == 0 || !access.MaySeeOrder(views[0].CustomerID, views[0].MerchantID) {
		return nil, errOrderNotFound
	}
	return &views[0], nil
}

// QueuePosition is a queued order's place in its merchant's line.
type QueuePosition struct {
	OrderID    uuid.UUID
	Version    int
	Position   int
	EtaSeconds int
	// LineSeq is as in Order.
	LineSeq int64
}

// QueuePositions returns the place of every queued order of the given
// merchants: one query ranks each merchant's whole line, however many people
// watch it, and reads no more of each order than its version, so that a
// reader holding an order's view at that version only moves it in the line.
func (s *Store) QueuePositions(ctx context.Context, merchantIDs []uuid.UUID) ([]QueuePosition, error) {
	if len(merchantIDs) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, queuePositionsSQL, merchantIDs)
	if err != nil {
		return nil, mapErr(fmt.Errorf("queue positions: %w", err))
	}
	defer rows.Close()
	var out []QueuePosition
	for rows.Next() {
		var p QueuePosition
		var through, load int
		var basis etaBasis
		if err := rows.Scan(append([]any{&p.OrderID, &p.Version, &p.Position, &through, &load}, basis.dest()...)...); err != nil {
			return nil, mapErr(fmt.Errorf("queue positions: %w", err))
		}
		p.EtaSeconds, p.LineSeq = basis.Wait(through-load, load), basis.lineSeq
		out = append(out, p)
	}
	return out, mapErr(rows.Err())
}

// queuePositionsSQL ranks each merchant's line: the priority lane
// ('priority' > 'normal') first, each in sequence order; units_through sums
// the loads up to and including each. The merchant is read once and its line
// ranked beside it: a join of each queued order to its merchant was planned,
// on the estimates of a line that had just grown, as a probe of the merchant
// row per order, and the row of a merchant whose line moves is a long chain
// of versions.
const queuePositionsSQL = `SELECT r.id, r.version, r.position, r.through, r.load, ` + etaColumns + `
	FROM merchants m CROSS JOIN LATERAL (
		SELECT o.id, o.version, (row_number() OVER w)::int AS position, (sum(o.load) OVER w)::int AS through, o.load
		FROM orders o WHERE o.merchant_id = m.id AND o.status = 'queued'
		WINDOW w AS (ORDER BY o.lane DESC, o.queue_seq)) r
	WHERE m.id = ANY($1)`

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
func (s *Store) MerchantLoads(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]LoadView, error) {
	out := map[uuid.UUID]LoadView{}
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
		m.Load.setStatus(domain.StatusOf(m.load(), m.pause, m.PrepSeconds, m.stats))
		out[m.ID] = m.Load
	}
	return out, mapErr(rows.Err())
}
