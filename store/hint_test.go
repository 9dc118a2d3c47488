package store_test

import (
	"context"
	"testing"
	"time"

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
