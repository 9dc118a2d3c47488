package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/jobs"
	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/store/storetest"
)

// withSlots gives the merchant pickup slots (and hours, when given).
func withSlots(t *testing.T, st *store.Store, merchantID uuid.UUID, slots domain.SlotSettings, hours ...domain.Period) *store.MerchantView {
	t.Helper()
	patch := store.MerchantPatch{Slots: &slots}
	if hours != nil {
		patch.Hours = &hours
	}
	m, err := st.UpdateMerchant(context.Background(), merchantID, patch, storeMeta())
	require.NoError(t, err)
	return m
}

// nextSlot is a slot start of every-15-minutes slots (no hours, UTC) at
// least ahead from now.
func nextSlot(now time.Time, ahead time.Duration) time.Time {
	return now.Add(ahead).UTC().Truncate(15 * time.Minute).Add(15 * time.Minute)
}

var quarterHours = domain.SlotSettings{Minutes: 15, Capacity: 2, LeadMinutes: 0, HorizonDays: 2}

func slotTaken(t *testing.T, pool *pgxpool.Pool, merchantID uuid.UUID, at time.Time) int {
	t.Helper()
	var taken int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT taken FROM pickup_slots WHERE merchant_id = $1 AND starts_at = $2`,
		merchantID, at).Scan(&taken))
	return taken
}

func TestSlotRefusesAnOrderThatNoLongerFits(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 1})
	p := createProduct(t, st, m.ID, nil)
	withSlots(t, st, m.ID, quarterHours)
	at := nextSlot(time.Now(), time.Hour)

	first := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "a", PickupAt: &at})
	require.Equal(t, at, first.PickupAt.UTC())
	mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "b", PickupAt: &at, PaymentRef: "r"})
	_, err := place(ctx, st, m.ID, p.ID, placeOpts{Customer: "c", PickupAt: &at, PaymentRef: "r"})
	require.ErrorIs(t, err, domain.ErrSlotFull)
	require.Equal(t, 2, slotTaken(t, b.pool, m.ID, at), "a refusal takes nothing")

	slots, err := st.ListSlots(ctx, m.ID, at.Format(time.DateOnly))
	require.NoError(t, err)
	var seen bool
	for _, s := range slots {
		if s.StartsAt.Equal(at) {
			seen = true
			require.Equal(t, store.Slot{StartsAt: at, EndsAt: at.Add(15 * time.Minute), Capacity: 2, Taken: 2, Available: 0}, s)
		}
	}
	require.True(t, seen, "the slot is listed")

	// Another slot of the same merchant is not affected.
	other := at.Add(15 * time.Minute)
	mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "c", PickupAt: &other})
	require.Empty(t, violations(t, st))
}

func TestRequestRefusedAfterItsSlotTakesNoneOfIt(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 1})
	soldOut := createProduct(t, st, m.ID, &productOpts{Stock: intp(0)})
	tea := createProduct(t, st, m.ID, nil)
	withSlots(t, st, m.ID, domain.SlotSettings{Minutes: 15, Capacity: 1, HorizonDays: 1})
	at := nextSlot(time.Now(), time.Hour)

	// The slot has room for it, the stock has none.
	_, err := place(ctx, st, m.ID, soldOut.ID, placeOpts{Customer: "a", PickupAt: &at, PaymentRef: "r"})
	require.ErrorIs(t, err, domain.ErrSoldOut)
	require.Equal(t, 0, slotTaken(t, b.pool, m.ID, at), "a request the stock refused holds nothing of its slot")
	mustPlace(t, st, m.ID, tea.ID, placeOpts{Customer: "b", PickupAt: &at, PaymentRef: "r"})
	require.Equal(t, 1, slotTaken(t, b.pool, m.ID, at))
	require.Empty(t, violations(t, st))
}

func TestSlotCountsItemsForAMerchantCountingItems(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 1, CapacityUnit: domain.UnitItems})
	p, err := st.CreateProduct(ctx, store.CreateProductParams{MerchantID: m.ID, Name: "carrier", PriceCents: 100, LoadUnits: 2})
	require.NoError(t, err)
	withSlots(t, st, m.ID, domain.SlotSettings{Minutes: 15, Capacity: 5, HorizonDays: 1})
	at := nextSlot(time.Now(), time.Hour)

	mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "a", PickupAt: &at, Quantity: 2}) // 4 units
	_, err = place(ctx, st, m.ID, p.ID, placeOpts{Customer: "b", PickupAt: &at, Quantity: 1})
	require.ErrorIs(t, err, domain.ErrSlotFull, "2 more units do not fit in the 1 left")
	require.Equal(t, 4, slotTaken(t, b.pool, m.ID, at))
}

func TestPickupAtThatIsNoPublishedSlotNamesTheField(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, nil)
	p := createProduct(t, st, m.ID, nil)
	noSlots := nextSlot(time.Now(), time.Hour)
	_, err := place(ctx, st, m.ID, p.ID, placeOpts{PickupAt: &noSlots})
	require.ErrorIs(t, err, &domain.Error{Code: domain.CodeValidation})
	require.Contains(t, domain.ErrorMessage(err), "pickup_at")

	withSlots(t, st, m.ID, quarterHours)
	for name, at := range map[string]time.Time{
		"past":               nextSlot(time.Now(), -2*time.Hour),
		"off the grid":       nextSlot(time.Now(), time.Hour).Add(time.Minute),
		"beyond the horizon": nextSlot(time.Now(), 72*time.Hour),
	} {
		_, err := place(ctx, st, m.ID, p.ID, placeOpts{PickupAt: &at})
		require.ErrorIs(t, err, &domain.Error{Code: domain.CodeValidation}, name)
		require.Contains(t, domain.ErrorMessage(err), "pickup_at", name)
	}
	require.Zero(t, countRows(t, b.pool, "orders"), "a refused placement writes nothing")
}

// TestClosedMerchantTakesOrdersForSlotsOnly: outside its hours a merchant
// refuses orders for as soon as possible (merchant_closed) and takes
// orders for its published slots.
func TestClosedMerchantTakesOrdersForSlotsOnly(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := context.Background()
	clock := newFakeClock(st)
	// Monday 2026-10-05 06:00 UTC; open Mondays 08:00-12:00 UTC.
	clock.Set(time.Date(2026, 10, 5, 6, 0, 0, 0, time.UTC))
	m := createMerchant(t, st, nil)
	p := createProduct(t, st, m.ID, nil)
	withSlots(t, st, m.ID, quarterHours, domain.Period{Day: 1, Opens: "08:00", Closes: "12:00"})

	_, err := place(ctx, st, m.ID, p.ID, placeOpts{PaymentRef: "r"})
	require.ErrorIs(t, err, domain.ErrMerchantClosed)
	var de *domain.Error
	require.ErrorAs(t, err, &de)
	require.Equal(t, 2*time.Hour, de.RetryAfter)

	at := time.Date(2026, 10, 5, 9, 0, 0, 0, time.UTC)
	o := mustPlace(t, st, m.ID, p.ID, placeOpts{PaymentRef: "r", PickupAt: &at})
	require.Equal(t, domain.StatusScheduled, o.Status)
	outside := time.Date(2026, 10, 5, 13, 0, 0, 0, time.UTC)
	_, err = place(ctx, st, m.ID, p.ID, placeOpts{PickupAt: &outside})
	require.ErrorIs(t, err, &domain.Error{Code: domain.CodeValidation}, "no slot outside opening hours")

	clock.Set(time.Date(2026, 10, 5, 8, 0, 0, 0, time.UTC))
	mustPlace(t, st, m.ID, p.ID, placeOpts{PaymentRef: "r"})
	require.Empty(t, violations(t, st))
}

// TestReleaseJoinsTheLineAheadOfOrdersPaidLater: a scheduled order waits
// apart from the live line, which it does not count against, until its
// release at the slot's start minus prep_seconds; then it goes ahead of
// the order paid after it, and is admitted first.
func TestReleaseJoinsTheLineAheadOfOrdersPaidLater(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := context.Background()
	clock := newFakeClock(st)
	m, p, first := acceptedOrder(t, st, 1, "first")
	withSlots(t, st, m.ID, quarterHours)
	at := nextSlot(clock.Now(), time.Hour)

	scheduled := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "s", PaymentRef: "r", PickupAt: &at})
	require.Equal(t, domain.StatusScheduled, scheduled.Status)
	require.Nil(t, scheduled.QueuePosition)
	got, err := st.GetMerchant(ctx, m.ID)
	require.NoError(t, err)
	require.Zero(t, got.Load.Queued, "a scheduled order is not in the live line")

	released, err := st.ReleaseDue(ctx, m.ID)
	require.NoError(t, err)
	require.Zero(t, released, "not before its release")

	clock.Advance(10 * time.Minute)
	later := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "l", PaymentRef: "r"})
	require.Equal(t, domain.StatusQueued, later.Status)
	require.Equal(t, 1, *later.QueuePosition)

	clock.Set(at.Add(-60 * time.Second)) // prep_seconds is 60
	released, err = st.ReleaseDue(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, 1, released)
	s, err := st.GetOrder(ctx, scheduled.ID, admin)
	require.NoError(t, err)
	require.Equal(t, domain.StatusQueued, s.Status)
	require.Equal(t, 1, *s.QueuePosition, "ahead of the order paid after it")
	l, err := st.GetOrder(ctx, later.ID, admin)
	require.NoError(t, err)
	require.Equal(t, 2, *l.QueuePosition)

	_, err = st.CompleteOrder(ctx, first.ID, admin, "")
	require.NoError(t, err)
	s, err = st.GetOrder(ctx, scheduled.ID, admin)
	require.NoError(t, err)
	require.Equal(t, domain.StatusAccepted, s.Status)
	require.Empty(t, violations(t, st))
	requireRebuildAgrees(t, st)
}

// requireRebuildAgrees replays every stream and compares it with the
// projections: the new events fold to what their commands wrote.
func requireRebuildAgrees(t *testing.T, st *store.Store) {
	t.Helper()
	report, err := st.Rebuild(context.Background(), false)
	require.NoError(t, err)
	require.Zero(t, report.DifferenceCount, "%v", report.Differences)
}

// TestEndedScheduledOrderFreesItsSlot: cancelling a scheduled order, or the
// close of an unpaid one at its deadline, gives its load back to the slot.
func TestEndedScheduledOrderFreesItsSlot(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 1, PaymentTimeout: 60})
	p := createProduct(t, st, m.ID, &productOpts{Stock: intp(5)})
	withSlots(t, st, m.ID, quarterHours)
	at := nextSlot(time.Now(), time.Hour)
	paid := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "a", PaymentRef: "r", PickupAt: &at})
	unpaid := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "b", PickupAt: &at})
	require.Equal(t, 2, slotTaken(t, b.pool, m.ID, at))

	_, err := st.CancelOrder(ctx, paid.ID, "", customer("a"), "")
	require.NoError(t, err)
	require.Equal(t, 1, slotTaken(t, b.pool, m.ID, at))

	newFakeClock(st).Set(unpaid.PaymentDeadline.Add(time.Second))
	closed, err := st.CloseUnpaid(ctx, m.ID, unpaid.ID)
	require.NoError(t, err)
	require.True(t, closed)
	require.Equal(t, 0, slotTaken(t, b.pool, m.ID, at))
	require.Empty(t, violations(t, st))
	requireRebuildAgrees(t, st)
}

// TestPeriodEdgeChangesTheCapacityInForce: a period's capacity replaces
// the merchant's while it is open; at its edge the capacity in force
// changes as a PATCH would: raising it admits the line at once, lowering
// it evicts nobody. Each edge sets the timer of the next.
func TestPeriodEdgeChangesTheCapacityInForce(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	clock := newFakeClock(st)
	clock.Set(time.Date(2026, 10, 5, 7, 30, 0, 0, time.UTC)) // Monday
	m, p, _ := acceptedOrder(t, st, 1, "first")
	queued := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "q", PaymentRef: "r"})
	require.Equal(t, domain.StatusQueued, queued.Status)
	got, err := st.UpdateMerchant(ctx, m.ID, store.MerchantPatch{Hours: &[]domain.Period{
		{Day: 1, Opens: "07:00", Closes: "08:00"}, {Day: 1, Opens: "08:00", Closes: "09:00", Capacity: intp(3)},
	}}, storeMeta())
	require.NoError(t, err)
	require.Equal(t, 1, got.Load.Capacity)
	var edges int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'period_edge' AND scheduled_at = $1`,
		time.Date(2026, 10, 5, 8, 0, 0, 0, time.UTC)).Scan(&edges))
	require.Equal(t, 1, edges, "the timer of the next edge")

	clock.Set(time.Date(2026, 10, 5, 8, 0, 0, 0, time.UTC))
	changed, err := st.ApplyPeriodEdge(ctx, m.ID)
	require.NoError(t, err)
	require.True(t, changed)
	got, err = st.GetMerchant(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, 3, got.Load.Capacity)
	require.Equal(t, 1, got.Capacity, "the merchant's own capacity stays")
	q, err := st.GetOrder(ctx, queued.ID, admin)
	require.NoError(t, err)
	require.Equal(t, domain.StatusAccepted, q.Status, "raising admits the line at once")
	again, err := st.ApplyPeriodEdge(ctx, m.ID)
	require.NoError(t, err)
	require.False(t, again, "a repeated timer changes nothing")

	mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "third", PaymentRef: "r"})
	clock.Set(time.Date(2026, 10, 5, 9, 0, 0, 0, time.UTC))
	changed, err = st.ApplyPeriodEdge(ctx, m.ID)
	require.NoError(t, err)
	require.True(t, changed)
	got, err = st.GetMerchant(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, 1, got.Load.Capacity)
	require.Equal(t, 3, got.Load.Active, "lowering evicts nobody")
	require.Empty(t, violations(t, st))
	requireRebuildAgrees(t, st)
}

