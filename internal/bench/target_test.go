package bench

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
)

// The memory scenario weighs the process it started through that
// process's operator listener; a target reached through another process
// that kept only its base URL scraped "/metrics" of no host, and the
// scenario broke inside `bench all`.
func TestTargetViaAnInstanceIsThatInstance(t *testing.T) {
	base := NewTarget("http://127.0.0.1:1", nil, nil)
	base.OpsURL = "http://127.0.0.1:2"
	base.ServerPIDs = func() []int { return []int{1} }
	inst := &Instance{BaseURL: "http://127.0.0.1:3", OpsURL: "http://127.0.0.1:4", PID: 42}

	via := base.via(inst)
	if via.BaseURL != inst.BaseURL || via.OpsURL != inst.OpsURL {
		t.Fatalf("via an instance: base %q ops %q, want %q and %q", via.BaseURL, via.OpsURL, inst.BaseURL, inst.OpsURL)
	}
	if pids := via.serverPIDs(); !slices.Equal(pids, []int{42}) {
		t.Fatalf("via an instance: CPU read from %v, want [42]", pids)
	}
	if via.Spawn != nil {
		t.Fatal("a target reached through one instance must not start others")
	}
}

// The flash scenario's buyers start on connections already open, as the
// baselines they are compared with do (baselinePool): before the clock
// starts, the server has accepted at least one connection a client.
func TestOpenConnectionsOpensOneAClient(t *testing.T) {
	var accepted atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// As orderd's /healthz answers: a body, which holds the
		// connection until it is read.
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			accepted.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	target := NewTarget(srv.URL, nil, nil)
	const clients = 64
	if err := target.openConnections(context.Background(), clients); err != nil {
		t.Fatal(err)
	}
	if n := accepted.Load(); n < clients {
		t.Fatalf("%d connections open for %d clients", n, clients)
	}
	before := accepted.Load()
	if err := target.openConnections(context.Background(), clients); err != nil {
		t.Fatal(err)
	}
	if n := accepted.Load() - before; n != 0 {
		t.Fatalf("%d more connections opened when %d were open already", n, clients)
	}
}
