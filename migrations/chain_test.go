package migrations_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/migrations"
	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/store/storetest"
)

// The migration that brings the chains computes them for the events
// written before it, stream by stream, as the auditor's query recomputes
// them, and the trigger chains what comes after onto them.
func TestChainMigrationChainsExistingStreams(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.URL(t)
	for hasColumn(ctx, t, url, "events", "hash") {
		require.NoError(t, migrations.Down(ctx, url))
	}
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	merchant := uuid.New()
	streams := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	for i, s := range streams {
		for v := 1; v <= 3+i; v++ {
			_, err := conn.Exec(ctx, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data, metadata, recorded_at)
				VALUES ($1, $2, 'order', $3::int, 'order.placed', '{"b": [1, 2.50], "a": "é\n"}', '{"actor": "x"}', now() - $3::int * interval '1.5 second')`, s, merchant, v)
			require.NoError(t, err)
		}
	}

	require.NoError(t, migrations.Up(ctx, url))
	var unset int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM events WHERE hash IS NULL`).Scan(&unset))
	require.Zero(t, unset)
	_, err = conn.Exec(ctx, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data) VALUES ($1, $2, 'order', 4, 'order.completed', '{}')`,
		streams[0], merchant)
	require.NoError(t, err)

	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	broken, err := store.New(store.Config{Pool: pool}).BrokenChains(ctx)
	require.NoError(t, err)
	require.Empty(t, broken)
	var distinct int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(DISTINCT hash) FROM events`).Scan(&distinct))
	require.Equal(t, 3+4+5+1, distinct)
}

func hasColumn(ctx context.Context, t *testing.T, url, table, column string) bool {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns WHERE table_name = $1 AND column_name = $2`, table, column).Scan(&n))
	return n > 0
}
