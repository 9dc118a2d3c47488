package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
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
	writer := store.New(b.pool, nil)
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

// An event committed behind a transaction still in progress is not readable
// yet, and the reader is told so, because that transaction may end without
// sending a hint.
func TestLogHeldBackBehindOpenTransaction(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	head, err := st.LogHead(ctx)
	require.NoError(t, err)

	older, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer older.Rollback(ctx) //nolint:errcheck // ended below
	_, err = older.Exec(ctx, `SELECT pg_current_xact_id()`)
	require.NoError(t, err)

	stream := uuid.New()
	_, err = b.pool.Exec(ctx, `INSERT INTO events (stream_id, stream_type, version, type, data) VALUES ($1, 'test', 1, 't', '{}')`, stream)
	require.NoError(t, err)
	held, err := st.LogHeldBack(ctx)
	require.NoError(t, err)
	require.True(t, held)
	events, _, err := st.ReadLog(ctx, store.ReadLogParams{After: head, Limit: 1000})
	require.NoError(t, err)
	for _, e := range events {
		require.NotEqual(t, stream, e.StreamID, "an event behind an open transaction must wait")
	}

	require.NoError(t, older.Rollback(ctx))
	require.Eventually(t, func() bool {
		events, _, err := st.ReadLog(ctx, store.ReadLogParams{After: head, Limit: 10000})
		require.NoError(t, err)
		for _, e := range events {
			if e.StreamID == stream {
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond)
}
