package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/jobs"
	"github.com/orderd/orderd/store"
)

// slotReleasingSoon gives the merchant 5-minute slots and the prep_seconds
// that puts the release of its next slot at least a few seconds away
// lead from now, and returns that slot and its release.
func slotReleasingSoon(t *testing.T, st *store.Store, merchantID uuid.UUID, lead time.Duration) (pickup, release time.Time) {
	t.Helper()
	now := time.Now()
	pickup = now.Add(lead + 2*time.Second).UTC().Truncate(5 * time.Minute).Add(5 * time.Minute)
	prep := int(pickup.Sub(now.Add(lead)) / time.Second)
	_, err := st.UpdateMerchant(context.Background(), merchantID, store.MerchantPatch{
		PrepSeconds: &prep, Slots: &domain.SlotSettings{Minutes: 5, Capacity: 10, HorizonDays: 1},
	}, store.Meta{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	return pickup, domain.ReleaseAt(pickup, prep)
}

func placeForSlot(t *testing.T, st *store.Store, merchantID, productID uuid.UUID, customer string, pickup time.Time) *store.OrderView {
	t.Helper()
	res, err := st.PlaceOrder(context.Background(), store.PlaceRequest{
		MerchantID: merchantID, CustomerID: customer, PaymentRef: "pay-" + customer, PickupAt: &pickup,
		Lines:          []domain.LineRequest{{ProductID: productID, Quantity: 1}},
		IdempotencyKey: uuid.NewString(), RequestHash: []byte("h"),
	})
	require.NoError(t, err)
	require.Equal(t, domain.StatusScheduled, res.Order.Status)
	return res.Order
}

func acceptedAt(t *testing.T, st *store.Store, id uuid.UUID, within time.Duration) time.Time {
	t.Helper()
	waitStatus(t, st, id, domain.StatusAccepted, within)
	o, err := st.GetOrder(context.Background(), id, domain.Party{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	return *o.AcceptedAt
}

// TestScheduledOrdersReleasedOnTime: the release timer lets a slot's
// orders into the live line at the slot's start minus prep_seconds, not
// before, and the kitchen's room admits them.
func TestScheduledOrdersReleasedOnTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	startWorkers(t, b)
	m, p := merchantAndProduct(t, b.store, 5, 900)
	pickup, release := slotReleasingSoon(t, b.store, m, 3*time.Second)
	var ids []uuid.UUID
	for _, c := range []string{"a", "b", "c"} {
		ids = append(ids, placeForSlot(t, b.store, m, p, c, pickup).ID)
	}
	for _, id := range ids {
		at := acceptedAt(t, b.store, id, time.Until(release)+10*time.Second)
		require.WithinRange(t, at, release, release.Add(timerLateness))
	}
}

// TestReleaseAcrossARestart: a process takes a scheduled order and stops
// before its release; the release passes while every process is down, and
// the order is released within 3 s of the next process being ready.
func TestReleaseAcrossARestart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	before, err := jobs.NewClient(b.pool, b.store, jobs.DefaultConfig())
	require.NoError(t, err)
	require.NoError(t, before.Start(ctx))
	m, p := merchantAndProduct(t, b.store, 5, 900)
	pickup, release := slotReleasingSoon(t, b.store, m, 6*time.Second)
	o := placeForSlot(t, b.store, m, p, "a", pickup)
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, before.Stop(stopCtx))
	require.True(t, time.Now().Before(release), "the process stopped before the release")
	time.Sleep(time.Until(release) + 500*time.Millisecond)
	got, err := b.store.GetOrder(context.Background(), o.ID, domain.Party{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	require.Equal(t, domain.StatusScheduled, got.Status, "nothing ran to release it")
	started := time.Now()
	startWorkers(t, b)
	at := acceptedAt(t, b.store, o.ID, 10*time.Second)
	require.WithinRange(t, at, started, started.Add(3*time.Second))
}
