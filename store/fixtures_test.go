package store_test

import (
	"context"
	"fmt"
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

type testBundle struct {
	pool  *pgxpool.Pool
	store *store.Store
}

// setup makes a store on a new database, configured further by configure.
func setup(t *testing.T, configure ...func(*store.Config)) (*store.Store, *testBundle) {
	t.Helper()
	pool := storetest.Pool(t)
	ins, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	cfg := store.Config{Pool: pool, Jobs: ins}
	for _, c := range configure {
		c(&cfg)
	}
	st := newStore(cfg)
	return st, &testBundle{pool: pool, store: st}
}

// clocks are the clocks of the stores newStore made, which a test may set.
var clocks sync.Map

// testClock is time.Now until a test sets it.
type testClock struct {
	now atomic.Pointer[func() time.Time]
}

func (c *testClock) Now() time.Time {
	if f := c.now.Load(); f != nil {
		return (*f)()
	}
	return time.Now()
}

// newStore is store.New with a clock that setClock sets.
func newStore(cfg store.Config) *store.Store {
	c := &testClock{}
	if cfg.Now != nil {
		c.now.Store(&cfg.Now)
	}
	cfg.Now = c.Now
	st := store.New(cfg)
	clocks.Store(st, c)
	return st
}

// setClock makes now the clock of st, a store newStore made.
func setClock(st *store.Store, now func() time.Time) {
	c, ok := clocks.Load(st)
	if !ok {
		panic("setClock on a store newStore did not make")
	}
	c.(*testClock).now.Store(&now)
}

// instances returns n stores on one new database, each with a pool, lanes
// and batches of its own, as n processes would have.
func instances(t *testing.T, n int) ([]*store.Store, *testBundle) {
	t.Helper()
	url := storetest.URL(t)
	var stores []*store.Store
	var first *pgxpool.Pool
	for range n {
		pool, err := pgxpool.New(context.Background(), url)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		ins, err := jobs.NewInserter(pool)
		require.NoError(t, err)
		stores = append(stores, newStore(store.Config{Pool: pool, Jobs: ins}))
		if first == nil {
			first = pool
		}
	}
	return stores, &testBundle{pool: first, store: stores[0]}
}

var admin = domain.Party{Actor: domain.ActorAdmin, Subject: "admin"}

func customer(sub string) domain.Party {
	return domain.Party{Actor: domain.ActorCustomer, Subject: sub}
}

type merchantOpts struct {
	Capacity       int
	CapacityUnit   domain.CapacityUnit
	PaymentTimeout int
	MaxQueueWait   int
	WebhookURL     string
}

func createMerchant(t *testing.T, st *store.Store, o *merchantOpts) *store.MerchantView {
	t.Helper()
	if o == nil {
		o = &merchantOpts{Capacity: 5}
	}
	settings := domain.MerchantSettings{
		Name: "Merchant " + uuid.NewString()[:8], Capacity: o.Capacity, PrepSeconds: 60,
		MaxQueueWaitSeconds: 1800, PaymentTimeoutSeconds: 900, WebhookURL: o.WebhookURL,
		CapacityUnit: o.CapacityUnit,
	}
	if o.PaymentTimeout > 0 {
		settings.PaymentTimeoutSeconds = o.PaymentTimeout
	}
	if o.MaxQueueWait > 0 {
		settings.MaxQueueWaitSeconds = o.MaxQueueWait
	}
	m, err := st.CreateMerchant(context.Background(), settings, store.Meta{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	return m
}

type productOpts struct {
	Stock        *int
	PerUserLimit *int
	PriceCents   int64
}

func createProduct(t *testing.T, st *store.Store, merchantID uuid.UUID, o *productOpts) *store.ProductView {
	t.Helper()
	if o == nil {
		o = &productOpts{}
	}
	price := o.PriceCents
	if price == 0 {
		price = 450
	}
	p, err := st.CreateProduct(context.Background(), store.CreateProductParams{
		MerchantID: merchantID, Name: "Tea " + uuid.NewString()[:8], PriceCents: price,
		Stock: o.Stock, PerUserLimit: o.PerUserLimit,
	})
	require.NoError(t, err)
	return p
}

var keySeq atomic.Int64

type placeOpts struct {
	Customer   string
	PaymentRef string
	Quantity   int
	Key        string
	PickupAt   *time.Time
}

func place(ctx context.Context, st *store.Store, merchantID, productID uuid.UUID, o placeOpts) (*store.PlaceResult, error) {
	if o.Customer == "" {
		o.Customer = "alice"
	}
	if o.Quantity == 0 {
		o.Quantity = 1
	}
	if o.Key == "" {
		o.Key = fmt.Sprintf("key-%d", keySeq.Add(1))
	}
	return st.PlaceOrder(ctx, store.PlaceRequest{
		MerchantID: merchantID, CustomerID: o.Customer,
		Lines:          []domain.LineRequest{{ProductID: productID, Quantity: o.Quantity}},
		PaymentRef:     o.PaymentRef,
		IdempotencyKey: o.Key, RequestHash: requestHash(merchantID, productID, o),
		PickupAt: o.PickupAt,
	})
}

// requestHash is the hash place gives the request of o (its quantity
// filled in).
func requestHash(merchantID, productID uuid.UUID, o placeOpts) []byte {
	return []byte(fmt.Sprintf("%s/%s/%d/%s/%v", merchantID, productID, o.Quantity, o.PaymentRef, o.PickupAt))
}

// acceptedOrder makes a merchant of capacity with one product and places
// customer's paid order of it, which the kitchen's room accepts.
func acceptedOrder(t *testing.T, st *store.Store, capacity int, customer string) (*store.MerchantView, *store.ProductView, *store.OrderView) {
	t.Helper()
	m := createMerchant(t, st, &merchantOpts{Capacity: capacity})
	p := createProduct(t, st, m.ID, nil)
	o := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: customer, PaymentRef: "pay-" + customer})
	require.Equal(t, domain.StatusAccepted, o.Status)
	return m, p, o
}

func mustPlace(t *testing.T, st *store.Store, merchantID, productID uuid.UUID, o placeOpts) *store.OrderView {
	t.Helper()
	res, err := place(context.Background(), st, merchantID, productID, o)
	require.NoError(t, err)
	return res.Order
}

func countRows(t *testing.T, pool *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n))
	return n
}

