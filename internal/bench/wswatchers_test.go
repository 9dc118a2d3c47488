package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
)

// TestAWatcherWhosePongWaitsStaysConnected: a server that pings a watcher
// while it reads nothing fills the sockets until the watcher's pong cannot
// be written; the server reads again two seconds later and then admits the
// order. gorilla's own answer to a ping gives its pong one second and then
// fails the read with that write's timeout, so the watcher ended its own
// connection, counted lost ("queued", then "i/o timeout"), as the ws
// scenario's busy watcher processes did; a client that waits for its pong
// to go out, as a browser does, hears the order admitted.
func TestAWatcherWhosePongWaitsStaysConnected(t *testing.T) {
	up := websocket.Upgrader{}
	served, release := make(chan error, 1), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		served <- serveStalledPongs(c)
		<-release // closing now would reset what the watcher has not read
	}))
	defer srv.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := RunWatchers(context.Background(), inR, outW)
		outW.CloseWithError(err)
		done <- err
	}()
	spec := watcherSpec{Watchers: []watcher{{URL: "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/ws", Token: "t", Order: "o1"}}}
	require.NoError(t, json.NewEncoder(inW).Encode(spec))
	reports := make(chan watcherReport, 16)
	go func() {
		defer close(reports)
		dec := json.NewDecoder(bufio.NewReader(outR))
		for {
			var r watcherReport
			if dec.Decode(&r) != nil {
				return
			}
			reports <- r
		}
	}()
	require.True(t, (<-reports).Subscribed)
	if err := <-served; err != nil {
		t.Logf("the server's side ended early: %v", err) // what the watcher heard says why
	}
	heard := time.After(10 * time.Second)
	for admitted := false; !admitted; {
		select {
		case r := <-reports:
			admitted = r.Accepted == 1
		case <-heard:
			admitted = true // the final report says what it heard
		}
	}
	require.NoError(t, inW.Close())
	var r watcherReport
	for r = range reports {
		if r.Done {
			break
		}
	}
	close(release)
	require.NoError(t, <-done)
	require.Zero(t, r.Lost, "lost: %v", r.LastSeen)
	require.Len(t, r.Heard, 1)
}

// serveStalledPongs answers the watcher's subscribe with its order queued,
// pings it without reading until its pongs stall for two seconds, then
// reads again and sends the order accepted.
func serveStalledPongs(c *websocket.Conn) error {
	if _, _, err := c.ReadMessage(); err != nil {
		return err
	}
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"type":"order","order":{"version":1,"status":"queued","queue_position":2}}`)); err != nil {
		return err
	}
	// Pings as large as may be, so that the sockets fill with few of them.
	payload := []byte(strings.Repeat("p", 125))
	var pinged atomic.Int64
	var stalled atomic.Bool
	pinging := make(chan error, 1)
	go func() {
		for !stalled.Load() {
			if err := c.WriteControl(websocket.PingMessage, payload, time.Time{}); err != nil {
				pinging <- err
				return
			}
			pinged.Add(1)
		}
		pinging <- nil
	}()
	// The sockets are full once no ping goes out for two seconds.
	for last := int64(-1); ; {
		time.Sleep(2 * time.Second)
		n := pinged.Load()
		if n == last {
			break
		}
		last = n
	}
	stalled.Store(true)
	go func() {
		for {
			if _, _, err := c.NextReader(); err != nil {
				return
			}
		}
	}()
	if err := <-pinging; err != nil {
		return err
	}
	return c.WriteMessage(websocket.TextMessage, []byte(`{"type":"order","order":{"version":2,"status":"accepted"}}`))
}
