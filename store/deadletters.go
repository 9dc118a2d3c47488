package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/orderd/orderd/domain"
)

// Dead-letter kinds.
const (
	DeadLetterOrder   = "order"
	DeadLetterWebhook = "webhook"
)

// DeadLetter is something that needs a person: an order that expired in its
// queue or a webhook that could not be delivered.
type DeadLetter struct {
	ID         uuid.UUID  `json:"id"`
	Kind       string     `json:"kind"`
	RefID      uuid.UUID  `json:"ref_id"`
	MerchantID uuid.UUID  `json:"merchant_id"`
	Reason     string     `json:"reason"`
	Attempts   int        `json:"attempts"`
	CreatedAt  time.Time  `json:"created_at"`
	ResolvedAt *time.Time `json:"resolved_at"`
	Resolution *string    `json:"resolution,omitempty"`
	Note       *string    `json:"note,omitempty"`
}

const deadLetterColumns = `id, kind, ref_id, merchant_id, reason, attempts, created_at, resolved_at, resolution, note`

// ListDeadLettersParams filters the list and says where the page starts.
type ListDeadLettersParams struct {
	Kind       string // "" for all
	MerchantID uuid.UUID
	Unresolved bool
	Limit      int
	After      *PageKey
}

// ListDeadLetters returns a page of dead letters, newest first, and the key
// the next page starts after, nil at the end.
func (s *Store) ListDeadLetters(ctx context.Context, p ListDeadLettersParams) ([]DeadLetter, *PageKey, error) {
	if p.Kind != "" && p.Kind != DeadLetterOrder && p.Kind != DeadLetterWebhook {
		return nil, nil, domain.Errorf(domain.CodeValidation, "kind must be order or webhook")
	}
	limit := p.Limit
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	sql, args := deadLetterPageQuery(p, limit)
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, nil, mapErr(fmt.Errorf("list dead letters: %w", err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[DeadLetter])
	if err != nil {
		return nil, nil, mapErr(fmt.Errorf("list dead letters: %w", err))
	}
	if out == nil {
		out = []DeadLetter{}
	}
	if len(out) <= limit {
		return out, nil, nil
	}
	out = out[:limit]
	last := out[len(out)-1]
	return out, &PageKey{At: last.CreatedAt, ID: last.ID}, nil
}

// deadLetterPageQuery reads dead letters by (created_at, id) descending from
// before the key, one row more than the page, in dead_letters_created_idx.
func deadLetterPageQuery(p ListDeadLettersParams, limit int) (string, []any) {
	// Without a key the page starts above every row.
	afterAt, afterID := any("infinity"), uuid.Max
	if p.After != nil {
		afterAt, afterID = p.After.At, p.After.ID
	}
	return `SELECT ` + deadLetterColumns + ` FROM dead_letters
		WHERE ($1 = '' OR kind = $1) AND ($2::uuid IS NULL OR merchant_id = $2) AND (NOT $3 OR resolved_at IS NULL)
			AND (created_at, id) < ($4::timestamptz, $5::uuid)
		ORDER BY created_at DESC, id DESC LIMIT $6`, []any{p.Kind, nullUUID(p.MerchantID), p.Unresolved, afterAt, afterID, limit + 1}
}

func nullUUID(id uuid.UUID) *uuid.UUID {
	if id == uuid.Nil {
		return nil
	}
	return &id
}

// GetDeadLetter returns one dead letter.
func (s *Store) GetDeadLetter(ctx context.Context, id uuid.UUID) (*DeadLetter, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+deadLetterColumns+` FROM dead_letters WHERE id = $1`, id)
	if err != nil {
		return nil, mapErr(fmt.Errorf("get dead letter: %w", err))
	}
	dl, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[DeadLetter])
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, domain.Errorf(domain.CodeNotFound, "dead letter not found")
	}
	if err != nil {
		return nil, mapErr(fmt.Errorf("get dead letter: %w", err))
	}
	return &dl, nil
}

// ResolveDeadLetter marks a dead letter handled by a person.
func (s *Store) ResolveDeadLetter(ctx context.Context, id uuid.UUID, note string) (*DeadLetter, error) {
	if len(note) > 2000 {
		return nil, domain.Errorf(domain.CodeValidation, "note must be at most 2000 characters")
	}
	dl, err := s.GetDeadLetter(ctx, id)
	if err != nil {
		return nil, err
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error { return closeDeadLetter(ctx, tx, dl.MerchantID, id, "resolved", note) })
	if err != nil {
		return nil, err
	}
	return s.GetDeadLetter(ctx, id)
}

