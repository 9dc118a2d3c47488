package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Background work on Citus (the webhook relay's look for due messages)
// reads each worker's own shards on that worker, by their names, in one
// statement per worker: the same read through the coordinator is one
// statement per shard on the workers, each deparsed by the coordinator and
// parsed and planned anew by the worker, while a worker's statement over
// its shards keeps one text as long as no shard moves, which the worker
// plans once (the pools cache prepared statements).

// nodeShards are the shards of a table (of, from the map) that each worker
// holds, by node.
func (s *Store) nodeShards(ctx context.Context, of func(*nodeMap) []shardRange) (map[string][]int64, error) {
	if _, err := s.shardMap(ctx); err != nil {
		return nil, err
	}
	s.nodes.mu.Lock()
	defer s.nodes.mu.Unlock()
	byNode := map[string][]int64{}
	for _, sh := range of(&s.nodes) {
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
