package store

import (
	"cmp"
	"reflect"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orderd/orderd/store/pgkit"
)

// A placement batch on a Citus worker holds Citus's placement lock on its
// merchants' shards, checked to be on that worker (addBatchProducts), and so
// may name those shards and their co-located shards in its writes: a
// statement on a shard by its name is plain PostgreSQL to the worker, which
// plans its text once per connection, where through the distributed table
// Citus plans the statement on every call and runs it as one statement per
// shard by local execution, each deparsed, parsed and planned anew.

// heldShardGroups splits rows (of merchants) into the groups that one
// statement writing the table of merchants may name, each with that table:
// on a worker holding the shards of its batch's merchants (shardsHeld), a
// group per shard, named by the shard's name; elsewhere all of them, with
// the distributed table's name.
func heldShardGroups[T any](tx pgx.Tx, rows []T, merchantID func(T) uuid.UUID) (groups [][]T, tables []string) {
	t, ok := tx.(*txn)
	if !ok || !t.shardsHeld || len(t.shards) == 0 {
		return [][]T{rows}, []string{"merchants"}
	}
	groups = pgkit.GroupBy(rows, func(r T) int64 { return shardOf(t.shards, merchantHash(merchantID(r))).id })
	for _, g := range groups {
		tables = append(tables, heldTable(tx, "merchants", merchantID(g[0])))
	}
	return groups, tables
}

// heldTable is table, as SQL, or on a worker holding the shards of its
// batch's merchants (shardsHeld) the name of table's shard that holds
// merchant's rows, for a table co-located with merchants that the shard
// map holds.
func heldTable(tx pgx.Tx, table string, merchant [16]byte) string {
	t, ok := tx.(*txn)
	if !ok || !t.shardsHeld || len(t.tables[table]) == 0 {
		return table
	}
	return shardName(table, shardOf(t.tables[table], merchantHash(merchant)).id)
}

// addToHeldShards is addTo for an insert into table (one the shard map
// holds, co-located with merchants, named so in Into) whose rows' merchants
// are the column merchant of Columns: on a worker holding the shards of its
// batch's merchants, each shard's rows go into that shard by its name, in
// PostgreSQL's form (unnest), one statement per shard.
func (r insertRows) addToHeldShards(tx pgx.Tx, b *pgx.Batch, table string, merchant int, read func(pgx.Rows) error) {
	t, ok := tx.(*txn)
	if !ok || !t.shardsHeld || len(t.tables[table]) == 0 {
		r.addTo(tx, b, read)
		return
	}
	into, ok := strings.CutPrefix(r.Into, "INSERT INTO "+table+" ")
	if !ok {
		into, ok = strings.CutPrefix(r.Into, "INSERT INTO "+pgx.Identifier{table}.Sanitize()+" ")
	}
	if !ok {
		panic("store: an insert into " + table + " names another table: " + r.Into)
	}
	merchants := r.Columns[merchant].values.([][16]byte)
	rows := make([]int, len(merchants))
	for i := range rows {
		rows[i] = i
	}
	shards := t.tables[table]
	groups := pgkit.GroupBy(rows, func(i int) int64 { return shardOf(shards, merchantHash(merchants[i])).id })
	// In the shards' order, as Citus runs a statement's shards: keys that
	// are locked in row order stay in one order across batches.
	slices.SortFunc(groups, func(a, b []int) int {
		return cmp.Compare(shardOf(shards, merchantHash(merchants[a[0]])).id, shardOf(shards, merchantHash(merchants[b[0]])).id)
	})
	for _, group := range groups {
		part := r
		part.Into = "INSERT INTO " + heldTable(tx, table, merchants[group[0]]) + " " + into
		part.Columns = columnsAt(r.Columns, group)
		for _, st := range part.statements(false) {
			q := b.Queue(st.sql, st.args...)
			if read != nil {
				q.Query(read)
			}
		}
	}
}

// byShard splits items into the groups that one statement taking row locks
// may name (lockGroups): on a Citus worker one per shard of their merchants,
// in the shards' order; elsewhere all of them.
func byShard[T any](tx pgx.Tx, items []T, merchantID func(T) uuid.UUID) [][]T {
	t, ok := tx.(*txn)
	if !ok || len(t.shards) == 0 || len(items) < 2 {
		return [][]T{items}
	}
	shard := func(it T) int64 { return shardOf(t.shards, merchantHash(merchantID(it))).id }
	groups := pgkit.GroupBy(items, shard)
	slices.SortFunc(groups, func(a, b []T) int { return cmp.Compare(shard(a[0]), shard(b[0])) })
	return groups
}

// columnsAt is the rows of columns at rows, in that order.
func columnsAt(columns []column, rows []int) []column {
	out := make([]column, len(columns))
	for c, col := range columns {
		all := reflect.ValueOf(col.values)
		some := reflect.MakeSlice(all.Type(), 0, len(rows))
		for _, i := range rows {
			some = reflect.Append(some, all.Index(i))
		}
		out[c] = column{typ: col.typ, values: some.Interface()}
	}
	return out
}

// heldShardRows splits the rows of merchants (the indexes of merchants)
// into the groups that one statement writing table may name, each with
// the table's name for it: on a worker holding the shards of its batch's
// merchants (shardsHeld), a group per shard, in the shards' order, named
// by the shard's name; elsewhere all of them, with table's name.
func heldShardRows(tx pgx.Tx, table string, merchants [][16]byte) (groups [][]int, tables []string) {
	rows := make([]int, len(merchants))
	for i := range rows {
		rows[i] = i
	}
	t, ok := tx.(*txn)
	if !ok || !t.shardsHeld || len(t.tables[table]) == 0 {
		return [][]int{rows}, []string{pgx.Identifier{table}.Sanitize()}
	}
	shards := t.tables[table]
	shard := func(i int) int64 { return shardOf(shards, merchantHash(merchants[i])).id }
	groups = pgkit.GroupBy(rows, shard)
	slices.SortFunc(groups, func(a, b []int) int { return cmp.Compare(shard(a[0]), shard(b[0])) })
	for _, g := range groups {
		tables = append(tables, heldTable(tx, table, merchants[g[0]]))
	}
	return groups, tables
}
