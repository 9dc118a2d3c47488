package bench

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/orderd/orderd/webhook"
)

// TestHotWeightedIsJudgedAgainstHot: the weighted run's goal is a ratio
// to the unweighted run beside it, computed, not stated.
func TestHotWeightedIsJudgedAgainstHot(t *testing.T) {
	for _, c := range []struct {
		hot, weighted float64
		met           bool
	}{{1000, 950, true}, {1000, 900, true}, {1000, 899, false}, {1000, 500, false}} {
		w := &Result{PerS: c.weighted, Extra: map[string]any{}, GoalText: "≤ 10 % slower than hot in the same run"}
		JudgeAcross(map[string]*Result{"hot": {PerS: c.hot}, "hot-weighted": w})
		if w.GoalMet == nil || *w.GoalMet != c.met {
			t.Errorf("hot %.0f/s, weighted %.0f/s: met %s, want %v", c.hot, c.weighted, w.Met(), c.met)
		}
		if w.Ratio != c.weighted/c.hot || w.BaselinePerS != c.hot {
			t.Errorf("hot %.0f/s, weighted %.0f/s: ratio %.3f to %.0f/s", c.hot, c.weighted, w.Ratio, w.BaselinePerS)
		}
	}
	alone := &Result{PerS: 900, Extra: map[string]any{}}
	JudgeAcross(map[string]*Result{"hot-weighted": alone})
	if alone.GoalMet != nil {
		t.Errorf("without hot in the run, hot-weighted's goal was judged %s", alone.Met())
	}
}

func ms(v float64) *float64 { return &v }

// TestTimerPhasesAreJudgedFromWhatClosed: a phase meets the lateness goal
// only when every order it placed closed, none before its deadline, within
// the bounds; nothing closed is no measurement, and an early close is a
// broken invariant.
func TestTimerPhasesAreJudgedFromWhatClosed(t *testing.T) {
	for _, c := range []struct {
		name      string
		f         timerPhaseFigures
		met       bool
		violation string
	}{
		{"on time", timerPhaseFigures{placed: 10, closed: 10, p99: ms(300), maxLateMs: ms(900)}, true, ""},
		{"nothing placed", timerPhaseFigures{}, false, "placed no order"},
		{"nothing closed", timerPhaseFigures{placed: 10}, false, "closed none of its 10 orders"},
		{"some still open", timerPhaseFigures{placed: 10, closed: 9, p99: ms(300), maxLateMs: ms(900)}, false, ""},
		{"closed early", timerPhaseFigures{placed: 10, closed: 10, early: 2, p99: ms(300), maxLateMs: ms(900)}, false, "2 orders closed before their payment deadline"},
		{"p99 late", timerPhaseFigures{placed: 10, closed: 10, p99: ms(1001), maxLateMs: ms(1500)}, false, ""},
		{"max late", timerPhaseFigures{placed: 10, closed: 10, p99: ms(900), maxLateMs: ms(2001)}, false, ""},
	} {
		c.f.name = "short"
		met, violations := judgeTimerPhase(c.f)
		if met != c.met {
			t.Errorf("%s: met %v, want %v", c.name, met, c.met)
		}
		if c.violation == "" && len(violations) > 0 || c.violation != "" && !slices.ContainsFunc(violations, func(v string) bool { return strings.Contains(v, c.violation) }) {
			t.Errorf("%s: violations %q, want one saying %q", c.name, violations, c.violation)
		}
	}
}

// TestWSIsJudgedOnLagAndIdleMemory: the lag's p99 and maximum, the memory
// of an idle connection and every watcher heard, each from what was measured.
func TestWSIsJudgedOnLagAndIdleMemory(t *testing.T) {
	run := func(p99, maxMs, kib float64, dropped, heard int64) *Result {
		return &Result{P99ms: p99, Extra: map[string]any{"lag_max_ms": maxMs, "idle_conn_kib": kib,
			"clients_dropped": dropped, "accepted_heard": heard, "clients": 20000}}
	}
	for _, c := range []struct {
		name string
		run  *Result
		want wsGoals
	}{
		{"all met", run(240, 900, 9.5, 0, 20000), wsGoals{true, true, true}},
		{"p99 missed", run(260, 900, 9.5, 0, 20000), wsGoals{false, true, true}},
		{"one update later than a second", run(240, 1100, 9.5, 0, 20000), wsGoals{false, true, true}},
		{"idle connection too large", run(240, 900, 10.5, 0, 20000), wsGoals{true, false, true}},
		{"a watcher dropped", run(240, 900, 9.5, 1, 20000), wsGoals{true, true, false}},
		{"a watcher never heard", run(240, 900, 9.5, 0, 19999), wsGoals{true, true, false}},
		{"nothing measured", &Result{P99ms: 100, Extra: map[string]any{}}, wsGoals{}},
	} {
		if got := judgeWS(c.run); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
		if c.run.Extra["clients"] != nil && judgeWS(c.run).all() != (c.want == wsGoals{true, true, true}) {
			t.Errorf("%s: all() disagrees", c.name)
		}
	}
}

// TestReceiverCountsEachMessageOnce: a message delivered twice (delivery
// is at least once) counts once, so that duplicates never make up for a
// message that never arrived.
func TestReceiverCountsEachMessageOnce(t *testing.T) {
	r := newReceiver()
	defer r.srv.Close()
	r.secrets.Store("/hook", "secret")
	sender := webhook.NewSender(webhook.Options{AllowLoopback: true})
	for _, id := range []string{"m1", "m1", "m2"} {
		if !sender.Send(context.Background(), webhook.Message{ID: id, URL: r.srv.URL + "/hook", Secret: "secret", Body: []byte(`{"order":{"id":"o","version":2}}`)}).OK() {
			t.Fatal("the receiver refused a delivery")
		}
	}
	if got, dup := r.received.Load(), r.duplicates.Load(); got != 2 || dup != 1 {
		t.Fatalf("received %d messages and %d duplicates, want 2 and 1", got, dup)
	}
}

// TestStoreMaxKeepsTheLatest: a sell-out's time is its latest sale's,
// whichever recorder stores last.
func TestStoreMaxKeepsTheLatest(t *testing.T) {
	var a atomic.Int64
	var wg sync.WaitGroup
	for v := range int64(1000) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			storeMax(&a, 1000-v)
		}()
	}
	wg.Wait()
	storeMax(&a, 3)
	if a.Load() != 1000 {
		t.Fatalf("kept %d, want the largest, 1000", a.Load())
	}
}
