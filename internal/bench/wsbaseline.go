package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// wsBaseline measures what the ws scenario is compared with: a websocket
// server that reads no database sends perClient messages of body's size to
// each of clients connected clients, each connection written by a goroutine
// of its own, as fast as it can. It returns messages per second from the
// first message sent to the last one received.
func wsBaseline(ctx context.Context, clients, perClient int, body []byte) (float64, error) {
	start := make(chan struct{})
	var connected sync.WaitGroup
	connected.Add(clients)
	upgrader := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		connected.Done()
		select {
		case <-start:
		case <-ctx.Done():
			return
		}
		for range perClient {
			if err := c.WriteMessage(websocket.TextMessage, body); err != nil {
				return
			}
		}
		// Wait for the client to hang up, so that no message is cut off.
		_, _, _ = c.ReadMessage()
	}))
	defer srv.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	var received sync.WaitGroup
	errs := make(chan error, clients)
	conns := make([]*websocket.Conn, 0, clients)
	for range clients {
		dialer := websocket.Dialer{HandshakeTimeout: 30 * time.Second}
		c, _, err := dialer.DialContext(ctx, url, nil)
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			return 0, fmt.Errorf("ws baseline dial: %w", err)
		}
		conns = append(conns, c)
	}
	connected.Wait()
	for _, c := range conns {
		received.Add(1)
		go func() {
			defer received.Done()
			defer c.Close()
			for range perClient {
				if _, _, err := c.ReadMessage(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	began := time.Now()
	close(start)
	received.Wait()
	elapsed := time.Since(began)
	close(errs)
	if err := <-errs; err != nil {
		return 0, fmt.Errorf("ws baseline: %w", err)
	}
	return float64(clients*perClient) / elapsed.Seconds(), nil
}

// wsMessage is an order update as orderd's websocket sends it.
func (t *Target) wsMessage(ctx context.Context) ([]byte, error) {
	view, err := t.sampleOrderView(ctx)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"type": "order", "order": view})
}
