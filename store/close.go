package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orderd/orderd/domain"
)

type closeRequest struct {
	orderID uuid.UUID
	closed  bool
	err     error
	done    chan struct{}
}

// CloseUnpaid closes an order still unpaid at its deadline and releases its
// stock and claims; it does nothing for any other order, so the timer may
// fire late, twice, or after payment. It reports whether the order was
// closed. Concurrent calls share transactions: a burst of deadlines closes
// as a few batches.
func (s *Store) CloseUnpaid(ctx context.Context, orderID uuid.UUID) (bool, error) {
	req := &closeRequest{orderID: orderID, done: make(chan struct{})}
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
	ids := make([]uuid.UUID, len(batch))
	for i, req := range batch {
		ids[i], req.closed = req.orderID, false
	}
	rows, err := tx.Query(ctx, `SELECT `+orderColumns+` FROM orders o WHERE o.id = ANY($1) ORDER BY o.id FOR UPDATE`, ids)
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
	closed := map[string]bool{}
	var changes []change
	var customers, products []string
	var quantities []int32
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
		for _, it := range o.Items {
			customers, products, quantities = append(customers, o.CustomerID), append(products, it.ProductID), append(quantities, int32(it.Quantity))
		}
		closed[o.ID] = true
	}
	if len(changes) > 0 {
		if err := s.commitChanges(ctx, tx, changes, nil, now); err != nil {
			return fmt.Errorf("close orders: %w", err)
		}
		if err := releaseUnits(ctx, tx, customers, products, quantities); err != nil {
			return err
		}
	}
	for _, req := range batch {
		req.closed = closed[req.orderID.String()]
	}
	return nil
}

// closeOverdueBatch is the sweep's way in: the same batched close.
func (s *Store) closeOverdueBatch(ctx context.Context, ids []uuid.UUID) error {
	reqs := make([]*closeRequest, len(ids))
	for i, id := range ids {
		reqs[i] = &closeRequest{orderID: id, done: make(chan struct{})}
	}
	return s.inTx(ctx, func(tx pgx.Tx) error { return s.closeInTx(ctx, tx, reqs) })
}
