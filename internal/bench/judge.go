package bench

import (
	"fmt"
	"sync/atomic"
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

// wsIdleConnGoal bounds what one idle websocket connection costs the
// server, in KiB of live heap and stacks.
const wsIdleConnGoal = 20.0

// judgeWS says whether websocket rounds met both goals: lag p99 and the
// memory of an idle connection, in every round given.
func judgeWS(rounds ...*Result) bool {
	for _, r := range rounds {
		kib, ok := r.Extra["idle_conn_kib"].(float64)
		if !ok || kib > wsIdleConnGoal || r.P99ms > float64(wsLagGoal.Milliseconds()) {
			return false
		}
	}
	return len(rounds) > 0
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
