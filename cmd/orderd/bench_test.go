package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOrderdBenchRunsTheBenchBesideIt: `orderd bench` is orderd-bench run
// from beside orderd with the same arguments, its output and exit status
// passed through; an orderd with no orderd-bench beside it says how to run
// the bench instead.
func TestOrderdBenchRunsTheBenchBesideIt(t *testing.T) {
	dir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", dir+string(filepath.Separator), ".", "../orderd-bench").CombinedOutput()
	require.NoError(t, err, "%s", out)
	orderd := filepath.Join(dir, "orderd")

	out, err = exec.Command(orderd, "bench", "--help").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "usage: orderd-bench")

	out, err = exec.Command(orderd, "bench", "no-such-scenario").CombinedOutput()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "%v: %s", err, out)
	require.Equal(t, 1, exit.ExitCode())
	require.Contains(t, string(out), `unknown scenario "no-such-scenario"`)
	require.NotContains(t, string(out), "orderd: exit status", "the bench's own error is the only one printed")

	alone := mustBinary(t)
	out, err = exec.Command(alone, "bench", "all").CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "go run ./cmd/orderd-bench")
}
