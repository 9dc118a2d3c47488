package ws

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

func queuedAt(t *testing.T, id uuid.UUID, version, position int) orderOffer {
	t.Helper()
	view, err := newOrderView(store.OrderView{ID: id, Version: version, Status: domain.StatusQueued})
	require.NoError(t, err)
	return orderOffer{view: view, position: position, eta: position * 30, lineSeq: 1}
}

// busyConn is a connection whose writer the test plays: take stands for it.
func busyConn(id uuid.UUID) *conn {
	return &conn{writing: true, orders: map[uuid.UUID]*orderSlot{id: {}}}
}

// A move in the line is sent when the place changed by a sixteenth of
// itself, or is among the first sixteen, or the line settled (however long
// the client waited, a line that still moves sends nothing smaller); a new
// status always goes out, carrying the newest place.
func TestMovesAreSentWhenAPersonWouldNotice(t *testing.T) {
	id := uuid.New()
	c := busyConn(id)
	sent := func() []string {
		msgs, _ := c.take()
		c.writing = true
		out := make([]string, len(msgs))
		for i, m := range msgs {
			out[i] = string(m)
		}
		return out
	}

	require.False(t, c.offerOrder(queuedAt(t, id, 3, 1000), false, nil))
	require.Len(t, sent(), 1, "the snapshot goes out at once")
	require.True(t, c.offerOrder(queuedAt(t, id, 3, 950), false, nil), "50 places of 1000 are held back")
	require.Empty(t, sent())
	require.False(t, c.offerOrder(queuedAt(t, id, 3, 937), false, nil), "63 places of 1000 are a sixteenth")
	msgs := sent()
	require.Len(t, msgs, 1)
	require.Contains(t, msgs[0], `"queue_position":937,"eta_seconds":28110`)

	require.True(t, c.offerOrder(queuedAt(t, id, 3, 936), false, nil), "one place of 937 while the line moves")
	quicker := queuedAt(t, id, 3, 937)
	quicker.eta = 28110 * 8 / 10
	require.True(t, c.offerOrder(quicker, false, nil), "a fifth off the estimate alone")
	quicker.eta = 28110 * 7 / 10
	require.False(t, c.offerOrder(quicker, false, nil), "nearly a third off the estimate alone")
	require.Len(t, sent(), 1)
	require.False(t, c.offerOrder(queuedAt(t, id, 3, 936), true, nil), "any change once the line settled")
	require.Len(t, sent(), 1)

	for pos := 16; pos >= 14; pos-- {
		require.False(t, c.offerOrder(queuedAt(t, id, 3, pos), false, nil), "the first sixteen places count down one by one")
		require.Contains(t, sent()[0], fmt.Sprintf(`"queue_position":%d,`, pos))
	}
	require.False(t, c.offerOrder(queuedAt(t, id, 3, 20), true, nil), "an earlier read of the line is no news")
	require.Empty(t, sent())

	accepted, err := offerOf(store.OrderView{ID: id, Version: 4, Status: domain.StatusAccepted})
	require.NoError(t, err)
	require.False(t, c.offerOrder(accepted, false, nil))
	msgs = sent()
	require.Len(t, msgs, 1, "a new status is not held back")
	require.Contains(t, msgs[0], `"status":"accepted"`)
	require.Contains(t, msgs[0], `"queue_position":null,"eta_seconds":null`)
}

// The place spliced into an order's encoding is what encoding the order
// with that place gives.
func TestOrderMessageCarriesItsPlace(t *testing.T) {
	reason := `a "quoted" reason with "queue_position":null,"eta_seconds":null inside`
	pos, eta := 12, 345
	o := store.OrderView{ID: uuid.New(), Version: 7, Status: domain.StatusQueued, StatusReason: &reason,
		Items: []domain.Item{{ProductID: uuid.New(), Quantity: 2}}, QueuePosition: &pos, EtaSeconds: &eta}
	offer, err := offerOf(o)
	require.NoError(t, err)
	want, err := json.Marshal(orderMessage{Type: "order", Order: o})
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(offer.encode()))
}

// A merchant's status goes out at once when it opens, closes, pauses or
// gets busy; its line's length and estimate are coalesced like places.
func TestStatusWorthSending(t *testing.T) {
	base := merchantStatusMessage{Type: "merchant_status", Open: true, Busy: true, Queued: 400, EstWaitSeconds: 1200}
	with := func(f func(*merchantStatusMessage)) merchantStatusMessage { m := base; f(&m); return m }
	cases := []struct {
		name string
		next merchantStatusMessage
		want bool
	}{
		{"nothing changed", base, false},
		{"a few more in line", with(func(m *merchantStatusMessage) { m.Queued = 410; m.EstWaitSeconds = 1230 }), false},
		{"a sixteenth more in line", with(func(m *merchantStatusMessage) { m.Queued = 425 }), true},
		{"a longer wait by a fifth", with(func(m *merchantStatusMessage) { m.EstWaitSeconds = 1440 }), false},
		{"a longer wait by a quarter", with(func(m *merchantStatusMessage) { m.EstWaitSeconds = 1500 }), true},
		{"no longer busy", with(func(m *merchantStatusMessage) { m.Busy = false }), true},
		{"paused", with(func(m *merchantStatusMessage) { m.Paused = true; m.PauseMode = "queue" }), true},
		{"refusing", with(func(m *merchantStatusMessage) { m.Open = false }), true},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, statusWorthSending(base, tc.next, false), tc.name)
	}
	require.True(t, statusWorthSending(base, cases[1].next, true), "any change once the line settled")
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

