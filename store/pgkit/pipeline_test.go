package pgkit_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/store/pgkit"
	"github.com/orderd/orderd/store/storetest"
)

// countingTracer counts the round trips a connection makes.
type countingTracer struct{ trips int }

func (c *countingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.trips++
	return ctx
}
func (c *countingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *countingTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.trips++
	return ctx
}
func (c *countingTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *countingTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}
func (c *countingTracer) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	c.trips++
	return ctx
}
func (c *countingTracer) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}

func connect(t *testing.T) (*pgx.Conn, *countingTracer) {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(storetest.URL(t))
	require.NoError(t, err)
	tracer := &countingTracer{}
	cfg.Tracer = tracer
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(ctx) })
	_, err = conn.Exec(ctx, `CREATE TABLE copied (id int PRIMARY KEY, tags text[], note text)`)
	require.NoError(t, err)
	tracer.trips = 0
	return conn, tracer
}

func copyRows(ctx context.Context, tx pgx.Tx, rows ...[]any) (int64, error) {
	return tx.CopyFrom(ctx, pgx.Identifier{"copied"}, []string{"id", "tags", "note"}, pgx.CopyFromRows(rows))
}

// deferredCopy copies rows while pt defers.
func deferredCopy(t *testing.T, pt *pgkit.PipelinedTx, rows ...[]any) {
	t.Helper()
	require.NoError(t, pt.Deferring(func() error {
		_, err := copyRows(context.Background(), pt, rows...)
		return err
	}))
}

func count(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var n int
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT count(*) FROM copied`).Scan(&n))
	return n
}

// TestDeferredCopyTravelsWithTheCommit: a copy made while deferring costs
// no round trip of its own; its rows, and a deferred Exec, are written by
// the commit's batch.
func TestDeferredCopyTravelsWithTheCommit(t *testing.T) {
	ctx := context.Background()
	conn, tracer := connect(t)
	pt := pgkit.NewPipelinedTx(conn)
	b := &pgx.Batch{}
	b.Queue(`SELECT 1`)
	require.NoError(t, pt.SendBatch(ctx, b).Close())
	err := pt.Deferring(func() error {
		n, err := copyRows(ctx, pt, []any{1, []string{"a", "b"}, "one"}, []any{2, []string{}, nil})
		require.EqualValues(t, 2, n)
		if err != nil {
			return err
		}
		_, err = pt.Exec(ctx, `INSERT INTO copied (id, tags) VALUES ($1, $2)`, 3, []string{"c"})
		return err
	})
	require.NoError(t, err)
	require.Equal(t, 1, tracer.trips, "nothing sent while deferring")
	require.NoError(t, pt.CommitWith(ctx, nil))
	require.Equal(t, 2, tracer.trips, "the deferred writes went with the commit")

	var tags []string
	var note *string
	require.NoError(t, conn.QueryRow(ctx, `SELECT tags, note FROM copied WHERE id = 2`).Scan(&tags, &note))
	require.Empty(t, tags)
	require.Nil(t, note)
	require.Equal(t, 3, count(t, conn))
}

// TestDeferredCopyIsSeenByTheNextRead: a read after a deferred copy sends
// the copy first, and a rollback forgets what was deferred.
func TestDeferredCopyIsSeenByTheNextRead(t *testing.T) {
	ctx := context.Background()
	conn, _ := connect(t)
	pt := pgkit.NewPipelinedTx(conn)
	deferredCopy(t, pt, []any{1, []string{"a"}, "one"})
	var n int
	require.NoError(t, pt.QueryRow(ctx, `SELECT count(*) FROM copied`).Scan(&n))
	require.Equal(t, 1, n)
	deferredCopy(t, pt, []any{2, []string{"b"}, "two"})
	require.NoError(t, pt.Rollback(ctx))
	require.Equal(t, 0, count(t, conn))
}

// TestDeferredCopyFailsWithItsBatch: a deferred row that breaks a
// constraint fails the batch it travels with.
func TestDeferredCopyFailsWithItsBatch(t *testing.T) {
	ctx := context.Background()
	conn, _ := connect(t)
	pt := pgkit.NewPipelinedTx(conn)
	deferredCopy(t, pt, []any{1, nil, "one"}, []any{1, nil, "again"})
	require.Error(t, pt.CommitWith(ctx, nil))
	require.NoError(t, pt.Rollback(ctx))
	require.Equal(t, 0, count(t, conn))
}
