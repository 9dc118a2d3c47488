package bench

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/components"
	"github.com/go-echarts/go-echarts/v2/opts"
)

// WriteChart plots, per scenario, completions per second, latency
// percentiles and queue depth over the run, as one HTML page.
func WriteChart(path string, names []string, r Report) error {
	page := components.NewPage()
	page.PageTitle = "orderd bench"
	for _, n := range names {
		res := r.Scenarios[n]
		if res == nil || len(res.Series) == 0 {
			continue
		}
		x := make([]string, len(res.Series))
		done := make([]opts.LineData, len(res.Series))
		p50 := make([]opts.LineData, len(res.Series))
		p99 := make([]opts.LineData, len(res.Series))
		queue := make([]opts.LineData, len(res.Series))
		for i, p := range res.Series {
			x[i] = strconv.Itoa(p.Second)
			done[i] = opts.LineData{Value: p.Done}
			p50[i] = opts.LineData{Value: p.P50ms}
			p99[i] = opts.LineData{Value: p.P99ms}
			queue[i] = opts.LineData{Value: p.Queue}
		}
		throughput := charts.NewLine()
		throughput.SetGlobalOptions(charts.WithTitleOpts(opts.Title{Title: n + ": requests/s", Subtitle: fmt.Sprintf("ratio to baseline %.2f", res.Ratio)}))
		throughput.SetXAxis(x).AddSeries("completed per second", done).AddSeries("queue depth", queue)
		latency := charts.NewLine()
		latency.SetGlobalOptions(charts.WithTitleOpts(opts.Title{Title: n + ": latency (ms)"}))
		latency.SetXAxis(x).AddSeries("p50", p50).AddSeries("p99", p99)
		page.AddCharts(throughput, latency)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create chart: %w", err)
	}
	defer f.Close()
	if err := page.Render(f); err != nil {
		return fmt.Errorf("render chart: %w", err)
	}
	return nil
}