func eventually(t *testing.T, within time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("not within %s: %s", within, msg)
}

func intp(v int) *int { return &v }

func storeMeta() store.Meta { return store.Meta{Actor: domain.ActorAdmin, Subject: "admin"} }

type orderRef struct {
	id       uuid.UUID
	customer string
}

// scheduledDrop creates a FIFO drop of 5 units of a new limited product of
// the merchant, opening a minute from the clock's now and starting an hour
// from it.
func scheduledDrop(t *testing.T, st *store.Store, clock *fakeClock, merchantID uuid.UUID) *store.DropView {
	t.Helper()
	p := createProduct(t, st, merchantID, &productOpts{Stock: intp(5)})
	d, err := st.CreateDrop(context.Background(), store.CreateDropParams{
		ProductID: p.ID, OpensAt: clock.Now().Add(time.Minute), StartsAt: clock.Now().Add(time.Hour),
		Mode: domain.DropFIFO, PurchaseWindowSeconds: intp(60), Units: intp(5), Access: admin,
	})
	require.NoError(t, err)
	return d
}

// openDrops moves the clock to the drops' opening and settles them open.
func openDrops(t *testing.T, st *store.Store, clock *fakeClock, drops []*store.DropView) {
	t.Helper()
	clock.Advance(time.Minute)
	for _, d := range drops {
		require.NoError(t, st.SettleDrop(context.Background(), d.MerchantID, d.ID))
	}
}
