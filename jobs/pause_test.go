package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// resumedAt waits for the merchant's pause to end and returns when the
// merchant.resumed event was recorded.
func resumedAt(t *testing.T, b *bundle, merchantID string, within time.Duration) time.Time {
	t.Helper()
	var at time.Time
	require.Eventually(t, func() bool {
		return b.pool.QueryRow(context.Background(), `SELECT recorded_at FROM events
			WHERE stream_id = $1 AND type = 'merchant.resumed' ORDER BY version DESC LIMIT 1`, merchantID).Scan(&at) == nil
	}, within, 20*time.Millisecond, "the pause ends by itself")
	return at
}

// TestPauseEndsOnTime pauses merchants for 1 and 2 s with queued orders
// waiting: each resumes by itself within 1 s of its end, by its timer, and
// its queue drains at once.
func TestPauseEndsOnTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	startWorkers(t, b)
	ctx := context.Background()
	for _, secs := range []int{1, 2} {
		m, p := merchantAndProduct(t, b.store, 1, 900)
		paused, err := b.store.PauseMerchant(ctx, m, domain.PauseRequest{Mode: domain.PauseQueue, ForSeconds: &secs}, store.Meta{Actor: domain.ActorMerchant})
		require.NoError(t, err)
		require.True(t, paused.Load.Paused)
		o := placeUnpaid(t, b.store, m, p, "alice", "paid")
		require.Equal(t, domain.StatusQueued, o.Status, "paused: nobody is admitted")
		at := resumedAt(t, b, m.String(), 10*time.Second)
		require.WithinRange(t, at, *paused.Load.PausedUntil, paused.Load.PausedUntil.Add(time.Second))
		waitStatus(t, b.store, o.ID, domain.StatusAccepted, time.Second)
		got, err := b.store.GetMerchant(ctx, m)
		require.NoError(t, err)
		require.False(t, got.Load.Paused)
		require.Nil(t, got.Load.PausedUntil)
	}
}

// TestPauseEndsAfterRestart pauses a merchant while no worker runs (every
// process is down) and lets the end pass: once workers start, the merchant
// resumes at once.
func TestPauseEndsAfterRestart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	m, _ := merchantAndProduct(t, b.store, 1, 900)
	secs := 1
	_, err := b.store.PauseMerchant(ctx, m, domain.PauseRequest{Mode: domain.PauseRefuse, ForSeconds: &secs}, store.Meta{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	time.Sleep(1500 * time.Millisecond)
	got, err := b.store.GetMerchant(ctx, m)
	require.NoError(t, err)
	require.True(t, got.Load.Paused, "nothing ran to end it")
	started := time.Now()
	startWorkers(t, b)
	at := resumedAt(t, b, m.String(), 10*time.Second)
	require.WithinRange(t, at, started, started.Add(3*time.Second))
}
