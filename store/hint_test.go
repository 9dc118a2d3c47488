package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/store"
)

func waitWake(t *testing.T, wakes <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-wakes:
	case <-time.After(10 * time.Second):
		t.Fatalf("no log hint: %s", what)
	}
}

func TestLogHintsReachListenersOfOtherStores(t *testing.T) {
	listener, b := setup(t)
	writer := newStore(store.Config{Pool: b.pool})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	wakes := make(chan struct{}, 1)
	wake := func() {
		select {
		case wakes <- struct{}{}:
		default:
		}
	}
	listened := make(chan error, 1)
	go func() { listened <- listener.ListenLog(ctx, wake) }()
	waitWake(t, wakes, "a listener wakes its caller once it listens")
	go writer.RunLogHints(ctx)

	createMerchant(t, writer, nil)
	waitWake(t, wakes, "an event committed through another store")

	// A lost connection ends the listener with an error, so the caller can
	// listen again, and the new listener wakes it at once: whatever was
	// hinted in between is read then.
	_, err := b.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE query LIKE 'LISTEN%' AND datname = current_database() AND pid <> pg_backend_pid()`)
	require.NoError(t, err)
	select {
	case err := <-listened:
		require.Error(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not notice its connection was cut")
	}
	go func() { listened <- listener.ListenLog(ctx, wake) }()
	waitWake(t, wakes, "a listener wakes its caller again after reconnecting")
}

// An event committed while an older transaction holds an xid (an ANALYZE,
// a slow request) is read at once, and the older transaction's own events
// are read when it commits: nothing waits for it and nothing is skipped.
func TestChangedStreamsNotHeldBackByOpenTransaction(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	_, since, err := st.ChangedStreams(ctx, "", nil)
	require.NoError(t, err)

	older, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer older.Rollback(ctx) //nolint:errcheck // committed below
	_, err = older.Exec(ctx, `SELECT pg_current_xact_id()`)
	require.NoError(t, err)

	insert := func(q interface {
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	}) uuid.UUID {
		id := uuid.New()
		_, err := q.Exec(ctx, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data) VALUES ($1, $1, 'test', 1, 't', '{}')`, id)
		require.NoError(t, err)
		return id
	}
	later := insert(b.pool)
	streams, since, err := st.ChangedStreams(ctx, since, nil)
	require.NoError(t, err)
	require.Equal(t, []store.StreamRef{{Type: "test", ID: later, MerchantID: later}}, streams)

	early := insert(older)
	streams, since, err = st.ChangedStreams(ctx, since, nil)
	require.NoError(t, err)
	require.Empty(t, streams, "an uncommitted event is not read")
	require.NoError(t, older.Commit(ctx))
	streams, since, err = st.ChangedStreams(ctx, since, nil)
	require.NoError(t, err)
	require.Equal(t, []store.StreamRef{{Type: "test", ID: early, MerchantID: early}}, streams, "the older transaction's event, once")
	streams, _, err = st.ChangedStreams(ctx, since, nil)
	require.NoError(t, err)
	require.Empty(t, streams)
}

// A reader that names its merchants reads their streams only, each with its
// merchant, and one that names none reads nothing.
func TestChangedStreamsOfSomeMerchants(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	_, since, err := st.ChangedStreams(ctx, "", nil)
	require.NoError(t, err)
	mine, theirs, stream := uuid.New(), uuid.New(), uuid.New()
	for _, m := range []uuid.UUID{mine, theirs} {
		_, err := b.pool.Exec(ctx, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data) VALUES ($1, $2, 'test', 1, 't', '{}')`, m, m)
		require.NoError(t, err)
	}
	_, err = b.pool.Exec(ctx, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data) VALUES ($1, $2, 'test', 1, 't', '{}')`, stream, mine)
	require.NoError(t, err)

	streams, _, err := st.ChangedStreams(ctx, since, []uuid.UUID{mine})
	require.NoError(t, err)
	require.ElementsMatch(t, []store.StreamRef{{Type: "test", ID: mine, MerchantID: mine}, {Type: "test", ID: stream, MerchantID: mine}}, streams)
	streams, _, err = st.ChangedStreams(ctx, since, []uuid.UUID{})
	require.NoError(t, err)
	require.Empty(t, streams)
	streams, _, err = st.ChangedStreams(ctx, since, nil)
	require.NoError(t, err)
	require.Len(t, streams, 3)
}
