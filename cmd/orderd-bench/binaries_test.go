package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// binaries builds orderd-bench and orderd side by side, once, as `go
// install ./cmd/...` lays them out, so that the bench finds its orderd
// beside it.
var binaries = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "orderd-bench-bin")
	if err != nil {
		return "", err
	}
	out, err := exec.Command("go", "build", "-o", dir+string(filepath.Separator), ".", "../orderd").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %w: %s", err, out)
	}
	return dir, nil
})

// mustBinaries is the paths of the orderd-bench and orderd binaries.
func mustBinaries(t *testing.T) (benchBin, orderdBin string) {
	t.Helper()
	dir, err := binaries()
	require.NoError(t, err)
	return filepath.Join(dir, "orderd-bench"), filepath.Join(dir, "orderd")
}

// TestTheBenchBuildsOrderdWhenNoneIsBeside: `go run ./cmd/orderd-bench`
// leaves no orderd beside the bench (this test's binary has none either),
// so the bench builds one from the module it runs in, whose servers it can
// start; an --orderd that does not exist is refused.
func TestTheBenchBuildsOrderdWhenNoneIsBeside(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	path, cleanup, err := orderdBinary(ctx, "")
	require.NoError(t, err)
	out, err := exec.Command(path, "help").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "orderd serve")
	cleanup()
	_, err = os.Stat(path)
	require.ErrorIs(t, err, os.ErrNotExist, "the built orderd is removed after the run")

	_, _, err = orderdBinary(ctx, filepath.Join(t.TempDir(), "no-such-orderd"))
	require.ErrorContains(t, err, "--orderd")
}

// TestBenchHelpShowsNoSecret: the bench's --help lists its flags without the
// secrets it read from the environment.
func TestBenchHelpShowsNoSecret(t *testing.T) {
	benchBin, _ := mustBinaries(t)
	secret := "bench-help-secret-4f1c9a7e2b6d8035"
	for _, flag := range []string{"--help", "-h"} {
		cmd := exec.Command(benchBin, flag)
		cmd.Env = append(os.Environ(), "ORDERD_JWT_SECRET="+secret, "DATABASE_URL=postgres://u:"+secret+"@localhost/x")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, strings.ToLower(string(out)), "usage")
		require.Contains(t, string(out), "-orderd")
		require.NotContains(t, string(out), secret)
	}
}
