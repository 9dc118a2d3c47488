//go:build citus

package store_test

import (
	"context"
	"fmt"

	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/internal/citustest"
	"github.com/orderd/orderd/jobs"
	"github.com/orderd/orderd/store"
)

// TestCitusChangedStreamsSeesEveryEventOnce tails the log on a Citus
// cluster while 16 writers, each appending to merchants spread over both
// workers, commit transactions of different lengths, half of them through
// the coordinator and half on the merchant's worker, as placements are.
// The log is read node by node, each worker's rows against its own
// snapshots: a row written through the coordinator carried the
// coordinator's transaction id, which a worker's snapshot cannot judge.
func TestCitusChangedStreamsSeesEveryEventOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url := citustest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	st := store.New(store.Config{Pool: pool})
	defer st.Close()

	const writers, perWriter = 16, 40
	merchants := make([]uuid.UUID, 8)
	direct := make([]*pgxpool.Pool, len(merchants))
	for i := range merchants {
		merchants[i] = uuid.New()
		node, err := st.MerchantNode(ctx, merchants[i])
		require.NoError(t, err)
		direct[i] = workerPool(t, url, node)
	}
	_, since, err := st.ChangedStreams(ctx, "", nil)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				m := (w + i) % len(merchants)
				via := pool
				if w%2 == 1 {
					via = direct[m]
				}
				tx, err := via.Begin(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				_, err = tx.Exec(ctx, `INSERT INTO events (merchant_id, stream_id, stream_type, version, type, data) VALUES ($1, $2, 'test', 1, 't', '{}')`,
					merchants[m], uuid.New())
				if err == nil && (w+i)%3 == 0 {
					time.Sleep(time.Duration((w*7+i)%5) * time.Millisecond)
				}
				if err == nil {
					err = tx.Commit(ctx)
				}
				if err != nil {
					_ = tx.Rollback(ctx)
					t.Error(err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	seen := map[uuid.UUID]int{}
	read := func() {
		streams, next, err := st.ChangedStreams(ctx, since, nil)
		require.NoError(t, err)
		for _, s := range streams {
			seen[s.ID]++
		}
		since = next
	}
	for {
		select {
		case <-done:
			read()
			require.Len(t, seen, writers*perWriter, "every committed event is read")
			for id, n := range seen {
				require.Equal(t, 1, n, "stream %s read %d times", id, n)
			}
			return
		default:
			read()
		}
	}
}

// TestCitusBackstopQueriesRun: the timer backstops read every shard, with
// queries Citus must accept (the drops' one correlated a subquery without
// FROM, refused at every round).
func TestCitusBackstopQueriesRun(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, citustest.URL(t))
	require.NoError(t, err)
	defer pool.Close()
	st := store.New(store.Config{Pool: pool})
	_, err = st.DropsToSettle(ctx, time.Now(), 10)
	require.NoError(t, err)
}

// TestCitusPlacesManyMerchantsAtOnce: 16 goroutines place orders for 8
// merchants, spread over both workers, through two stores (two processes'
// lanes), while a second connection holds one merchant's row for a while.
// Batches are split by merchant and their merchants decided concurrently;
// every order is decided, the held merchant's requests wait in its parked
// line, and once the queues are drained by completions every audit view is
// clean (fifo_violations: admission in queue order).
func TestCitusPlacesManyMerchantsAtOnce(t *testing.T) {
	ctx := context.Background()
	stores, pool := processStores(t, citustest.URL(t), 2)
	st := stores[0]
	type shop struct{ merchant, product uuid.UUID }
	shops := make([]shop, 8)
	for i := range shops {
		m := createMerchant(t, st, &merchantOpts{Capacity: 2})
		shops[i] = shop{m.ID, createProduct(t, st, m.ID, nil).ID}
	}
	release := holdLock(t, pool, `SELECT 1 FROM merchants WHERE id = $1 FOR NO KEY UPDATE`, shops[0].merchant)

	const writers, perWriter = 16, 10
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[domain.OrderStatus]int{}
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				sh := shops[(w+i)%len(shops)]
				ref := "r"
				if i%5 == 4 {
					ref = ""
				}
				ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				res, err := place(ctx, stores[w%2], sh.merchant, sh.product, placeOpts{Customer: fmt.Sprintf("c%d-%d", w, i), PaymentRef: ref})
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				statuses[res.Order.Status]++
				mu.Unlock()
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	release()
	wg.Wait()
	require.Equal(t, writers*perWriter, countRows(t, pool, "orders"), "every order decided")
	require.Equal(t, writers*perWriter/5, statuses[domain.StatusAwaitingPayment], "%v", statuses)
	require.Positive(t, statuses[domain.StatusQueued], "orders queued: %v", statuses)

	// Completions admit the queued orders, each merchant's in queue order.
	var cg sync.WaitGroup
	for w, sh := range shops {
		cg.Add(1)
		go func() {
			defer cg.Done()
			via := stores[w%2]
			for {
				accepted, err := via.ListMerchantOrders(ctx, sh.merchant, domain.StatusAccepted, 10)
				if err != nil {
					t.Error(err)
					return
				}
				if len(accepted) == 0 {
					return
				}
				for _, o := range accepted {
					if _, err := via.CompleteOrder(ctx, o.ID, admin, ""); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	cg.Wait()
	var queued int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE status = 'queued'`).Scan(&queued))
	require.Zero(t, queued, "every queue drained")
	require.Empty(t, violations(t, st))
}

// shardLog follows the commands a Citus coordinator reports sending
// to its workers (citus.log_remote_commands): which shards each
// distributed transaction touched.
type shardLog struct {
	mu sync.Mutex
	// open is the transaction running on each worker connection of each
	// session with the coordinator.
	open map[string]string
	// shards are the shards each transaction's commands named.
	shards map[string]map[int64]bool
}

var (
	beginRe = regexp.MustCompile(`assign_distributed_transaction_id\(\d+, (\d+),`)
	shardRe = regexp.MustCompile(`public\.[a-z_]+_(\d{6,})\b`)
)

func (r *shardLog) note(c *pgconn.PgConn, n *pgconn.Notice) {
	if !strings.HasPrefix(n.Message, "issuing ") {
		return // run on the coordinator itself
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// The detail names the worker and the session's own number for its
	// connection there, which other sessions reuse.
	conn := fmt.Sprintf("%d %s", c.PID(), n.Detail)
	if m := beginRe.FindStringSubmatch(n.Message); m != nil {
		r.open[conn] = m[1]
		return
	}
	tx, ok := r.open[conn]
	if !ok {
		return // a statement of its own, outside any transaction
	}
	if strings.HasPrefix(n.Message, "issuing COMMIT") || strings.HasPrefix(n.Message, "issuing ROLLBACK") ||
		strings.HasPrefix(n.Message, "issuing PREPARE TRANSACTION") {
		delete(r.open, conn)
		return
	}
	if r.shards[tx] == nil {
		r.shards[tx] = map[int64]bool{}
	}
	for _, m := range shardRe.FindAllStringSubmatch(n.Message, -1) {
		id, _ := strconv.ParseInt(m[1], 10, 64)
		r.shards[tx][id] = true
	}
}

// reset forgets the transactions seen so far.
func (r *shardLog) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.shards = map[string]map[int64]bool{}
}

// requireOneShardEach fails unless every transaction seen since the last
// reset touched one merchant's shards (co-located shards share their hash
// range), and at least one was seen.
func (r *shardLog) requireOneShardEach(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT shardid, shardminvalue FROM pg_dist_shard WHERE shardminvalue IS NOT NULL`)
	require.NoError(t, err)
	ranges := map[int64]string{}
	for rows.Next() {
		var id int64
		var min string
		require.NoError(t, rows.Scan(&id, &min))
		ranges[id] = min
	}
	require.NoError(t, rows.Err())
	r.mu.Lock()
	defer r.mu.Unlock()
	require.NotEmpty(t, r.shards, "no transaction reached a worker")
	for tx, shards := range r.shards {
		groups := map[string]bool{}
		for id := range shards {
			groups[ranges[id]] = true
		}
		require.LessOrEqual(t, len(groups), 1, "transaction %s touched the shards %v of several merchants", tx, shards)
	}
}

// citusStore is a store with a job inserter on a new distributed database,
// whose connections report every command they send to the workers.
func citusStore(t *testing.T) (*store.Store, *pgxpool.Pool, *shardLog) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(citustest.URL(t))
	require.NoError(t, err)
	rc := &shardLog{open: map[string]string{}, shards: map[string]map[int64]bool{}}
	cfg.ConnConfig.RuntimeParams["citus.log_remote_commands"] = "on"
	cfg.ConnConfig.RuntimeParams["client_min_messages"] = "log"
	cfg.ConnConfig.OnNotice = rc.note
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	ins, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	return newStore(store.Config{Pool: pool, Jobs: ins}), pool, rc
}

// processStores is n stores on url, each with a pool and job inserter of
// its own, as n orderd processes would have, and the last one's pool.
func processStores(t *testing.T, url string, n int) ([]*store.Store, *pgxpool.Pool) {
	t.Helper()
	var stores []*store.Store
	var pool *pgxpool.Pool
	for range n {
		p, err := pgxpool.New(context.Background(), url)
		require.NoError(t, err)
		t.Cleanup(p.Close)
		ins, err := jobs.NewInserter(p)
		require.NoError(t, err)
		st := store.New(store.Config{Pool: p, Jobs: ins})
		t.Cleanup(st.Close)
		stores = append(stores, st)
		pool = p
	}
	return stores, pool
}

// merchantsOnEveryWorker creates merchants until there are at least n and
// every worker holds one.
func merchantsOnEveryWorker(t *testing.T, st *store.Store, pool *pgxpool.Pool, n int) []*store.MerchantView {
	t.Helper()
	var workers int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM citus_get_active_worker_nodes()`).Scan(&workers))
	nodes := map[string]bool{}
	var out []*store.MerchantView
	for len(out) < n || len(nodes) < workers {
		require.Less(t, len(out), 64, "no merchant on some worker")
		m := createMerchant(t, st, &merchantOpts{Capacity: 100})
		var node string
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT nodename || ':' || nodeport FROM citus_shards
			WHERE table_name = 'merchants'::regclass AND shardid = get_shard_id_for_distribution_column('merchants', $1::uuid)`, m.ID).Scan(&node))
		nodes[node] = true
		out = append(out, m)
	}
	return out
}

// TestCitusDropJoinsStayOnOneShard: concurrent joins of drops of merchants
// on both workers, which the join batches group, each rank in its drop's
// line, and every transaction of theirs touches one merchant's shards. A
// join batch locked its drops by id alone, which Citus refuses (a FOR
// UPDATE on every shard): no join succeeded there.
func TestCitusDropJoinsStayOnOneShard(t *testing.T) {
	ctx := context.Background()
	st, pool, rc := citusStore(t)
	clock := newFakeClock(st)
	var drops []*store.DropView
	for _, m := range merchantsOnEveryWorker(t, st, pool, 4) {
		drops = append(drops, scheduledDrop(t, st, clock, m.ID))
	}
	openDrops(t, st, clock, drops)

	const perDrop = 30
	rc.reset()
	var wg sync.WaitGroup
	for i := range perDrop * len(drops) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := st.JoinDrop(ctx, drops[i%len(drops)].ID, fmt.Sprintf("c%d", i), "")
			if !assert.NoError(t, err) {
				return
			}
			assert.True(t, res.Created)
		}()
	}
	wg.Wait()
	for _, d := range drops {
		draw, err := st.GetDraw(ctx, d.ID)
		require.NoError(t, err)
		require.Len(t, draw.Entries, perDrop)
		for i, e := range draw.Entries {
			require.NotNil(t, e.Rank)
			require.Equal(t, i+1, *e.Rank, "drop %s ranks its line in order", d.ID)
		}
	}
	rc.requireOneShardEach(t, pool)
}

