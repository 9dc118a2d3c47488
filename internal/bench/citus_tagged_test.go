//go:build citus

package bench

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/internal/citustest"
)

// TestCitusTwoPhaseWatchCountsEveryCommit: a write to two merchants' shards
// in one transaction commits in two phases, which the watch counts; a
// write to one merchant's does not.
func TestCitusTwoPhaseWatchCountsEveryCommit(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, citustest.Bare(t))
	require.NoError(t, err)
	defer pool.Close()
	target := &Target{Pool: pool, Citus: true}
	_, err = pool.Exec(ctx, `CREATE TABLE probe (merchant_id uuid PRIMARY KEY, n int NOT NULL)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `SELECT create_distributed_table('probe', 'merchant_id')`)
	require.NoError(t, err)

	// Two merchant ids whose shards sit on different workers.
	var a, b string
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT x.id, y.id FROM (SELECT gen_random_uuid() AS id FROM generate_series(1, 64)) x,
		                       (SELECT gen_random_uuid() AS id FROM generate_series(1, 64)) y
		WHERE (SELECT nodeport FROM citus_shards s WHERE s.shardid = get_shard_id_for_distribution_column('probe', x.id))
		   <> (SELECT nodeport FROM citus_shards s WHERE s.shardid = get_shard_id_for_distribution_column('probe', y.id))
		LIMIT 1`).Scan(&a, &b))
	insert := `INSERT INTO probe (merchant_id, n) VALUES ($1, 0)`

	w := WatchTwoPhase(target)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, insert, a)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.Zero(t, w.Stop(), "one merchant's shard: one phase")

	w = WatchTwoPhase(target)
	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, insert, b)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE probe SET n = n + 1 WHERE merchant_id = $1`, a)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, 2, w.Stop(), "a prepared transaction on each worker")
}
