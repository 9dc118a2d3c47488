package pgkit_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/store/pgkit"
	"github.com/orderd/orderd/store/storetest"
)

func connectWithUUIDs(t *testing.T) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(storetest.URL(t))
	require.NoError(t, err)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(ctx) })
	require.NoError(t, pgkit.RegisterTypes(ctx, conn))
	return conn
}

func TestUUIDsTravelAsPostgreSQLReadsThem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := connectWithUUIDs(t)
	a, b := uuid.New(), uuid.New()

	var text string
	require.NoError(t, conn.QueryRow(ctx, `SELECT $1::uuid::text`, a).Scan(&text))
	require.Equal(t, a.String(), text)
	require.NoError(t, conn.QueryRow(ctx, `SELECT $1::uuid::text`, &b).Scan(&text))
	require.Equal(t, b.String(), text)

	var texts []string
	require.NoError(t, conn.QueryRow(ctx, `SELECT $1::uuid[]::text[]`, []uuid.UUID{a, b}).Scan(&texts))
	require.Equal(t, []string{a.String(), b.String()}, texts)

	var isNull, empty bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT $1::uuid[] IS NULL, $2::uuid[] = '{}'`, []uuid.UUID(nil), []uuid.UUID{}).Scan(&isNull, &empty))
	require.True(t, isNull, "a nil slice is NULL")
	require.True(t, empty, "an empty slice is an empty array")
	var none *uuid.UUID
	require.NoError(t, conn.QueryRow(ctx, `SELECT $1::uuid IS NULL`, none).Scan(&isNull))
	require.True(t, isNull, "a nil pointer is NULL")

	var got uuid.UUID
	require.NoError(t, conn.QueryRow(ctx, `SELECT $1::text::uuid`, a.String()).Scan(&got))
	require.Equal(t, a, got)
	var gots []uuid.UUID
	require.NoError(t, conn.QueryRow(ctx, `SELECT ARRAY[$1::text::uuid, $2::text::uuid]`, a.String(), b.String()).Scan(&gots))
	require.Equal(t, []uuid.UUID{a, b}, gots)

	kept := a
	require.NoError(t, conn.QueryRow(ctx, `SELECT NULL::uuid`).Scan(&kept))
	require.Equal(t, a, kept, "NULL leaves a uuid.UUID as it was, as its own Scan does")
	var nullable uuid.NullUUID
	require.NoError(t, conn.QueryRow(ctx, `SELECT NULL::uuid`).Scan(&nullable))
	require.False(t, nullable.Valid)
	require.NoError(t, conn.QueryRow(ctx, `SELECT $1::uuid`, b).Scan(&nullable))
	require.Equal(t, uuid.NullUUID{UUID: b, Valid: true}, nullable)
}

// A column of ids is encoded without an allocation per id: pgx alone turns
// each into text through driver.Valuer and walks the slice by reflection.
// Not parallel: testing.AllocsPerRun refuses to run beside other tests.
func TestAColumnOfUUIDsEncodesWithoutAnAllocationPerID(t *testing.T) {
	m := connectWithUUIDs(t).TypeMap()
	ids := make([]uuid.UUID, 100)
	for i := range ids {
		ids[i] = uuid.New()
	}
	buf := make([]byte, 0, 4096)
	allocs := testing.AllocsPerRun(20, func() {
		var err error
		_, err = m.Encode(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, ids, buf[:0])
		require.NoError(t, err)
	})
	require.Less(t, allocs, float64(len(ids)/10))
}