// closeDeadLetter marks an open dead letter handled, in the caller's
// transaction so that the retry it records and the retry itself commit together.
func closeDeadLetter(ctx context.Context, tx pgx.Tx, merchantID, id uuid.UUID, resolution, note string) error {
	tag, err := tx.Exec(ctx, `UPDATE dead_letters SET resolved_at = now(), resolution = $2, note = nullif($3, '')
		WHERE merchant_id = $4 AND id = $1 AND resolved_at IS NULL`, id, resolution, note, merchantID)
	if err != nil {
		return fmt.Errorf("close dead letter: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return domain.Errorf(domain.CodeInvalidTransition, "the dead letter is already resolved")
	}
	return nil
}

// RetryDeadLetter sends an expired order back to its place in the queue (ahead
// of every order queued after it, with a fresh expiry) or hands a webhook back
// to the relay.
func (s *Store) RetryDeadLetter(ctx context.Context, id uuid.UUID, access domain.Party, requestID string) (*DeadLetter, error) {
	dl, err := s.GetDeadLetter(ctx, id)
	if err != nil {
		return nil, err
	}
	if dl.ResolvedAt != nil {
		return nil, domain.Errorf(domain.CodeInvalidTransition, "the dead letter is already resolved")
	}
	switch dl.Kind {
	case DeadLetterOrder:
		if _, err := s.requeueOrder(ctx, dl.RefID, id, access, requestID); err != nil {
			return nil, err
		}
	case DeadLetterWebhook:
		if err := s.RetryWebhook(ctx, dl.MerchantID, dl.RefID, id); err != nil {
			return nil, err
		}
	}
	return s.GetDeadLetter(ctx, id)
}

// requeueOrder puts an expired order back in its merchant's line at its
// original place; used by the dead-letter retry.
func (s *Store) requeueOrder(ctx context.Context, orderID, deadLetterID uuid.UUID, access domain.Party, requestID string) (*OrderView, error) {
	return s.runOrderCommand(ctx, orderCommand{
		orderID: orderID, access: access, requestID: requestID,
		decide: func(tx pgx.Tx, o domain.Order, m *merchantRow, now time.Time) ([]domain.Event, []river.InsertManyParams, error) {
			var dropOrder bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM drop_entries WHERE merchant_id = $1 AND order_id = $2)`, m.ID, o.ID).
				Scan(&dropOrder); err != nil {
				return nil, nil, fmt.Errorf("find drop entry: %w", err)
			}
			if dropOrder {
				return nil, nil, domain.ErrDropOrderNotRequeued
			}
			events, load, err := domain.Requeue(o, m.load(), m.maxQueueWait(), now)
			if err != nil {
				return nil, nil, err
			}
			m.setLoad(load)
			after, err := o.Apply(events...)
			if err != nil {
				return nil, nil, err
			}
			products, err := loadProducts(ctx, tx, m.ID, itemIDs(o.Items))
			if err != nil {
				return nil, nil, err
			}
			if err := domain.RefuseStock(stockLines(after, products, nil)); err != nil {
				return nil, nil, err
			}
			if err := retakeStock(ctx, tx, after, products); err != nil {
				return nil, nil, err
			}
			return events, []river.InsertManyParams{expiryJob(after)}, nil
		},
		after: func(tx pgx.Tx, w writeSet, _ change, m *merchantRow, now time.Time) (writeSet, error) {
			if err := closeDeadLetter(ctx, tx, m.ID, deadLetterID, "retried", ""); err != nil {
				return w, err
			}
			head, err := s.readLineHead(ctx, tx, m, s.cfg.InlineDrainLimit, w, now)
			if err != nil {
				return w, err
			}
			return head.admit(domain.DrainLine(head.orders, m.load(), head.limit, now))
		},
	})
}

// retakeStock takes again the units and claims that an expired order's
// expiry gave back. Unlike a placement batch, the retry waits for every
// bucket of its products: it is rare, holds no other bucket, and so is never
// answered sold out while a bucket it did not wait for is being given
// units. A refusal fails the retry's whole transaction, so nothing it took
// needs putting back.
func retakeStock(ctx context.Context, tx pgx.Tx, o domain.Order, products map[uuid.UUID]productInfo) error {
	var limited []domain.Item
	var limitedIDs []uuid.UUID
	guarded := false
	for _, it := range sortedItems(o.Items) {
		p := products[it.ProductID]
		guarded = guarded || p.limited || p.perUserLimit != nil
		if p.limited {
			limited, limitedIDs = append(limited, it), append(limitedIDs, it.ProductID)
		}
	}
	if !guarded {
		return nil
	}
	locks := &pgx.Batch{}
	var refused error
	addClaims(locks, o, products, &refused, func(domain.Item) {})
	held := addLockBuckets(locks, o.MerchantID, limitedIDs)
	if err := tx.SendBatch(ctx, locks).Close(); err != nil {
		return fmt.Errorf("lock stock: %w", err)
	}
	if refused != nil {
		return refused
	}
	takes := &pgx.Batch{}
	for _, it := range limited {
		fromBuckets, err := domain.TakeFromBuckets(it.ProductID, held[it.ProductID], it.Quantity)
		if err != nil {
			return err
		}
		addTake(takes, takenFrom(o.MerchantID, it.ProductID, fromBuckets))
	}
	if takes.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, takes).Close(); err != nil {
		return fmt.Errorf("take stock: %w", err)
	}
	return nil
}

func itemIDs(items []domain.Item) []uuid.UUID {
	ids := make([]uuid.UUID, len(items))
	for i, it := range items {
		ids[i] = it.ProductID
	}
	return ids
}
