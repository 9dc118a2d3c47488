package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
)

// TestMemoryKeepsItsRoundsViolations: the memory scenario's rounds are
// whole scenarios, whose invariants are checked as when they run alone; a
// violation in any of them is the memory scenario's, not dropped.
func TestMemoryKeepsItsRoundsViolations(t *testing.T) {
	var gcs atomic.Int64
	ops := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A process that collects its garbage at every scrape and holds
		// steady: nothing for the memory checks themselves to find.
		fmt.Fprintf(w, "go_gc_duration_seconds_count %d\ngo_gc_heap_live_bytes 1e7\ngo_goroutines 50\nprocess_resident_memory_bytes 5e7\n", gcs.Add(1))
	}))
	defer ops.Close()
	target := NewTarget("http://127.0.0.1:1", nil, nil)
	target.Spawn = func(context.Context) (*Instance, error) {
		return &Instance{BaseURL: "http://127.0.0.1:1", OpsURL: ops.URL, Stop: func() {}}, nil
	}
	load := func(name string, violatingRound int) memoryLoad {
		round := 0
		return memoryLoad{name, func(context.Context, *Target, Options) (*Result, error) {
			round++
			res := &Result{}
			if round == violatingRound {
				res.Violations = []string{name + " broke"}
			}
			return res, nil
		}}
	}
	res, err := memoryWith(context.Background(), target, Options{}, []memoryLoad{load("spread", 0), load("hot", 2), load("ws", 3)})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"round 2 hot: hot broke", "round 3 ws: ws broke"}
	if !slices.Equal(res.Violations, want) || res.InvariantsOK {
		t.Fatalf("violations %q (invariants ok: %v), want %q", res.Violations, res.InvariantsOK, want)
	}
}
