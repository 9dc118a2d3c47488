package ws_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/store"
)

func issueTicket(t *testing.T, st *store.Store, p auth.Principal) string {
	t.Helper()
	ticket, hash := auth.NewTicket()
	_, err := st.IssueTicket(context.Background(), &store.IssueTicketParams{Hash: hash, TTL: auth.TicketTTL,
		Holder: store.TicketHolder{Subject: p.Subject, Role: string(p.Role), MerchantID: p.MerchantID}})
	require.NoError(t, err)
	return ticket
}

// dialStatus opens a websocket with query and reports the HTTP status of the
// handshake (101 on success).
func dialStatus(t *testing.T, url, query string) int {
	t.Helper()
	c, resp, err := websocket.DefaultDialer.Dial(url+"/?"+query, nil)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	require.NotNil(t, resp, "%v", err)
	return resp.StatusCode
}

// TestTicketOpensOneWebsocketOnAnyInstance: a ticket issued through one
// store opens a websocket on another instance as its holder, and never
// again, on either; an expired or made-up ticket opens nothing.
func TestTicketOpensOneWebsocketOnAnyInstance(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Two instances share the database, as two orderd serve processes do.
	second := &bundle{pool: b.pool, store: store.New(store.Config{Pool: b.pool, Jobs: b.store.Config().Jobs})}
	urlA, urlB := startHub(t, b), startHub(t, second)
	s := newShop(t, b.store, 1)
	o := s.place(t, b.store, "alice")

	ticket := issueTicket(t, b.store, auth.Principal{Subject: "alice", Role: auth.RoleCustomer})
	c, _, err := websocket.DefaultDialer.Dial(urlB+"/?ticket="+ticket, nil)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	send(t, c, map[string]string{"op": "subscribe", "order_id": o.ID.String()})
	require.Equal(t, "order", read(t, c, deliver).Type, "the ticket's holder is alice, who may watch her order")
	require.Equal(t, http.StatusUnauthorized, dialStatus(t, urlA, "ticket="+ticket), "used on the other instance")
	require.Equal(t, http.StatusUnauthorized, dialStatus(t, urlB, "ticket="+ticket), "used on the same instance")

	// The merchant's id travels with its ticket.
	shopTicket := issueTicket(t, second.store, auth.Principal{Subject: "shop", Role: auth.RoleMerchant, MerchantID: s.merchant})
	m, _, err := websocket.DefaultDialer.Dial(urlA+"/?ticket="+shopTicket, nil)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	send(t, m, map[string]string{"op": "subscribe", "merchant_id": s.merchant.String()})
	require.Equal(t, "merchant_load", read(t, m, deliver).Type)

	late := &bundle{pool: b.pool, store: store.New(store.Config{Pool: b.pool, Jobs: b.store.Config().Jobs,
		Now: func() time.Time { return time.Now().Add(auth.TicketTTL + time.Second) }})}
	urlLate := startHub(t, late)
	expired := issueTicket(t, b.store, auth.Principal{Subject: "alice", Role: auth.RoleCustomer})
	require.Equal(t, http.StatusUnauthorized, dialStatus(t, urlLate, "ticket="+expired), "61 s after issue")
	require.Equal(t, http.StatusUnauthorized, dialStatus(t, urlA, "ticket="+expired), "an expired ticket is gone for good")

	made, _ := auth.NewTicket()
	require.Equal(t, http.StatusUnauthorized, dialStatus(t, urlA, "ticket="+made), "never issued")
	require.Equal(t, http.StatusUnauthorized, dialStatus(t, urlA, "ticket=wst_nonsense"), "not a ticket")
}

// TestTicketRaceHasOneWinner: connections racing with one ticket across two
// instances, all at once: exactly one opens.
func TestTicketRaceHasOneWinner(t *testing.T) {
	t.Parallel()
	b := setup(t)
	second := &bundle{pool: b.pool, store: store.New(store.Config{Pool: b.pool, Jobs: b.store.Config().Jobs})}
	urls := []string{startHub(t, b), startHub(t, second)}
	for range 5 {
		ticket := issueTicket(t, b.store, auth.Principal{Subject: "alice", Role: auth.RoleCustomer})
		var opened atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 8 {
			wg.Go(func() {
				<-start
				c, resp, err := websocket.DefaultDialer.Dial(urls[i%2]+"/?ticket="+ticket, nil)
				if err == nil {
					opened.Add(1)
					c.Close()
					return
				}
				if resp == nil || resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("a losing dial must answer 401: %v", err)
				}
			})
		}
		close(start)
		wg.Wait()
		require.Equal(t, int32(1), opened.Load())
	}
}
