package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"
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

// TestCollectedScrapeAsksForTheCollections: a server that is idle and whose
// heap is large collects only when the runtime forces it, minutes apart; the
// weighing asks each server for its two collections instead of waiting for
// them (it once waited past five minutes inside bench all's memory round).
func TestCollectedScrapeAsksForTheCollections(t *testing.T) {
	var gcs atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/heap", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("gc") == "1" {
			gcs.Add(1)
		}
		fmt.Fprint(w, "heap profile")
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "go_gc_duration_seconds_count %d\ngo_goroutines 7\n", gcs.Load())
	})
	a, b := httptest.NewServer(mux), httptest.NewServer(mux)
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := collectedScrape(ctx, []string{a.URL, b.URL})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.sum("go_gc_duration_seconds_count"); got != 8 {
		t.Fatalf("the scrapes saw %v collections in all, want both servers weighed after all four asked for (4+4)", got)
	}
}