// RSS reads a process's resident set size from /proc, in bytes.
func RSS(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			f := strings.Fields(l)
			if len(f) >= 2 {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// Markdown renders the summary as docs/performance.md: how the run was
// made, the table with the best baseline of each scenario, and every
// baseline's sweep.
func Markdown(names []string, r Report) string {
	var b strings.Builder
	b.WriteString("# Performance\n\n<!-- Written by `orderd bench --markdown`; do not edit. -->\n\n")
	fmt.Fprintf(&b, "The latest `orderd bench %s` run, as the bench wrote it. [How orderd is measured](benchmarks.md) says what each scenario does, what it is compared with and how to run it yourself.\n\n", strings.Join(names, ","))
	fmt.Fprintf(&b, "Run %v", r.Machine["when"])
	if c, ok := r.Machine["commit"].(string); ok && c != "" {
		fmt.Fprintf(&b, " of commit `%s`", c)
	}
	fmt.Fprintf(&b, " on %v CPUs (%v), mode: %s.", r.Machine["cpus"], r.Machine["go"], r.Settings.Mode)
	if la, ok := r.Machine["load_average"].(string); ok && la != "" {
		fmt.Fprintf(&b, " Load average at the start: %s.", la)
	}
	if len(r.Settings.NonDefault) > 0 {
		fmt.Fprintf(&b, " Not default: %s.", strings.Join(r.Settings.NonDefault, "; "))
	}
	b.WriteString("\n\n| scenario | orderd /s | best baseline /s (connections) | same on orderd's tables /s | ratio | goal | met | p50 ms | p99 ms | invariants |\n")
	b.WriteString("|---|---:|---:|---:|---:|---|---|---:|---:|---|\n")
	for _, n := range names {
		res := r.Scenarios[n]
		if res == nil {
			continue
		}
		ok := "ok"
		if !res.InvariantsOK {
			ok = "BROKEN"
		}
		base := fmt.Sprintf("%.0f", res.BaselinePerS)
		if res.BaselineConns > 0 {
			base += fmt.Sprintf(" (%d)", res.BaselineConns)
		}
		own := "—"
		for _, bl := range res.Baselines {
			if bl.Name == "orderd_tables" {
				own = fmt.Sprintf("%.0f (%d)", bl.BestPerS, bl.BestConns)
			}
		}
		met := res.Met()
		if met == "no" {
			met = "**no**"
		}
		fmt.Fprintf(&b, "| %s | %.0f | %s | %s | %.2f | %s | %s | %.1f | %.1f | %s |\n",
			n, res.PerS, base, own, res.Ratio, res.GoalStated(), met, res.P50ms, res.P99ms, ok)
	}
	var sweeps strings.Builder
	for _, n := range names {
		res := r.Scenarios[n]
		if res == nil {
			continue
		}
		for _, bl := range res.Baselines {
			fmt.Fprintf(&sweeps, "| %s | %s |", n, bl.Name)
			for _, p := range bl.Sweep {
				if p.Conns == bl.BestConns {
					fmt.Fprintf(&sweeps, " **%.0f** |", p.PerS)
				} else {
					fmt.Fprintf(&sweeps, " %.0f |", p.PerS)
				}
			}
			sweeps.WriteString("\n")
		}
	}
	if sweeps.Len() > 0 {
		b.WriteString("\nBaselines per second at each connection count (the best in bold):\n\n| scenario | tables |")
		for _, c := range SweepConns {
			fmt.Fprintf(&b, " %d |", c)
		}
		b.WriteString("\n|---|---|" + strings.Repeat("---:|", len(SweepConns)) + "\n")
		b.WriteString(sweeps.String())
	}
	b.WriteString("\nEvery other figure of each scenario:\n\n")
	for _, n := range names {
		res := r.Scenarios[n]
		if res == nil {
			continue
		}
		keys := make([]string, 0, len(res.Extra))
		for k := range res.Extra {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var notes []string
		for _, k := range keys {
			notes = append(notes, fmt.Sprintf("%s=%v", k, res.Extra[k]))
		}
		if res.RSSBytes > 0 {
			notes = append(notes, fmt.Sprintf("rss=%dMiB", res.RSSBytes>>20))
		}
		fmt.Fprintf(&b, "- %s: %s\n", n, strings.Join(notes, ", "))
		for _, v := range res.Violations {
			fmt.Fprintf(&b, "  - VIOLATION: %s\n", v)
		}
	}
	return b.String()
}

// The README's block of figures lies between these two lines, which
// WriteReadme replaces and nothing else.
const (
	readmeBegin = "<!-- figures: written by orderd bench --readme; do not edit -->"
	readmeEnd   = "<!-- end of figures -->"
)

// ReadmeFigures replaces the figures block of a README with the run's
// headline table: each scenario's rate, its goal and whether the bench
// judged it met. The run's date, commit and machine are on the performance
// page it links to, so the README names no run.
func ReadmeFigures(readme string, names []string, r Report) (string, error) {
	begin := strings.Index(readme, readmeBegin)
	end := strings.Index(readme, readmeEnd)
	if begin < 0 || end < begin {
		return "", fmt.Errorf("no figures block: the README needs the lines %q and %q", readmeBegin, readmeEnd)
	}
	var b strings.Builder
	b.WriteString(readmeBegin + "\n\n")
	fmt.Fprintf(&b, "From the latest `orderd bench %s` on a %v-CPU machine, PostgreSQL on the same machine ([the run and every figure](docs/performance.md)):\n\n", strings.Join(names, ","), r.Machine["cpus"])
	b.WriteString("| scenario | orderd /s | p99 ms | goal | met |\n|---|---:|---:|---|---|\n")
	for _, n := range names {
		res := r.Scenarios[n]
		if res == nil {
			continue
		}
		met := res.Met()
		if met == "no" {
			met = "**no**"
		}
		if !res.InvariantsOK {
			met += ", invariants **broken**"
		}
		fmt.Fprintf(&b, "| %s | %.0f | %.1f | %s | %s |\n", n, res.PerS, res.P99ms, res.GoalStated(), met)
	}
	b.WriteString("\n")
	return readme[:begin] + b.String() + readme[end:], nil
}

// The README's block of cluster figures ("Scaling out") lies between these
// two lines, which ReadmeCluster replaces and nothing else.
const (
	clusterBegin = "<!-- cluster figures: written by orderd bench --citus-url --readme; do not edit -->"
	clusterEnd   = "<!-- end of cluster figures -->"
)

// ReadmeCluster replaces the cluster block of a README with a run on a
// Citus cluster (--citus-url): the run named (its time, machine and
// scenarios; the README cites no commit), then for each scenario the CPU per unit node by node on both
// deployments, the goals as the bench judged them, and the projection for
// N workers, as PrintCluster prints them.
func ReadmeCluster(readme string, names []string, r Report) (string, error) {
	begin := strings.Index(readme, clusterBegin)
	end := strings.Index(readme, clusterEnd)
	if begin < 0 || end < begin {
		return "", fmt.Errorf("no cluster figures block: the README needs the lines %q and %q", clusterBegin, clusterEnd)
	}
	if r.Citus == nil {
		return "", errors.New("the run measured no Citus cluster (--citus-url)")
	}
	var b strings.Builder
	b.WriteString(clusterBegin + "\n\n")
	fmt.Fprintf(&b, "From `orderd bench --citus-url … %s`, run %v", strings.Join(names, ","), r.Machine["when"])
	fmt.Fprintf(&b, ", a coordinator and its workers on one %v-CPU machine with the bench's own PostgreSQL", r.Machine["cpus"])
	if la, ok := r.Machine["load_average"].(string); ok && la != "" {
		fmt.Fprintf(&b, " (load average at the start: %s)", la)
	}
	b.WriteString(". CPU µs per unit, every process of each node counted, and sessions started:\n")
	for _, n := range names {
		c := r.Citus.Comparisons[n]
		if c == nil {
			continue
		}
		fmt.Fprintf(&b, "\n**%s**, per %s (%d on one PostgreSQL, %d on Citus):\n\n", n, c.Unit, c.OnePostgres.Units, c.Citus.Units)
		b.WriteString("| deployment | party | CPU µs | sessions |\n|---|---|---:|---:|\n")
		for _, d := range []struct {
			name string
			c    *Cost
		}{{"one PostgreSQL", c.OnePostgres}, {"Citus", c.Citus}} {
			for _, node := range d.c.Nodes {
				fmt.Fprintf(&b, "| %s | %s | %s | %d |\n", d.name, node.Name, known(node.CPUus, node.CPUKnown), node.Sessions)
			}
			fmt.Fprintf(&b, "| %s | orderd | %s | |\n", d.name, known(d.c.OrderdUS, d.c.OrderdKnown))
			fmt.Fprintf(&b, "| %s | **total** | **%.0f** | %d |\n", d.name, d.c.TotalUS(), d.c.Sessions())
		}
		b.WriteString("\n| goal | met | measured |\n|---|---|---|\n")
		for _, g := range c.Goals {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", g.Text, map[bool]string{true: "yes", false: "**no**"}[g.Met], g.Measured)
		}
		fmt.Fprintf(&b, "\nThe projection, nodes of %v cores, each %s costing each node what it cost here:\n\n", r.Machine["cpus"], c.Unit)
		head, rule, rate, bound := "| workers |", "|---|", "| "+c.Unit+"s/s |", "| bound by |"
		for _, p := range c.Projection {
			head, rule = head+fmt.Sprintf(" %d |", p.Workers), rule+"---:|"
			rate, bound = rate+fmt.Sprintf(" %.0f |", p.PerS), bound+" "+p.Bound+" |"
		}
		b.WriteString(head + "\n" + rule + "\n" + rate + "\n" + bound + "\n")
	}
	b.WriteString("\n")
	return readme[:begin] + b.String() + readme[end:], nil
}
