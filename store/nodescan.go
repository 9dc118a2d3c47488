package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Background work on Citus (the webhook relay's look for due messages, the
// admission sweep, the timer backstop's rounds) reads each worker's own
// shards on that worker, by their names, in one
// statement per worker: the same read through the coordinator is one
// statement per shard on the workers, each deparsed by the coordinator and
// parsed and planned anew by the worker, while a worker's statement over
// its shards keeps one text as long as no shard moves, which the worker
// plans once (the pools cache prepared statements).

// nodeShards are the shards of table that each worker holds, by node.
func (s *Store) nodeShards(ctx context.Context, table string) (map[string][]int64, error) {
	if _, err := s.shardMap(ctx); err != nil {
		return nil, err
	}
	s.nodes.mu.Lock()
	defer s.nodes.mu.Unlock()
	byNode := map[string][]int64{}
	for _, sh := range s.nodes.of(table) {
		byNode[sh.node] = append(byNode[sh.node], sh.id)
	}
	return byNode, nil
}

// onEachNode runs read on every worker of shards, one after another, with
// the worker's name, its pool and the ids of its shards. A worker that fails is left
// out (what it holds waits for the next look) and the map is read again,
// since its shards may have moved; the error is returned only when every
// worker failed.
func (s *Store) onEachNode(ctx context.Context, shards map[string][]int64, read func(node string, pool *pgxpool.Pool, ids []int64) error) error {
	var lastErr error
	failed := 0
	for node, ids := range shards {
		pool, err := s.nodePool(node)
		if err == nil {
			err = read(node, pool, ids)
		}
		if err != nil {
			failed++
			lastErr = fmt.Errorf("on %s: %w", node, err)
		}
	}
	if failed > 0 {
		s.nodeFailed()
		if failed == len(shards) {
			return lastErr
		}
	}
	return nil
}

// shardsUnion is part, given each of ids (shards of one table, or of
// tables co-located with it), as one UNION ALL.
func shardsUnion(ids []int64, part func(id int64) string) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = part(id)
	}
	return strings.Join(parts, "\nUNION ALL\n")
}

// shardName is the name of table's shard id, as SQL.
func shardName(table string, id int64) string {
	return pgx.Identifier{table + "_" + strconv.FormatInt(id, 10)}.Sanitize()
}

// readEachNode is query, given the name of the table it reads (from), with
// args, read through the pool on one PostgreSQL; on Citus it is read on each
// worker over its own shards of table, query given each shard's name, in one
// statement per worker, and the workers' rows are merged, at most limit of
// them. Each shard's query limits its own rows.
func readEachNode[T any](ctx context.Context, s *Store, table string, query func(from string) string, limit int, scan pgx.RowToFunc[T], args ...any) ([]T, error) {
	return readEachNodeJoined(ctx, s, table, func(name func(string) string) string { return query(name(table)) }, limit, scan, args...)
}

// readEachNodeJoined is readEachNode for a query that joins table to tables
// co-located with it, merchant by merchant: query names each table it reads
// by name(table), the table itself on one PostgreSQL, on a worker its shard
// co-located with one of the worker's shards of table (the same hash
// range), so that the join stays within the shard.
func readEachNodeJoined[T any](ctx context.Context, s *Store, table string, query func(name func(table string) string) string, limit int, scan pgx.RowToFunc[T], args ...any) ([]T, error) {
	if !s.Distributed(ctx) {
		rows, err := s.pool.Query(ctx, query(func(t string) string { return t }), args...)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, scan)
	}
	shards, err := s.nodeShards(ctx, table)
	if err != nil {
		return nil, err
	}
	var all []T
	err = s.onEachNode(ctx, shards, func(_ string, pool *pgxpool.Pool, ids []int64) error {
		rows, err := pool.Query(ctx, shardsUnion(ids, func(id int64) string {
			return "(" + query(func(t string) string { return s.colocatedShard(table, id, t) }) + ")"
		}), args...)
		if err != nil {
			return err
		}
		found, err := pgx.CollectRows(rows, scan)
		all = append(all, found...)
		return err
	})
	return all[:min(len(all), limit)], err
}

// colocatedShard is the name of the shard of other co-located with table's
// shard id in the store's map: the one with the same hash range.
func (s *Store) colocatedShard(table string, id int64, other string) string {
	if other == table {
		return shardName(table, id)
	}
	s.nodes.mu.Lock()
	defer s.nodes.mu.Unlock()
	for _, sh := range s.nodes.of(table) {
		if sh.id != id {
			continue
		}
		for _, o := range s.nodes.of(other) {
			if o.min == sh.min {
				return shardName(other, o.id)
			}
		}
	}
	// Not in the map (it moved since the ids were read): a name no
	// worker holds, which fails the worker's read, and the map is read
	// again (onEachNode).
	return shardName(other, 0)
}
