//go:build citus

package migrations_test

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/internal/citustest"
	"github.com/orderd/orderd/migrations"
)

// TestCitusDistributeLaysOutEveryTableOnce distributes a fresh database on the
// cluster, then runs again: every per-merchant table is hash-distributed by
// merchant and co-located with merchants, the global tables are reference
// tables, River's stay off Citus, and the second run changes nothing.
func TestCitusDistributeLaysOutEveryTableOnce(t *testing.T) {
	ctx := context.Background()
	url := citustest.Bare(t)
	done, err := migrations.Distribute(ctx, url, migrations.DistributeParams{})
	require.NoError(t, err)
	require.NotEmpty(t, done)

	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `
		SELECT c.relname, coalesce(p.partmethod::text, ''), coalesce(column_to_column_name(p.logicalrelid, p.partkey), ''),
		       coalesce(p.colocationid = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'merchants'::regclass), false)
		FROM pg_class c LEFT JOIN pg_dist_partition p ON p.logicalrelid = c.oid
		WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'`)
	require.NoError(t, err)
	type layout struct {
		method, column string
		colocated      bool
	}
	got := map[string]layout{}
	for rows.Next() {
		var name string
		var l layout
		require.NoError(t, rows.Scan(&name, &l.method, &l.column, &l.colocated))
		got[name] = l
	}
	require.NoError(t, rows.Err())
	global := []string{"ws_tickets", "sign_in_codes"}
	local := []string{"river_job", "river_leader", "river_queue", "river_migration", "river_notification", "goose_db_version",
		"log_heads", "log_leaves", "log_hash_tiles", "checkpoints"}
	for name, l := range got {
		if name != "merchants" && !slices.Contains(global, name) && !slices.Contains(local, name) {
			require.Equal(t, layout{"h", "merchant_id", true}, l, name)
		}
	}
	require.Contains(t, got, "events")
	require.Equal(t, layout{"h", "id", true}, got["merchants"])
	for _, name := range global {
		require.Equal(t, "n", got[name].method, name)
	}
	for _, name := range local {
		require.Equal(t, layout{}, got[name], name)
	}

	// A session's read of every shard keeps to one connection per worker
	// (the database's own setting, which a new session takes).
	var poolSize string
	require.NoError(t, conn.QueryRow(ctx, `SHOW citus.max_adaptive_executor_pool_size`).Scan(&poolSize))
	require.Equal(t, "1", poolSize)

	// Every audit view is a query Citus can run.
	rows, err = conn.Query(ctx, `SELECT viewname FROM pg_views WHERE schemaname = 'audit' ORDER BY 1`)
	require.NoError(t, err)
	views, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotEmpty(t, views)
	for _, v := range views {
		_, err := conn.Exec(ctx, `SELECT * FROM audit.`+pgx.Identifier{v}.Sanitize())
		require.NoError(t, err, "audit.%s", v)
	}

	// ShardsPerWorker shards on each worker, each a group of every
	// co-located table's shards.
	rows, err = conn.Query(ctx, `SELECT count(*) FROM citus_shards WHERE table_name = 'merchants'::regclass GROUP BY nodename, nodeport`)
	require.NoError(t, err)
	perWorker, err := pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	var workers int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM citus_get_active_worker_nodes()`).Scan(&workers))
	require.Len(t, perWorker, workers)
	for _, n := range perWorker {
		require.Equal(t, migrations.ShardsPerWorker, n)
	}

	again, err := migrations.Distribute(ctx, url, migrations.DistributeParams{Shards: 7})
	require.NoError(t, err)
	require.Empty(t, again, "a second run changes nothing")

	// A table no one placed is refused before anything moves.
	_, err = conn.Exec(ctx, `CREATE TABLE stray (id int PRIMARY KEY)`)
	require.NoError(t, err)
	_, err = migrations.Distribute(ctx, url, migrations.DistributeParams{})
	require.ErrorContains(t, err, "stray")
}

// TestCitusDistributeRefusesADatabaseWithoutCitus: without Citus there is nothing to
// lay out, and saying so beats a half-done layout.
func TestCitusDistributeRefusesADatabaseWithoutCitus(t *testing.T) {
	ctx := context.Background()
	url := citustest.Bare(t)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `DROP EXTENSION citus CASCADE`)
	require.NoError(t, err)
	_, err = migrations.Distribute(ctx, url, migrations.DistributeParams{})
	require.ErrorContains(t, err, "citus extension is not installed")
}

// TestCitusDistributeTakesAShardCount: a shard count given is every
// per-merchant table's.
func TestCitusDistributeTakesAShardCount(t *testing.T) {
	ctx := context.Background()
	url := citustest.Bare(t)
	done, err := migrations.Distribute(ctx, url, migrations.DistributeParams{Shards: 3})
	require.NoError(t, err)
	require.Contains(t, done, "distributed merchants by id in 3 shards")
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var counts []int
	require.NoError(t, conn.QueryRow(ctx, `SELECT array_agg(DISTINCT n) FROM (SELECT count(*)::int AS n FROM pg_dist_shard JOIN pg_dist_partition USING (logicalrelid) WHERE partmethod = 'h' GROUP BY logicalrelid) c`).Scan(&counts))
	require.Equal(t, []int{3}, counts, "the shard counts of the distributed tables")
}
