package migrations_test

import (
	"context"
	"crypto/ed25519"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/orderd/orderd/ledger/verify"
	"github.com/orderd/orderd/migrations"
	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/store/storetest"
)

// Migration 34 packs a log's stored hashes, a row each, into tiles, and
// down unpacks them: a log grown before it hashes to its checkpoints
// either way, and grows on after it from its part-filled last tile.
func TestHashTilesMigrationKeepsTheLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.URL(t)
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	merchant := uuid.New()
	appendEvents := func(n int) {
		conn, err := pgx.Connect(ctx, url)
		require.NoError(t, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data)
			SELECT gen_random_uuid(), $1, 'order', 1, 'order.placed', '{}' FROM generate_series(1, $2)`, merchant, n)
		require.NoError(t, err)
	}
	extend := func() *verify.Checkpoint {
		pool, err := pgxpool.New(ctx, url)
		require.NoError(t, err)
		defer pool.Close()
		res, err := store.New(store.Config{Pool: pool}).ExtendLog(ctx, store.ExtendLogParams{Log: store.LogMain, Key: key})
		require.NoError(t, err)
		require.NotNil(t, res.Checkpoint)
		return res.Checkpoint
	}
	// 45 leaves store 86 hashes: two full tiles and one of 22.
	appendEvents(45)
	before := extend()
	require.EqualValues(t, 45, before.Size)

	require.NoError(t, migrations.DownTo(ctx, url, 33))
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var rows int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM log_hashes WHERE log = 'main'`).Scan(&rows))
	require.Equal(t, tlog.StoredHashCount(45), rows)
	hashRows := tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(indexes))
		for i, idx := range indexes {
			var h []byte
			if err := conn.QueryRow(ctx, `SELECT hash FROM log_hashes WHERE log = 'main' AND idx = $1`, idx).Scan(&h); err != nil {
				return nil, err
			}
			out[i] = tlog.Hash(h)
		}
		return out, nil
	})
	root, err := tlog.TreeHash(45, hashRows)
	require.NoError(t, err)
	require.Equal(t, before.Root, root[:], "the rows unpacked from the tiles hash to the checkpoint")

	require.NoError(t, migrations.Up(ctx, url))
	appendEvents(30)
	after := extend()
	require.EqualValues(t, 75, after.Size)

	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	st := store.New(store.Config{Pool: pool})
	report, err := st.AuditHistory(ctx, store.HistoryAuditParams{Key: key.Public().(ed25519.PublicKey)})
	require.NoError(t, err)
	require.True(t, report.OK(), "%+v", report)
	require.Equal(t, 2, report.Checkpoints)
	cons, err := st.ConsistencyProof(ctx, store.LogMain, 45, 75)
	require.NoError(t, err)
	require.NoError(t, verify.VerifyConsistency(45, 75, before.Root, after.Root, cons))
}
