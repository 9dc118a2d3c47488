package bench

import (
	"fmt"
	"sync/atomic"
	"time"
)

// hotWeightedGoal is how much slower than hot its weighted twin may run.
const hotWeightedGoal = 0.9

// JudgeAcross judges the goals that weigh one scenario of a run against
// another: hot-weighted against hot, when both ran. Without hot, its goal
// stays unjudged.
func JudgeAcross(scenarios map[string]*Result) {
	hot, weighted := scenarios["hot"], scenarios["hot-weighted"]
	if weighted == nil {
		return
	}
	if hot == nil || hot.PerS <= 0 || weighted.PerS <= 0 {
		weighted.GoalMet = nil
		return
	}
	weighted.BaselinePerS, weighted.BaselineConns, weighted.Baselines = hot.PerS, 0, nil
	weighted.Ratio, weighted.Goal = ratio(weighted.PerS, hot.PerS), hotWeightedGoal
	weighted.Extra["hot_per_s"] = hot.PerS
	weighted.setGoalMet(weighted.Ratio >= hotWeightedGoal)
}

// Timers' lateness goals, per phase.
const (
	timerLateP99Goal = 1000.0 // ms
	timerLateMaxGoal = 2000.0 // ms
)

// timerPhaseFigures are what one phase of the timers scenario measured:
// the orders it placed, those closed, those closed before their deadline,
// and the lateness of the closes (nil when nothing closed).
type timerPhaseFigures struct {
	name                string
	placed, closed      int
	early               int
	p50, p99, maxLateMs *float64
}

// judgeTimerPhase says whether a phase met the lateness goal: every order
// it placed closed, none before its deadline, p99 and max within bounds. A
// phase that placed or closed nothing measured nothing, and meets nothing.
// A close before the deadline is also a broken invariant.
func judgeTimerPhase(f timerPhaseFigures) (met bool, violations []string) {
	if f.early > 0 {
		violations = append(violations, fmt.Sprintf("%s phase: %d orders closed before their payment deadline", f.name, f.early))
	}
	switch {
	case f.placed == 0:
		violations = append(violations, fmt.Sprintf("%s phase placed no order", f.name))
	case f.closed == 0:
		violations = append(violations, fmt.Sprintf("%s phase closed none of its %d orders", f.name, f.placed))
	}
	met = f.placed > 0 && f.closed == f.placed && f.early == 0 &&
		f.p99 != nil && *f.p99 <= timerLateP99Goal && f.maxLateMs != nil && *f.maxLateMs <= timerLateMaxGoal
	return met, violations
}

// The ws scenario's goals: the lag from an acceptance's commit to its
// watcher, what one idle websocket connection costs the server (KiB of live
// heap and stacks, on the worst instance), and no watcher dropped.
const (
	wsLagP99Goal   = 250 * time.Millisecond
	wsLagMaxGoal   = time.Second
	wsIdleConnGoal = 10.0
)

// wsGoals says which of the ws goals a run met.
type wsGoals struct{ lag, memory, noneDropped bool }

func (g wsGoals) all() bool { return g.lag && g.memory && g.noneDropped }

// judgeWS judges a ws run from its figures; one not measured meets nothing.
func judgeWS(r *Result) wsGoals {
	kib, kibOK := r.Extra["idle_conn_kib"].(float64)
	maxMs, maxOK := r.Extra["lag_max_ms"].(float64)
	dropped, droppedOK := r.Extra["clients_dropped"].(int64)
	heard, heardOK := r.Extra["accepted_heard"].(int64)
	clients, clientsOK := r.Extra["clients"].(int)
	return wsGoals{
		lag:         maxOK && r.P99ms <= float64(wsLagP99Goal.Milliseconds()) && maxMs <= float64(wsLagMaxGoal.Milliseconds()),
		memory:      kibOK && kib <= wsIdleConnGoal,
		noneDropped: droppedOK && heardOK && clientsOK && clients > 0 && dropped == 0 && heard == int64(clients),
	}
}

// storeMax raises a to v unless it already holds more: concurrent
// recorders of "the latest moment" store in whatever order they run.
func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// The placement engine's goals: group commit must beat one pipelined
// transaction per order on orderd's own tables, and cost no more CPU per
// order in all than that transaction does.
const (
	spreadGoal    = 1.0
	spreadP99Goal = 50.0  // ms
	spreadCPUGoal = 180.0 // µs per order: orderd, PostgreSQL and the load generator
	hotGoal       = 1.2
	flashGoal     = 1.0 // sell-out rate over the best single-row baseline's
)

// judgeAgainstOwnTables records the ratio to the best sweep on copies of
// orderd's tables, which the placement goals are stated against.
func judgeAgainstOwnTables(res *Result) {
	best := 0.0
	for _, b := range res.Baselines {
		if b.Name == "orderd_tables" {
			best = b.BestPerS
		}
	}
	res.Extra["ratio_orderd_tables"] = round3(ratio(res.PerS, best))
}

// orderCPU is the CPU per order of every party the run measured; false when
// a party was not measured (a server or database elsewhere), since a goal
// on the total cannot then be judged.
func orderCPU(extra map[string]any) (float64, bool) {
	pg, pgOK := extra["order_postgres_cpu_us"].(float64)
	if both, ok := extra["order_orderd_and_generator_cpu_us"].(float64); ok {
		return both + pg, pgOK
	}
	srv, srvOK := extra["order_orderd_cpu_us"].(float64)
	gen, genOK := extra["order_generator_cpu_us"].(float64)
	return srv + gen + pg, srvOK && genOK && pgOK
}

// timersPlacementGoal: a placement that schedules its payment timer is
// nearly as fast as one that schedules none.
const timersPlacementGoal = 0.9
