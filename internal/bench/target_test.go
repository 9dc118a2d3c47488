package bench

import (
	"slices"
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
