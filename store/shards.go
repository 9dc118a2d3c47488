package store

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
)

// shardMap remembers which Citus shard holds each merchant's rows, for
// grouping a placement batch by shard: a transaction whose every statement
// names merchants of one shard runs on that shard alone and commits in one
// phase, whatever the number of merchants, where one transaction per
// merchant costs the coordinator and the worker a transaction each. A
// merchant keeps its shard when shards move between nodes; a shard split
// gives it another, so the map is forgotten every shardMapLife and a batch
// grouped by a stale entry touches two shards, which Citus commits in two
// phases, until then.
type shardMap struct {
	mu    sync.Mutex
	of    map[uuid.UUID]int64
	since time.Time
}

// shardMapLife is how long a merchant's shard is remembered.
const shardMapLife = time.Minute

// merchantShard is the shard holding merchantID's rows on Citus, read once
// per shardMapLife; 0 on one PostgreSQL, where batches are not split.
func (s *Store) merchantShard(ctx context.Context, merchantID uuid.UUID) (int64, error) {
	if !s.Distributed(ctx) {
		return 0, nil
	}
	s.shards.mu.Lock()
	if time.Since(s.shards.since) > shardMapLife {
		s.shards.of, s.shards.since = map[uuid.UUID]int64{}, time.Now()
	}
	id, ok := s.shards.of[merchantID]
	s.shards.mu.Unlock()
	if ok {
		return id, nil
	}
	if err := s.pool.QueryRow(ctx, `SELECT get_shard_id_for_distribution_column('merchants', $1::uuid)`, merchantID).Scan(&id); err != nil {
		return 0, mapErr(fmt.Errorf("merchant's shard: %w", err))
	}
	s.shards.mu.Lock()
	s.shards.of[merchantID] = id
	s.shards.mu.Unlock()
	return id, nil
}
