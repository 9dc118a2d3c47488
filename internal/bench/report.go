package bench

import (
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

// Markdown renders the summary as the README's performance table.
func Markdown(names []string, r Report) string {
	var b strings.Builder
	b.WriteString("| scenario | orderd /s | baseline /s | ratio | goal | p50 ms | p99 ms | invariants | notes |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---|---|\n")
	for _, n := range names {
		res := r.Scenarios[n]
		if res == nil {
			continue
		}
		ok := "ok"
		if !res.InvariantsOK {
			ok = "BROKEN"
		}
		var notes []string
		keys := make([]string, 0, len(res.Extra))
		for k := range res.Extra {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			notes = append(notes, fmt.Sprintf("%s=%v", k, res.Extra[k]))
		}
		if res.RSSBytes > 0 {
			notes = append(notes, fmt.Sprintf("rss=%dMiB", res.RSSBytes>>20))
		}
		fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.2f | %.1f | %.1f | %.1f | %s | %s |\n",
			n, res.PerS, res.BaselinePerS, res.Ratio, res.Goal, res.P50ms, res.P99ms, ok, strings.Join(notes, ", "))
	}
	return b.String()
}
