package migrations_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/migrations"
	"github.com/orderd/orderd/store/storetest"
)

// TestUpDownUpRoundTrip checks that every migration, ours and River's, has a
// working down: up, all the way down, and up again from the same database.
func TestUpDownUpRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.URL(t) // migrated from the template

	current, err := migrations.Current(ctx, url)
	require.NoError(t, err)
	require.True(t, current)

	require.NoError(t, migrations.Down(ctx, url))
	current, err = migrations.Current(ctx, url)
	require.NoError(t, err)
	require.False(t, current, "one migration rolled back")

	require.NoError(t, migrations.Reset(ctx, url))
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var tables int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'goose_db_version'`).Scan(&tables))
	require.Zero(t, tables, "everything is gone after a reset")

	require.NoError(t, migrations.Up(ctx, url))
	require.NoError(t, migrations.Up(ctx, url), "up is idempotent")
	current, err = migrations.Current(ctx, url)
	require.NoError(t, err)
	require.True(t, current)

	statuses, err := migrations.Status(ctx, url)
	require.NoError(t, err)
	require.NotEmpty(t, statuses)
}
