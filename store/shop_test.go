package store_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// TestRebuildReplaysAShopsDay replays a menu with options, its changes and
// a kitchen's undo and pickup from the log: the projections it rebuilds are
// the live ones.
func TestRebuildReplaysAShopsDay(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 4, CapacityUnit: domain.UnitItems})
	tea, err := st.CreateProduct(ctx, store.CreateProductParams{MerchantID: m.ID, Name: "Milk tea", PriceCents: 450, Meta: storeMeta(),
		OptionGroups: []domain.OptionGroup{{Name: "Size", MinSelect: 1, MaxSelect: 1, Options: []domain.Option{
			{Name: "Regular"}, {Name: "Large", PriceDeltaCents: 80, LoadUnits: 1},
		}}}})
	require.NoError(t, err)
	require.Len(t, tea.OptionGroups, 1)
	large := tea.OptionGroups[0].Options[1].ID
	_, err = uuid.Parse(large)
	require.NoError(t, err, "the server names the options it was sent without ids")
	cake := createProduct(t, st, m.ID, nil)

	placed, err := st.PlaceOrder(ctx, store.PlaceRequest{MerchantID: m.ID, CustomerID: "alice", PaymentRef: "card",
		Lines: []domain.LineRequest{{ProductID: tea.ID, Quantity: 1, Options: []string{large}}}, IdempotencyKey: "k1", RequestHash: []byte("h")})
	require.NoError(t, err)
	o := placed.Order
	require.Equal(t, 2, o.Load)
	require.Equal(t, int64(530), o.TotalCents)

	price, off := int64(500), false
	_, err = st.UpdateProduct(ctx, store.UpdateProductParams{MerchantID: m.ID, ProductID: tea.ID, Patch: domain.ProductPatch{PriceCents: &price}, Meta: storeMeta()})
	require.NoError(t, err)
	_, err = st.UpdateProduct(ctx, store.UpdateProductParams{MerchantID: m.ID, ProductID: cake.ID, Patch: domain.ProductPatch{Available: &off}, Meta: storeMeta()})
	require.NoError(t, err)
	require.NoError(t, st.HideProduct(ctx, m.ID, cake.ID, storeMeta()))
	_, err = st.UpdateProduct(ctx, store.UpdateProductParams{MerchantID: m.ID, ProductID: tea.ID, Patch: domain.ProductPatch{PriceCents: &price}, Meta: storeMeta()})
	require.NoError(t, err)
	_, err = st.UpdateProduct(ctx, store.UpdateProductParams{MerchantID: uuid.New(), ProductID: tea.ID, Patch: domain.ProductPatch{PriceCents: &price}, Meta: storeMeta()})
	require.ErrorIs(t, err, domain.ErrNotFound, "a product is changed through its own merchant only")

	_, err = st.CompleteOrder(ctx, o.ID, admin, "")
	require.NoError(t, err)
	reopened, err := st.ReopenOrder(ctx, o.ID, admin, "")
	require.NoError(t, err)
	require.Equal(t, domain.StatusAccepted, reopened.Status)
	_, err = st.CompleteOrder(ctx, o.ID, admin, "")
	require.NoError(t, err)
	done, err := st.PickUpOrder(ctx, o.ID, admin, "")
	require.NoError(t, err)
	require.NotNil(t, done.PickedUpAt)
	_, err = st.PickUpOrder(ctx, o.ID, customer("alice"), "")
	require.Equal(t, domain.CodeForbidden, domain.ErrorCode(err), "the customer does not hand over its own order")

	menu, err := st.ListProducts(ctx, m.ID)
	require.NoError(t, err)
	require.Len(t, menu, 1, "the hidden product is off the menu")
	require.Equal(t, int64(500), menu[0].PriceCents)

	report, err := st.Rebuild(ctx, false)
	require.NoError(t, err)
	require.Empty(t, report.Differences, "%+v", report.Differences)
	audit, err := st.Audit(ctx)
	require.NoError(t, err)
	require.True(t, audit.OK, "%+v", audit.Checks)
}
