package store_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

func testEvent(n int) domain.Event {
	return domain.Event{Type: domain.EventOrderCompleted, Data: domain.OrderCompleted{CompletedAt: time.Unix(int64(n), 0).UTC()}}
}

func TestAppendExpectedVersion(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := context.Background()
	id := uuid.New()

	require.NoError(t, st.Append(ctx, store.AppendParams{StreamID: id, MerchantID: id, StreamType: "test", Events: []domain.Event{testEvent(1), testEvent(2)}}))
	err := st.Append(ctx, store.AppendParams{StreamID: id, MerchantID: id, StreamType: "test", ExpectedVersion: 1, Events: []domain.Event{testEvent(3)}})
	require.ErrorIs(t, err, domain.ErrConflict)
	require.NoError(t, st.Append(ctx, store.AppendParams{StreamID: id, MerchantID: id, StreamType: "test", ExpectedVersion: 2, Events: []domain.Event{testEvent(3)}}))

	events, err := st.ReadStream(ctx, id, id)
	require.NoError(t, err)
	require.Len(t, events, 3)
	for i, e := range events {
		require.Equal(t, i+1, e.Version)
	}
}

func TestAppendRaceExactlyOneWins(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := context.Background()
	for round := range 20 {
		id := uuid.New()
		require.NoError(t, st.Append(ctx, store.AppendParams{StreamID: id, MerchantID: id, StreamType: "test", Events: []domain.Event{testEvent(round)}}))
		var wins, conflicts atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				err := st.Append(ctx, store.AppendParams{StreamID: id, MerchantID: id, StreamType: "test", ExpectedVersion: 1, Events: []domain.Event{testEvent(round)}})
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, domain.ErrConflict):
					conflicts.Add(1)
				default:
					t.Errorf("unexpected error: %v", err)
				}
			}()
		}
		close(start)
		wg.Wait()
		require.Equal(t, int32(1), wins.Load(), "round %d", round)
		require.Equal(t, int32(1), conflicts.Load(), "round %d", round)
	}
}

func TestEventsAreAppendOnly(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	require.NoError(t, st.Append(ctx, store.AppendParams{StreamID: uuid.New(), StreamType: "test", Events: []domain.Event{testEvent(1)}}))
	for _, stmt := range []string{
		`UPDATE events SET type = 'x'`,
		`DELETE FROM events`,
		`TRUNCATE events`,
	} {
		_, err := b.pool.Exec(ctx, stmt)
		require.ErrorContains(t, err, "append-only", stmt)
	}
	require.Equal(t, 1, countRows(t, b.pool, "events"))
}

// TestChangedStreamsSeesEveryEventOnce tails the log while 16 writers commit in
// overlapping transactions of different lengths, so positions are assigned in
// one order and committed in another; a reader keeping only the last position
// would skip events.
func TestChangedStreamsSeesEveryEventOnce(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	const writers, perWriter = 16, 40
	_, since, err := st.ChangedStreams(ctx, "", nil)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				tx, err := b.pool.Begin(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				_, err = tx.Exec(ctx, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data) VALUES ($1, $1, 'test', 1, 't', '{}')`, uuid.New())
				if err == nil && (w+i)%3 == 0 {
					// Hold the transaction open so later positions commit first.
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
			require.Equal(t, writers*perWriter, countRows(t, b.pool, "events"))
			return
		default:
			read()
		}
	}
}
