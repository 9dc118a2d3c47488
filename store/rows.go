package store

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// insertRows is an INSERT of many rows, held column by column, written once
// for both deployments. On PostgreSQL the rows come from unnest over one
// array per column: one statement text whatever the number of rows. On
// Citus they are a VALUES list with a parameter per cell: Citus plans an
// INSERT … SELECT through the coordinator and commits it in two phases
// even when every row goes to one shard, while a multi-row VALUES is
// routed to its shard and commits there in one phase, worker before
// coordinator, as the log reader needs (docs/scaling-out.md, The log on Citus).
type insertRows struct {
	// Into is the statement up to its rows: INSERT INTO table (columns).
	Into string
	// Row is one row's expressions. $1 … $len(Args) are Args, shared by
	// every row; the numbers after them are the elements of Columns, in
	// their order. Empty, the row is the columns' elements in their order.
	Row     string
	Args    []any
	Columns []column
	// Ordered inserts the rows in the order of the columns' elements, for
	// statements that lock keys in that order.
	Ordered bool
	// Tail follows the rows (ON CONFLICT, RETURNING); it may name Args.
	Tail string
}

// column is one column of an insertRows: its values, a slice with one
// element per row, and their SQL type.
type column struct {
	typ    string
	values any
}

func col(typ string, values any) column { return column{typ: typ, values: values} }

// maxParams is how many parameters one statement may carry.
const maxParams = 65535

// statement is one SQL statement and its arguments.
type statement struct {
	sql  string
	args []any
}

// statements renders the insert: one statement from unnest on PostgreSQL;
// on Citus one VALUES statement, or several in a row when the cells
// exceed one statement's parameters.
func (r insertRows) statements(citus bool) []statement {
	shared := len(r.Args)
	if !citus {
		key := unnestKey{into: r.Into, row: r.Row, tail: r.Tail, ordered: r.Ordered, shared: shared, columns: len(r.Columns)}
		q, ok := unnestTexts.Load(key)
		if !ok {
			q, _ = unnestTexts.LoadOrStore(key, r.unnestSQL())
		}
		args := append([]any(nil), r.Args...)
		for _, c := range r.Columns {
			args = append(args, c.values)
		}
		return []statement{{q.(string), args}}
	}
	rows := 0
	if len(r.Columns) > 0 {
		rows = reflect.ValueOf(r.Columns[0].values).Len()
	}
	perStatement := max((maxParams-shared)/max(len(r.Columns), 1), 1)
	var out []statement
	for start := 0; start < rows; start += perStatement {
		var q strings.Builder
		q.WriteString(r.Into + " VALUES ")
		args := append([]any(nil), r.Args...)
		for i := start; i < min(start+perStatement, rows); i++ {
			if i > start {
				q.WriteString(", ")
			}
			first := len(args)
			q.WriteString("(")
			r.cells(&q, func(q *strings.Builder, c int) {
				q.WriteString("$" + strconv.Itoa(first+c+1) + "::" + r.Columns[c].typ)
			})
			q.WriteString(")")
			for _, c := range r.Columns {
				args = append(args, reflect.ValueOf(c.values).Index(i).Interface())
			}
		}
		out = append(out, statement{r.tail(q.String()), args})
	}
	return out
}

// unnestKey is what the PostgreSQL text of an insert depends on (its
// columns' types are fixed by the text of the statement that names them).
type unnestKey struct {
	into, row, tail string
	ordered         bool
	shared, columns int
}

// unnestTexts holds the PostgreSQL text of every insert rendered so far,
// by unnestKey: the write path renders the same few statements over and
// over.
var unnestTexts sync.Map

// unnestSQL renders the insert's PostgreSQL text.
func (r insertRows) unnestSQL() string {
	var q strings.Builder
	q.WriteString(r.Into + " SELECT ")
	r.cells(&q, func(q *strings.Builder, c int) { q.WriteString("r.c" + strconv.Itoa(c+1)) })
	from, _ := unnestOf(len(r.Args), r.Columns)
	q.WriteString(" FROM " + from)
	names := make([]string, len(r.Columns))
	for i := range r.Columns {
		names[i] = "c" + strconv.Itoa(i+1)
	}
	if r.Ordered {
		q.WriteString(" WITH ORDINALITY AS r(" + strings.Join(names, ", ") + ", n) ORDER BY r.n")
	} else {
		q.WriteString(" AS r(" + strings.Join(names, ", ") + ")")
	}
	return r.tail(q.String())
}

// cells writes Row to q with each reference to a column's element ($n
// past Args) written by name, given the column's index.
func (r insertRows) cells(q *strings.Builder, name func(q *strings.Builder, c int)) {
	if r.Row == "" {
		for c := range r.Columns {
			if c > 0 {
				q.WriteString(", ")
			}
			name(q, c)
		}
		return
	}
	row := r.Row
	for {
		i := strings.IndexByte(row, '$')
		if i < 0 {
			q.WriteString(row)
			return
		}
		j := i + 1
		for j < len(row) && row[j] >= '0' && row[j] <= '9' {
			j++
		}
		n, err := strconv.Atoi(row[i+1 : j])
		if err != nil || n <= len(r.Args) {
			q.WriteString(row[:j])
		} else {
			q.WriteString(row[:i])
			name(q, n-len(r.Args)-1)
		}
		row = row[j:]
	}
}

// unnestOf is unnest over the columns' arrays, the parameters numbered
// after the first before, and its arguments: the rows of an insert on
// PostgreSQL, and of an UPDATE … FROM on both deployments (Citus routes
// one to the shard its merchant_id = ANY(…) names, in one phase).
func unnestOf(before int, columns []column) (string, []any) {
	var q strings.Builder
	args := make([]any, len(columns))
	q.WriteString("unnest(")
	for i, c := range columns {
		if i > 0 {
			q.WriteString(", ")
		}
		fmt.Fprintf(&q, "$%d::%s[]", before+i+1, c.typ)
		args[i] = c.values
	}
	q.WriteString(")")
	return q.String(), args
}

func (r insertRows) tail(q string) string {
	if r.Tail == "" {
		return q
	}
	return q + " " + r.Tail
}

// exec runs the insert in tx.
func (r insertRows) exec(ctx context.Context, tx pgx.Tx) error {
	for _, st := range r.statements(onCitusTx(tx)) {
		if _, err := tx.Exec(ctx, st.sql, st.args...); err != nil {
			return err
		}
	}
	return nil
}

// addTo adds the insert to b for the deployment tx runs on; read, when not
// nil, reads the rows each of its statements returns.
func (r insertRows) addTo(tx pgx.Tx, b *pgx.Batch, read func(pgx.Rows) error) {
	for _, st := range r.statements(onCitusTx(tx)) {
		q := b.Queue(st.sql, st.args...)
		if read != nil {
			q.Query(read)
		}
	}
}
