//go:build citus

package store_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/internal/citustest"
	"github.com/orderd/orderd/jobs"
	"github.com/orderd/orderd/store"
)

// routedStore is a store on a new database of the cluster, with its pool.
func routedStore(t *testing.T) (*store.Store, *pgxpool.Pool, string) {
	t.Helper()
	url := citustest.URL(t)
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	ins, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	st := store.New(store.Config{Pool: pool, Jobs: ins})
	t.Cleanup(st.Close)
	return st, pool, url
}

// workerPool is a pool of connections to node ("host:port"), in the
// database url names.
func workerPool(t *testing.T, url, node string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	host, port, err := net.SplitHostPort(node)
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	// No fallback: one would be the coordinator's address.
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = host, uint16(p), nil
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// catalogNode is the worker Citus's catalog places merchantID on.
func catalogNode(t *testing.T, pool *pgxpool.Pool, merchantID uuid.UUID) (string, int64) {
	t.Helper()
	var host string
	var port int
	var shard int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT nodename, nodeport, shardid FROM citus_shards
		WHERE table_name = 'merchants'::regclass AND shardid = get_shard_id_for_distribution_column('merchants', $1::uuid)`, merchantID).Scan(&host, &port, &shard))
	return net.JoinHostPort(host, strconv.Itoa(port)), shard
}

// twoPhaseCommits counts the two-phase commits any node of the database
// started (pg_dist_transaction, kept until Citus's recovery clears them a
// minute later at the earliest) and the transactions prepared there now.
func twoPhaseCommits(t *testing.T, pool *pgxpool.Pool, url string) int {
	t.Helper()
	ctx := context.Background()
	nodes := []*pgxpool.Pool{pool}
	rows, err := pool.Query(ctx, `SELECT node_name || ':' || node_port FROM citus_get_active_worker_nodes()`)
	require.NoError(t, err)
	workers, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	for _, w := range workers {
		nodes = append(nodes, workerPool(t, url, w))
	}
	n := 0
	for _, p := range nodes {
		var c int
		require.NoError(t, p.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_dist_transaction) + (SELECT count(*) FROM pg_prepared_xacts WHERE database = current_database())`).Scan(&c))
		n += c
	}
	return n
}

