package store

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/store/pgkit"
	"github.com/orderd/orderd/store/storetest"
)

// A pipelined transaction commits its last batch with the COMMIT; when a
// statement of that batch fails, nothing of the transaction stays, the
// COMMIT is not mistaken for success, and the connection goes back clean.
func TestPipelinedTxCommitsOrNothing(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	s := New(Config{Pool: pool})
	ctx := context.Background()
	_, err := pool.Exec(ctx, `CREATE TABLE pipelined (id int PRIMARY KEY)`)
	require.NoError(t, err)

	insert := func(ids ...int) *pgx.Batch {
		b := &pgx.Batch{}
		for _, id := range ids {
			b.Queue(`INSERT INTO pipelined (id) VALUES ($1)`, id)
		}
		return b
	}
	err = s.inPipelinedTx(ctx, func(tx *txn, pt *pgkit.PipelinedTx) error {
		if err := tx.SendBatch(ctx, insert(1)).Close(); err != nil {
			return err
		}
		return pt.CommitWith(ctx, insert(2))
	})
	require.NoError(t, err)

	err = s.inPipelinedTx(ctx, func(tx *txn, pt *pgkit.PipelinedTx) error {
		if err := tx.SendBatch(ctx, insert(3)).Close(); err != nil {
			return err
		}
		return pt.CommitWith(ctx, insert(4, 1))
	})
	require.ErrorContains(t, err, "pipelined_pkey")

	err = s.inPipelinedTx(ctx, func(tx *txn, pt *pgkit.PipelinedTx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO pipelined (id) VALUES (5)`); err != nil {
			return err
		}
		return nil
	})
	require.ErrorContains(t, err, "without its commit")

	rows, err := pool.Query(ctx, `SELECT id FROM pipelined ORDER BY id`)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	require.Equal(t, []int{1, 2}, ids)

	for range pool.Stat().MaxConns() {
		c, err := pool.Acquire(ctx)
		require.NoError(t, err)
		require.Equal(t, byte('I'), c.Conn().PgConn().TxStatus())
		defer c.Release()
	}
}
