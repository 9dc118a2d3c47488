package bench

import (
	"bytes"
	"strings"
	"testing"
)

func TestCompareShowsEachFiguresChange(t *testing.T) {
	old := Report{Settings: Settings{Mode: "separate processes"}, Scenarios: map[string]*Result{
		"spread": {PerS: 1000, P99ms: 40, Extra: map[string]any{"order_cpu_us": 500.0}, Baselines: []Baseline{{Name: "plain", BestPerS: 2000}}},
		"gone":   {PerS: 1},
	}}
	cur := Report{Settings: Settings{Mode: "separate processes", NonDefault: []string{"--clients=8"}}, Scenarios: map[string]*Result{
		"spread": {PerS: 1100, P99ms: 40, Extra: map[string]any{"order_cpu_us": 400.0}, Baselines: []Baseline{{Name: "plain", BestPerS: 1900}}},
	}}
	var out bytes.Buffer
	Compare(&out, old, cur)
	got := out.String()
	for _, want := range []string{"settings differ", "--clients=8"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	lines := map[string]string{"per_s": "+10.0%", "order_cpu_us": "-20.0%", "baseline_plain_best_per_s": "-5.0%", "p99_ms": "~"}
	for figure, change := range lines {
		found := false
		for _, l := range strings.Split(got, "\n") {
			f := strings.Fields(l)
			if len(f) == 5 && f[0] == "spread" && f[1] == figure {
				found = true
				if f[4] != change {
					t.Errorf("%s: change %s, want %s", figure, f[4], change)
				}
			}
		}
		if !found {
			t.Errorf("no line for %s in:\n%s", figure, got)
		}
	}
	if strings.Contains(got, "gone") {
		t.Errorf("a scenario missing from one report is compared:\n%s", got)
	}
}