// TestCitusPlacesANodesMerchantsInOneTransaction: placements of two
// merchants on one worker, in different shards and one placement lane
// (so that they can share a batch), arriving together, are
// decided on that worker in one transaction (a placement batch is split by
// node), which commits in one phase: no node records or prepares a
// two-phase commit. Their events share the worker's transaction id.
func TestCitusPlacesANodesMerchantsInOneTransaction(t *testing.T) {
	ctx := context.Background()
	st, pool, url := routedStore(t)

	type shop struct {
		merchant, product uuid.UUID
		shard             int64
	}
	var pair []shop
	byNode := map[string]shop{}
	tried := 0
	for len(pair) == 0 {
		require.Less(t, tried, 64, "no two merchants on one node in different shards and one lane")
		tried++
		m := createMerchant(t, st, &merchantOpts{Capacity: 1000})
		node, shard := catalogNode(t, pool, m.ID)
		routed, err := st.MerchantNode(ctx, m.ID)
		require.NoError(t, err)
		require.Equal(t, node, routed, "the store places merchant %s where Citus does", m.ID)
		sh := shop{m.ID, createProduct(t, st, m.ID, nil).ID, shard}
		if other, ok := byNode[node]; ok && other.shard != shard && store.SamePlacementLane(other.merchant, sh.merchant) {
			pair = []shop{other, sh}
		}
		if _, ok := byNode[node]; !ok {
			byNode[node] = sh
		}
	}
	before := twoPhaseCommits(t, pool, url)

	const writers, perWriter = 16, 4
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				sh := pair[(w+i)%2]
				if _, err := place(ctx, st, sh.merchant, sh.product, placeOpts{Customer: fmt.Sprintf("c%d-%d", w, i), PaymentRef: "r"}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	require.Equal(t, before, twoPhaseCommits(t, pool, url), "every placement commits in one phase")

	rows, err := pool.Query(ctx, `SELECT merchant_id, tx_id::text FROM events WHERE merchant_id = ANY($1) AND stream_type = 'order'`,
		[]uuid.UUID{pair[0].merchant, pair[1].merchant})
	require.NoError(t, err)
	merchantsOf := map[string]map[uuid.UUID]bool{}
	n := 0
	for rows.Next() {
		var m uuid.UUID
		var tx string
		require.NoError(t, rows.Scan(&m, &tx))
		if merchantsOf[tx] == nil {
			merchantsOf[tx] = map[uuid.UUID]bool{}
		}
		merchantsOf[tx][m] = true
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, writers*perWriter, n, "every order has its one event")
	both := 0
	for _, ms := range merchantsOf {
		if len(ms) == 2 {
			both++
		}
	}
	require.Positive(t, both, "a transaction placed both merchants' orders")
}

// TestCitusFollowsAMovedShard: once a merchant's shard moves to the other
// worker, the store sends its placements there, and placements succeed
// before, while the store still knows the old place (the old worker finds
// the shard gone from its catalog and the batch is routed again), and
// after.
func TestCitusFollowsAMovedShard(t *testing.T) {
	ctx := context.Background()
	st, pool, _ := routedStore(t)
	m := createMerchant(t, st, &merchantOpts{Capacity: 1000})
	p := createProduct(t, st, m.ID, nil)
	from, shard := catalogNode(t, pool, m.ID)
	routed, err := st.MerchantNode(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, from, routed)
	mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "before", PaymentRef: "r"})

	moved := moveShard(t, pool, m.ID, from, shard)

	mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "during", PaymentRef: "r"})
	eventually(t, 30*time.Second, func() bool {
		routed, err := st.MerchantNode(ctx, m.ID)
		return err == nil && routed == moved
	}, "the store routes the merchant to the worker its shard moved to")
	mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "after", PaymentRef: "r"})
	require.Equal(t, 3, countRows(t, pool, "orders"))
}

// TestCitusFollowsASplitShard: once a merchant's shard is split (as the
// cluster grows, docs/scaling-out.md), a placement sent by a shard map that
// still names the old shard is routed again and placed, not failed: Citus
// no longer knows the old shard's id, and the batch's lock of it on the
// worker fails with an internal error naming it.
func TestCitusFollowsASplitShard(t *testing.T) {
	ctx := context.Background()
	st, pool, _ := routedStore(t)
	m := createMerchant(t, st, &merchantOpts{Capacity: 1000})
	p := createProduct(t, st, m.ID, nil)
	from, shard := catalogNode(t, pool, m.ID)
	mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "before", PaymentRef: "r"})
	st.HoldShardMap()

	// Both halves on the same worker: nothing writes meanwhile, so the
	// split's replication has no update to stall on.
	_, err := pool.Exec(ctx, `
		SELECT citus_split_shard_by_split_points(s.shardid, ARRAY[((s.shardminvalue::bigint + s.shardmaxvalue::bigint) / 2)::text],
			ARRAY[n.nodeid, n.nodeid], 'block_writes')
		FROM pg_dist_shard s, pg_dist_node n WHERE s.shardid = $1 AND n.nodename || ':' || n.nodeport = $2`, shard, from)
	require.NoError(t, err)
	_, split := catalogNode(t, pool, m.ID)
	require.NotEqual(t, shard, split, "the merchant's shard after the split")

	_, err = place(ctx, st, m.ID, p.ID, placeOpts{Customer: "after", PaymentRef: "r"})
	require.NoError(t, err, "a placement sent by the map from before the split")
	require.Equal(t, 2, countRows(t, pool, "orders"))
}

