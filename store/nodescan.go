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
// args, read through the pool on one PostgreSQL, and on Citus when table is
// "" (a query over several tables); on Citus it is read on each worker over
// its own shards of table, query given each shard's name, in one statement
// per worker, and the workers' rows are merged, at most limit of them. Each
// shard's query limits its own rows.
func readEachNode[T any](ctx context.Context, s *Store, table string, query func(from string) string, limit int, scan pgx.RowToFunc[T], args ...any) ([]T, error) {
	if table == "" || !s.Distributed(ctx) {
		rows, err := s.pool.Query(ctx, query(table), args...)
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
		rows, err := pool.Query(ctx, shardsUnion(ids, func(id int64) string { return "(" + query(shardName(table, id)) + ")" }), args...)
		if err != nil {
			return err
		}
		found, err := pgx.CollectRows(rows, scan)
		all = append(all, found...)
		return err
	})
	return all[:min(len(all), limit)], err
}
