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
	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/store/storetest"
)

// The pickup test runs this test binary again as a second and third OS
// process placing orders; these variables tell such a process what to do.
const (
	pickupHelperDB       = "ORDERD_PICKUP_HELPER_DB"
	pickupHelperMerchant = "ORDERD_PICKUP_HELPER_MERCHANT"
	pickupHelperProduct  = "ORDERD_PICKUP_HELPER_PRODUCT"
	pickupHelperOffset   = "ORDERD_PICKUP_HELPER_OFFSET_NS"
	pickupHelperStart    = "ORDERD_PICKUP_HELPER_START_NS"
	pickupHelperCount    = "ORDERD_PICKUP_HELPER_COUNT"
)

func TestMain(m *testing.M) {
	if os.Getenv(pickupHelperDB) != "" {
		if err := pickupHelper(); err != nil {
			fmt.Fprintln(os.Stderr, "pickup helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// pickupPlan is one actor's share of the placements: count paid orders,
// paced evenly over pickupSpread from start, with a clock offset from the
// machine's by offset.
type pickupPlan struct {
	merchant, product uuid.UUID
	offset            time.Duration
	start             time.Time
	count             int
}

const (
	pickupSpread  = 3 * time.Second
	pickupWorkers = 8
)

func (p pickupPlan) run(ctx context.Context, st *store.Store) error {
	st.Now = func() time.Time { return time.Now().Add(p.offset) }
	spacing := pickupSpread / time.Duration(p.count)
	var next atomic.Int64
	errs := make(chan error, pickupWorkers)
	var wg sync.WaitGroup
	for range pickupWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= p.count {
					return
				}
				time.Sleep(time.Until(p.start.Add(time.Duration(i) * spacing)))
				_, err := st.PlaceOrder(ctx, store.PlaceParams{
					MerchantID: p.merchant, CustomerID: fmt.Sprintf("c-%d-%s", i, uuid.NewString()), PaymentRef: "paid",
					Lines:          []domain.LineRequest{{ProductID: p.product.String(), Quantity: 1}},
					IdempotencyKey: uuid.NewString(), RequestHash: []byte("h"),
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return errors.Join(func() []error {
		var all []error
		for err := range errs {
			all = append(all, err)
		}
		return all
	}()...)
}

func smallPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 4
	return pgxpool.NewWithConfig(ctx, cfg)
}

func pickupHelper() error {
	ctx := context.Background()
	var p pickupPlan
	var err error
	if p.merchant, err = uuid.Parse(os.Getenv(pickupHelperMerchant)); err != nil {
		return err
	}
	if p.product, err = uuid.Parse(os.Getenv(pickupHelperProduct)); err != nil {
		return err
	}
	offset, err := strconv.ParseInt(os.Getenv(pickupHelperOffset), 10, 64)
	if err != nil {
		return err
	}
	start, err := strconv.ParseInt(os.Getenv(pickupHelperStart), 10, 64)
	if err != nil {
		return err
	}
	if p.count, err = strconv.Atoi(os.Getenv(pickupHelperCount)); err != nil {
		return err
	}
	p.offset, p.start = time.Duration(offset), time.Unix(0, start)
	pool, err := smallPool(ctx, os.Getenv(pickupHelperDB))
	if err != nil {
		return err
	}
	defer pool.Close()
	return p.run(ctx, store.New(pool, nil))
}

// TestPickupCodesUniqueAcrossMidnight places 2,000 paid orders at one
// merchant from eight goroutines in each of three OS processes (this one and
// two more), paced over 3 s across the merchant's local midnight: every
// process's clock runs ahead of the machine's by the same amount, so that
// midnight in the merchant's time zone falls in the middle of the run. No
// code repeats within a local day, each day's codes are 001, 002, ... with
// no gap, and the new day starts again from 001.
func TestPickupCodesUniqueAcrossMidnight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.URL(t)
	pool, err := smallPool(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := store.New(pool, nil)
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
	errs[helpers] = pickupPlan{merchant: m.ID, product: p.ID, offset: offset, start: start, count: total - helpers*share}.run(ctx, st)
	wg.Wait()
	for i, err := range errs {
		if i < helpers {
			require.NoError(t, err, "helper process %d: %s", i, outs[i])
		} else {
			require.NoError(t, err)
		}
	}

	rows, err := pool.Query(ctx, `SELECT (paid_at AT TIME ZONE $2)::date::text, pickup_code FROM orders WHERE merchant_id = $1`, m.ID, zone)
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
