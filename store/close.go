package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orderd/orderd/domain"
)

type closeRequest struct {
	// merchantID is the order's merchant when the caller knows it.
	merchantID uuid.UUID
	orderID    uuid.UUID
	closed     bool
	err        error
	done       chan struct{}
}

// CloseUnpaid closes an order still unpaid at its deadline and releases its
// stock and claims; it does nothing for any other order, so the timer may
// fire late, twice, or after payment. It reports whether the order was
// closed. Concurrent calls share transactions: a burst of deadlines closes
// as a few batches. merchantID may be uuid.Nil when the caller does not know
// it; the batch then looks it up.
func (s *Store) CloseUnpaid(ctx context.Context, merchantID, orderID uuid.UUID) (bool, error) {
	req := &closeRequest{merchantID: merchantID, orderID: orderID, done: make(chan struct{})}
	s.closer.Submit(req)
	select {
	case <-req.done:
		return req.closed, req.err
	case <-ctx.Done():
		return false, mapErr(ctx.Err())
	}
}

func (s *Store) closeBatch(batch []*closeRequest) {
	ctx, cancel := context.WithTimeout(context.Background(), placeBatchTimeout)
	defer cancel()
	if groups := s.closeGroups(ctx, batch); len(groups) > 1 {
		for _, g := range groups {
			s.closeBatch(g)
		}
		return
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error { return s.closeInTx(ctx, tx, batch) })
	if err != nil && len(batch) > 1 && domain.ErrorCode(err) != domain.CodeUnavailable {
		for _, req := range batch {
			s.closeBatch([]*closeRequest{req})
		}
		return
	}
	for _, req := range batch {
		if err != nil {
			req.closed, req.err = false, err
		}
		close(req.done)
	}
}

// closeInTx locks the batch's orders in id order, closes those still unpaid
// past their deadline, and releases what they held, a few statements for
// the whole batch.
func (s *Store) closeInTx(ctx context.Context, tx pgx.Tx, batch []*closeRequest) error {
	if err := findMerchants(ctx, tx, batch); err != nil {
		return err
	}
	ids, merchants := make([][16]byte, len(batch)), make([][16]byte, len(batch))
	for i, req := range batch {
		ids[i], merchants[i], req.closed = req.orderID, req.merchantID, false
	}
	rows, err := tx.Query(ctx, `SELECT `+orderColumns+` FROM orders o WHERE o.id = ANY($1) AND o.merchant_id = ANY($2)
		ORDER BY o.id FOR UPDATE`, ids, merchants)
	if err != nil {
		return fmt.Errorf("lock orders: %w", err)
	}
	var orders []domain.Order
	for rows.Next() {
		var o domain.Order
		if err := rows.Scan(scanOrderInto(&o)...); err != nil {
			rows.Close()
			return fmt.Errorf("scan order: %w", err)
		}
		orders = append(orders, o)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("lock orders: %w", err)
	}
	// The decisions' time, read once the orders' locks are held.
	now := s.now()
	for _, o := range orders {
		now = domain.DecisionTime(now, o.LastDecidedAt())
	}
	closed := map[string]bool{}
	var changes []change
	var released releasedUnits
	for _, o := range orders {
		events := domain.Close(o, now)
		if len(events) == 0 {
			continue
		}
		after, err := o.Apply(events...)
		if err != nil {
			return err
		}
		changes = append(changes, change{before: o, after: after, events: events, meta: Meta{Actor: domain.ActorSystem}})
		released.add(o)
		closed[o.ID] = true
	}
	if len(changes) > 0 {
		if err := s.commitChanges(ctx, tx, changes, nil, now); err != nil {
			return fmt.Errorf("close orders: %w", err)
		}
		if err := releaseUnits(ctx, tx, released); err != nil {
			return err
		}
	}
	for _, req := range batch {
		req.closed = closed[req.orderID.String()]
	}
	return nil
}

// findMerchants reads, without a lock, the merchant of the orders whose
// caller named none, so that the orders' locks name their merchants (an
// order never changes merchant).
func findMerchants(ctx context.Context, tx querier, batch []*closeRequest) error {
	var unknown [][16]byte
	for _, req := range batch {
		if req.merchantID == uuid.Nil {
			unknown = append(unknown, req.orderID)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT id, merchant_id FROM orders WHERE id = ANY($1)`, unknown)
	if err != nil {
		return fmt.Errorf("find orders' merchants: %w", err)
	}
	found := map[uuid.UUID]uuid.UUID{}
	for rows.Next() {
		var id, merchant uuid.UUID
		if err := rows.Scan(&id, &merchant); err != nil {
			rows.Close()
			return fmt.Errorf("find orders' merchants: %w", err)
		}
		found[id] = merchant
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("find orders' merchants: %w", err)
	}
	for _, req := range batch {
		if req.merchantID == uuid.Nil {
			req.merchantID = found[req.orderID]
		}
	}
	return nil
}

// closeOverdueBatch is the sweep's way in: the same batched close.
func (s *Store) closeOverdueBatch(ctx context.Context, orders []orderRef) error {
	reqs := make([]*closeRequest, len(orders))
	for i, o := range orders {
		reqs[i] = &closeRequest{merchantID: o.MerchantID, orderID: o.ID, done: make(chan struct{})}
	}
	for _, g := range s.closeGroups(ctx, reqs) {
		if err := s.inTx(ctx, func(tx pgx.Tx) error { return s.closeInTx(ctx, tx, g) }); err != nil {
			return err
		}
	}
	return nil
}

// closeGroups is how a batch of closes is split into transactions: one on
// one PostgreSQL; one per merchant on Citus, where a transaction that writes
// several merchants' rows spans shards (see byMerchant).
func (s *Store) closeGroups(ctx context.Context, batch []*closeRequest) [][]*closeRequest {
	if citus, err := s.onCitus(ctx); err != nil || !citus {
		return [][]*closeRequest{batch}
	}
	if err := findMerchants(ctx, s.pool, batch); err != nil {
		// The batch's own transaction meets the same trouble and reports it.
		return [][]*closeRequest{batch}
	}
	return byMerchant(batch, func(r *closeRequest) uuid.UUID { return r.merchantID })
}

// byMerchant splits items by merchant, keeping their order within each and
// ordering the groups by their first item. On Citus, a transaction that
// writes several merchants' rows spans shards and commits in two phases,
// the coordinator's first, so that the log reader could read past an event
// before the worker holding it commits; batches of several merchants are
// therefore decided merchant by merchant there.
func byMerchant[T any](items []T, merchant func(T) uuid.UUID) [][]T {
	index := map[uuid.UUID]int{}
	var groups [][]T
	for _, it := range items {
		m := merchant(it)
		i, ok := index[m]
		if !ok {
			i = len(groups)
			index[m] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], it)
	}
	return groups
}

// orderRef names an order with its merchant.
type orderRef struct {
	ID, MerchantID uuid.UUID
}
