package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"text/tabwriter"
)

// ReadReport reads a file written by --json.
func ReadReport(path string) (Report, error) {
	var r Report
	b, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("read %s: %w", path, err)
	}
	return r, nil
}

// figures flattens a result into named numbers: the headline figures, then
// every numeric figure of Extra, then each baseline's best point.
func figures(res *Result) ([]string, map[string]float64) {
	m := map[string]float64{
		"per_s": res.PerS, "baseline_per_s": res.BaselinePerS, "ratio": res.Ratio, "p50_ms": res.P50ms, "p99_ms": res.P99ms,
	}
	names := []string{"per_s", "baseline_per_s", "ratio", "p50_ms", "p99_ms"}
	var extra []string
	for k, v := range res.Extra {
		if f, ok := v.(float64); ok {
			m[k] = f
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	names = append(names, extra...)
	for _, b := range res.Baselines {
		k := "baseline_" + b.Name + "_best_per_s"
		m[k] = b.BestPerS
		names = append(names, k)
	}
	if res.RSSBytes > 0 {
		m["rss_mib"] = float64(res.RSSBytes) / (1 << 20)
		names = append(names, "rss_mib")
	}
	return names, m
}

// Compare prints, for every scenario and figure in both reports, the old
// value, the new one and the change. Each report is one run, one sample
// per figure, so there is no variance to test a change against (what
// benchstat would do with several runs): the settings of both runs are
// printed first, and a reader judges a change against the noise the runs
// of the machine show.
func Compare(w io.Writer, old, cur Report) {
	fmt.Fprintf(w, "old: %v, %s; new: %v, %s\n", old.Machine["when"], old.Settings.Mode, cur.Machine["when"], cur.Settings.Mode)
	if !slices.Equal(old.Settings.NonDefault, cur.Settings.NonDefault) {
		fmt.Fprintf(w, "settings differ:\n  old: %v\n  new: %v\n", old.Settings.NonDefault, cur.Settings.NonDefault)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tfigure\told\tnew\tchange\t")
	var scenarios []string
	for n := range cur.Scenarios {
		if old.Scenarios[n] != nil {
			scenarios = append(scenarios, n)
		}
	}
	sort.Strings(scenarios)
	for _, n := range scenarios {
		_, o := figures(old.Scenarios[n])
		names, c := figures(cur.Scenarios[n])
		for _, f := range names {
			ov, ok := o[f]
			if !ok {
				continue
			}
			nv := c[f]
			fmt.Fprintf(tw, "%s\t%s\t%.4g\t%.4g\t%s\t\n", n, f, ov, nv, change(ov, nv))
		}
	}
	_ = tw.Flush()
}

func change(old, cur float64) string {
	switch {
	case old == cur:
		return "~"
	case old == 0:
		return "new"
	}
	pct := (cur - old) / math.Abs(old) * 100
	return fmt.Sprintf("%+.1f%%", pct)
}
