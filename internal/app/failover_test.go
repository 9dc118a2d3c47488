package app_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/internal/app"
	"github.com/orderd/orderd/internal/pglocal"
)

// TestPoolLeavesReadOnlyServers turns a private cluster read-only under a
// pool whose URL names it twice (as a primary and a standby would be named):
// the connection whose write is refused (25006) is closed on release rather
// than handed out again, a new connection to a read-only server is refused
// at connect (read-write is the default with several hosts), and once the
// server is writable again the pool writes without being rebuilt.
func TestPoolLeavesReadOnlyServers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	inst, err := pglocal.Find(ctx, pglocal.Options{DataDir: t.TempDir(), SkipLocalhost: true, Fast: true, Logf: t.Logf})
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Stop(context.Background()) })
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable", inst.Port(), inst.Port())

	pool, err := app.NewPool(ctx, url, 2, 0)
	require.NoError(t, err)
	defer pool.Close()
	_, err = pool.Exec(ctx, `CREATE TABLE notes (n int)`)
	require.NoError(t, err)
	require.EqualValues(t, 1, pool.Stat().TotalConns())

	admin, err := pgx.Connect(ctx, inst.URL)
	require.NoError(t, err)
	defer admin.Close(context.Background())
	_, err = admin.Exec(ctx, `ALTER SYSTEM SET default_transaction_read_only = on`)
	require.NoError(t, err)
	_, err = admin.Exec(ctx, `SELECT pg_reload_conf()`)
	require.NoError(t, err)

	// The pooled session reads the reloaded setting at its next statement.
	require.Eventually(t, func() bool {
		_, err := pool.Exec(ctx, `INSERT INTO notes VALUES (1)`)
		var pgErr *pgconn.PgError
		return errors.As(err, &pgErr) && pgErr.Code == pgerrcode.ReadOnlySQLTransaction
	}, 10*time.Second, 50*time.Millisecond, "a write on a read-only server is refused with 25006")
	require.Eventually(t, func() bool { return pool.Stat().TotalConns() == 0 }, 5*time.Second, 10*time.Millisecond,
		"the read-only connection went back into the pool")

	_, err = pool.Exec(ctx, `SELECT 1`)
	require.ErrorIs(t, err, pgconn.ErrReadOnlyConnection, "a new connection to a read-only server is refused")

	_, err = admin.Exec(ctx, `SET default_transaction_read_only = off`)
	require.NoError(t, err)
	_, err = admin.Exec(ctx, `ALTER SYSTEM RESET default_transaction_read_only`)
	require.NoError(t, err)
	_, err = admin.Exec(ctx, `SELECT pg_reload_conf()`)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := pool.Exec(ctx, `INSERT INTO notes VALUES (2)`)
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "writes resume once the server is writable")
}