// The slot race runs this test binary again as two more OS processes
// placing orders for one slot; these variables tell such a process what to
// do.
const (
	slotHelperDB       = "ORDERD_SLOT_HELPER_DB"
	slotHelperMerchant = "ORDERD_SLOT_HELPER_MERCHANT"
	slotHelperProduct  = "ORDERD_SLOT_HELPER_PRODUCT"
	slotHelperOffset   = "ORDERD_SLOT_HELPER_OFFSET_NS"
	slotHelperPickup   = "ORDERD_SLOT_HELPER_PICKUP_NS"
	slotRacers         = 12
)

// raceForSlot places slotRacers orders for the slot at pickup at once,
// paid and unpaid, and reports how many were placed; every other answer
// must be slot_full.
func raceForSlot(ctx context.Context, st *store.Store, target helperTarget, pickup time.Time) (int, error) {
	var wg sync.WaitGroup
	errs := make([]error, slotRacers)
	for i := range slotRacers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ref := ""
			if i%2 == 0 {
				ref = "pay"
			}
			_, errs[i] = place(ctx, st, target.merchant, target.product, placeOpts{
				Customer: fmt.Sprintf("racer-%d-%s", i, uuid.NewString()[:8]), PaymentRef: ref, PickupAt: &pickup,
			})
		}()
	}
	wg.Wait()
	placed := 0
	for _, err := range errs {
		switch {
		case err == nil:
			placed++
		case !errors.Is(err, domain.ErrSlotFull):
			return placed, err
		}
	}
	return placed, nil
}

