package ws

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

func queuedAt(id uuid.UUID, version, position int) store.Order {
	return store.Order{ID: id, Version: version, Status: domain.StatusQueued, QueuePosition: &position}
}

// A move in the line waits until positionEvery after the previous message;
// a new status goes out at once, carrying the newest position with it.
func TestTakeSpacesMovesInTheLine(t *testing.T) {
	id := uuid.New()
	c := &conn{wake: make(chan struct{}, 1), orders: map[uuid.UUID]*orderSlot{id: {}}}
	t0 := time.Now()

	c.offerOrder(queuedAt(id, 3, 10))
	msgs, next := c.take(t0)
	require.Len(t, msgs, 1, "the snapshot goes out at once")
	require.True(t, next.IsZero())

	c.offerOrder(queuedAt(id, 3, 9))
	msgs, next = c.take(t0.Add(100 * time.Millisecond))
	require.Empty(t, msgs, "a move right after a message waits")
	require.Equal(t, t0.Add(positionEvery), next)

	<-c.wake
	c.offerOrder(queuedAt(id, 3, 8))
	require.Empty(t, c.wake, "a deferred move does not wake the writer again: it holds a timer")

	msgs, next = c.take(t0.Add(positionEvery))
	require.Len(t, msgs, 1)
	require.Contains(t, string(msgs[0]), `"queue_position":8`, "only the newest move is sent")
	require.True(t, next.IsZero())

	c.offerOrder(queuedAt(id, 3, 7))
	accepted := store.Order{ID: id, Version: 4, Status: domain.StatusAccepted}
	c.offerOrder(accepted)
	require.Len(t, c.wake, 1, "a new status wakes the writer")
	msgs, _ = c.take(t0.Add(positionEvery + time.Millisecond))
	require.Len(t, msgs, 1, "a new status is not held back")
	require.Contains(t, string(msgs[0]), `"status":"accepted"`)
}

// A position grows only in a later read of the line (a priority order
// joined ahead); an earlier read never follows a later one.
func TestNewerLetsAPriorityJoinMoveAnOrderBack(t *testing.T) {
	at := func(version, position int, lineSeq int64) state {
		return state{version: version, position: position, lineSeq: lineSeq}
	}
	cases := []struct {
		name       string
		last, next state
		newer      bool
	}{
		{"forward in the same read", at(3, 5, 10), at(3, 4, 10), true},
		{"back in the same read", at(3, 4, 10), at(3, 5, 10), false},
		{"back after a join", at(3, 4, 10), at(3, 5, 11), true},
		{"forward, but an earlier read", at(3, 4, 11), at(3, 3, 10), false},
		{"back to an earlier read", at(3, 5, 11), at(3, 4, 10), false},
		{"a new version wins", at(3, 5, 11), at(4, 0, 0), true},
		{"an old version loses", at(4, 2, 11), at(3, 1, 12), false},
	}
	for _, tc := range cases {
		require.Equal(t, tc.newer, newer(tc.last, tc.next), tc.name)
	}
}