// moveShard moves shard, merchantID's, from its worker to another, and
// returns that one.
func moveShard(t *testing.T, pool *pgxpool.Pool, merchantID uuid.UUID, from string, shard int64) string {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT node_name || ':' || node_port FROM citus_get_active_worker_nodes() WHERE node_name || ':' || node_port <> $1`, from)
	require.NoError(t, err)
	others, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotEmpty(t, others, "a second worker to move the shard to")
	fromHost, fromPort, _ := net.SplitHostPort(from)
	toHost, toPort, _ := net.SplitHostPort(others[0])
	_, err = pool.Exec(ctx, `SELECT citus_move_shard_placement($1, $2, $3::int, $4, $5::int, shard_transfer_mode => 'block_writes')`,
		shard, fromHost, fromPort, toHost, toPort)
	require.NoError(t, err)
	moved, _ := catalogNode(t, pool, merchantID)
	require.Equal(t, others[0], moved)
	return moved
}

// TestCitusReadsNoMovedShard: a placement batch on a worker reads its
// products from the worker's shards by their names. After a merchant's
// shard moved away, the old worker keeps its copy until Citus cleans it up;
// a batch sent there by a shard map behind the move must not read that copy
// (which would place an order of a product made unavailable since the
// move), but find the shard gone from the worker's catalog and be routed
// again.
func TestCitusReadsNoMovedShard(t *testing.T) {
	ctx := context.Background()
	st, pool, url := routedStore(t)
	m := createMerchant(t, st, &merchantOpts{Capacity: 1000})
	p := createProduct(t, st, m.ID, nil)
	from, shard := catalogNode(t, pool, m.ID)
	mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "before", PaymentRef: "r"})
	st.HoldShardMap()
	moved := moveShard(t, pool, m.ID, from, shard)
	off := false
	_, err := st.UpdateProduct(ctx, store.UpdateProductParams{MerchantID: m.ID, ProductID: p.ID, Patch: domain.ProductPatch{Available: &off}, Meta: storeMeta()})
	require.NoError(t, err)
	routed, err := st.MerchantNode(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, from, routed, "the store's map is behind the move")

	_, err = place(ctx, st, m.ID, p.ID, placeOpts{Customer: "after", PaymentRef: "r"})
	require.Equal(t, domain.CodeProductUnavailable, domain.ErrorCode(err), "%v", err)
	routed, err = st.MerchantNode(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, moved, routed, "the store routes the merchant where its shard moved")
	var copied bool
	require.NoError(t, workerPool(t, url, from).QueryRow(ctx, `SELECT to_regclass(format('products_%s', get_shard_id_for_distribution_column('products', $1::uuid))) IS NOT NULL`, m.ID).Scan(&copied))
	require.True(t, copied, "the old worker still held its copy of the shard")
}

// TestCitusDownWorkerFailsOnlyItsMerchants: with one worker unreachable (the
// store's connections to it go to a port nothing listens on), placements
// for its merchants answer unavailable (503 with Retry-After), never a
// bare error, while another worker's merchants are placed as before.
func TestCitusDownWorkerFailsOnlyItsMerchants(t *testing.T) {
	ctx := context.Background()
	st, pool, url := routedStore(t)
	ms := merchantsOnEveryWorker(t, st, pool, 2)
	down, _ := catalogNode(t, pool, ms[0].ID)
	var up *store.MerchantView
	for _, m := range ms {
		if n, _ := catalogNode(t, pool, m.ID); n != down {
			up = m
		}
	}
	require.NotNil(t, up)
	downP, upP := createProduct(t, st, ms[0].ID, nil), createProduct(t, st, up.ID, nil)

	// A port that refuses connections: one just closed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())
	st.SetNodePool(down, workerPool(t, url, dead))

	short, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err = place(short, st, ms[0].ID, downP.ID, placeOpts{Customer: "a", PaymentRef: "r"})
	require.Error(t, err)
	require.Equal(t, domain.CodeUnavailable, domain.ErrorCode(err), "%v", err)
	mustPlace(t, st, up.ID, upP.ID, placeOpts{Customer: "b", PaymentRef: "r"})
}
