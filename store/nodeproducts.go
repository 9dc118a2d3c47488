package store

import (
	"errors"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/orderd/orderd/domain"
)

// A placement batch on a Citus worker reads its products from the worker's
// own shards of products and drops, by their names, in one statement over
// all of them whose text stays the same until a shard moves (the pools
// cache it prepared, and PostgreSQL plans it once). Through the
// distributed tables the same read is planned by Citus on every call and
// runs as one statement per shard, each deparsed, parsed and planned anew.
//
// A shard read by its name bypasses Citus's routing, so the batch first
// makes sure its merchants' shards are still here and stay so until it
// commits: it takes Citus's lock on their placements in share mode (the
// lock a write through Citus takes, which a shard move takes exclusively
// before it switches the shard to its new node), then reads the worker's
// catalog. A shard that moved away is errShardMoved, and the batch is
// routed again (decideBatch).

// errShardMoved says a batch on a worker found one of its merchants' shards
// placed elsewhere: the shard map was behind a move.
var errShardMoved = domain.Errorf(domain.CodeUnavailable, "a merchant's shard is moving; retry")

// shareLock is PostgreSQL's ShareLock, as lock_shard_metadata takes a mode.
const shareLock = 5

// addBatchProducts is addProducts for a placement batch, read on its
// worker's own shards when tx runs on one and holds them (holdShards).
func (s *Store) addBatchProducts(tx pgx.Tx, b *pgx.Batch, merchants [][16]byte, ids []uuid.UUID) map[uuid.UUID]productInfo {
	t, ok := tx.(*txn)
	if !ok || !t.shardsHeld {
		return addProducts(b, merchants, ids)
	}
	read := s.nodeProductsRead(t.node)
	if read == "" {
		return addProducts(b, merchants, ids)
	}
	out := make(map[uuid.UUID]productInfo, len(ids))
	b.Queue(read, ids, merchants).Query(func(rows pgx.Rows) error { return scanProducts(rows, out) })
	return out
}

// holdShards adds to b, on a Citus worker, Citus's lock on the placements
// of merchants' shards in share mode and the check that the worker holds
// them: from then on the transaction's statements may name those shards
// and their co-located shards (shardsHeld). Elsewhere it adds nothing.
func holdShards(tx pgx.Tx, b *pgx.Batch, merchants [][16]byte) {
	t, ok := tx.(*txn)
	if !ok || t.node == "" || len(t.shards) == 0 {
		return
	}
	var shards []int64
	for _, m := range merchants {
		shards = append(shards, shardOf(t.shards, merchantHash(m)).id)
	}
	slices.Sort(shards)
	shards = slices.Compact(shards)
	b.Queue(`SELECT lock_shard_metadata($1, $2::bigint[])`, shareLock, shards)
	b.Queue(`SELECT count(*) FROM pg_dist_placement WHERE shardid = ANY($1::bigint[]) AND groupid = (SELECT groupid FROM pg_dist_local_group)`, shards).
		QueryRow(func(row pgx.Row) error {
			var here int
			if err := row.Scan(&here); err != nil {
				return err
			}
			if here != len(shards) {
				return errShardMoved
			}
			return nil
		})
	t.shardsHeld = true
}

// nodeProductsRead is productsSelect over node's shards of products, each
// joined to its co-located shard of drops, for the products of $1 among
// the merchants of $2; "" if the map holds no such pairs.
func (s *Store) nodeProductsRead(node string) string {
	s.nodes.mu.Lock()
	defer s.nodes.mu.Unlock()
	if read, ok := s.nodes.productReads[node]; ok {
		return read
	}
	drops := map[int32]int64{}
	for _, d := range s.nodes.drops {
		drops[d.min] = d.id
	}
	var products []int64
	dropsOf := map[int64]int64{}
	for _, p := range s.nodes.products {
		d, ok := drops[p.min]
		if p.node != node || !ok {
			continue
		}
		products = append(products, p.id)
		dropsOf[p.id] = d
	}
	read := ""
	if len(products) > 0 {
		read = shardsUnion(products, func(id int64) string {
			return productsFrom(shardName("products", id), shardName("drops", dropsOf[id])) +
				` WHERE p.id = ANY($1::uuid[]) AND p.merchant_id = ANY($2)`
		})
	}
	if s.nodes.productReads == nil {
		s.nodes.productReads = map[string]string{}
	}
	s.nodes.productReads[node] = read
	return read
}

// shardMoved reports whether a batch on a worker failed because a shard it
// read by name is no longer there: moved away, or split into others, whose
// old id Citus no longer knows when holdShards locks it (an internal error
// naming the shard, from Citus's metadata cache).
func shardMoved(err error) bool {
	var pgErr *pgconn.PgError
	if errors.Is(err, errShardMoved) || !errors.As(err, &pgErr) {
		return errors.Is(err, errShardMoved)
	}
	return pgErr.Code == pgerrcode.UndefinedTable ||
		pgErr.Code == pgerrcode.InternalError && strings.HasPrefix(pgErr.Message, "could not find valid entry for shard ")
}