// TestAClientCutOffForNotReadingIsCounted: a client that stops reading is
// cut off when a write times out, and counted as dropped. gorilla hides the
// deadline's error behind its own, which is a timeout all the same.
func TestAClientCutOffForNotReadingIsCounted(t *testing.T) {
	h := New(nil, nil, Options{WriteTimeout: 100 * time.Millisecond})
	accepted := make(chan *conn, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := h.upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		accepted <- &conn{hub: h, ws: ws}
	}))
	defer srv.Close()
	client, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	require.NoError(t, err)
	defer client.Close()
	c := <-accepted
	big := bytes.Repeat([]byte("x"), 64<<10)
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.closed && len(c.errs) < 2 {
			c.errs = append(c.errs, big)
			c.signal()
		}
		return c.closed
	}, 30*time.Second, time.Millisecond, "the client that never reads was not cut off")
	h.wg.Wait()
	require.Equal(t, int64(1), h.Stats.Dropped.Load())
}

// When the kitchen's pace changes, every estimate in a line changes at once:
// a ranking sends the new estimate alone to at most estimatesPerRanking of
// a line's watchers, nearest their turn first, and the next ranking to the
// rest; a move worth a message is never held back for it.
func TestANewPaceReachesALongLineOverRankings(t *testing.T) {
	merchant := uuid.New()
	h := &Hub{orders: map[uuid.UUID]*watchedOrder{}, lines: map[uuid.UUID]*line{merchant: {orders: map[uuid.UUID]*watchedOrder{}}},
		refreshOrders: map[uuid.UUID]struct{}{}}
	const watchers = estimatesPerRanking + 500
	conns := make([]*conn, watchers)
	ids := make([]uuid.UUID, watchers)
	for i := range watchers {
		ids[i] = uuid.New()
		c := busyConn(ids[i])
		// The client has its place, 100 + i, at the old pace (30 s an order).
		require.False(t, c.offerOrder(queuedAt(t, ids[i], 3, 100+i), false, nil))
		playWriter(c)
		w := &watchedOrder{conns: map[*conn]struct{}{c: {}}, merchant: merchant, last: queuedAt(t, ids[i], 3, 100+i)}
		h.orders[ids[i]], h.lines[merchant].orders[ids[i]] = w, w
		conns[i] = c
	}
	// The pace halves: every estimate doubles, no place moves. The line is
	// ranked back to front, as a database may return it.
	ranking := func() []store.QueuePosition {
		var out []store.QueuePosition
		for i := watchers - 1; i >= 0; i-- {
			out = append(out, store.QueuePosition{OrderID: ids[i], Version: 3, Position: 100 + i, EtaSeconds: (100 + i) * 60, LineSeq: 2})
		}
		return out
	}
	due := map[uuid.UUID]bool{merchant: true}
	pending := func() (front, back int) {
		for i, c := range conns {
			if msgs := playWriter(c); len(msgs) > 0 {
				require.Len(t, msgs, 1)
				require.Contains(t, string(msgs[0]), fmt.Sprintf(`"eta_seconds":%d`, (100+i)*60))
				if i < estimatesPerRanking {
					front++
				} else {
					back++
				}
			}
		}
		return front, back
	}

	require.False(t, h.offerRanking(due, ranking()))
	require.True(t, h.lines[merchant].held, "the rest wait for the next ranking, or the line to settle")
	front, back := pending()
	require.Equal(t, estimatesPerRanking, front, "the first ranking tells those nearest their turn")
	require.Zero(t, back)

	require.False(t, h.offerRanking(due, ranking()))
	front, back = pending()
	require.Zero(t, front, "who heard the new estimate is not sent it again")
	require.Equal(t, watchers-estimatesPerRanking, back, "the next ranking tells the rest")
	require.False(t, h.lines[merchant].held)

	// A move worth a message goes out whatever the estimates sent: the
	// whole line moves up by a sixteenth, at a pace halved again.
	moved := ranking()
	for i := range moved {
		moved[i].Position -= (moved[i].Position + 15) / 16
		moved[i].EtaSeconds *= 2
	}
	require.False(t, h.offerRanking(due, moved))
	front = 0
	for _, c := range conns {
		if msgs := playWriter(c); len(msgs) > 0 {
			front++
		}
	}
	require.Equal(t, watchers, front, "every watcher hears of its move")
}

// playWriter takes what waits for c's writer, and leaves c busy, as its
// writer would be until the messages were written.
func playWriter(c *conn) [][]byte {
	msgs, _ := c.take()
	c.writing = true
	return msgs
}