func slotHelper() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var target helperTarget
	if err := target.readEnv(slotHelperMerchant, slotHelperProduct, slotHelperOffset); err != nil {
		return err
	}
	ns, err := strconv.ParseInt(os.Getenv(slotHelperPickup), 10, 64)
	if err != nil {
		return err
	}
	return runInHelperProcess(ctx, os.Getenv(slotHelperDB), 8, func(ctx context.Context, st *store.Store, _ *pgxpool.Pool) error {
		placed, err := raceForSlot(ctx, st, target, time.Unix(0, ns).UTC())
		fmt.Printf("placed=%d\n", placed)
		return err
	})
}

// TestProcessesRaceForASlotsLastPlace: three OS processes (this one and
// two more) place orders at once for the last place of a slot, while a
// second connection holds the slot's row lock: every request waits for it
// rather than answering slot_full, and once it is let go exactly one
// request gets the place; every other answers slot_full, and the slot
// holds exactly its capacity.
func TestProcessesRaceForASlotsLastPlace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const capacity = 5
	shop := newSlotShop(t, capacity)
	url, pool, st, m, p, at := shop.url, shop.pool, shop.st, shop.m, shop.p, shop.at
	for i := range capacity - 1 {
		mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: fmt.Sprintf("early-%d", i), PickupAt: &at})
	}

	holder, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer holder.Rollback(ctx) //nolint:errcheck // released below
	_, err = holder.Exec(ctx, `SELECT 1 FROM pickup_slots WHERE merchant_id = $1 AND starts_at = $2 FOR UPDATE`, m.ID, at)
	require.NoError(t, err)

	const helpers = 2
	outs := make([][]byte, helpers)
	errs := make([]error, helpers)
	var wg sync.WaitGroup
	for i := range helpers {
		cmd := osexec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), slotHelperDB+"="+url, slotHelperMerchant+"="+m.ID.String(),
			slotHelperProduct+"="+p.ID.String(), slotHelperOffset+"=0", slotHelperPickup+"="+strconv.FormatInt(at.UnixNano(), 10))
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = cmd.Output()
		}()
	}
	var mine int
	var mineErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		raceCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		mine, mineErr = raceForSlot(raceCtx, st, helperTarget{merchant: m.ID, product: p.ID}, at)
	}()

	// Requests from every process arrive and wait for the slot's row.
	eventually(t, 30*time.Second, func() bool {
		// The first batch waits for the slot, and batches behind it for
		// what it holds (the merchant, its pickup counters).
		var onSlot, waiting int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE query LIKE '%pickup_slots%'), count(*)
			FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&onSlot, &waiting))
		return onSlot >= 1 && waiting >= 3
	}, "placements wait for the held slot")
	require.Equal(t, capacity-1, slotTaken(t, pool, m.ID, at), "nobody answered before the lock was let go")
	require.NoError(t, holder.Rollback(ctx))
	wg.Wait()

	require.NoError(t, mineErr)
	total := mine
	for i := range helpers {
		require.NoError(t, errs[i], "helper process %d: %s", i, outs[i])
		var n int
		_, err := fmt.Sscanf(strings.TrimSpace(string(outs[i])), "placed=%d", &n)
		require.NoError(t, err, "helper process %d: %s", i, outs[i])
		total += n
	}
	require.Equal(t, 1, total, "exactly one of %d requests took the last place", (helpers+1)*slotRacers)
	require.Equal(t, capacity, slotTaken(t, pool, m.ID, at))
	var orders int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE merchant_id = $1 AND pickup_at = $2`, m.ID, at).Scan(&orders))
	require.Equal(t, capacity, orders)
	require.Empty(t, violations(t, st))
}

// slotShop is a merchant with a product and slots of capacity, on a store
// whose pool has room for a second connection holding rows, and the next
// slot an hour or more ahead; other processes reach its database at url.
type slotShop struct {
	url  string
	pool *pgxpool.Pool
	st   *store.Store
	m    *store.MerchantView
	p    *store.ProductView
	at   time.Time
}

func newSlotShop(t *testing.T, capacity int) slotShop {
	t.Helper()
	url := storetest.URL(t)
	pool, err := poolOf(context.Background(), url, 8)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	ins, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	st := newStore(store.Config{Pool: pool, Jobs: ins})
	m := createMerchant(t, st, &merchantOpts{Capacity: 2})
	p := createProduct(t, st, m.ID, nil)
	withSlots(t, st, m.ID, domain.SlotSettings{Minutes: 15, Capacity: capacity, HorizonDays: 1})
	return slotShop{url: url, pool: pool, st: st, m: m, p: p, at: nextSlot(time.Now(), time.Hour)}
}
