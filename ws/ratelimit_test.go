package ws_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/ws"
)

// TestSubscribesAreRateLimitedPerConnection: with one subscribe a second
// (bursts of two), the third subscribe at once is answered rate_limited with
// how long to wait and subscribes nothing, the connection stays open, and
// another connection of the same customer has its own allowance.
func TestSubscribesAreRateLimitedPerConnection(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url := startHubWith(t, b, ws.Options{Poll: 20 * time.Millisecond, SubscribesPerSecond: 1})
	s := newShop(t, b.store, 10)
	alice := auth.Principal{Subject: "alice", Role: auth.RoleCustomer}
	var orders []string
	for range 3 {
		orders = append(orders, s.place(t, b.store, "alice").ID.String())
	}
	c := dial(t, url, alice)
	for _, id := range orders[:2] {
		send(t, c, map[string]string{"op": "subscribe", "order_id": id})
		m := read(t, c, deliver)
		require.Equal(t, "order", m.Type)
		require.Equal(t, id, m.Order.ID.String())
	}
	send(t, c, map[string]string{"op": "subscribe", "order_id": orders[2]})
	require.NoError(t, c.SetReadDeadline(time.Now().Add(deliver)))
	var limited struct {
		Type              string `json:"type"`
		Code              string `json:"code"`
		RetryAfterSeconds int    `json:"retry_after_seconds"`
	}
	require.NoError(t, c.ReadJSON(&limited))
	require.Equal(t, "error", limited.Type)
	require.Equal(t, "rate_limited", limited.Code)
	require.Equal(t, 1, limited.RetryAfterSeconds)

	// Unsubscribing is free, and the connection still works.
	send(t, c, map[string]string{"op": "unsubscribe", "order_id": orders[0]})
	send(t, c, map[string]string{"op": "dance"})
	require.Equal(t, "validation_failed", read(t, c, deliver).Code)

	other := dial(t, url, alice)
	send(t, other, map[string]string{"op": "subscribe", "order_id": orders[2]})
	require.Equal(t, "order", read(t, other, deliver).Type, "the limit is per connection")

	// After the wait the first connection may subscribe again.
	time.Sleep(time.Duration(limited.RetryAfterSeconds) * time.Second)
	send(t, c, map[string]string{"op": "subscribe", "order_id": orders[2]})
	require.Equal(t, "order", read(t, c, deliver).Type)
}
