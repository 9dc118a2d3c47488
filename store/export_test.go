package store

import (
	"context"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// SamePlacementLane reports whether two merchants' paid orders share a
// placement lane, so that a test can put a locked merchant next to others.
func SamePlacementLane(a, b uuid.UUID) bool {
	return laneOf(&placement{p: PlaceParams{MerchantID: a, PaymentRef: "r"}}) ==
		laneOf(&placement{p: PlaceParams{MerchantID: b, PaymentRef: "r"}})
}

// PagePlans returns PostgreSQL's plan for the page query of each list, made
// with sequential and bitmap scans priced out: an index that serves a list
// then shows as an index scan with no sort above it.
func (s *Store) PagePlans(ctx context.Context, lists []OrderList, deadLetters ListDeadLettersParams) ([]string, error) {
	type query struct {
		sql  string
		args []any
	}
	var queries []query
	for _, l := range lists {
		sql, args := pageQuery(l)
		queries = append(queries, query{sql, args})
	}
	sql, args := deadLetterPageQuery(deadLetters, 50)
	queries = append(queries, query{sql, args})
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read only
	if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off`); err != nil {
		return nil, err
	}
	var plans []string
	for _, q := range queries {
		rows, err := tx.Query(ctx, `EXPLAIN (COSTS OFF) `+q.sql, q.args...)
		if err != nil {
			return nil, err
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, err
		}
		plans = append(plans, strings.Join(lines, "\n"))
	}
	return plans, nil
}
