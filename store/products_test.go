package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// TestProductRowIsTheFoldOfItsStream: creation and every restock are events
// of the product's stream, and the product's row is what they fold to,
// written by the one product write; a restock the rules refuse writes
// neither.
func TestProductRowIsTheFoldOfItsStream(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, nil)
	limited := createProduct(t, st, m.ID, &productOpts{Stock: intp(10), PerUserLimit: intp(3)})
	for _, q := range []int{5, 1, 20} {
		_, err := st.Restock(ctx, limited.ID, q, storeMeta())
		require.NoError(t, err)
	}
	unlimited := createProduct(t, st, m.ID, nil)
	_, err := st.Restock(ctx, unlimited.ID, 5, storeMeta())
	require.Equal(t, domain.CodeValidation, domain.ErrorCode(err), "unlimited stock takes no restock")
	_, err = st.Restock(ctx, limited.ID, domain.MaxStock, storeMeta())
	require.Equal(t, domain.CodeValidation, domain.ErrorCode(err), "past the most stock a product may have")

	for _, p := range []*store.ProductView{limited, unlimited} {
		stored, err := st.ReadStream(ctx, m.ID, p.ID)
		require.NoError(t, err)
		var fold domain.Product
		for _, se := range stored {
			e, err := domain.DecodeEvent(se.Type, se.Data)
			require.NoError(t, err)
			fold, err = fold.Evolve(e)
			require.NoError(t, err)
		}
		got, err := st.GetProduct(ctx, p.ID)
		require.NoError(t, err)
		require.Equal(t, fold.Version, got.Version)
		require.Equal(t, fold.StockTotal, got.StockTotal)
		require.Equal(t, fold.PerUserLimit, got.PerUserLimit)
		require.Equal(t, fold.Name, got.Name)
		require.Equal(t, fold.PriceCents, got.PriceCents)
		require.True(t, fold.CreatedAt.Equal(got.CreatedAt))
		require.Equal(t, fold.StockTotal, got.StockRemaining, "no order took any")
	}
	got, err := st.GetProduct(ctx, limited.ID)
	require.NoError(t, err)
	require.Equal(t, 36, *got.StockTotal)
	require.Equal(t, 4, got.Version)
	require.Equal(t, 5, countRows(t, b.pool, "events WHERE stream_type = 'product'"))
}
