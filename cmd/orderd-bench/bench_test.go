package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/internal/app"
	"github.com/orderd/orderd/internal/bench"
	"github.com/orderd/orderd/store/storetest"
)

// TestBenchJSONCarriesSweepsSettingsAndMeasuredBaselines runs orderd-bench
// as a user would, in its default mode (orderd serve as a process of its
// own), on short settings, and reads its JSON: every SQL baseline swept over
// every connection count with the best as the baseline, the webhooks
// baseline measured in the run, CPU per order per process, and the
// settings with everything not at its default.
func TestBenchJSONCarriesSweepsSettingsAndMeasuredBaselines(t *testing.T) {
	bin, _ := mustBinaries(t)
	out := filepath.Join(t.TempDir(), "bench.json")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--database-url", storetest.URL(t), "--quiet", "--json", out,
		"--clients", "16", "--baseline-step", "50ms", "--count", "200", "hot,flash,webhooks")
	cmd.Dir = t.TempDir()
	// A server that requires an issuer and an audience: the bench's
	// tokens must carry them too.
	cmd.Env = append(os.Environ(), "ORDERD_JWT_ISSUER=orderd-bench-test", "ORDERD_JWT_AUDIENCE=orderd-api")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	summary := stdout.String()
	require.Contains(t, summary, "mode: separate processes")
	require.Contains(t, summary, "not default: --count=200")

	raw, err := os.ReadFile(out)
	require.NoError(t, err)
	var report bench.Report
	require.NoError(t, json.Unmarshal(raw, &report))

	s := report.Settings
	require.Equal(t, "separate processes", s.Mode)
	require.Equal(t, app.DefaultConfig().RatePerCustomer, s.Server["rate_per_customer"], "rate limits stay at their defaults")
	for _, want := range []string{"webhook_allow_loopback", "--database-url", "--clients=16", "--baseline-step=50ms", "--count=200"} {
		require.True(t, slices.ContainsFunc(s.NonDefault, func(n string) bool { return strings.Contains(n, want) }),
			"settings name %q as not default: %v", want, s.NonDefault)
	}

	for _, name := range []string{"hot", "flash"} {
		res := report.Scenarios[name]
		require.NotNil(t, res, name)
		require.True(t, res.InvariantsOK, "%s: %v", name, res.Violations)
		require.Len(t, res.Baselines, 2, name)
		for i, b := range res.Baselines {
			require.Equal(t, []string{"plain", "orderd_tables"}[i], b.Name)
			require.NotEmpty(t, b.Statements)
			var conns []int
			var best bench.SweepPoint
			rates := map[float64]bool{}
			for _, p := range b.Sweep {
				conns = append(conns, p.Conns)
				require.Positive(t, p.Done, "%s %s at %d: nothing done", name, b.Name, p.Conns)
				require.InDelta(t, float64(p.Done)/p.Seconds, p.PerS, 0.01*p.PerS+1, "%s %s at %d: the rate is what was done in the time", name, b.Name, p.Conns)
				require.Contains(t, p.CPU, "tx_cpu_us")
				if p.PerS > best.PerS {
					best = p
				}
				rates[p.PerS] = true
			}
			require.Equal(t, bench.SweepConns, conns, "%s %s sweeps every connection count", name, b.Name)
			require.Greater(t, len(rates), 1, "%s %s: every point of the sweep the same rate is no measurement", name, b.Name)
			require.Equal(t, best.PerS, b.BestPerS, "%s %s: the best point is the best", name, b.Name)
			require.Equal(t, best.Conns, b.BestConns)
		}
		if name == "flash" {
			// Flash is measured against the strongest single-row sale of
			// either table.
			best := 0.0
			for _, b := range res.Baselines {
				best = max(best, b.BestPerS)
			}
			require.Equal(t, best, res.BaselinePerS, "flash: the baseline is the best point of either sweep")
		} else {
			require.Equal(t, res.Baselines[0].BestPerS, res.BaselinePerS, "%s: the baseline is the best of the plain sweep", name)
			require.Equal(t, res.Baselines[0].BestConns, res.BaselineConns)
		}
		require.InDelta(t, res.PerS/res.BaselinePerS, res.Ratio, 1e-9, name)
		require.NotNil(t, res.GoalMet, name)
	}
	hot := report.Scenarios["hot"].Extra
	for _, k := range []string{"order_orderd_cpu_us", "order_postgres_cpu_us", "order_generator_cpu_us"} {
		require.Contains(t, hot, k, "CPU per order read per process")
		require.Positive(t, hot[k].(float64), k)
	}
	cost := report.Scenarios["hot"].Costs["order"]
	require.NotNil(t, cost, "the cost per order, party by party")
	require.Len(t, cost.Nodes, 1)
	require.Equal(t, "postgres", cost.Nodes[0].Name)
	require.True(t, cost.Complete(), "every party's CPU read: %+v", cost)
	require.InDelta(t, hot["order_postgres_cpu_us"].(float64), cost.Nodes[0].CPUus, 0.1)
	require.NotNil(t, report.Scenarios["flash"].Costs["buyer"], "flash's cost per buyer answered")

	hooks := report.Scenarios["webhooks"]
	require.NotNil(t, hooks)
	require.True(t, hooks.InvariantsOK, "%v", hooks.Violations)
	alone := hooks.Extra["receiver_alone_seconds"].(float64)
	messages := hooks.Extra["messages"].(float64)
	require.Positive(t, alone)
	acknowledged := messages - hooks.Extra["receiver_alone_failed"].(float64)
	// The report rounds the receiver's time to the millisecond, which at this
	// test's size (tens of milliseconds) moves the rate by a few percent.
	require.InEpsilon(t, acknowledged/alone, hooks.BaselinePerS, 0.01+0.0005/alone, "the webhooks baseline is the receiver's capacity measured in this run")
	require.NotEqual(t, hooks.Extra["goal_per_s"], hooks.BaselinePerS)
	require.False(t, math.IsNaN(hooks.Ratio))
}
