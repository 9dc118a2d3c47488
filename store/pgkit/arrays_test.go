package pgkit_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/store/storetest"
)

// Every slice wrapArrays takes arrives as pgx alone sends it, into every
// column type the store sends it to and into some it does not (where pgx's
// own wrapper takes over): PostgreSQL's text of the array is compared.
func TestArraysTravelAsPgxSendsThem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ours := connectWithUUIDs(t)
	cfg, err := pgx.ParseConfig(storetest.URL(t))
	require.NoError(t, err)
	plain, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = plain.Close(ctx) })

	at := time.Date(2026, 11, 28, 23, 59, 58, 123456789, time.FixedZone("x", 5*3600+1800))
	a, b := uuid.New(), uuid.New()
	cases := []struct {
		name, typ string
		value     any
	}{
		{"ids", "uuid", []uuid.UUID{a, b}},
		{"ids as bytes", "uuid", [][16]byte{a, b}},
		{"no ids", "uuid", [][16]byte(nil)},
		{"texts", "text", []string{"a", "", "é\"\\{},", "NULL"}},
		{"texts as ids", "uuid", []string{a.String(), b.String()}},
		{"json", "jsonb", []string{`{"a": [1, 2]}`, `"x"`, `null`}},
		{"json in json", "json", []string{`{"a":  [1, 2]}`, `"x"`}},
		{"enum", "river_job_state", []string{"available", "completed"}},
		{"empty", "text", []string{}},
		{"no texts", "text", []string(nil)},
		{"times", "timestamptz", []time.Time{at, {}, at.Add(time.Hour)}},
		{"times without zone", "timestamp", []time.Time{at}},
		{"times as dates", "date", []time.Time{at}},
		{"bigints", "bigint", []int64{0, -1, 1 << 40}},
		{"bigints as ints", "int", []int64{7, 1 << 20}},
		{"bigints as numeric", "numeric", []int64{7, 1 << 40}},
		{"ints", "int", []int32{0, 255, 256, -1 << 31}},
		{"ints as bigints", "bigint", []int32{1 << 30}},
		{"nullable texts", "text", []pgtype.Text{{String: "x", Valid: true}, {}}},
		{"nullable json", "jsonb", []pgtype.Text{{String: `{"b":1}`, Valid: true}, {}}},
		{"nullable times", "timestamptz", []pgtype.Timestamptz{{Time: at, Valid: true}, {}, {InfinityModifier: pgtype.Infinity, Valid: true}}},
		{"nullable bigints", "bigint", []pgtype.Int8{{Int64: 1 << 40, Valid: true}, {}}},
	}
	for _, c := range cases {
		q := `SELECT $1::` + c.typ + `[]::text`
		var want, got pgtype.Text
		require.NoError(t, plain.QueryRow(ctx, q, c.value).Scan(&want), c.name)
		require.NoError(t, ours.QueryRow(ctx, q, c.value).Scan(&got), c.name)
		require.Equal(t, want, got, c.name)
	}

	_, err = ours.Exec(ctx, `SELECT $1::int[]`, []int64{1 << 40})
	require.ErrorContains(t, err, "greater than maximum value for int4", "an int column refuses a bigint that does not fit, as pgx alone does")
}

// The columns of an order row encode with an allocation or two per column,
// not one per element: pgx alone boxes every element wider than a word.
// Not parallel: testing.AllocsPerRun refuses to run beside other tests.
func TestColumnsEncodeWithoutAnAllocationPerElement(t *testing.T) {
	m := connectWithUUIDs(t).TypeMap()
	const rows = 64
	ids, texts, jsons := make([][16]byte, rows), make([]string, rows), make([]string, rows)
	times, bigints, nullTexts, nullTimes := make([]time.Time, rows), make([]int64, rows), make([]pgtype.Text, rows), make([]pgtype.Timestamptz, rows)
	for i := range rows {
		ids[i], texts[i], jsons[i] = uuid.New(), "customer", `[{"product_id": 1}]`
		times[i], bigints[i] = time.Now(), 1<<20+int64(i)
		nullTexts[i], nullTimes[i] = pgtype.Text{String: "ref", Valid: i%2 == 0}, pgtype.Timestamptz{Time: times[i], Valid: i%2 == 1}
	}
	columns := []struct {
		oid   uint32
		value any
	}{
		{pgtype.UUIDArrayOID, ids}, {pgtype.TextArrayOID, texts}, {pgtype.JSONBArrayOID, jsons},
		{pgtype.TimestamptzArrayOID, times}, {pgtype.Int8ArrayOID, bigints},
		{pgtype.TextArrayOID, nullTexts}, {pgtype.TimestamptzArrayOID, nullTimes},
	}
	buf := make([]byte, 0, 1<<16)
	for _, c := range columns {
		allocs := testing.AllocsPerRun(20, func() {
			_, err := m.Encode(c.oid, pgtype.BinaryFormatCode, c.value, buf[:0])
			require.NoError(t, err)
		})
		require.LessOrEqual(t, allocs, 2.0, "%T", c.value)
	}
}

// A column of texts grows pgx's parameter buffer, which starts small for
// every statement, once to what it needs, not by doubling through it.
// Not parallel: testing.AllocsPerRun refuses to run beside other tests.
func TestATextColumnGrowsTheBufferOnce(t *testing.T) {
	m := connectWithUUIDs(t).TypeMap()
	texts := make([]string, 64)
	for i := range texts {
		texts[i] = `{"event": "` + strings.Repeat("x", 200) + `"}`
	}
	var value any = texts
	encodeInto := func(oid uint32, capacity int) float64 {
		return testing.AllocsPerRun(20, func() {
			_, err := m.Encode(oid, pgtype.BinaryFormatCode, value, make([]byte, 0, capacity))
			require.NoError(t, err)
		})
	}
	for _, oid := range []uint32{pgtype.JSONBArrayOID, pgtype.TextArrayOID} {
		// Into a buffer large enough from the start: the buffer itself and
		// what encoding the column allocates besides (more under the race
		// detector), which the small buffer's encoding also pays.
		// Under the race detector jsonb's column costs one allocation more
		// from the small buffer; doubling through it would cost six.
		growths := 1.0
		if raceBuild {
			growths = 2
		}
		roomy := encodeInto(oid, 1<<16)
		require.LessOrEqual(t, encodeInto(oid, 256), roomy+growths, "oid %d: one growth", oid)
	}
}
