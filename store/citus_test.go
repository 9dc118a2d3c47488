//go:build citus

package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/internal/citustest"
	"github.com/orderd/orderd/store"
)

// TestCitusChangedStreamsSeesEveryEventOnce tails the log on a Citus
// cluster while 16 writers, each appending to merchants spread over both
// workers, commit transactions of different lengths. The rows live on the
// workers, the transaction ids and the reader's snapshots on the
// coordinator: read in one statement, Citus took the rows before the
// snapshot and skipped transactions that committed in between.
func TestCitusChangedStreamsSeesEveryEventOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool, err := pgxpool.New(ctx, citustest.URL(t))
	require.NoError(t, err)
	defer pool.Close()
	st := store.New(pool, nil)

	const writers, perWriter = 16, 40
	merchants := make([]uuid.UUID, 8)
	for i := range merchants {
		merchants[i] = uuid.New()
	}
	_, since, err := st.ChangedStreams(ctx, "")
	require.NoError(t, err)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				tx, err := pool.Begin(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				_, err = tx.Exec(ctx, `INSERT INTO events (merchant_id, stream_id, stream_type, version, type, data) VALUES ($1, $2, 'test', 1, 't', '{}')`,
					merchants[(w+i)%len(merchants)], uuid.New())
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
		streams, next, err := st.ChangedStreams(ctx, since)
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
	st := store.New(pool, nil)
	_, err = st.DropsToSettle(ctx, time.Now(), 10)
	require.NoError(t, err)
}
