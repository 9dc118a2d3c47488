package store

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// Commands on one order take its turn in the order they asked for it; one
// that gives up while waiting neither holds the turn nor loses it for the
// others.
func TestOrderTurnsGoFirstComeFirst(t *testing.T) {
	var turns orderTurns
	ctx := context.Background()
	order := uuid.New()
	release, err := turns.take(ctx, order)
	require.NoError(t, err)

	got := make(chan int, 3)
	for i := range 3 {
		go func() {
			done, err := turns.take(ctx, order)
			if err != nil {
				got <- -1
				return
			}
			got <- i
			done()
		}()
		// The next asks only once this one waits.
		require.Eventually(t, func() bool {
			turns.mu.Lock()
			defer turns.mu.Unlock()
			return len(turns.busy[order]) == i+1
		}, time.Second, time.Millisecond)
	}
	gaveUp, cancel := context.WithCancel(ctx)
	cancelled := make(chan error, 1)
	go func() {
		_, err := turns.take(gaveUp, order)
		cancelled <- err
	}()
	require.Eventually(t, func() bool {
		turns.mu.Lock()
		defer turns.mu.Unlock()
		return len(turns.busy[order]) == 4
	}, time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-cancelled, context.Canceled)

	other, err := turns.take(ctx, uuid.New())
	require.NoError(t, err, "another order's turn is free")
	other()

	release()
	require.Equal(t, []int{0, 1, 2}, []int{<-got, <-got, <-got})
	turns.mu.Lock()
	defer turns.mu.Unlock()
	require.Empty(t, turns.busy, "the last release forgets the order")
}
