package migrations_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/jobs"
	"github.com/orderd/orderd/migrations"
	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/store/storetest"
)

// globalTables hold no merchant's data: they stay whole when the schema is
// distributed by merchant. Every other table is per merchant. The
// tamper-evident log is one tree over every merchant's events.
var globalTables = map[string]bool{"goose_db_version": true, "sign_in_codes": true, "ws_tickets": true,
	"log_heads": true, "log_leaves": true, "log_hash_tiles": true, "checkpoints": true}

// merchantColumn is the column that names a table's merchant.
func merchantColumn(table string) string {
	if table == "merchants" {
		return "id"
	}
	return "merchant_id"
}

// TestEveryKeyNamesTheMerchant reads the catalog: every per-merchant table
// has a merchant_id, every primary key, unique constraint and unique index
// of one contains it, and every foreign key between them pairs merchant with
// merchant, as a schema distributed by merchant requires.
func TestEveryKeyNamesTheMerchant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, storetest.URL(t))
	require.NoError(t, err)
	defer conn.Close(ctx)

	rows, err := conn.Query(ctx, `
		SELECT c.relname, EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'merchant_id' AND NOT a.attisdropped)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND c.relname NOT LIKE 'river\_%'`)
	require.NoError(t, err)
	perMerchant := map[string]bool{}
	for rows.Next() {
		var table string
		var hasMerchant bool
		require.NoError(t, rows.Scan(&table, &hasMerchant))
		if globalTables[table] {
			continue
		}
		require.True(t, hasMerchant || table == "merchants", "table %s has no merchant_id: add one, or list it as global", table)
		perMerchant[table] = true
	}
	require.NoError(t, rows.Err())
	require.Contains(t, perMerchant, "events")
	require.Contains(t, perMerchant, "orders")

	// Unique indexes cover primary keys and unique constraints too.
	rows, err = conn.Query(ctx, `
		SELECT t.relname, i.relname, array(SELECT a.attname::text FROM unnest(x.indkey) k JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k)
		FROM pg_index x JOIN pg_class t ON t.oid = x.indrelid JOIN pg_class i ON i.oid = x.indexrelid
		JOIN pg_namespace n ON n.oid = t.relnamespace
		WHERE n.nspname = 'public' AND x.indisunique`)
	require.NoError(t, err)
	checked := 0
	for rows.Next() {
		var table, index string
		var columns []string
		require.NoError(t, rows.Scan(&table, &index, &columns))
		if !perMerchant[table] {
			continue
		}
		checked++
		require.Contains(t, columns, merchantColumn(table), "unique index %s on %s (%s) lacks the merchant", index, table, strings.Join(columns, ", "))
	}
	require.NoError(t, rows.Err())
	require.Greater(t, checked, len(perMerchant), "every per-merchant table has a key, some more than one")

	rows, err = conn.Query(ctx, `
		SELECT con.conname, t.relname, r.relname,
		       array(SELECT a.attname::text FROM unnest(con.conkey) WITH ORDINALITY k(n, o) JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n ORDER BY k.o),
		       array(SELECT a.attname::text FROM unnest(con.confkey) WITH ORDINALITY k(n, o) JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.n ORDER BY k.o)
		FROM pg_constraint con JOIN pg_class t ON t.oid = con.conrelid JOIN pg_class r ON r.oid = con.confrelid
		JOIN pg_namespace n ON n.oid = t.relnamespace
		WHERE n.nspname = 'public' AND con.contype = 'f'`)
	require.NoError(t, err)
	foreign := 0
	for rows.Next() {
		var name, table, referenced string
		var columns, referencedColumns []string
		require.NoError(t, rows.Scan(&name, &table, &referenced, &columns, &referencedColumns))
		if !perMerchant[table] {
			continue
		}
		foreign++
		require.True(t, perMerchant[referenced], "foreign key %s on %s references %s, which is not per merchant", name, table, referenced)
		paired := false
		for i, c := range columns {
			paired = paired || (c == merchantColumn(table) && referencedColumns[i] == merchantColumn(referenced))
		}
		require.True(t, paired, "foreign key %s on %s (%s) → %s (%s) does not pair merchant with merchant", name, table,
			strings.Join(columns, ", "), referenced, strings.Join(referencedColumns, ", "))
	}
	require.NoError(t, rows.Err())
	require.NotZero(t, foreign)
}

// TestMerchantKeysKeepData rolls the merchant keys back and forward again
// over a merchant's data: nothing is lost either way, and going up gives
// every event and idempotency key the merchant of its stream.
func TestMerchantKeysKeepData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	ins, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	st := store.New(store.Config{Pool: pool, Jobs: ins})
	var merchants []uuid.UUID
	for range 2 {
		m, err := st.CreateMerchant(ctx, domain.MerchantSettings{Name: "m " + uuid.NewString(), Capacity: 1, PrepSeconds: 60,
			MaxQueueWaitSeconds: 600, PaymentTimeoutSeconds: 600}, store.Meta{Actor: domain.ActorAdmin})
		require.NoError(t, err)
		stock, limit := 10, 5
		p, err := st.CreateProduct(ctx, store.CreateProductParams{MerchantID: m.ID, Name: "tea", PriceCents: 100, Stock: &stock, PerUserLimit: &limit})
		require.NoError(t, err)
		for i, ref := range []string{"paid", "paid", ""} {
			_, err := st.PlaceOrder(ctx, store.PlaceRequest{MerchantID: m.ID, CustomerID: "alice", PaymentRef: ref,
				Lines: []domain.LineRequest{{ProductID: p.ID, Quantity: 1}}, IdempotencyKey: fmt.Sprint("k", i), RequestHash: []byte{byte(i)}})
			require.NoError(t, err)
		}
		merchants = append(merchants, m.ID)
	}
	count := func(sql string) int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, sql).Scan(&n))
		return n
	}
	events, keys := count(`SELECT count(*) FROM events`), count(`SELECT count(*) FROM orders WHERE idempotency_key IS NOT NULL`)
	require.Equal(t, 6, keys)

	hasColumn := `SELECT count(*) FROM information_schema.columns WHERE table_name = 'events' AND column_name = 'merchant_id'`
	for count(hasColumn) == 1 {
		require.NoError(t, migrations.Down(ctx, url))
	}
	require.Equal(t, events, count(`SELECT count(*) FROM events`))
	require.Equal(t, 3, count(`SELECT count(*) FROM idempotency_keys`), "one key per customer and key, the first order's")

	require.NoError(t, migrations.Up(ctx, url))
	require.Equal(t, events, count(`SELECT count(*) FROM events`))
	require.Zero(t, count(`SELECT count(*) FROM events e WHERE e.merchant_id IS DISTINCT FROM CASE e.stream_type
		WHEN 'merchant' THEN e.stream_id
		WHEN 'product' THEN (SELECT merchant_id FROM products WHERE id = e.stream_id)
		ELSE (SELECT merchant_id FROM orders WHERE id = e.stream_id) END`), "every event names its stream's merchant")
	require.Equal(t, 3, count(`SELECT count(*) FROM orders WHERE idempotency_key IS NOT NULL`), "each key back on its order's row")
	require.Equal(t, len(merchants), count(`SELECT count(DISTINCT merchant_id) FROM events`))
}
