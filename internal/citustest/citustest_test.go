//go:build citus

package citustest

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestCitusDropsItsDatabasesOnEveryNode: a test's database is gone from
// every node after the test, even with a transaction left prepared on a
// worker (a two-phase commit cut short), which made the DROP DATABASE
// fail there, or after a drop cut short left it on some nodes only; and
// the sweep drops what runs killed before their cleanup left, keeping
// databases of runs that may still be going.
func TestCitusDropsItsDatabasesOnEveryNode(t *testing.T) {
	ctx := context.Background()
	_, coord, workers := cluster(ctx, t)
	exists := func(name string) []string {
		var on []string
		for _, n := range nodes(coord, workers) {
			conn, err := pgx.ConnectConfig(ctx, n)
			require.NoError(t, err)
			var found bool
			require.NoError(t, conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, name).Scan(&found))
			conn.Close(ctx)
			if found {
				on = append(on, fmt.Sprintf("%s:%d", n.Host, n.Port))
			}
		}
		return on
	}
	onWorker := func(name string) *pgx.ConnConfig {
		c := coord.Copy()
		c.Host, c.Port, c.Database = workers[0].host, uint16(workers[0].port), name
		return c
	}

	var name string
	t.Run("a test", func(t *testing.T) {
		u, err := url.Parse(Bare(t))
		require.NoError(t, err)
		name = strings.TrimPrefix(u.Path, "/")
		require.Len(t, exists(name), 1+len(workers))
		exec(ctx, t, onWorker(name), `BEGIN`, `CREATE TABLE left_over (id int)`, `PREPARE TRANSACTION 'orderd_left_over'`)
	})
	require.Empty(t, exists(name), "the test's database is dropped on every node")

	// A drop cut short: the database is gone from one worker alone, and
	// Citus refuses to propagate a DROP to a worker without it.
	cut := fmt.Sprintf("%s%d_cut", prefix, time.Now().Unix())
	exec(ctx, t, coord, `SET citus.enable_create_database_propagation = on`, `CREATE DATABASE `+cut)
	exec(ctx, t, onWorker(coord.Database), `DROP DATABASE `+cut)
	require.Len(t, exists(cut), len(workers))
	require.NoError(t, drop(ctx, coord, workers, cut))
	require.Empty(t, exists(cut), "a database a drop cut short is dropped on every node")

	// A database of a run killed long ago, made on one worker alone, and
	// one of a run that may be going.
	stale := fmt.Sprintf("%s%d_stale", prefix, time.Now().Add(-staleAfter-time.Minute).Unix())
	fresh := fmt.Sprintf("%s%d_fresh", prefix, time.Now().Unix())
	w := onWorker(coord.Database)
	exec(ctx, t, w, `CREATE DATABASE `+stale, `CREATE DATABASE `+fresh)
	t.Cleanup(func() { exec(ctx, t, w, `DROP DATABASE IF EXISTS `+fresh) })
	sweep(ctx, t, coord, workers)
	require.Empty(t, exists(stale), "a stale database is swept")
	require.NotEmpty(t, exists(fresh), "a fresh one is kept")
}
