package store_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/ledger/verify"
	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/store/storetest"
)

var testKey = ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))

func extend(t *testing.T, st *store.Store) store.ExtendLogResult {
	t.Helper()
	res, err := st.ExtendLog(context.Background(), store.ExtendLogParams{Log: store.LogMain, Key: testKey})
	require.NoError(t, err)
	require.False(t, res.Busy)
	return res
}

// The log's inclusion and consistency proofs check out with an independent
// implementation of RFC 6962's verification (transparency-dev/merkle), and
// with ledger/verify, for logs of many sizes: every order's events against
// every checkpoint, every pair of checkpoints against each other.
func TestLogProofsVerifyWithAnIndependentRFC6962Verifier(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 100})
	p := createProduct(t, st, m.ID, nil)
	var orders []*store.OrderView
	var checkpoints []*verify.Checkpoint
	for round := range 7 {
		for i := range round + 1 {
			c := fmt.Sprintf("r%d-%d", round, i)
			orders = append(orders, mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: c, PaymentRef: "pay-" + c}))
		}
		res := extend(t, st)
		require.NotNil(t, res.Checkpoint, "round %d", round)
		require.NoError(t, res.Checkpoint.Verify(testKey.Public().(ed25519.PublicKey)))
		checkpoints = append(checkpoints, res.Checkpoint)
	}
	require.Nil(t, extend(t, st).Checkpoint, "nothing new, no checkpoint")

	for _, c := range checkpoints {
		for _, o := range orders {
			receipt, err := st.OrderProof(ctx, o.ID, admin, store.LogMain, int64(c.Size))
			require.NoError(t, err)
			require.NoError(t, receipt.Verify(nil))
			for _, e := range receipt.Events {
				require.NoError(t, proof.VerifyInclusion(rfc6962.DefaultHasher, e.LeafIndex, c.Size, rfc6962.DefaultHasher.HashLeaf(e.Hash), e.Inclusion, c.Root))
			}
		}
		for _, d := range checkpoints {
			if d.Size < c.Size {
				continue
			}
			cons, err := st.ConsistencyProof(ctx, store.LogMain, int64(c.Size), int64(d.Size))
			require.NoError(t, err)
			require.NoError(t, proof.VerifyConsistency(rfc6962.DefaultHasher, c.Size, d.Size, cons, c.Root, d.Root), "%d to %d", c.Size, d.Size)
			require.NoError(t, verify.VerifyConsistency(c.Size, d.Size, c.Root, d.Root, cons))
			if d.Size > c.Size {
				require.Error(t, verify.VerifyConsistency(c.Size, d.Size, d.Root, c.Root, cons))
			}
		}
	}

	// A receipt of the first checkpoint holds only the events it had; an
	// order placed after the last has an empty one.
	first, err := st.OrderProof(ctx, orders[1].ID, admin, store.LogMain, int64(checkpoints[0].Size))
	require.NoError(t, err)
	require.Empty(t, first.Events)
	late := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "late", PaymentRef: "pay-late"})
	receipt, err := st.OrderProof(ctx, late.ID, admin, store.LogMain, 0)
	require.NoError(t, err)
	require.Empty(t, receipt.Events)
	require.Equal(t, checkpoints[len(checkpoints)-1].Size, receipt.Checkpoint.Size)

	_, err = st.ConsistencyProof(ctx, store.LogMain, 1, int64(checkpoints[1].Size))
	require.ErrorIs(t, err, store.ErrNoCheckpoint)
}

