package store_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// recomputeChains is the chains recomputed from nothing but each event's
// content, version 1 first, as an auditor who trusts no stored hash would:
// the hash of every event reached, by stream and version.
const recomputeChains = `WITH RECURSIVE chain AS (
    SELECT stream_id, version, sha256('\x0000000000000000000000000000000000000000000000000000000000000000'::bytea || ` + contentSQL + `) AS h
    FROM events e WHERE version = 1
  UNION ALL
    SELECT e.stream_id, e.version, sha256(c.h || ` + contentSQL + `)
    FROM chain c JOIN events e ON e.stream_id = c.stream_id AND e.version = c.version + 1
)
SELECT stream_id::text || '/' || version::text, h FROM chain`

const contentSQL = `convert_to(e.stream_id::text || E'\n' || e.version::text || E'\n' || e.type || E'\n' ||
    e.data::text || E'\n' || coalesce(e.metadata::text, '') || E'\n' ||
    (extract(epoch from e.recorded_at) * 1000000)::bigint::text, 'UTF8')`

// Every event appended, by placements batched across merchants (one insert
// for several streams, several versions of one stream) and by commands on
// single orders, carries the hash that the chain's formula recomputes from
// the events' contents alone, and the auditor's query finds no break.
func TestEveryEventIsChainedAsTheAuditorRecomputes(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var orders []*store.OrderView
	for m := range 3 {
		merchant := createMerchant(t, st, &merchantOpts{Capacity: 4})
		product := createProduct(t, st, merchant.ID, nil)
		for i := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := fmt.Sprintf("c%d-%d", m, i)
				o := mustPlace(t, st, merchant.ID, product.ID, placeOpts{Customer: c, PaymentRef: "pay-" + c})
				mu.Lock()
				orders = append(orders, o)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	for _, o := range orders {
		if o.Status == domain.StatusAccepted {
			_, err := st.CompleteOrder(ctx, o.ID, admin, "")
			require.NoError(t, err)
		}
	}

	rows, err := b.pool.Query(ctx, `SELECT stream_id::text || '/' || version::text, hash FROM events`)
	require.NoError(t, err)
	stored := map[string][]byte{}
	var key string
	var hash []byte
	_, err = pgx.ForEachRow(rows, []any{&key, &hash}, func() error { stored[key] = hash; return nil })
	require.NoError(t, err)
	require.Greater(t, len(stored), 3*12, "every order and its merchant's events")

	recomputed := map[string][]byte{}
	rows, err = b.pool.Query(ctx, recomputeChains)
	require.NoError(t, err)
	_, err = pgx.ForEachRow(rows, []any{&key, &hash}, func() error { recomputed[key] = hash; return nil })
	require.NoError(t, err)
	require.Equal(t, stored, recomputed)

	// The formula in Go, from the fields the API serves, gives the same.
	o := orders[0]
	events, err := st.ReadStream(ctx, o.MerchantID, o.ID)
	require.NoError(t, err)
	prev := make([]byte, 32)
	for _, e := range events {
		var data, meta string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT data::text, metadata::text FROM events WHERE stream_id = $1 AND version = $2`,
			e.StreamID, e.Version).Scan(&data, &meta))
		content := e.StreamID.String() + "\n" + strconv.Itoa(e.Version) + "\n" + e.Type + "\n" + data + "\n" + meta + "\n" +
			strconv.FormatInt(e.RecordedAt.UnixMicro(), 10)
		sum := sha256.Sum256(append(prev, content...))
		require.Equal(t, sum[:], e.Hash, "version %d", e.Version)
		prev = sum[:]
	}

	broken, err := st.BrokenChains(ctx)
	require.NoError(t, err)
	require.Empty(t, broken)
}

// Chaining has no point that appends to different streams pass through: a
// transaction that appended to one stream and has not committed holds up
// no append to another.
func TestChainsDoNotWaitAcrossStreams(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	merchant := createMerchant(t, st, nil)
	open, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer open.Rollback(ctx)
	_, err = open.Exec(ctx, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data) VALUES ($1, $2, 'order', 1, 'order.placed', '{}')`,
		uuid.New(), merchant.ID)
	require.NoError(t, err)

	// And a version that follows none in its stream is refused.
	_, err = b.pool.Exec(ctx, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data) VALUES ($1, $2, 'order', 2, 'order.paid', '{}')`,
		uuid.New(), merchant.ID)
	require.ErrorContains(t, err, "follows no event 1")

	appendCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err = st.Append(appendCtx, store.AppendParams{
		StreamID: uuid.New(), StreamType: store.StreamOrder, MerchantID: merchant.ID,
		Events: []domain.Event{{Type: "order.placed", Data: map[string]any{"n": 1}}},
	})
	require.NoError(t, err)
}

// TestFirstEventsChainedByTheirInsert: the insert of a stream's first
// event writes its hash itself, so a placement appends with the chain's
// trigger turned off (as a superuser may) and its chain still recomputes;
// a later version leaves its hash to the trigger, which alone sees a link
// before it inserted by the same statement, and without it is refused.
// The insert computing it saves each placement's event a PL/pgSQL call.
func TestFirstEventsChainedByTheirInsert(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 4})
	p := createProduct(t, st, m.ID, nil)
	_, err := b.pool.Exec(ctx, `ALTER TABLE events DISABLE TRIGGER events_chain`)
	require.NoError(t, err)
	o := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "c", PaymentRef: "pay"})
	require.Equal(t, domain.StatusAccepted, o.Status)
	broken, err := st.BrokenChains(ctx)
	require.NoError(t, err)
	require.Empty(t, broken)

	_, err = st.CompleteOrder(ctx, o.ID, admin, "")
	require.Error(t, err, "a later version's hash is the trigger's to write")
	_, err = b.pool.Exec(ctx, `ALTER TABLE events ENABLE TRIGGER events_chain`)
	require.NoError(t, err)
	_, err = st.CompleteOrder(ctx, o.ID, admin, "")
	require.NoError(t, err)
	broken, err = st.BrokenChains(ctx)
	require.NoError(t, err)
	require.Empty(t, broken)
}

// The auditor's query the documentation prints is the one orderd audit
// runs, character for character: an auditor copies it from there.
func TestTheDocumentedChainQueryIsTheAuditsOwn(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "tamper-evidence.md"))
	require.NoError(t, err)
	_, after, ok := strings.Cut(string(doc), "### The auditor's query")
	require.True(t, ok)
	_, block, ok := strings.Cut(after, "```sql\n")
	require.True(t, ok)
	query, _, ok := strings.Cut(block, "\n```")
	require.True(t, ok)
	require.Equal(t, store.ChainQuery+";", query)
}
