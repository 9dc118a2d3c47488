package e2e

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
)

// flakyNetwork stands between the browser and orderd: a TCP proxy that can
// cut every connection at once and refuse new ones, as a phone's network
// does when it drops.
type flakyNetwork struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	down   bool
}

func newFlakyNetwork(t *testing.T, target string) *flakyNetwork {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	n := &flakyNetwork{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { n.serve(c) })
		}
	})
	t.Cleanup(func() { _ = ln.Close(); n.cut(); wg.Wait() })
	return n
}

func (n *flakyNetwork) addr() string { return n.ln.Addr().String() }

func (n *flakyNetwork) serve(client net.Conn) {
	n.mu.Lock()
	if n.down {
		n.mu.Unlock()
		_ = client.Close()
		return
	}
	n.conns[client] = struct{}{}
	n.mu.Unlock()
	server, err := net.Dial("tcp", n.target)
	if err != nil {
		_ = client.Close()
		return
	}
	n.mu.Lock()
	if n.down {
		n.mu.Unlock()
		_ = client.Close()
		_ = server.Close()
		return
	}
	n.conns[server] = struct{}{}
	n.mu.Unlock()
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
	}
	wg.Go(func() { pipe(server, client) })
	wg.Go(func() { pipe(client, server) })
	wg.Wait()
	n.mu.Lock()
	delete(n.conns, client)
	delete(n.conns, server)
	n.mu.Unlock()
}

// cut closes every connection and refuses new ones until restore.
func (n *flakyNetwork) cut() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down = true
	for c := range n.conns {
		_ = c.Close()
	}
}

func (n *flakyNetwork) restore() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down = false
}

// TestTicketSurvivesANetworkDrop: the phone's network drops while its
// order waits in line, the line moves meanwhile, and when the network is
// back the ticket reconnects by itself and shows where the order is now.
func TestTicketSurvivesANetworkDrop(t *testing.T) {
	w := setup(t)
	m, products := w.merchant(t, "Dumpling House", 1, "Pork dumplings")
	ahead := w.paidOrder(t, m.ID, products[0], "c0")
	w.paidOrder(t, m.ID, products[0], "c1")

	network := newFlakyNetwork(t, w.a.Addr())
	link := w.customerLink(t, "alice", m.ID)
	link = "http://" + network.addr() + link[len(w.base):]
	phone := w.tab(t, 390, 844)
	require.NoError(t, chromedp.Run(phone, chromedp.Navigate(link), chromedp.WaitVisible(`#menu li .more`, chromedp.ByQuery)))
	click(phone, t, "#menu li .more")
	click(phone, t, "#place")
	until(phone, t, `document.querySelector("#status").dataset.status === "queued" && document.querySelector("#position").textContent === "2"`)
	until(phone, t, `document.querySelector("#live").textContent === "live"`)

	network.cut()
	until(phone, t, `document.querySelector("#live").textContent === "reconnecting…"`)
	_, err := w.st.CompleteOrder(context.Background(), ahead.ID, domain.Party{Actor: domain.ActorAdmin}, "")
	require.NoError(t, err)
	network.restore()

	// The subscription is sent again on the new connection, and its answer
	// is the order as it is now: one place nearer, still queued.
	until(phone, t, `document.querySelector("#live").textContent === "live" && document.querySelector("#position").textContent === "1" &&
		document.querySelector("#status").dataset.status === "queued"`)
}
