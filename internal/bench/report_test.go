package bench

import (
	"strings"
	"testing"
)

// TestReadmeFiguresReplacesOnlyItsBlock: the README's figures come from the
// run, as judged by the bench, and the prose around them is left as it was.
func TestReadmeFiguresReplacesOnlyItsBlock(t *testing.T) {
	met, missed := true, false
	run := Report{Machine: map[string]any{"cpus": 2}, Scenarios: map[string]*Result{
		"spread": {PerS: 9100.4, P99ms: 21.5, GoalText: "≥ 1.0× the best baseline", GoalMet: &met, InvariantsOK: true},
		"flash":  {PerS: 2286, P99ms: 84.5, GoalText: "sold out no later", GoalMet: &missed, InvariantsOK: true},
		"slots":  {PerS: 7616, P99ms: 53.6, InvariantsOK: false},
	}}
	readme := "# orderd\n\nprose before\n\n" + readmeBegin + "\n\nfigures of an older run | 1 |\n\n" + readmeEnd + "\n\nprose after\n"
	got, err := ReadmeFigures(readme, []string{"spread", "flash", "slots", "not-run"}, run)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"prose before\n\n" + readmeBegin,
		readmeEnd + "\n\nprose after\n",
		"`orderd bench spread,flash,slots,not-run` on a 2-CPU machine",
		"| spread | 9100 | 21.5 | ≥ 1.0× the best baseline | yes |",
		"| flash | 2286 | 84.5 | sold out no later | **no** |",
		"| slots | 7616 | 53.6 |  | —, invariants **broken** |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the README lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "older run") || strings.Contains(got, "not-run |") {
		t.Errorf("the block keeps what the run did not measure:\n%s", got)
	}
	again, err := ReadmeFigures(got, []string{"spread", "flash", "slots"}, run)
	if err != nil || strings.Count(again, readmeBegin) != 1 || strings.Count(again, readmeEnd) != 1 {
		t.Fatalf("a second run must replace the block, not add one (err %v):\n%s", err, again)
	}

	if _, err := ReadmeFigures("# a README without the block\n", []string{"spread"}, run); err == nil || !strings.Contains(err.Error(), readmeBegin) {
		t.Fatalf("without the block the error must name the lines to add, got %v", err)
	}
}

func TestReadmeClusterReplacesOnlyItsBlock(t *testing.T) {
	cost := func(unit string, orderd float64, nodes ...NodeCost) *Cost {
		return &Cost{Unit: unit, Units: 1000, OrderdUS: orderd, OrderdKnown: true, Nodes: nodes}
	}
	run := Report{Machine: map[string]any{"cpus": 2, "when": "2026-11-28T10:00:00Z", "commit": "abc1234"}, Citus: &ClusterRun{
		Comparisons: map[string]*Comparison{"spread": {
			Unit:        "order",
			OnePostgres: cost("order", 150, NodeCost{Name: "postgres", CPUus: 200, CPUKnown: true}),
			Citus: cost("order", 300, NodeCost{Name: "coordinator", CPUus: 30, CPUKnown: true, Sessions: 1},
				NodeCost{Name: "worker localhost:9701", CPUus: 290, CPUKnown: true}),
			Goals:      []Goal{{Text: "no two-phase commit", Met: true, Measured: "0 prepared transactions"}, {Text: "CPU ≤ 2×", Met: false, Measured: "620 against 350 µs"}},
			Projection: []ProjectionPoint{{Workers: 1, PerS: 3000, Bound: "workers"}, {Workers: 2, PerS: 6000, Bound: "workers"}},
		}},
	}}
	readme := "# orderd\n\n" + readmeBegin + "\n\nheadline\n\n" + readmeEnd + "\n\n## Scaling out\n\n" + clusterBegin + "\n\nan older run\n\n" + clusterEnd + "\n\nprose after\n"
	got, err := ReadmeCluster(readme, []string{"spread", "timers"}, run)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		readmeBegin + "\n\nheadline\n\n" + readmeEnd,
		"`orderd bench --citus-url … spread,timers`, run 2026-11-28T10:00:00Z, a coordinator",
		"**spread**, per order (1000 on one PostgreSQL, 1000 on Citus)",
		"| one PostgreSQL | postgres | 200 | 0 |",
		"| one PostgreSQL | **total** | **350** | 0 |",
		"| Citus | worker localhost:9701 | 290 | 0 |",
		"| Citus | **total** | **620** | 1 |",
		"| CPU ≤ 2× | **no** | 620 against 350 µs |",
		"| no two-phase commit | yes | 0 prepared transactions |",
		"| workers | 1 | 2 |\n|---|---:|---:|\n| orders/s | 3000 | 6000 |\n| bound by | workers | workers |",
		clusterEnd + "\n\nprose after\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the README lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "older run") || strings.Contains(got, "**timers**") || strings.Contains(got, "abc1234") {
		t.Errorf("the block keeps what the run did not measure:\n%s", got)
	}
	if _, err := ReadmeCluster(readme, []string{"spread"}, Report{}); err == nil {
		t.Error("a run without a cluster must not write the block")
	}
}
