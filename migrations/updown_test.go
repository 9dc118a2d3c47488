package migrations_test

import (
	"context"
	"fmt"
	"io/fs"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/internal/pglocal"
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
	require.Empty(t, auditObjects(ctx, t, url), "the views read the newest schema only")

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
	requireTheFiles(ctx, t, url)

	statuses, err := migrations.Status(ctx, url)
	require.NoError(t, err)
	require.NotEmpty(t, statuses)
}

// TestConcurrentUpOnEmptyDatabase starts several migrators at once on an
// empty database, as several orderd serve processes do on a first deploy.
func TestConcurrentUpOnEmptyDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := emptyDatabase(t)

	current, err := migrations.Current(ctx, url)
	require.NoError(t, err)
	require.False(t, current, "nothing applied yet")

	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- migrations.Up(ctx, url) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	current, err = migrations.Current(ctx, url)
	require.NoError(t, err)
	require.True(t, current)
}

// TestDownStepByStep walks down one goose migration at a time; the step after
// the last one removes River's schema, and a further step has nothing to do.
func TestDownStepByStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.URL(t)
	sqlFiles, err := fs.Glob(migrations.FS, "*.sql")
	require.NoError(t, err)

	for range sqlFiles {
		require.NoError(t, migrations.Down(ctx, url))
		require.True(t, tableExists(ctx, t, url, "river_job"), "River stays while any of ours is applied")
	}
	require.NoError(t, migrations.Down(ctx, url))
	require.False(t, tableExists(ctx, t, url, "river_job"))
	require.False(t, tableExists(ctx, t, url, "river_migration"))
	require.NoError(t, migrations.Down(ctx, url), "nothing left to roll back")

	statuses, err := migrations.Status(ctx, url)
	require.NoError(t, err)
	for _, s := range statuses {
		require.False(t, s.Applied, s.String())
	}
	require.NoError(t, migrations.Up(ctx, url))
	current, err := migrations.Current(ctx, url)
	require.NoError(t, err)
	require.True(t, current)
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	require.Len(t, migrations.Fingerprint(), 12)
	require.Equal(t, migrations.Fingerprint(), migrations.Fingerprint())
}

func tableExists(ctx context.Context, t *testing.T, url, table string) bool {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var exists bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists))
	return exists
}

// emptyDatabase creates a database with no schema at all on the test server.
func emptyDatabase(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	admin := storetest.AdminURL(t)
	name := fmt.Sprintf("orderd_empty_%d", time.Now().UnixNano())
	require.NoError(t, pglocal.EnsureDatabase(ctx, admin, name))
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), admin)
		if err != nil {
			t.Logf("drop %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
			t.Logf("drop %s: %v", name, err)
		}
	})
	return (&pglocal.Instance{URL: admin}).DatabaseURL(name)
}
