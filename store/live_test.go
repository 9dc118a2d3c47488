package store_test

import (
	"context"
	"regexp"
	"strconv"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// TestRankingReadsTheMerchantOnce: ranking a line reads its merchant's row
// once, however long the line and whatever the planner believes of it. The
// live updates rank a busy line twice a second in every process, and the
// line has just grown by far more than its statistics say: planned as a
// join of each queued order to its merchant, a line of thousands read the
// merchant's row as many times.
func TestRankingReadsTheMerchantOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, tb := setup(t)
	// Statistics of an empty table, as on a fresh database whose line grew
	// faster than autovacuum's analyze follows.
	_, err := tb.pool.Exec(ctx, `ALTER TABLE orders SET (autovacuum_enabled = false); ANALYZE orders`)
	require.NoError(t, err)
	m := createMerchant(t, st, &merchantOpts{Capacity: 1})
	p := createProduct(t, st, m.ID, nil)
	const placed = 120
	for i := range placed {
		o := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "c" + strconv.Itoa(i), PaymentRef: "pay"})
		require.Contains(t, []domain.OrderStatus{domain.StatusAccepted, domain.StatusQueued}, o.Status)
	}
	positions, err := st.QueuePositions(ctx, []uuid.UUID{m.ID})
	require.NoError(t, err)
	require.Len(t, positions, placed-1)
	for i, pos := range positions {
		require.Equal(t, i+1, pos.Position)
	}

	plan, err := store.QueuePositionsPlan(ctx, tb.pool, []uuid.UUID{m.ID})
	require.NoError(t, err)
	scan := regexp.MustCompile(`(?m)Scan .*on merchants m .*loops=(\d+)\)$`).FindStringSubmatch(plan)
	require.NotNil(t, scan, plan)
	require.Equal(t, "1", scan[1], plan)
}
