package app_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/internal/app"
	"github.com/orderd/orderd/store/storetest"
)

// TestCheckJWTSecretRefusesGuessableSecrets: a secret long enough but easy
// to guess is refused like a short one, in a line that never repeats it.
func TestCheckJWTSecretRefusesGuessableSecrets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, secret string
		refused      string // "" when accepted
	}{
		{"openssl rand -hex 32", "3f9a1c0e5b7d2a4c6e8f0b1d3a5c7e9f1b3d5f7a9c1e3b5d7f9a1c3e5b7d9f1a", ""},
		{"32 random letters and digits", "kT8vQ2mZ9xR4pL7nW1sY6hJ3bF5dG0cA", ""},
		{"empty", "", "is required"},
		{"short", "kT8vQ2mZ9xR4pL7nW1sY6hJ3", "at least 32 are required"},
		{"a repeated character", strings.Repeat("a", 40), "too easy to guess"},
		{"a repeated word", "passwordpasswordpasswordpassword", "too easy to guess"},
		{"a sequence", "0123456789abcdef0123456789abcdef", "too easy to guess"},
		{"a dictionary phrase", "thisismysecretpasswordfortheserver", "too easy to guess"},
		{"a repeated phrase", "changeme-changeme-changeme-changeme", "too easy to guess"},
	} {
		err := app.CheckJWTSecret(tc.secret)
		if tc.refused == "" {
			require.NoError(t, err, tc.name)
			continue
		}
		require.Error(t, err, tc.name)
		require.Contains(t, err.Error(), tc.refused, tc.name)
		require.Contains(t, err.Error(), "openssl rand -hex 32", tc.name)
		if tc.secret != "" {
			require.NotContains(t, err.Error(), tc.secret, "%s: the secret is never repeated", tc.name)
		}
	}
}

// TestAnAddressInUseNamesItsSetting: the error of a port another process
// holds says which setting chooses another.
func TestAnAddressInUseNamesItsSetting(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = taken.Close() })
	url := storetest.URL(t)
	for _, tc := range []struct{ addr, opsAddr, setting string }{
		{taken.Addr().String(), "127.0.0.1:0", "--addr or ORDERD_ADDR"},
		{"127.0.0.1:0", taken.Addr().String(), "--ops-addr or ORDERD_OPS_ADDR"},
	} {
		cfg := newcomerConfig(url)
		cfg.Addr, cfg.OpsAddr = tc.addr, tc.opsAddr
		a, err := app.New(context.Background(), cfg)
		require.NoError(t, err)
		err = a.Listen()
		a.Close()
		require.Error(t, err)
		require.Contains(t, err.Error(), "in use by another process; choose another with "+tc.setting)
	}
}

// TestServeSaysToMigrate: a database behind the migrations is refused at
// start with the command that brings it up to date, instead of answering
// requests with missing tables; serving with ORDERD_MIGRATE says that it
// migrates.
func TestServeSaysToMigrate(t *testing.T) {
	t.Parallel()
	url := storetest.URL(t)
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	_, err = conn.Exec(context.Background(), `DELETE FROM goose_db_version WHERE version_id = (SELECT max(version_id) FROM goose_db_version)`)
	require.NoError(t, err)
	require.NoError(t, conn.Close(context.Background()))

	cfg := newcomerConfig(url)
	_, err = app.New(context.Background(), cfg)
	require.ErrorIs(t, err, app.ErrNotMigrated)
	require.Contains(t, err.Error(), "run `orderd migrate up`")

	var logs bytes.Buffer
	cfg.Migrate = true
	cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	a, err := app.New(context.Background(), cfg)
	if err == nil {
		a.Close()
	}
	require.Contains(t, logs.String(), "migrating the database")
}

// TestStartUpLogReadsDurationsAsPeopleWriteThem: the configuration's
// durations log as "5s", not as nanoseconds, in JSON too.
func TestStartUpLogReadsDurationsAsPeopleWriteThem(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "config", app.DefaultConfig())
	for _, want := range []string{`"webhook_backoff":"5s"`, `"webhook_timeout":"5s"`, `"guest_ttl":"12h0m0s"`, `"request_timeout":"10s"`} {
		require.Contains(t, logs.String(), want)
	}
}

func newcomerConfig(url string) app.Config {
	cfg := app.DefaultConfig()
	cfg.DatabaseURL = url
	cfg.JWTSecret = "Pz4wK8nB2vX6qT1mR9cJ5hL3dF7gS0aQ"
	cfg.Addr, cfg.OpsAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Migrate = false
	cfg.MaxConns = 2
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return cfg
}
