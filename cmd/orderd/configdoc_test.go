package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/internal/app"
)

var updateDocs = flag.Bool("update", false, "rewrite the generated documentation instead of comparing it")

// TestConfigurationReferenceIsCurrent holds docs/configuration.md to serve's
// flags: a setting added, renamed or re-described without regenerating the
// page fails here.
func TestConfigurationReferenceIsCurrent(t *testing.T) {
	// The defaults shown are the code's, not this environment's.
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "ORDERD_") {
			t.Setenv(name, "")
		}
	}
	path := filepath.Join("..", "..", "docs", "configuration.md")
	want := configurationReference()
	if *updateDocs {
		require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, want, string(got), "docs/configuration.md is stale: go test ./cmd/orderd -run TestConfigurationReferenceIsCurrent -update")
}

// TestEverySettingNamesItsVariable: a flag of serve without its variable in
// its usage could not be set from the environment the reference promises.
func TestEverySettingNamesItsVariable(t *testing.T) {
	cfg := app.DefaultConfig()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	configFlags(fs, &cfg)
	fs.VisitAll(func(f *flag.Flag) {
		require.Regexp(t, settingEnv, f.Usage, "--%s names no environment variable", f.Name)
	})
}
