//go:build citus

package store_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/internal/citustest"
	"github.com/orderd/orderd/jobs"
	"github.com/orderd/orderd/store"
)

// TestCitusSettlesDropsFromTheirWorkers: the backstop's read of the drops
// to settle (a drop joined to its entries and lines) is read on each worker
// over its own shards, joined shard by shard, and finds the overdue drops
// of merchants on every worker, which it settles. Through the coordinator it
// was a distributed join planned there at every round of every process, an
// idle orderd's dearest statement on the coordinator.
func TestCitusSettlesDropsFromTheirWorkers(t *testing.T) {
	ctx := context.Background()
	url := citustest.URL(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	reads := &nodeReads{}
	cfg.ConnConfig.Tracer = reads
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	ins, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	st := newStore(store.Config{Pool: pool, Jobs: ins})
	defer st.Close()
	clock := newFakeClock(st)

	merchants := merchantsOnEveryWorker(t, st, pool, 2)
	var drops []*store.DropView
	for _, m := range merchants {
		drops = append(drops, scheduledDrop(t, st, clock, m.ID))
	}
	n, err := st.DropsToSettle(ctx, clock.Now(), 10)
	require.NoError(t, err)
	require.Zero(t, n, "no drop is due")

	clock.Advance(time.Minute + time.Second)
	n, err = st.DropsToSettle(ctx, clock.Now(), 10)
	require.NoError(t, err)
	require.Equal(t, len(drops), n, "every drop opening is found, on every worker")
	for _, d := range drops {
		got, err := st.GetDrop(ctx, d.ID)
		require.NoError(t, err)
		require.Equal(t, domain.DropStateOpen, got.State)
	}

	coordinator, workers := reads.of(int(cfg.ConnConfig.Port))
	for _, sql := range coordinator {
		require.NotContains(t, sql, "last_deadline", "the coordinator reads no drops to settle")
	}
	var onWorkers int
	for _, sql := range workers {
		if strings.Contains(sql, "last_deadline") {
			onWorkers++
			require.Contains(t, sql, `"drop_entries_`, "each worker joins its shards by their names")
		}
	}
	require.Positive(t, onWorkers)
}

// nodeReads records the statements the store's pools send, by the port of
// the node each went to.
type nodeReads struct {
	mu     sync.Mutex
	byPort map[int][]string
}

func (r *nodeReads) of(coordinatorPort int) (coordinator, workers []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for port, sqls := range r.byPort {
		if port == coordinatorPort {
			coordinator = append(coordinator, sqls...)
		} else {
			workers = append(workers, sqls...)
		}
	}
	return coordinator, workers
}

func (r *nodeReads) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byPort == nil {
		r.byPort = map[int][]string{}
	}
	port := int(conn.Config().Port)
	r.byPort[port] = append(r.byPort[port], data.SQL)
	return ctx
}

func (r *nodeReads) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
