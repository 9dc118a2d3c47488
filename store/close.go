package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store/pgkit"
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
// closed: not when another transaction holds the order (closeInTx).
// Concurrent calls share transactions: a burst of deadlines closes
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
	if batch[0].merchantID == uuid.Nil && s.splitOnCitus() {
		s.closeFindingMerchants(ctx, batch)
		return
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error { return s.closeInTx(ctx, tx, batch) })
	if err != nil && len(batch) > 1 && domain.ErrorCode(err) != domain.CodeUnavailable {
		for _, req := range batch {
			s.closeBatch([]*closeRequest{req})
		}
		return
	}
	answerCloses(batch, err)
}

// closeFindingMerchants closes, on Citus, the requests whose callers named
// no merchant, which a batch split by merchant hands over together: it
// reads their merchants, then closes each merchant's in a transaction of
// its own (jobs from before timers carried their merchant; few).
func (s *Store) closeFindingMerchants(ctx context.Context, batch []*closeRequest) {
	if err := findMerchants(ctx, s.pool, batch); err != nil {
		answerCloses(batch, mapErr(err))
		return
	}
	for _, g := range pgkit.GroupBy(batch, closeMerchant) {
		if g[0].merchantID == uuid.Nil {
			answerCloses(g, nil) // no such order: nothing to close
			continue
		}
		s.closeBatch(g)
	}
}

// answerCloses answers a batch's callers: with err, as not closed.
func answerCloses(batch []*closeRequest, err error) {
	for _, req := range batch {
		if err != nil {
			req.closed, req.err = false, err
		}
		close(req.done)
	}
}

func closeMerchant(r *closeRequest) uuid.UUID { return r.merchantID }

// closeInTx locks the batch's orders in id order, closes those still unpaid
// past their deadline, and releases what they held, a few statements for
// the whole batch. It skips an order another transaction holds: a payment
// deciding it, or another close (a River job's batch and a backstop's round
// find the same overdue orders), which would otherwise make each batch wait
// for every one before it, all of it then held by the first batch's writes.
// A skipped order that the holder leaves unpaid is still overdue, and the
// backstop of its timer closes it a grace period later.
func (s *Store) closeInTx(ctx context.Context, tx pgx.Tx, batch []*closeRequest) error {
	if err := findMerchants(ctx, tx, batch); err != nil {
		return err
	}
	ids, merchants := make([][16]byte, len(batch)), make([][16]byte, len(batch))
	for i, req := range batch {
		ids[i], merchants[i], req.closed = req.orderID, req.merchantID, false
	}
	rows, err := tx.Query(ctx, `SELECT `+orderColumns+` FROM orders o WHERE o.id = ANY($1) AND o.merchant_id = ANY($2)
		ORDER BY o.id FOR UPDATE SKIP LOCKED`, ids, merchants)
	if err != nil {
		return fmt.Errorf("lock orders: %w", err)
	}
	orders, err := scanOrders(rows)
	if err != nil {
		return fmt.Errorf("lock orders: %w", err)
	}
	// The decisions' time, read once the orders' locks are held.
	now := s.now()
	for _, o := range orders {
		now = domain.DecisionTime(now, o.LastDecidedAt())
	}
	closed := map[uuid.UUID]bool{}
	var changes []change
	var released releasedUnits
	var slots []slotTake
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
		if r, ok := slotReturn(o, after); ok {
			slots = append(slots, r)
		}
		closed[o.ID] = true
	}
	if len(changes) > 0 {
		if err := s.commit(ctx, tx, writeSet{changes: changes, slotReturns: slots}, now); err != nil {
			return fmt.Errorf("close orders: %w", err)
		}
		if err := releaseUnits(ctx, tx, released); err != nil {
			return err
		}
	}
	for _, req := range batch {
		req.closed = closed[req.orderID]
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

// closeOverdueBatch is the sweep's way in: the same batched close, one
// merchant per transaction on Citus (splitOnCitus).
func (s *Store) closeOverdueBatch(ctx context.Context, orders []orderRef) error {
	reqs := closeRequests(orders)
	groups := [][]*closeRequest{reqs}
	if s.splitOnCitus() {
		groups = pgkit.GroupBy(reqs, closeMerchant)
	}
	for _, g := range groups {
		if err := s.inTx(ctx, func(tx pgx.Tx) error { return s.closeInTx(ctx, tx, g) }); err != nil {
			return err
		}
	}
	return nil
}

// closeRequests asks to close orders, for a caller that closes them itself.
func closeRequests(orders []orderRef) []*closeRequest {
	reqs := make([]*closeRequest, len(orders))
	for i, o := range orders {
		reqs[i] = &closeRequest{merchantID: o.MerchantID, orderID: o.ID, done: make(chan struct{})}
	}
	return reqs
}

// orderRef names an order with its merchant.
type orderRef struct {
	ID, MerchantID uuid.UUID
}
