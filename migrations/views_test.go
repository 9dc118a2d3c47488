package migrations_test

import (
	"context"
	"path"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/migrations"
	"github.com/orderd/orderd/store/storetest"
)

// auditObjects lists the audit schema's views and functions with the oid of
// each, and whether the auditors' role may read each view.
func auditObjects(ctx context.Context, t *testing.T, url string) map[string]struct {
	oid      uint32
	readable bool
} {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `
		SELECT relname::text, oid::int8, has_table_privilege('orderd_auditor', oid, 'SELECT')
		FROM pg_class WHERE relnamespace = to_regnamespace('audit') AND relkind = 'v'
		UNION ALL
		SELECT proname::text, oid::int8, true FROM pg_proc WHERE pronamespace = to_regnamespace('audit')`)
	require.NoError(t, err)
	out := map[string]struct {
		oid      uint32
		readable bool
	}{}
	for rows.Next() {
		var name string
		var oid int64
		var readable bool
		require.NoError(t, rows.Scan(&name, &oid, &readable))
		out[name] = struct {
			oid      uint32
			readable bool
		}{uint32(oid), readable}
	}
	require.NoError(t, rows.Err())
	return out
}

// requireTheFiles checks that the audit schema holds exactly the views and
// functions of views/, each readable by the auditors.
func requireTheFiles(ctx context.Context, t *testing.T, url string) {
	t.Helper()
	names, err := migrations.ViewFiles()
	require.NoError(t, err)
	var want []string
	for _, n := range names {
		want = append(want, strings.TrimPrefix(strings.TrimSuffix(path.Base(n), ".sql"), "00_"))
	}
	got := auditObjects(ctx, t, url)
	var have []string
	for name, o := range got {
		have = append(have, name)
		require.True(t, o.readable, "the auditors may read audit.%s", name)
	}
	require.ElementsMatch(t, want, have)
}

// TestAuditViewsAreTheFiles: a migrated database holds the views of views/
// and nothing else in the audit schema, and a second Up, with nothing to do,
// leaves them as they are.
func TestAuditViewsAreTheFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.URL(t)
	requireTheFiles(ctx, t, url)
	before := auditObjects(ctx, t, url)
	require.NoError(t, migrations.Up(ctx, url))
	require.Equal(t, before, auditObjects(ctx, t, url), "no view is made again when nothing changed")
}

// TestUpReplacesAnOlderReleasesViews: a database whose views an older
// release made, one of them retired since and one defined otherwise, gets
// the views of views/ from Up even when no migration is pending.
func TestUpReplacesAnOlderReleasesViews(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.URL(t)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `
		CREATE VIEW audit.retired_check AS SELECT id FROM orders WHERE false;
		CREATE OR REPLACE VIEW audit.unpaid_past_deadline AS
		SELECT id AS order_id, merchant_id, customer_id, payment_deadline, now() - payment_deadline AS overdue_by
		FROM orders WHERE false;
		COMMENT ON SCHEMA audit IS 'orderd views of an older release'`)
	require.NoError(t, err)

	require.NoError(t, migrations.Up(ctx, url))
	requireTheFiles(ctx, t, url)
	var def string
	require.NoError(t, conn.QueryRow(ctx, `SELECT pg_get_viewdef('audit.unpaid_past_deadline'::regclass)`).Scan(&def))
	require.Contains(t, def, "awaiting_payment")
}

// TestUpMigratesUnderAnOlderReleasesViews: a database that an older release
// left at migration 14, with the pickup codes' audit reading a column that
// migration 15 drops, migrates to current: Up drops the views before
// migrating and makes them from views/ after.
func TestUpMigratesUnderAnOlderReleasesViews(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := emptyDatabase(t)
	require.NoError(t, migrations.UpTo(ctx, url, 14))
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `
		CREATE VIEW audit.duplicate_pickup_codes AS
		SELECT o.merchant_id, o.pickup_code, m.pickup_day, array_agg(o.id) AS order_ids
		FROM orders o JOIN merchants m ON m.id = o.merchant_id
		WHERE o.pickup_code IS NOT NULL
		GROUP BY o.merchant_id, o.pickup_code, m.pickup_day
		HAVING count(*) > 1`)
	require.NoError(t, err)

	require.NoError(t, migrations.Up(ctx, url))
	current, err := migrations.Current(ctx, url)
	require.NoError(t, err)
	require.True(t, current)
	requireTheFiles(ctx, t, url)
}
