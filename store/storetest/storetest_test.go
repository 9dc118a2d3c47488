package storetest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/migrations"
	"github.com/orderd/orderd/store/storetest"
)

// TestDatabasesAreIsolated checks that each call gets a migrated database of
// its own, and that it is gone once its test ends.
func TestDatabasesAreIsolated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var first string
	t.Run("own", func(t *testing.T) {
		first = storetest.URL(t)
		second := storetest.URL(t)
		require.NotEqual(t, first, second)
		for _, url := range []string{first, second} {
			current, err := migrations.Current(ctx, url)
			require.NoError(t, err)
			require.True(t, current, "cloned from the migrated template")
		}

		conn, err := pgx.Connect(ctx, first)
		require.NoError(t, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, `CREATE TABLE storetest_probe (id int)`)
		require.NoError(t, err)

		require.True(t, probeExists(ctx, t, first))
		require.False(t, probeExists(ctx, t, second), "a change in one database is invisible in the other")
	})

	admin, err := pgx.Connect(ctx, storetest.AdminURL(t))
	require.NoError(t, err)
	defer admin.Close(ctx)
	cfg, err := pgx.ParseConfig(first)
	require.NoError(t, err)
	var exists bool
	require.NoError(t, admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, cfg.Database).Scan(&exists))
	require.False(t, exists, "dropped when its test ended")
}

func TestPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	var jobs int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM river_job`).Scan(&jobs))
	require.Zero(t, jobs)
}

func probeExists(ctx context.Context, t *testing.T, url string) bool {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var exists bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT to_regclass('storetest_probe') IS NOT NULL`).Scan(&exists))
	return exists
}
