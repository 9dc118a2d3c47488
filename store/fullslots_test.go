package store_test

import (
	"context"
	"fmt"
	"os"
	osexec "os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

const (
	slotFreeHelperDB       = "ORDERD_SLOT_FREE_HELPER_DB"
	slotFreeHelperOrder    = "ORDERD_SLOT_FREE_HELPER_ORDER"
	slotFreeHelperCustomer = "ORDERD_SLOT_FREE_HELPER_CUSTOMER"
)

// slotFreeHelper cancels one order, as its customer, from a process of its
// own.
func slotFreeHelper() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id, err := uuid.Parse(os.Getenv(slotFreeHelperOrder))
	if err != nil {
		return err
	}
	return runInHelperProcess(ctx, os.Getenv(slotFreeHelperDB), 2, func(ctx context.Context, st *store.Store, _ *pgxpool.Pool) error {
		_, err := st.CancelOrder(ctx, id, "", domain.Party{Actor: domain.ActorCustomer, Subject: os.Getenv(slotFreeHelperCustomer)}, "")
		return err
	})
}

// TestFullSlotRefusedWithoutItsBatchUntilAnotherProcessFreesIt: one OS
// process fills a slot; this one, having seen it full, then refuses
// requests for it at once while another connection holds the merchant's
// row (which its batch would wait for); another process cancels one of
// the slot's orders, and this one's next request, which the row still
// holds up, is not refused: it waits for its batch and takes the room.
func TestFullSlotRefusedWithoutItsBatchUntilAnotherProcessFreesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const capacity = 3
	shop := newSlotShop(t, capacity)
	url, pool, st, m, p, at := shop.url, shop.pool, shop.st, shop.m, shop.p, shop.at

	fill := osexec.Command(os.Args[0], "-test.run=^$")
	fill.Env = append(os.Environ(), slotHelperDB+"="+url, slotHelperMerchant+"="+m.ID.String(),
		slotHelperProduct+"="+p.ID.String(), slotHelperOffset+"=0", slotHelperPickup+"="+strconv.FormatInt(at.UnixNano(), 10))
	out, err := fill.Output()
	require.NoError(t, err, "filling process: %s", out)
	require.Equal(t, fmt.Sprintf("placed=%d", capacity), strings.TrimSpace(string(out)))

	// This process learns that the slot is full from its batch.
	_, err = place(ctx, st, m.ID, p.ID, placeOpts{Customer: "first-refused", PaymentRef: "pay", PickupAt: &at})
	require.ErrorIs(t, err, domain.ErrSlotFull)

	holder := holdMerchant(t, pool, m.ID)
	for i := range 3 {
		refuseCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = place(refuseCtx, st, m.ID, p.ID, placeOpts{Customer: fmt.Sprintf("refused-%d", i), PaymentRef: "pay", PickupAt: &at})
		cancel()
		require.ErrorIs(t, err, domain.ErrSlotFull, "refused without waiting for the merchant's row")
	}
	require.NoError(t, holder.Rollback(ctx))

	var orderID uuid.UUID
	var customer string
	require.NoError(t, pool.QueryRow(ctx, `SELECT id, customer_id FROM orders WHERE merchant_id = $1 AND pickup_at = $2 LIMIT 1`,
		m.ID, at).Scan(&orderID, &customer))
	free := osexec.Command(os.Args[0], "-test.run=^$")
	free.Env = append(os.Environ(), slotFreeHelperDB+"="+url, slotFreeHelperOrder+"="+orderID.String(), slotFreeHelperCustomer+"="+customer)
	out, err = free.CombinedOutput()
	require.NoError(t, err, "freeing process: %s", out)
	require.Equal(t, capacity-1, slotTaken(t, pool, m.ID, at))

	holder = holdMerchant(t, pool, m.ID)
	answered := make(chan error, 1)
	go func() {
		_, err := place(ctx, st, m.ID, p.ID, placeOpts{Customer: "after-the-free", PaymentRef: "pay", PickupAt: &at})
		answered <- err
	}()
	eventually(t, 30*time.Second, func() bool {
		var waiting int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FROM merchants%'`).Scan(&waiting))
		return waiting >= 1
	}, "the request waits for its merchant's row")
	select {
	case err := <-answered:
		t.Fatalf("answered while its merchant's row was held: %v", err)
	default:
	}
	require.NoError(t, holder.Rollback(ctx))
	require.NoError(t, <-answered)
	require.Equal(t, capacity, slotTaken(t, pool, m.ID, at))
	require.Empty(t, violations(t, st))
}

// holdMerchant takes the merchant's row lock in a transaction of its own,
// until the caller rolls it back.
func holdMerchant(t *testing.T, pool *pgxpool.Pool, merchantID uuid.UUID) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	holder, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Rollback(ctx) })
	_, err = holder.Exec(ctx, `SELECT 1 FROM merchants WHERE id = $1 FOR UPDATE`, merchantID)
	require.NoError(t, err)
	return holder
}

// TestRetryOfAPlacementInAFullSlotIsItsReplay: once a slot is known full,
// the retry of the placement that took its last place still answers that
// order, not slot_full.
func TestRetryOfAPlacementInAFullSlotIsItsReplay(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	m := createMerchant(t, st, &merchantOpts{Capacity: 2})
	p := createProduct(t, st, m.ID, nil)
	withSlots(t, st, m.ID, domain.SlotSettings{Minutes: 15, Capacity: 1, HorizonDays: 1})
	at := nextSlot(time.Now(), time.Hour)
	first := placeOpts{Customer: "first", PaymentRef: "pay", Key: "k-first", PickupAt: &at}
	placed := mustPlace(t, st, m.ID, p.ID, first)
	_, err := place(context.Background(), st, m.ID, p.ID, placeOpts{Customer: "second", PaymentRef: "pay", PickupAt: &at})
	require.ErrorIs(t, err, domain.ErrSlotFull)
	again, err := place(context.Background(), st, m.ID, p.ID, first)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, placed.ID, again.Order.ID)
}
