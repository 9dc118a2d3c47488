package store

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// On Citus the log is read node by node. A placement commits on the worker
// holding its merchant, with no coordinator in the transaction, and an
// event's tx_id is then that worker's transaction id; the other writes,
// sent through the coordinator, would carry the coordinator's, so on Citus
// a trigger on the shards sets every event's tx_id to its worker's
// (migrations.Distribute). Each worker's share of the log is then a log of
// one PostgreSQL: its transaction ids, its snapshots, ChangedStreams'
// scheme as it is. A reader's place is one snapshot per worker.

// nodeSnapshots is a LogSnapshot on Citus: each worker's snapshot, by
// node ("host:port"), written "node=snapshot;node=snapshot".
type nodeSnapshots map[string]string

func parseNodeSnapshots(s LogSnapshot) nodeSnapshots {
	out := nodeSnapshots{}
	for _, part := range strings.Split(string(s), ";") {
		if node, snap, ok := strings.Cut(part, "="); ok {
			out[node] = snap
		}
	}
	return out
}

func (n nodeSnapshots) String() LogSnapshot {
	nodes := make([]string, 0, len(n))
	for node := range n {
		nodes = append(nodes, node)
	}
	sort.Strings(nodes)
	parts := make([]string, len(nodes))
	for i, node := range nodes {
		parts[i] = node + "=" + n[node]
	}
	return LogSnapshot(strings.Join(parts, ";"))
}

// changedStreamsByNode is ChangedStreams on Citus: on every worker holding
// shards of the log, the worker's snapshot, then the rows of its own shards
// of events (read by their names, so that Citus sends nothing to another
// node) whose transactions ended between the worker's two snapshots. A
// worker first seen (added to the cluster) starts from now. A worker that
// fails keeps its place and is read from it next time; the others' changes
// are returned meanwhile, unless every worker failed.
func (s *Store) changedStreamsByNode(ctx context.Context, since LogSnapshot, merchants []uuid.UUID) ([]StreamRef, LogSnapshot, error) {
	// The shards to read on each node: all of them, or those of the
	// merchants named (every node keeps its place either way).
	shards, err := s.eventShards(ctx)
	if err != nil {
		return nil, since, err
	}
	if merchants != nil {
		s.nodes.mu.Lock()
		all := s.nodes.events
		s.nodes.mu.Unlock()
		named, seen := map[string][]int64{}, map[int64]bool{}
		for node := range shards {
			named[node] = nil
		}
		for _, m := range merchants {
			sh := shardOf(all, merchantHash(m))
			if sh.node != "" && !seen[sh.id] {
				seen[sh.id] = true
				named[sh.node] = append(named[sh.node], sh.id)
			}
		}
		shards = named
	}
	before := parseNodeSnapshots(since)
	// A worker that fails keeps its place: next holds it until its read
	// gives the new one.
	next := nodeSnapshots{}
	for node := range shards {
		if prev, known := before[node]; known {
			next[node] = prev
		}
	}
	var out []StreamRef
	err = s.onEachNode(ctx, shards, func(node string, pool *pgxpool.Pool, ids []int64) error {
		prev, known := before[node]
		streams, now, err := readNodeLog(ctx, pool, prev, ids, merchants, since != "" && known && len(ids) > 0)
		if err != nil {
			return err
		}
		next[node] = now
		out = append(out, streams...)
		return nil
	})
	if err != nil {
		return nil, since, mapErr(fmt.Errorf("read log: %w", err))
	}
	return out, next.String(), nil
}

// readNodeLog takes the worker's snapshot and, if read, the streams of
// shards (of events, by id) changed since prev, in one round trip.
func readNodeLog(ctx context.Context, pool *pgxpool.Pool, prev string, shards []int64, merchants []uuid.UUID, read bool) ([]StreamRef, string, error) {
	// One round trip, in a transaction whose statements share one snapshot:
	// the one returned and the one the rows are read with.
	b := &pgx.Batch{}
	b.Queue(`BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`)
	var now string
	b.Queue(`SELECT pg_current_snapshot()::text`).QueryRow(func(row pgx.Row) error { return row.Scan(&now) })
	var out []StreamRef
	if read {
		// A stream's events share its merchant and so one shard: distinct
		// in each shard is distinct in all.
		changed := shardsUnion(shards, func(id int64) string {
			return `SELECT DISTINCT stream_id, stream_type, merchant_id FROM ` + shardName("events", id) + `
				WHERE (tx_id >= pg_snapshot_xmax($1::pg_snapshot) OR tx_id = ANY (ARRAY(SELECT pg_snapshot_xip($1::pg_snapshot))))
				  AND pg_visible_in_snapshot(tx_id, pg_current_snapshot())
				  AND ($2::uuid[] IS NULL OR merchant_id = ANY ($2))`
		})
		b.Queue(changed, prev, merchants).Query(func(rows pgx.Rows) error {
			var err error
			out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (StreamRef, error) {
				var r StreamRef
				err := row.Scan(&r.ID, &r.Type, &r.MerchantID)
				return r, err
			})
			return err
		})
	}
	b.Queue(`COMMIT`)
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, "", fmt.Errorf("read the log: %w", err)
	}
	return out, now, nil
}
