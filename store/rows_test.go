package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/store/storetest"
)

// Both renderings of an insert, unnest for PostgreSQL and VALUES for
// Citus, are plain SQL: run on one PostgreSQL they write the same rows,
// shared arguments, casts, nulls, order, ON CONFLICT and RETURNING
// included, and the VALUES form splits a batch whose cells pass one
// statement's parameters.
func TestInsertRowsWriteTheSameRowsInBothForms(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `CREATE TABLE rows_unnest (k int PRIMARY KEY, tag text NOT NULL, doc jsonb, at timestamptz, n int);
		CREATE TABLE rows_values (LIKE rows_unnest INCLUDING ALL)`)
	require.NoError(t, err)
	at := time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)
	keys := []int32{3, 1, 2, 1}
	docs := []string{`{"a": 1}`, `[]`, `{"b": "x"}`, `{}`}
	ns := []pgtype.Int4{{Int32: 7, Valid: true}, {}, {Int32: 9, Valid: true}, {}}
	write := func(table string, citus bool) []int32 {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx) //nolint:errcheck // a no-op after commit
		var returned []int32
		b := &pgx.Batch{}
		insertRows{
			Into:    `INSERT INTO ` + table + ` (k, tag, doc, at, n)`,
			Row:     `$3, $1, $4::jsonb, $2, $5`,
			Args:    []any{"t", at},
			Columns: []column{col("int", keys), col("text", docs), col("int", ns)},
			Ordered: true,
			Tail:    `ON CONFLICT (k) DO NOTHING RETURNING k`,
		}.addTo(&txn{Tx: tx, citus: citus}, b, func(rows pgx.Rows) error {
			for rows.Next() {
				var k int32
				if err := rows.Scan(&k); err != nil {
					return err
				}
				returned = append(returned, k)
			}
			return rows.Err()
		})
		require.NoError(t, tx.SendBatch(ctx, b).Close())
		require.NoError(t, tx.Commit(ctx))
		return returned
	}
	require.Equal(t, []int32{3, 1, 2}, write("rows_unnest", false), "in order, the second 1 left by ON CONFLICT")
	require.Equal(t, []int32{3, 1, 2}, write("rows_values", true))
	read := func(table string) string {
		var s string
		require.NoError(t, pool.QueryRow(ctx, `SELECT string_agg(format('%s %s %s %s %s', k, tag, doc, at, n), '; ' ORDER BY k) FROM `+table).Scan(&s))
		return s
	}
	require.Equal(t, read("rows_unnest"), read("rows_values"))
	require.Contains(t, read("rows_values"), `1 t [] 2026-11-24 03:00:00+00 `, "the first row of key 1, n null")

	big := make([]int32, maxParams)
	for i := range big {
		big[i] = int32(100 + i)
	}
	r := insertRows{Into: `INSERT INTO rows_values (k, tag)`, Row: `$2, $1`, Args: []any{"big"}, Columns: []column{col("int", big)}}
	require.Equal(t, 1, len(r.statements(false)))
	split := r.statements(true)
	require.Equal(t, 2, len(split), "more cells than one statement's parameters")
	require.True(t, strings.HasPrefix(split[0].sql, `INSERT INTO rows_values (k, tag) VALUES ($2::int, $1), ($3::int, $1)`))
	require.Equal(t, `INSERT INTO rows_values (k, tag) VALUES ($2::int, $1)`, split[1].sql, "the row left over, numbered afresh")
	require.Equal(t, []any{"big", big[len(big)-1]}, split[1].args)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, r.exec(ctx, &txn{Tx: tx, citus: true}))
	require.NoError(t, tx.Commit(ctx))
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rows_values WHERE tag = 'big'`).Scan(&n))
	require.Equal(t, len(big), n, fmt.Sprintf("%d statements", len(split)))
}