// Several instances extend one log between them: the one holding the log's
// head extends it while the others skip, every event enters the log exactly
// once, and when the holder's connection dies another takes over.
func TestOneLogWriterAtATime(t *testing.T) {
	t.Parallel()
	stores, b := instances(t, 3)
	ctx := context.Background()
	m := createMerchant(t, stores[0], &merchantOpts{Capacity: 1000})
	p := createProduct(t, stores[0], m.ID, nil)

	var wg sync.WaitGroup
	var busy atomic.Int64
	errs := make(chan error, len(stores))
	for i, st := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 25 {
				res, err := st.ExtendLog(ctx, store.ExtendLogParams{Log: store.LogMain, Key: testKey})
				if err != nil {
					errs <- err
					return
				}
				if res.Busy {
					busy.Add(1)
				}
				c := fmt.Sprintf("w%d-%d", i, n)
				if _, err := place(ctx, st, m.ID, p.ID, placeOpts{Customer: c, PaymentRef: "pay-" + c}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	t.Logf("extensions that found another writer: %d", busy.Load())

	// A second connection holds the head: every instance skips.
	holder, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = holder.Exec(ctx, `SELECT 1 FROM log_heads WHERE log = 'main' FOR UPDATE`)
	require.NoError(t, err)
	for _, st := range stores {
		res, err := st.ExtendLog(ctx, store.ExtendLogParams{Log: store.LogMain, Key: testKey})
		require.NoError(t, err)
		require.True(t, res.Busy)
	}
	require.NoError(t, holder.Conn().Close(ctx)) // the holder dies
	_ = holder.Rollback(ctx)                     // hands the closed connection back to its pool
	// Its backend ends once the server sees the connection gone.
	var res store.ExtendLogResult
	eventually(t, 5*time.Second, func() bool {
		res, err = stores[1].ExtendLog(ctx, store.ExtendLogParams{Log: store.LogMain, Key: testKey})
		require.NoError(t, err)
		return !res.Busy
	}, "another instance takes the log over")

	var events, leaves, distinct int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM log_leaves),
		(SELECT count(DISTINCT (stream_id, version)) FROM log_leaves)`).Scan(&events, &leaves, &distinct))
	require.Equal(t, events, leaves)
	require.Equal(t, events, distinct)
	require.EqualValues(t, events, res.Size)
}

// A receipt proves the order's events as they are now: once an event
// logged in a checkpoint is changed, removed or put in the middle by a
// superuser with the triggers off, the order's receipt no longer verifies,
// even with the stored hashes left as they were (they are not what a
// receipt serves).
func TestAReceiptOfARewrittenOrderNoLongerProves(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, statement string }{
		{"data changed", `UPDATE events SET data = jsonb_set(data, '{total_cents}', '1') WHERE stream_id = $1 AND version = 1`},
		{"type changed", `UPDATE events SET type = 'order.cancelled' WHERE stream_id = $1 AND version = 3`},
		{"time changed", `UPDATE events SET recorded_at = recorded_at - interval '1 millisecond' WHERE stream_id = $1 AND version = 2`},
		{"event deleted mid-stream", `DELETE FROM events WHERE stream_id = $1 AND version = 2`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, b := setup(t)
			ctx := context.Background()
			m := createMerchant(t, st, &merchantOpts{Capacity: 10})
			p := createProduct(t, st, m.ID, nil)
			// Paid after its placement: its stream has events in the
			// middle.
			o := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "c"})
			_, err := st.PayOrder(ctx, o.ID, "pay", domain.Party{Actor: domain.ActorCustomer, Subject: "c"}, "")
			require.NoError(t, err)
			_, err = st.CompleteOrder(ctx, o.ID, admin, "")
			require.NoError(t, err)
			extend(t, st)
			receipt, err := st.OrderProof(ctx, o.ID, admin, store.LogMain, 0)
			require.NoError(t, err)
			require.Len(t, receipt.Events, 4, "placed, paid, accepted, completed")
			require.NoError(t, receipt.Verify(nil))

			require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, tc.statement, o.ID)
				return err
			}))
			receipt, err = st.OrderProof(ctx, o.ID, admin, store.LogMain, 0)
			require.NoError(t, err)
			require.Error(t, receipt.Verify(nil))
		})
	}
}

// A checkpoint is made when the log grew and the last one is at least the
// interval old: none sooner however much it grew, none later while it did
// not grow, and the log itself follows the events meanwhile.
func TestACheckpointAtMostEveryInterval(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	setClock(st, func() time.Time { return now })
	m := createMerchant(t, st, &merchantOpts{Capacity: 10})
	p := createProduct(t, st, m.ID, nil)
	every := func() store.ExtendLogResult {
		t.Helper()
		res, err := st.ExtendLog(context.Background(), store.ExtendLogParams{Log: store.LogMain, Key: testKey, Interval: time.Minute})
		require.NoError(t, err)
		return res
	}
	first := every()
	require.NotNil(t, first.Checkpoint, "the first checkpoint needs no wait")

	mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "a", PaymentRef: "pay-a"})
	now = now.Add(59 * time.Second)
	res := every()
	require.Nil(t, res.Checkpoint, "grown, but the last checkpoint is younger than the interval")
	require.Greater(t, res.Size, first.Size, "the log follows the events all the same")

	now = now.Add(time.Second)
	res = every()
	require.NotNil(t, res.Checkpoint, "grown and the interval passed")
	require.Equal(t, uint64(res.Size), res.Checkpoint.Size)

	now = now.Add(time.Hour)
	require.Nil(t, every().Checkpoint, "not grown")
}

// The log takes events in the order their transactions ended, the live
// feed's: an event of a transaction that began before another's and
// commits after it, while an extension ran in between, enters the log once,
// after the other's.
func TestTheLogTakesEventsInCommitOrder(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 10})
	p := createProduct(t, st, m.ID, nil)
	extend(t, st)

	early, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = early.Rollback(ctx) }()
	slow := uuid.New()
	_, err = early.Exec(ctx, `INSERT INTO events (stream_id, stream_type, version, type, data, merchant_id)
		VALUES ($1, 'test', 1, 'test.slow', '{}', $2)`, slow, m.ID)
	require.NoError(t, err)
	quick := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "quick", PaymentRef: "pay"})
	extend(t, st)
	require.NoError(t, early.Commit(ctx))
	extend(t, st)

	leaf := func(stream uuid.UUID) []int64 {
		rows, err := b.pool.Query(ctx, `SELECT leaf_index FROM log_leaves WHERE stream_id = $1`, stream)
		require.NoError(t, err)
		idx, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		require.NoError(t, err)
		return idx
	}
	slowLeaves, quickLeaves := leaf(slow), leaf(quick.ID)
	require.Len(t, slowLeaves, 1, "logged once")
	require.NotEmpty(t, quickLeaves)
	require.Greater(t, slowLeaves[0], quickLeaves[len(quickLeaves)-1], "after the transaction that ended first")
}

// Each extension of the log reads the events of the transactions that
// ended since the last one, not every event, however often it runs on one
// connection (its read is a prepared statement, which PostgreSQL may move
// to a generic plan after five runs). Over events written by few
// transactions of many rows each (an import, the ledger benchmark), a read
// that took the transactions in progress from pg_snapshot_xip inside the
// statement was planned blind and read every event at each extension.
func TestEachExtensionReadsOnlyTheEventsItLogs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(storetest.URL(t))
	require.NoError(t, err)
	// One connection: every extension runs the same prepared statement, and
	// the counters read below are this connection's, flushed on demand.
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := newStore(store.Config{Pool: pool})
	merchant := uuid.New()
	const events = 20000
	for range 4 {
		_, err := pool.Exec(ctx, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data)
			SELECT gen_random_uuid(), $1, 'test', 1, 'test.imported', '{}' FROM generate_series(1, $2::int / 4)`, merchant, events)
		require.NoError(t, err)
	}
	res, err := st.ExtendLog(ctx, store.ExtendLogParams{Log: store.LogMain})
	require.NoError(t, err)
	require.EqualValues(t, events, res.Size)
	_, err = pool.Exec(ctx, `ANALYZE events`)
	require.NoError(t, err)

	eventsRead := func() int64 {
		// pg_stat_force_next_flush publishes this connection's counters as
		// it goes idle, before the next statement reads them.
		_, err := pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
		require.NoError(t, err)
		var n int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)
			FROM pg_stat_user_tables WHERE relname = 'events'`).Scan(&n))
		return n
	}
	const extensions = 10
	before := eventsRead()
	for i := range extensions {
		_, err := pool.Exec(ctx, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data)
			VALUES (gen_random_uuid(), $1, 'test', 1, 'test.new', '{}')`, merchant)
		require.NoError(t, err)
		res, err := st.ExtendLog(ctx, store.ExtendLogParams{Log: store.LogMain})
		require.NoError(t, err)
		require.Equal(t, 1, res.Added, "extension %d", i)
	}
	require.Less(t, eventsRead()-before, int64(events), "events read by %d extensions of one event each", extensions)
}
