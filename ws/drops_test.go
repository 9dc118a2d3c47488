package ws_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

type dropMessage struct {
	Type   string           `json:"type"`
	Entry  *store.EntryView `json:"entry"`
	Drop   *store.DropView  `json:"drop"`
	Code   string           `json:"code"`
	Detail string           `json:"detail"`
}

func readDrop(t *testing.T, c *websocket.Conn, within time.Duration) dropMessage {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(within)))
	var m dropMessage
	_, data, err := c.ReadMessage()
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &m))
	return m
}

// TestDropAndEntrySubscriptions watches an entry and its drop through the
// draw, invitations, lapses and the sell-out: the entry's position only
// falls, and the final states arrive. Another customer may not watch it.
func TestDropAndEntrySubscriptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	b := setup(t, func(c *store.Config) { c.Now = now })
	url := startHub(t, b)
	s := newShop(t, b.store, 10)
	stock := 2
	p, err := b.store.CreateProduct(ctx, store.CreateProductParams{MerchantID: s.merchant, Name: "cup", PriceCents: 100, Stock: &stock})
	require.NoError(t, err)
	d, err := b.store.CreateDrop(ctx, store.CreateDropParams{
		ProductID: p.ID, OpensAt: now().Add(time.Second), StartsAt: now().Add(time.Hour),
		Mode: domain.DropFIFO, PurchaseWindowSeconds: intp(60), Units: intp(1), Access: admin,
	})
	require.NoError(t, err)
	clock.Store(d.OpensAt.UnixNano())
	customers := []string{"c0", "c1", "c2", "c3"}
	for _, c := range customers {
		_, err := b.store.JoinDrop(ctx, d.ID, c, "")
		require.NoError(t, err)
		clock.Add(int64(time.Millisecond))
	}
	last, err := b.store.MyEntry(ctx, d.ID, "c3")
	require.NoError(t, err)

	other := dial(t, url, auth.Principal{Subject: "c0", Role: auth.RoleCustomer})
	send(t, other, map[string]string{"op": "subscribe", "entry_id": last.ID.String()})
	require.Equal(t, "not_found", readDrop(t, other, deliver).Code)

	watcher := dial(t, url, auth.Principal{Subject: "c3", Role: auth.RoleCustomer})
	send(t, watcher, map[string]string{"op": "subscribe", "entry_id": last.ID.String()})
	first := readDrop(t, watcher, deliver)
	require.Equal(t, "entry", first.Type)
	require.Equal(t, 4, *first.Entry.Position)
	send(t, watcher, map[string]string{"op": "subscribe", "drop_id": d.ID.String()})
	require.Equal(t, "drop", readDrop(t, watcher, deliver).Type)

	settle := func() {
		require.NoError(t, b.store.SettleDrop(ctx, s.merchant, d.ID))
	}
	clock.Store(d.StartsAt.UnixNano())
	settle() // c0 invited
	for range 2 {
		// The window lapses: the next is invited.
		clock.Add(int64(61 * time.Second))
		settle()
	}
	// c2 buys the only unit: c3 ends sold_out.
	_, err = b.store.PlaceOrder(ctx, store.PlaceRequest{MerchantID: s.merchant, CustomerID: "c2", PaymentRef: "p",
		Lines: []domain.LineRequest{{ProductID: p.ID, Quantity: 1}}, IdempotencyKey: "k", RequestHash: []byte("h")})
	require.NoError(t, err)
	settle()

	position := *first.Entry.Position
	var entryDone, dropDone bool
	for !entryDone || !dropDone {
		m := readDrop(t, watcher, deliver)
		switch m.Type {
		case "entry":
			if m.Entry.Position != nil {
				require.Less(t, *m.Entry.Position, position, "positions only fall")
				position = *m.Entry.Position
			}
			entryDone = m.Entry.Status == domain.EntryStatusSoldOut
		case "drop":
			dropDone = m.Drop.State == domain.DropStateSoldOut
		default:
			t.Fatalf("unexpected message %+v", m)
		}
	}
}

func intp(v int) *int { return &v }
