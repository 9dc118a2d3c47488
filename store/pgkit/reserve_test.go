package pgkit_test

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/store/pgkit"
)

// A pipelined transaction reserves its round trip's send buffer before pgx
// writes into it: the reservation covers what the round trip writes (so pgx
// does not regrow the buffer), is not far above it, and the rows arrive
// as sent. pgx's trace of the connection gives each message's length; the
// reservation is the one message it cannot name.
func TestABatchIsWrittenIntoOneReservedBuffer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := connectWithUUIDs(t)
	_, err := conn.Exec(ctx, `CREATE TEMP TABLE reserved (id uuid PRIMARY KEY, data jsonb NOT NULL,
		at timestamptz, n bigint, note text)`)
	require.NoError(t, err)
	const insert = `INSERT INTO reserved SELECT * FROM unnest($1::uuid[], $2::jsonb[], $3::timestamptz[], $4::bigint[], $5::text[])`

	rows := func(count int) (ids []uuid.UUID, data []string, ats []pgtype.Timestamptz, ns []int64, notes []pgtype.Text) {
		at := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
		for i := range count {
			ids = append(ids, uuid.New())
			data = append(data, fmt.Sprintf(`{"i": %d, "pad": %q}`, i, strings.Repeat("é\"x", 100+i*7)))
			ats = append(ats, pgtype.Timestamptz{Time: at.Add(time.Duration(i) * time.Second), Valid: i%3 != 0})
			ns = append(ns, int64(i)<<33)
			notes = append(notes, pgtype.Text{String: strings.Repeat("n", i), Valid: i%2 == 0})
		}
		return
	}
	// The statement is prepared first, in a round trip of its own.
	pt := pgkit.NewPipelinedTx(conn)
	ids, data, ats, ns, notes := rows(1)
	b := &pgx.Batch{}
	b.Queue(insert, ids, data, ats, ns, notes)
	require.NoError(t, pt.CommitWith(ctx, b))

	var trace bytes.Buffer
	conn.PgConn().Frontend().Trace(&trace, pgproto3.TracerOptions{SuppressTimestamps: true})
	pt = pgkit.NewPipelinedTx(conn)
	ids, data, ats, ns, notes = rows(60)
	b = &pgx.Batch{}
	b.Queue(insert, ids, data, ats, ns, notes)
	b.Queue(`SELECT count(*) FROM reserved WHERE n = ANY($1)`, ns)
	estimate := pgkit.SendSize(append([]*pgx.QueuedQuery{{SQL: "begin"}}, append(b.QueuedQueries, &pgx.QueuedQuery{SQL: "commit"})...))
	require.NoError(t, pt.CommitWith(ctx, b))
	conn.PgConn().Frontend().Untrace()

	reserved, written := 0, 0
	for line := range strings.Lines(trace.String()) {
		f := strings.SplitN(strings.TrimSuffix(line, "\n"), "\t", 4)
		if len(f) < 3 || f[0] != "F" {
			continue
		}
		n, err := strconv.Atoi(f[2])
		require.NoError(t, err, f[1])
		if f[1] == "Unknown" {
			reserved++
			require.Zero(t, n, "the reservation writes nothing")
			continue
		}
		written += n
	}
	require.Equal(t, 1, reserved, "one reservation for the round trip")
	require.Greater(t, written, 40_000)
	require.GreaterOrEqual(t, estimate, written, "the reservation covers the round trip")
	require.Less(t, estimate, 2*written, "the reservation is not far above the round trip")

	got := conn.QueryRow(ctx, `SELECT count(*) FROM reserved WHERE id = ANY($1) AND data = ANY($2::jsonb[])`, ids, data)
	var count int
	require.NoError(t, got.Scan(&count))
	require.Equal(t, len(ids), count, "every row arrived as sent")
}
