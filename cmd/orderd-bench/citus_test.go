//go:build citus

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/internal/bench"
)

// TestCitusBenchComparesNodeByNode runs `orderd-bench --citus-url` as a
// user would, on a small hot scenario, and reads its JSON: the scenario ran
// on one PostgreSQL and on the cluster, each node's CPU and sessions per
// order were read (the coordinator's and both workers'), the goals were
// judged, the projection made, and the bench's database is gone from every
// node after.
func TestCitusBenchComparesNodeByNode(t *testing.T) {
	admin := os.Getenv("CITUS_URL")
	require.NotEmpty(t, admin, "CITUS_URL must name a Citus coordinator for the citus tests")
	bin, _ := mustBinaries(t)
	out := filepath.Join(t.TempDir(), "bench.json")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--citus-url", admin, "--quiet", "--json", out,
		"--clients", "16", "--baseline-step", "50ms", "--count", "300", "hot")
	cmd.Dir = t.TempDir()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// The goals are not met on the trial cluster: the run's exit says
	// nothing of the figures, which the JSON holds.
	_ = cmd.Run()
	raw, err := os.ReadFile(out)
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	require.Contains(t, stdout.String(), "projection")
	var report bench.Report
	require.NoError(t, json.Unmarshal(raw, &report))
	require.NotNil(t, report.Citus)
	require.True(t, report.Scenarios["hot"].InvariantsOK, "%v", report.Scenarios["hot"].Violations)
	require.True(t, report.Citus.Scenarios["hot"].InvariantsOK, "%v", report.Citus.Scenarios["hot"].Violations)
	require.Equal(t, "sslmode=disable", report.Citus.Settings["citus.node_conninfo"], "the cluster's settings are reported")

	c := report.Citus.Comparisons["hot"]
	require.NotNil(t, c)
	require.Equal(t, "order", c.Unit)
	require.Len(t, c.OnePostgres.Nodes, 1)
	var names []string
	workers := 0
	for _, n := range c.Citus.Nodes {
		names = append(names, n.Name)
		require.True(t, n.CPUKnown, "%s: CPU read from its postmaster's processes", n.Name)
		require.Positive(t, n.CPUus, n.Name)
		require.GreaterOrEqual(t, n.Sessions, int64(0), n.Name)
		if n.Worker {
			workers++
		}
	}
	require.Equal(t, "coordinator", names[0])
	require.Equal(t, 2, workers, "every worker: %v", names)
	require.True(t, c.Citus.Complete() && c.OnePostgres.Complete())
	require.Positive(t, c.Ratio)
	require.Len(t, c.Goals, 4)
	require.Len(t, c.Projection, 7)
	require.NotNil(t, report.Citus.Idle)
	require.Len(t, report.Citus.Idle.Citus.Nodes, 3)

	conn, err := pgx.Connect(ctx, admin)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var left []string
	rows, err := conn.Query(ctx, `SELECT datname FROM pg_database WHERE datname LIKE 'orderd_citus_%_bench'`)
	require.NoError(t, err)
	left, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Empty(t, strings.Join(left, ", "), "the bench drops its database")
}
