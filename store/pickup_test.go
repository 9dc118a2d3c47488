package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"strconv"
	"sync"
	"sync/atomic"
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

// The pickup test runs this test binary again as a second and third OS
// process placing orders (and the skew, slot and timers tests as processes
// of their own); these variables tell such a process what to do.
const (
	pickupHelperDB       = "ORDERD_PICKUP_HELPER_DB"
	pickupHelperMerchant = "ORDERD_PICKUP_HELPER_MERCHANT"
	pickupHelperProduct  = "ORDERD_PICKUP_HELPER_PRODUCT"
	pickupHelperOffset   = "ORDERD_PICKUP_HELPER_OFFSET_NS"
	pickupHelperStart    = "ORDERD_PICKUP_HELPER_START_NS"
	pickupHelperCount    = "ORDERD_PICKUP_HELPER_COUNT"
)

func TestMain(m *testing.M) {
	for env, helper := range map[string]func() error{pickupHelperDB: pickupHelper, skewHelperDB: skewHelper, slotHelperDB: slotHelper, slotFreeHelperDB: slotFreeHelper, timersHelperDB: timersHelper, flashHelperDB: flashHelper} {
		if os.Getenv(env) == "" {
			continue
		}
		if err := helper(); err != nil {
			fmt.Fprintln(os.Stderr, "helper process:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// pickupPlan is one actor's share of the placements: count orders, paced
// evenly over pickupSpread from start, with a clock offset from the
// machine's by offset. One in three is placed unpaid, and every other one of
// those paid right after; one in five is in the priority lane.
type pickupPlan struct {
	helperTarget
	start time.Time
	count int
}

const (
	pickupSpread  = 3 * time.Second
	pickupWorkers = 8
)

func (p pickupPlan) run(ctx context.Context, st *store.Store, pool *pgxpool.Pool) error {
	setClock(st, func() time.Time { return time.Now().Add(p.offset) })
	spacing := pickupSpread / time.Duration(p.count)
	var next atomic.Int64
	var answered sync.Map // order id -> the code of its placement's answer
	errs := make(chan error, pickupWorkers)
	var wg sync.WaitGroup
	for range pickupWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.work(ctx, st, &next, spacing, &answered); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	if len(all) > 0 {
		return errors.Join(all...)
	}
	var ids []uuid.UUID
	answered.Range(func(id, _ any) bool {
		ids = append(ids, id.(uuid.UUID))
		return true
	})
	if len(ids) != p.count {
		return fmt.Errorf("%d placements answered, %d placed", len(ids), p.count)
	}
	rows, err := pool.Query(ctx, `SELECT id, pickup_code FROM orders WHERE id = ANY($1)`, ids)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id uuid.UUID
		var code string
		if err := rows.Scan(&id, &code); err != nil {
			return err
		}
		if want, _ := answered.Load(id); want != code {
			return fmt.Errorf("order %s: placed with code %v, now %s", id, want, code)
		}
	}
	return rows.Err()
}

func (p pickupPlan) work(ctx context.Context, st *store.Store, next *atomic.Int64, spacing time.Duration, answered *sync.Map) error {
	for {
		i := int(next.Add(1)) - 1
		if i >= p.count {
			return nil
		}
		time.Sleep(time.Until(p.start.Add(time.Duration(i) * spacing)))
		customerID := fmt.Sprintf("c-%d-%s", i, uuid.NewString())
		params := store.PlaceRequest{
			MerchantID: p.merchant, CustomerID: customerID, PaymentRef: "paid",
			Lines:          []domain.LineRequest{{ProductID: p.product, Quantity: 1}},
			IdempotencyKey: uuid.NewString(), RequestHash: []byte("h"),
		}
		if i%3 == 0 {
			params.PaymentRef = ""
		}
		if i%5 == 0 {
			params.Lane = domain.LanePriority
		}
		res, err := st.PlaceOrder(ctx, params)
		if err != nil {
			return err
		}
		o := res.Order
		if o.PickupCode == nil || (*o.PickupCode)[0] != 'K' {
			return fmt.Errorf("placement %d (paid %t) answered pickup code %v", i, params.PaymentRef != "", o.PickupCode)
		}
		answered.Store(o.ID, *o.PickupCode)
		if i%6 != 0 {
			continue
		}
		after, err := st.PayOrder(ctx, o.ID, "paid-later", domain.Party{Actor: domain.ActorCustomer, Subject: customerID}, "")
		if err != nil {
			return err
		}
		if after.PickupCode == nil || *after.PickupCode != *o.PickupCode {
			return fmt.Errorf("order %s placed with code %s, paid with %v", o.ID, *o.PickupCode, after.PickupCode)
		}
	}
}

// sharedDatabaseStore is a store on a test database of its own that other
// processes can open too: its url, a small pool and the store.
func sharedDatabaseStore(ctx context.Context, t *testing.T) (string, *pgxpool.Pool, *store.Store) {
	t.Helper()
	url := storetest.URL(t)
	pool, err := smallPool(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	ins, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	return url, pool, newStore(store.Config{Pool: pool, Jobs: ins})
}

// storeWithSettings is a store on url whose sessions start with settings
// (deadlock_timeout, planner switches), so that a test can make a race or a
// plan show that the defaults would hide.
func storeWithSettings(ctx context.Context, t *testing.T, url string, settings map[string]string) *store.Store {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	for name, value := range settings {
		cfg.ConnConfig.RuntimeParams[name] = value
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	ins, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	return newStore(store.Config{Pool: pool, Jobs: ins})
}

func smallPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	return poolOf(ctx, url, 4)
}

func poolOf(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = maxConns
	return pgxpool.NewWithConfig(ctx, cfg)
}

// helperTarget is what a helper process works on: a merchant and its
// product, with its clock offset from the machine's.
type helperTarget struct {
	merchant, product uuid.UUID
	offset            time.Duration
}

// readEnv reads the target from the environment variables named.
func (h *helperTarget) readEnv(merchantVar, productVar, offsetVar string) error {
	var err error
	if h.merchant, err = uuid.Parse(os.Getenv(merchantVar)); err != nil {
		return err
	}
	if h.product, err = uuid.Parse(os.Getenv(productVar)); err != nil {
		return err
	}
	offset, err := strconv.ParseInt(os.Getenv(offsetVar), 10, 64)
	h.offset = time.Duration(offset)
	return err
}

// runInHelperProcess runs a helper process's part of a test: run, with a
// store of its own (pool of maxConns, jobs) on the test's database url.
func runInHelperProcess(ctx context.Context, url string, maxConns int32, run func(ctx context.Context, st *store.Store, pool *pgxpool.Pool) error) error {
	pool, err := poolOf(ctx, url, maxConns)
	if err != nil {
		return err
	}
	defer pool.Close()
	ins, err := jobs.NewInserter(pool)
	if err != nil {
		return err
	}
	return run(ctx, newStore(store.Config{Pool: pool, Jobs: ins}), pool)
}

func pickupHelper() error {
	ctx := context.Background()
	var p pickupPlan
	if err := p.readEnv(pickupHelperMerchant, pickupHelperProduct, pickupHelperOffset); err != nil {
		return err
	}
	start, err := strconv.ParseInt(os.Getenv(pickupHelperStart), 10, 64)
	if err != nil {
		return err
	}
	if p.count, err = strconv.Atoi(os.Getenv(pickupHelperCount)); err != nil {
		return err
	}
	p.start = time.Unix(0, start)
	return runInHelperProcess(ctx, os.Getenv(pickupHelperDB), 4, p.run)
}

// TestPickupCodesUniqueAcrossMidnight places 2,000 orders (paid and
// unpaid, in both lanes) at one merchant from eight goroutines in each of
// three OS processes (this one and two more), paced over 3 s across the
// merchant's local midnight: every process's clock runs ahead of the
// machine's by the same amount, so that midnight in the merchant's time zone
// falls in the middle of the run. Every placement answers its code, a
// payment after it keeps it, and the order keeps it to the end. No code
// repeats within a local day of placement, each day's codes are 001, 002,
// ... with no gap, and the new day starts again from 001.
func TestPickupCodesUniqueAcrossMidnight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, pool, st := sharedDatabaseStore(ctx, t)
	const zone = "Asia/Kathmandu" // UTC+05:45: a midnight that is no UTC hour
	m, err := st.CreateMerchant(ctx, domain.MerchantSettings{Name: "Momo", Capacity: 100_000, PrepSeconds: 60,
		MaxQueueWaitSeconds: 1800, PaymentTimeoutSeconds: 900, Timezone: zone, PickupPrefix: "K"}, store.Meta{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	p, err := st.CreateProduct(ctx, store.CreateProductParams{MerchantID: m.ID, Name: "momo", PriceCents: 300, Meta: store.Meta{Actor: domain.ActorAdmin}})
	require.NoError(t, err)

	loc, err := time.LoadLocation(zone)
	require.NoError(t, err)
	start := time.Now().Add(time.Second) // the helpers' start-up fits in it
	local := start.In(loc)
	midnight := time.Date(local.Year(), local.Month(), local.Day()+1, 0, 0, 0, 0, loc)
	offset := midnight.Sub(start) - pickupSpread/2
	const total, helpers = 2000, 2
	share := total / (helpers + 1)

	var wg sync.WaitGroup
	outs := make([][]byte, helpers)
	errs := make([]error, helpers+1)
	for i := range helpers {
		cmd := osexec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(),
			pickupHelperDB+"="+url, pickupHelperMerchant+"="+m.ID.String(), pickupHelperProduct+"="+p.ID.String(),
			pickupHelperOffset+"="+strconv.FormatInt(int64(offset), 10), pickupHelperStart+"="+strconv.FormatInt(start.UnixNano(), 10),
			pickupHelperCount+"="+strconv.Itoa(share))
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = cmd.CombinedOutput()
		}()
	}
	errs[helpers] = pickupPlan{helperTarget: helperTarget{merchant: m.ID, product: p.ID, offset: offset}, start: start, count: total - helpers*share}.run(ctx, st, pool)
	wg.Wait()
	for i, err := range errs {
		if i < helpers {
			require.NoError(t, err, "helper process %d: %s", i, outs[i])
		} else {
			require.NoError(t, err)
		}
	}

	rows, err := pool.Query(ctx, `SELECT (placed_at AT TIME ZONE $2)::date::text, pickup_code FROM orders WHERE merchant_id = $1`, m.ID, zone)
	require.NoError(t, err)
	codes := map[string]map[string]bool{}
	n := 0
	for rows.Next() {
		var day, code string
		require.NoError(t, rows.Scan(&day, &code))
		if codes[day] == nil {
			codes[day] = map[string]bool{}
		}
		require.False(t, codes[day][code], "code %s issued twice on %s", code, day)
		codes[day][code] = true
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, total, n)
	require.Len(t, codes, 2, "the run crossed the merchant's local midnight")
	for day, issued := range codes {
		for i := 1; i <= len(issued); i++ {
			require.True(t, issued[fmt.Sprintf("K%03d", i)], "day %s: K%03d missing among %d codes", day, i, len(issued))
		}
	}
}

// TestEveryPlacementIsNumberedAtPlacement: an order's pickup code is in the
// answer of its placement, paid or not, in either lane, and for a drop's
// product; payment keeps it; the placement that starts its stream records it
// (what rebuild folds); a refused placement takes no number.
func TestEveryPlacementIsNumberedAtPlacement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, b := setup(t)
	m, err := st.CreateMerchant(ctx, domain.MerchantSettings{Name: "Codes", Capacity: 1, PrepSeconds: 60,
		MaxQueueWaitSeconds: 1800, PaymentTimeoutSeconds: 900, Timezone: "Asia/Kathmandu", PickupPrefix: "Q"}, store.Meta{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	limited := createProduct(t, st, m.ID, &productOpts{Stock: intp(3)})
	plenty := createProduct(t, st, m.ID, nil)

	placeIn := func(customerID string, product uuid.UUID, quantity int, paymentRef string, lane domain.Lane) (*store.OrderView, error) {
		res, err := st.PlaceOrder(ctx, store.PlaceRequest{
			MerchantID: m.ID, CustomerID: customerID, PaymentRef: paymentRef, Lane: lane,
			Lines:          []domain.LineRequest{{ProductID: product, Quantity: quantity}},
			IdempotencyKey: uuid.NewString(), RequestHash: []byte("h"),
		})
		if err != nil {
			return nil, err
		}
		return res.Order, nil
	}
	unpaid, err := placeIn("ann", limited.ID, 1, "", "")
	require.NoError(t, err)
	require.Equal(t, domain.StatusAwaitingPayment, unpaid.Status)
	require.NotNil(t, unpaid.PickupCode, "an unpaid placement's answer carries its code")
	require.Equal(t, "Q001", *unpaid.PickupCode)
	paid, err := placeIn("bob", limited.ID, 1, "pay-bob", "")
	require.NoError(t, err)
	require.Equal(t, domain.StatusAccepted, paid.Status)
	require.Equal(t, "Q002", *paid.PickupCode)
	priority, err := placeIn("cat", plenty.ID, 1, "", domain.LanePriority)
	require.NoError(t, err)
	require.Equal(t, "Q003", *priority.PickupCode)
	_, err = placeIn("dan", limited.ID, 2, "", "")
	require.Equal(t, domain.CodeSoldOut, domain.ErrorCode(err))
	_, err = placeIn("dan", limited.ID, 2, "pay-dan", "")
	require.Equal(t, domain.CodeSoldOut, domain.ErrorCode(err))
	queued, err := placeIn("eve", plenty.ID, 1, "pay-eve", domain.LanePriority)
	require.NoError(t, err)
	require.Equal(t, domain.StatusQueued, queued.Status)
	require.Equal(t, "Q004", *queued.PickupCode, "refused placements took no number")

	for _, o := range []*store.OrderView{unpaid, priority} {
		after, err := st.PayOrder(ctx, o.ID, "pay-"+o.ID.String(), customer(o.CustomerID), "")
		require.NoError(t, err)
		require.Equal(t, domain.StatusQueued, after.Status)
		require.Equal(t, *o.PickupCode, *after.PickupCode, "payment keeps the code")
	}
	for _, o := range []*store.OrderView{unpaid, paid, priority, queued} {
		read, err := st.GetOrder(ctx, o.ID, admin)
		require.NoError(t, err)
		require.Equal(t, *o.PickupCode, *read.PickupCode)
		var recorded string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT coalesce(data->>'pickup_code', data->'placed'->>'pickup_code') FROM events WHERE stream_id = $1 AND version = 1`,
			o.ID).Scan(&recorded))
		require.Equal(t, *o.PickupCode, recorded, "the placement that starts the stream records the code")
		var inPaid int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE stream_id = $1 AND data ? 'pickup_code' AND version > 1`,
			o.ID).Scan(&inPaid))
		require.Zero(t, inPaid, "no later event numbers the order again")
	}

	// A drop's orders: the three early entries of a started drop are invited.
	f := startedDrop(t, st, 3)
	var codes []string
	for i, c := range []string{"x", "y", "z"} {
		ref := ""
		if i == 1 {
			ref = "pay-" + c
		}
		o := mustPlace(t, st, f.merchant.ID, f.product.ID, placeOpts{Customer: c, PaymentRef: ref})
		require.NotNil(t, o.PickupCode, "drop order of %s", c)
		codes = append(codes, *o.PickupCode)
		if ref == "" {
			after, err := st.PayOrder(ctx, o.ID, "pay-"+c, customer(c), "")
			require.NoError(t, err)
			require.Equal(t, *o.PickupCode, *after.PickupCode)
		}
	}
	require.Equal(t, []string{"001", "002", "003"}, codes)
}

// TestOrderPlacedBeforeCodesIsNumberedAtPayment: an order placed unpaid
// before codes were numbered at placement (its row and its order.placed
// event carry none, as migration 00015 left them) gets the next code of
// its local day of placement when it is paid, recorded in order.paid (so
// the rebuild agrees and the audit finds no duplicate); paying it again
// changes nothing.
func TestOrderPlacedBeforeCodesIsNumberedAtPayment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, b := setup(t)
	m, err := st.CreateMerchant(ctx, domain.MerchantSettings{Name: "Old codes", Capacity: 5, PrepSeconds: 60,
		MaxQueueWaitSeconds: 1800, PaymentTimeoutSeconds: 900, Timezone: "Asia/Kathmandu", PickupPrefix: "R"}, store.Meta{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	p := createProduct(t, st, m.ID, nil)
	old := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "old"})
	require.Equal(t, "R001", *old.PickupCode)
	exec(t, b.pool, `UPDATE orders SET pickup_code = NULL WHERE id = $1`, old.ID)
	exec(t, b.pool, `ALTER TABLE events DISABLE TRIGGER USER`)
	exec(t, b.pool, `UPDATE events SET data = data - 'pickup_code' WHERE stream_id = $1`, old.ID)
	exec(t, b.pool, `ALTER TABLE events ENABLE TRIGGER USER`)
	read, err := st.GetOrder(ctx, old.ID, admin)
	require.NoError(t, err)
	require.Nil(t, read.PickupCode)
	fresh := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "fresh", PaymentRef: "pay-fresh"})
	require.Equal(t, "R002", *fresh.PickupCode)

	paid, err := st.PayOrder(ctx, old.ID, "pay-old", customer("old"), "")
	require.NoError(t, err)
	require.Equal(t, domain.StatusAccepted, paid.Status)
	require.NotNil(t, paid.PickupCode, "the payment numbers the order")
	require.Equal(t, "R003", *paid.PickupCode)
	var recorded string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT data->>'pickup_code' FROM events WHERE stream_id = $1 AND type = 'order.paid'`,
		old.ID).Scan(&recorded))
	require.Equal(t, "R003", recorded)

	again, err := st.PayOrder(ctx, old.ID, "pay-old", customer("old"), "")
	require.NoError(t, err)
	require.Equal(t, "R003", *again.PickupCode)
	next := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "next"})
	require.Equal(t, "R004", *next.PickupCode, "the payment took its number from the day's counter")

	report, err := st.Rebuild(ctx, false)
	require.NoError(t, err)
	require.Empty(t, report.Differences, "%+v", report.Differences)
	var dups int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM audit.duplicate_pickup_codes`).Scan(&dups))
	require.Zero(t, dups)
}
