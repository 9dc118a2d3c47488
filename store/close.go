package store

import (
	"context"
	"encoding/json"
	"errors"
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
	s.closer.submit(req)
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
	meta, err := json.Marshal(Meta{Actor: domain.ActorSystem})
	if err != nil {
		return err
	}
	closed := map[string]bool{}
	var eventRows [][]any
	var updIDs []uuid.UUID
	var updVersions []int32
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
		data, err := json.Marshal(events[0].Data)
		if err != nil {
			return fmt.Errorf("encode event: %w", err)
		}
		id := uuid.MustParse(o.ID)
		eventRows = append(eventRows, []any{id, StreamOrder, int32(after.Version), events[0].Type, data, meta, now})
		updIDs, updVersions = append(updIDs, id), append(updVersions, int32(after.Version))
		for _, it := range o.Items {
			customers, products, quantities = append(customers, o.CustomerID), append(products, it.ProductID), append(quantities, int32(it.Quantity))
		}
		closed[o.ID] = true
		noteTransition(tx, o.Status, after.Status)
	}
	if len(updIDs) > 0 {
		noteEvents(tx)
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"events"},
			[]string{"stream_id", "stream_type", "version", "type", "data", "metadata", "recorded_at"}, pgx.CopyFromRows(eventRows)); err != nil {
			var pgErr interface{ SQLState() string }
			if errors.As(err, &pgErr) && pgErr.SQLState() == "23505" {
				return fmt.Errorf("close orders: %w", ErrVersionConflict)
			}
			return fmt.Errorf("append close events: %w", err)
		}
		if _, err := tx.Exec(ctx, `
			UPDATE orders o SET status = 'closed', version = t.v, ended_at = $3, status_reason = $4
			FROM unnest($1::uuid[], $2::int[]) AS t(id, v) WHERE o.id = t.id`,
			updIDs, updVersions, now, domain.ReasonPaymentTimeout); err != nil {
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
