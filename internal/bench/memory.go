package bench

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// memory: one orderd process under three back-to-back rounds of load
// (placements over many merchants, a hot merchant's queue, websocket
// watchers), weighed idle before and after each round once it has collected
// its garbage. A leak shows as live heap or goroutines that grow round after
// round instead of returning to where the first round left them.
func memory(ctx context.Context, t *Target, o Options) (*Result, error) {
	return memoryWith(ctx, t, o, memoryLoads)
}

// memoryLoad is one kind of load of a memory round.
type memoryLoad struct {
	name string
	run  func(ctx context.Context, t *Target, o Options) (*Result, error)
}

// memoryLoads are a memory round's loads, in order.
var memoryLoads = []memoryLoad{
	{"spread", func(ctx context.Context, t *Target, o Options) (*Result, error) {
		o.Duration = 10 * time.Second
		return spread(ctx, t, o)
	}},
	{"hot", func(ctx context.Context, t *Target, o Options) (*Result, error) {
		o.Count = 5000
		return hot(ctx, t, o, false)
	}},
	{"ws", func(ctx context.Context, t *Target, o Options) (*Result, error) {
		return wsRound(ctx, t, o, 1000, 1)
	}},
}

// memoryWith is memory under the given loads. Every round's loads check
// their own invariants, as they do when they run alone; their violations
// are the memory scenario's, named by round and load.
func memoryWith(ctx context.Context, t *Target, o Options, loads []memoryLoad) (*Result, error) {
	if t.Spawn == nil {
		return nil, errors.New("the memory scenario starts its own orderd process; it cannot run with --url")
	}
	inst, err := t.Spawn(ctx)
	if err != nil {
		return nil, err
	}
	defer inst.Stop()
	at := t.via(inst)
	weigh := func() (map[string]float64, error) {
		m, err := collectedScrape(ctx, []string{inst.OpsURL})
		if err != nil {
			return nil, err
		}
		return m[0], nil
	}
	idle, err := weigh()
	if err != nil {
		return nil, err
	}
	const rounds = 3
	res := &Result{Extra: map[string]any{}}
	mib := func(b float64) float64 { return round1(b / (1 << 20)) }
	res.Extra["idle_live_heap_mib"], res.Extra["idle_rss_mib"], res.Extra["idle_goroutines"] =
		mib(idle["go_gc_heap_live_bytes"]), mib(idle["process_resident_memory_bytes"]), idle["go_goroutines"]
	var after []map[string]float64
	start := time.Now()
	for r := 1; r <= rounds; r++ {
		round := Options{Seed: o.Seed + uint64(r), Progress: o.Progress, Out: o.Out, SkipBaselines: true}
		for _, l := range loads {
			lr, err := l.run(ctx, at, round)
			if err != nil {
				return nil, fmt.Errorf("memory round %d %s: %w", r, l.name, err)
			}
			for _, v := range lr.Violations {
				res.Violations = append(res.Violations, fmt.Sprintf("round %d %s: %s", r, l.name, v))
			}
		}
		m, err := weigh()
		if err != nil {
			return nil, err
		}
		after = append(after, m)
		res.Extra[fmt.Sprintf("round%d_live_heap_mib", r)] = mib(m["go_gc_heap_live_bytes"])
		res.Extra[fmt.Sprintf("round%d_rss_mib", r)] = mib(m["process_resident_memory_bytes"])
		res.Extra[fmt.Sprintf("round%d_goroutines", r)] = m["go_goroutines"]
	}
	res.Extra["seconds"] = round1(time.Since(start).Seconds())
	first, last := after[0], after[rounds-1]
	// Caches and pools settle in the first round; later rounds must not add.
	if grown := last["go_gc_heap_live_bytes"] - first["go_gc_heap_live_bytes"]; grown > 0.25*first["go_gc_heap_live_bytes"]+8<<20 {
		res.Violations = append(res.Violations, fmt.Sprintf("live heap grew by %.1f MiB from round 1 to round %d", grown/(1<<20), rounds))
	}
	// Keep-alive connections and pooled database connections stay after
	// the first round; what a later round adds is a leak.
	if grown := last["go_goroutines"] - first["go_goroutines"]; grown > 20 {
		res.Violations = append(res.Violations, fmt.Sprintf("%.0f more goroutines after round %d than after round 1", grown, rounds))
	}
	res.RSSBytes = int64(last["process_resident_memory_bytes"])
	res.InvariantsOK = len(res.Violations) == 0
	return res, nil
}
