//go:build citus

package store_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/internal/citustest"
	"github.com/orderd/orderd/store"
)

// TestCitusChainReadsItsOwnShard: a stream's later event, appended on its
// worker to the shard by name as placements and closes append it, gets
// its hash linked to the version before, and the chain's trigger reads
// that version from the shard it fires on, not through Citus's distributed
// table (a distributed query planned, deparsed and run locally on every
// call, which Citus reports with citus.log_local_commands). Before, every
// close's and payment's event paid that query on its worker.
func TestCitusChainReadsItsOwnShard(t *testing.T) {
	ctx := context.Background()
	url := citustest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	st := store.New(store.Config{Pool: pool})
	defer st.Close()

	merchant, stream := uuid.New(), uuid.New()
	node, err := st.MerchantNode(ctx, merchant)
	require.NoError(t, err)
	var shard string
	require.NoError(t, pool.QueryRow(ctx, `SELECT shard_name('events'::regclass, get_shard_id_for_distribution_column('events', $1::uuid))`,
		merchant).Scan(&shard))

	cfg := workerPool(t, url, node).Config().ConnConfig.Copy()
	var mu sync.Mutex
	var notices []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		notices = append(notices, n.Message)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer conn.Close(ctx)

	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SET LOCAL citus.log_local_commands = on`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SET LOCAL client_min_messages = log`)
	require.NoError(t, err)
	for v := 1; v <= 3; v++ {
		_, err = tx.Exec(ctx, `INSERT INTO `+pgx.Identifier{shard}.Sanitize()+` (merchant_id, stream_id, stream_type, version, type, data, recorded_at)
			VALUES ($1, $2, 'test', $3, 't', '{}', now())`, merchant, stream, v)
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit(ctx))
	mu.Lock()
	for _, n := range notices {
		require.NotContains(t, n, "executing the command locally", "the chain's trigger read the previous event through the distributed table")
	}
	mu.Unlock()

	// The chain is the one the audit recomputes: hash(v) = sha256(hash(v-1)
	// || content(v)), from 32 zero bytes.
	rows, err := pool.Query(ctx, `SELECT hash, type, data::text, coalesce(metadata::text, ''), (extract(epoch FROM recorded_at) * 1000000)::bigint
		FROM events WHERE merchant_id = $1 AND stream_id = $2 ORDER BY version`, merchant, stream)
	require.NoError(t, err)
	type event struct {
		hash                []byte
		typ, data, metadata string
		micros              int64
	}
	events, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (event, error) {
		var e event
		err := r.Scan(&e.hash, &e.typ, &e.data, &e.metadata, &e.micros)
		return e, err
	})
	require.NoError(t, err)
	require.Len(t, events, 3)
	prev := make([]byte, 32)
	for i, e := range events {
		content := strings.Join([]string{stream.String(), fmt.Sprint(i + 1), e.typ, e.data, e.metadata, fmt.Sprint(e.micros)}, "\n")
		sum := sha256.Sum256(append(append([]byte{}, prev...), content...))
		require.Equal(t, sum[:], e.hash, "version %d", i+1)
		prev = e.hash
	}
}
