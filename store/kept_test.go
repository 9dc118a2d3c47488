package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
)

// Orders carry no foreign key to their merchant (migration 23): a merchant
// is never deleted, re-keyed or truncated away (which would empty the
// tables whose keys name merchants and leave the orders), and a placement
// writes its order only for a merchant it read.
func TestMerchantsAreKeptUnderTheirOrders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, tb := setup(t)
	m, p, o := acceptedOrder(t, st, 5, "c1")

	refused := func(sql string, args ...any) {
		t.Helper()
		_, err := tb.pool.Exec(ctx, sql, args...)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%s: %v", sql, err)
		require.Equal(t, "23001", pgErr.Code, "%s: restrict_violation, got %s", sql, pgErr.Message)
	}
	refused(`DELETE FROM merchants WHERE id = $1`, m.ID)
	refused(`UPDATE merchants SET id = $2 WHERE id = $1`, m.ID, uuid.New())
	refused(`TRUNCATE merchants CASCADE`)
	_, err := tb.pool.Exec(ctx, `UPDATE merchants SET id = id, name = 'renamed' WHERE id = $1`, m.ID)
	require.NoError(t, err, "an update that keeps the id is allowed")

	var orphans int
	require.NoError(t, tb.pool.QueryRow(ctx, `SELECT count(*) FROM orders o WHERE NOT EXISTS (SELECT 1 FROM merchants m WHERE m.id = o.merchant_id)`).Scan(&orphans))
	require.Zero(t, orphans)
	got, err := st.GetOrder(ctx, o.ID, customer("c1"))
	require.NoError(t, err)
	require.Equal(t, m.ID, got.MerchantID)

	before := countRows(t, tb.pool, "orders")
	_, err = place(ctx, st, uuid.New(), p.ID, placeOpts{Customer: "c2", PaymentRef: "pay"})
	require.Equal(t, domain.CodeNotFound, domain.ErrorCode(err), "a placement for no merchant: %v", err)
	_, err = place(ctx, st, uuid.New(), p.ID, placeOpts{Customer: "c3"})
	require.Equal(t, domain.CodeNotFound, domain.ErrorCode(err), "an unpaid placement for no merchant: %v", err)
	require.Equal(t, before, countRows(t, tb.pool, "orders"), "no order without its merchant")
}
