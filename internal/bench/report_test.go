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
