// Package pgkit holds the store's pgx plumbing, which knows nothing of
// orders: transactions pipelined into two round trips, the batcher that
// groups concurrent requests into shared transactions, and scanners for
// nullable columns.
package pgkit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// PipelinedTx is a transaction whose BEGIN travels with its first statement
// or batch and whose COMMIT travels with its last batch (CommitWith), so a
// placement batch costs two round trips instead of four. Under load a round
// trip is mostly waiting to be scheduled, on both sides of the socket: 1.5 ms
// each on two busy cores, measured, against 0.2 ms of deciding a batch.
//
// It implements pgx.Tx so that River can insert jobs in it; it has no nested
// transactions and no large objects, which neither the store nor River's
// inserts use.
type PipelinedTx struct {
	conn      *pgx.Conn
	begun     bool
	committed bool
	// deferring: copies and statements without results wait in pending for
	// the next batch, the commit's at the latest (Deferring).
	deferring bool
	pending   []*pgx.QueuedQuery
}

// NewPipelinedTx starts nothing yet: BEGIN goes with the first statement.
func NewPipelinedTx(conn *pgx.Conn) *PipelinedTx { return &PipelinedTx{conn: conn} }

// Committed reports whether CommitWith (or Commit) committed.
func (t *PipelinedTx) Committed() bool { return t.committed }

var errNoNesting = errors.New("pgkit: a pipelined transaction has no nested transactions")

// SendBatch sends b, preceded by BEGIN when it is the transaction's first
// and by the statements deferred until now.
func (t *PipelinedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	var first []*pgx.QueuedQuery
	if !t.begun {
		first = append(first, &pgx.QueuedQuery{SQL: "begin"})
		t.begun = true
	}
	if len(first) > 0 || len(t.pending) > 0 {
		first = append(append(first, t.pending...), b.QueuedQueries...)
		b, t.pending = &pgx.Batch{QueuedQueries: first}, nil
	}
	reserveSend(t.conn, b.QueuedQueries)
	return t.conn.SendBatch(ctx, b)
}

// Deferring runs fn with the transaction deferring what needs no answer
// but its success: copies (CopyFrom), sent as INSERT statements, and Exec's
// statements go with the transaction's next batch, its commit's at the
// latest, instead of a round trip each; a statement that reads (Query)
// first sends them. Such a write fails, if it does, with that batch. River
// inserts jobs without returning them by a copy, and a placement inserts
// its timers while it holds its merchants' locks.
func (t *PipelinedTx) Deferring(fn func() error) error {
	t.deferring = true
	defer func() { t.deferring = false }()
	return fn()
}

// ready sends what a statement sent on its own must follow, together: the
// BEGIN, when none was sent, and the statements deferred until now.
func (t *PipelinedTx) ready(ctx context.Context) error {
	if t.begun && len(t.pending) == 0 {
		return nil
	}
	return t.SendBatch(ctx, &pgx.Batch{}).Close()
}

// maxDeferredCopyArgs bounds the parameters of one INSERT a copy becomes,
// under PostgreSQL's limit of 65,535.
const maxDeferredCopyArgs = 60000

// deferCopy turns a copy into INSERT statements on pending.
func (t *PipelinedTx) deferCopy(table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	quoted := make([]string, len(columns))
	for i, c := range columns {
		quoted[i] = pgx.Identifier{c}.Sanitize()
	}
	into := "INSERT INTO " + table.Sanitize() + " (" + strings.Join(quoted, ", ") + ") VALUES "
	var sql strings.Builder
	var args []any
	var n int64
	queue := func() {
		if len(args) > 0 {
			t.pending = append(t.pending, &pgx.QueuedQuery{SQL: sql.String(), Arguments: args})
			sql.Reset()
			args = nil
		}
	}
	for src.Next() {
		row, err := src.Values()
		if err != nil {
			return 0, err
		}
		if len(row) != len(columns) {
			return 0, fmt.Errorf("pgkit: a copy row has %d values for %d columns", len(row), len(columns))
		}
		if len(args)+len(row) > maxDeferredCopyArgs {
			queue()
		}
		if len(args) == 0 {
			sql.WriteString(into)
		} else {
			sql.WriteString(", ")
		}
		sql.WriteByte('(')
		for i, v := range row {
			if i > 0 {
				sql.WriteString(", ")
			}
			args = append(args, v)
			sql.WriteString("$" + strconv.Itoa(len(args)))
		}
		sql.WriteByte(')')
		n++
	}
	if err := src.Err(); err != nil {
		return 0, err
	}
	queue()
	return n, nil
}

// CommitWith sends b followed by COMMIT, in one round trip.
func (t *PipelinedTx) CommitWith(ctx context.Context, b *pgx.Batch) error {
	if b == nil {
		b = &pgx.Batch{}
	}
	b.Queue("commit")
	if err := t.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	// COMMIT of a transaction that failed earlier answers ROLLBACK without
	// an error; the connection's status tells.
	if t.conn.PgConn().TxStatus() != 'I' {
		return errors.New("pgkit: commit did not end the transaction")
	}
	t.committed = true
	return nil
}

func (t *PipelinedTx) Commit(ctx context.Context) error { return t.CommitWith(ctx, nil) }

// Rollback ends the transaction unless it has ended: after CommitWith, or
// after a failed COMMIT, which ends it too.
func (t *PipelinedTx) Rollback(ctx context.Context) error {
	t.pending = nil
	if !t.begun || t.committed || t.conn.PgConn().TxStatus() == 'I' {
		return nil
	}
	_, err := t.conn.Exec(ctx, "rollback")
	return err
}

func (t *PipelinedTx) Begin(context.Context) (pgx.Tx, error) { return nil, errNoNesting }

func (t *PipelinedTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if t.deferring {
		return t.deferCopy(table, columns, src)
	}
	if err := t.ready(ctx); err != nil {
		return 0, err
	}
	return t.conn.CopyFrom(ctx, table, columns, src)
}

func (t *PipelinedTx) LargeObjects() pgx.LargeObjects {
	panic("pgkit: a pipelined transaction has no large objects")
}

func (t *PipelinedTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.conn.Prepare(ctx, name, sql)
}

// Exec runs sql, or, deferring, adds it to the next batch and answers an
// empty command tag.
func (t *PipelinedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.deferring {
		t.pending = append(t.pending, &pgx.QueuedQuery{SQL: sql, Arguments: args})
		return pgconn.CommandTag{}, nil
	}
	if err := t.ready(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return t.conn.Exec(ctx, sql, args...)
}

func (t *PipelinedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.ready(ctx); err != nil {
		return nil, err
	}
	return t.conn.Query(ctx, sql, args...)
}

func (t *PipelinedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.ready(ctx); err != nil {
		return errRow{err}
	}
	return t.conn.QueryRow(ctx, sql, args...)
}

func (t *PipelinedTx) Conn() *pgx.Conn { return t.conn }

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
