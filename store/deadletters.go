package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

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
