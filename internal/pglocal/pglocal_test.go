package pglocal_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/internal/pglocal"
)

// TestPrivateCluster takes the path of a machine with no server to use: it
// initializes a cluster in a temporary directory, starts it, reuses it while
// it runs, stops it, and starts it again without a second initdb.
func TestPrivateCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	opts := pglocal.Options{DataDir: t.TempDir(), SkipLocalhost: true, Fast: true, Logf: t.Logf}

	inst, err := pglocal.Find(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Stop(context.Background()) })
	require.True(t, inst.Started)
	require.Contains(t, inst.URL, "127.0.0.1")

	conn, err := pgx.Connect(ctx, inst.URL)
	require.NoError(t, err)
	var maxConns, fsync string
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_setting('max_connections'), current_setting('fsync')`).Scan(&maxConns, &fsync))
	require.NoError(t, conn.Close(ctx))
	require.Equal(t, "300", maxConns)
	require.Equal(t, "off", fsync)

	require.NoError(t, pglocal.EnsureDatabase(ctx, inst.URL, "orderd_pglocal"))
	require.NoError(t, pglocal.EnsureDatabase(ctx, inst.URL, "orderd_pglocal"), "an existing database is fine")
	conn, err = pgx.Connect(ctx, inst.DatabaseURL("orderd_pglocal"))
	require.NoError(t, err)
	var db string
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_database()`).Scan(&db))
	require.NoError(t, conn.Close(ctx))
	require.Equal(t, "orderd_pglocal", db)

	again, err := pglocal.Find(ctx, opts)
	require.NoError(t, err)
	require.False(t, again.Started, "a running cluster is reused, and left to its starter to stop")
	require.Equal(t, inst.URL, again.URL)
	require.NoError(t, again.Stop(ctx), "stopping a reused cluster is a no-op")

	require.NoError(t, inst.Stop(ctx))
	_, err = pgx.Connect(ctx, inst.URL)
	require.Error(t, err, "stopped")

	restarted, err := pglocal.Find(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = restarted.Stop(context.Background()) })
	require.True(t, restarted.Started)
	require.NoError(t, pglocal.EnsureDatabase(ctx, restarted.URL, "orderd_pglocal"))
	conn, err = pgx.Connect(ctx, restarted.DatabaseURL("orderd_pglocal"))
	require.NoError(t, err, "the data directory survived the restart")
	require.NoError(t, conn.Close(ctx))

	// A connection left open does not keep the database from its drop.
	left, err := pgx.Connect(ctx, restarted.DatabaseURL("orderd_pglocal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = left.Close(context.Background()) })
	require.NoError(t, pglocal.DropDatabase(ctx, restarted.URL, "orderd_pglocal"))
	require.NoError(t, pglocal.DropDatabase(ctx, restarted.URL, "orderd_pglocal"), "a database already gone is fine")
	conn, err = pgx.Connect(ctx, restarted.URL)
	require.NoError(t, err)
	var exists bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'orderd_pglocal')`).Scan(&exists))
	require.NoError(t, conn.Close(ctx))
	require.False(t, exists, "dropped")
	require.NoError(t, restarted.Stop(ctx))
}

// TestDeepDataDir starts a cluster whose data directory is too deep for a
// Unix socket inside it.
func TestDeepDataDir(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	inst, err := pglocal.Find(ctx, pglocal.Options{DataDir: dir, SkipLocalhost: true, Fast: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Stop(context.Background()) })
	conn, err := pgx.Connect(ctx, inst.URL)
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	require.NoError(t, inst.Stop(ctx))
}

func TestNothingToUse(t *testing.T) {
	t.Parallel()
	_, err := pglocal.Find(context.Background(), pglocal.Options{EnvVar: "ORDERD_UNSET_TEST_URL", SkipLocalhost: true})
	require.ErrorIs(t, err, pglocal.ErrNotFound)
	require.Equal(t, "no PostgreSQL found: set ORDERD_UNSET_TEST_URL, run one on localhost:5432, or install it (apt-get install postgresql)", err.Error())
}

func TestEnvVarWins(t *testing.T) {
	t.Setenv("ORDERD_PGLOCAL_TEST_URL", "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=1")
	_, err := pglocal.Find(context.Background(), pglocal.Options{EnvVar: "ORDERD_PGLOCAL_TEST_URL"})
	require.ErrorContains(t, err, "ORDERD_PGLOCAL_TEST_URL", "a set but dead URL is an error, not a reason to look elsewhere")
}

func TestDatabaseURL(t *testing.T) {
	t.Parallel()
	inst := &pglocal.Instance{URL: "postgres://app:secret@db.example:6543/postgres?sslmode=disable"}
	require.Equal(t, "postgres://app:secret@db.example:6543/orders?sslmode=disable", inst.DatabaseURL("orders"))
}