// TestCitusWebhookAttemptsStayOnOneShard: one record of outcomes of
// merchants on both workers (delivered, rescheduled, dead) writes each
// merchant's rows in a transaction of their shard. It updated every
// merchant's outbox rows in one statement, a transaction over several
// shards.
func TestCitusWebhookAttemptsStayOnOneShard(t *testing.T) {
	ctx := context.Background()
	st, pool, rc := citusStore(t)
	b := &testBundle{pool: pool, store: st}
	merchants := merchantsOnEveryWorker(t, st, pool, 4)
	want := map[uuid.UUID]string{}
	for i, m := range merchants {
		for _, id := range addOutbox(t, b, m.ID, uuid.New(), 1) {
			want[id] = []string{"delivered", "pending", "dead"}[i%3]
			if i%3 == 2 {
				// On its last attempt.
				_, err := pool.Exec(ctx, `UPDATE outbox SET attempts = 1 WHERE merchant_id = $1 AND id = $2`, m.ID, id)
				require.NoError(t, err)
			}
		}
	}
	claimed, err := st.ClaimWebhooks(ctx, store.ClaimParams{Limit: 100, Lease: time.Minute})
	require.NoError(t, err)
	require.Len(t, claimed, len(want))
	var results []store.AttemptResult
	for _, d := range claimed {
		if want[d.ID] == "delivered" {
			results = append(results, store.AttemptResult{Delivery: d, StartedAt: time.Now(), StatusCode: 200, OK: true})
		} else {
			results = append(results, failed(d))
		}
	}

	rc.reset()
	require.NoError(t, st.RecordWebhookAttempts(ctx, results, fastPolicy))
	rc.requireOneShardEach(t, pool)
	got := map[uuid.UUID]string{}
	rows, err := pool.Query(ctx, `SELECT id, status FROM outbox`)
	require.NoError(t, err)
	for rows.Next() {
		var id uuid.UUID
		var s string
		require.NoError(t, rows.Scan(&id, &s))
		got[id] = s
	}
	require.NoError(t, rows.Err())
	require.Equal(t, want, got)
	require.Equal(t, len(want), countRows(t, pool, "webhook_attempts"))
}
