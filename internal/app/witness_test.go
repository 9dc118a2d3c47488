package app_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/internal/app"
	"github.com/orderd/orderd/store/storetest"
)

// TestABadWitnessIsRefusedAtStart: a witness address that is not an
// absolute http or https URL, or one without a secret to sign with, stops
// serve before it starts, in one line naming the setting.
func TestABadWitnessIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	url := storetest.URL(t)
	const secret = "w1tness-s3cret-0f-thirty-two-bytes-at-least"
	for _, tc := range []struct{ url, secret, refused string }{
		{"witness.example:8443/keep", secret, `ORDERD_WITNESS_URL "witness.example:8443/keep" is not an absolute http or https URL`},
		{"ftp://witness.example/keep", secret, "is not an absolute http or https URL"},
		{"/keep", secret, "is not an absolute http or https URL"},
		{"https://witness.example/keep", "", "ORDERD_WITNESS_SECRET must be at least 32 bytes"},
		{"", secret, "ORDERD_WITNESS_SECRET is set without ORDERD_WITNESS_URL"},
	} {
		cfg := newcomerConfig(url)
		cfg.WitnessURL, cfg.WitnessSecret = tc.url, tc.secret
		a, err := app.New(context.Background(), cfg)
		if err == nil {
			a.Close()
		}
		require.Error(t, err, tc.url)
		require.Contains(t, err.Error(), tc.refused)
		require.NotContains(t, err.Error(), "\n", "one line")
		require.False(t, strings.Contains(err.Error(), secret), "the secret is never repeated")
	}
	cfg := newcomerConfig(url)
	cfg.WitnessURL, cfg.WitnessSecret = "https://witness.example/keep", secret
	a, err := app.New(context.Background(), cfg)
	require.NoError(t, err)
	a.Close()
}

// TestABadCheckpointKeyIsRefusedAtStart: a checkpoint key file that is
// missing or does not hold a base64 32-byte seed, or a checkpoint interval
// that is not positive, stops serve before it starts, in one line.
func TestABadCheckpointKeyIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	url := storetest.URL(t)
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}
	good := file("good.key", base64.StdEncoding.EncodeToString(make([]byte, ed25519.SeedSize))+"\n")
	for _, tc := range []struct {
		key      string
		interval time.Duration
		refused  string
	}{
		{filepath.Join(dir, "missing.key"), time.Minute, "read the checkpoint key"},
		{file("text.key", "not a key at all"), time.Minute, "is not a base64 32-byte seed"},
		{file("short.key", base64.StdEncoding.EncodeToString(make([]byte, 16))), time.Minute, "is not a base64 32-byte seed"},
		{good, 0, "the checkpoint interval must be positive"},
	} {
		cfg := newcomerConfig(url)
		cfg.CheckpointKey, cfg.CheckpointInterval = tc.key, tc.interval
		a, err := app.New(context.Background(), cfg)
		if err == nil {
			a.Close()
		}
		require.Error(t, err, tc.key)
		require.Contains(t, err.Error(), tc.refused)
		require.NotContains(t, err.Error(), "\n", "one line")
	}
	cfg := newcomerConfig(url)
	cfg.CheckpointKey = good
	a, err := app.New(context.Background(), cfg)
	require.NoError(t, err)
	a.Close()
}
