package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/orderd/orderd/store/pgkit"
)

// nodeMap is Citus's shard map as this process knows it: the hash range of
// every shard of merchants (and so of every table co-located with it), the
// worker holding it, and a pool of connections to each worker. A merchant's
// node is found in memory (merchantHash, as Citus hashes a uuid), so that a
// placement is sent to the worker that holds its merchant's rows: Citus
// syncs its metadata to every worker, and a transaction opened there whose
// every statement touches that worker's shards runs them by local execution
// inside the worker's own transaction, which commits in one phase with no
// coordinator in the path (placeBatch).
//
// The map is read from the coordinator's catalog once, then again when it is
// older than nodeMapCheck (in the background: requests go on with the map
// they have) and at once after a node's transaction failed, so that a moved
// shard is followed. Until then a moved merchant's requests still reach its
// old worker, which forwards them to the new one (correct, but two nodes in
// one transaction).
type nodeMap struct {
	mu     sync.Mutex
	shards []shardRange
	// events are the shards of the log, outbox the webhook relay's,
	// products and drops a placement's and orders the backstop's, with
	// their nodes, for the reads done worker by worker (of).
	events   []shardRange
	outbox   []shardRange
	products []shardRange
	drops    []shardRange
	orders   []shardRange
	// written are the shards of the other tables a transaction on a
	// worker writes by their names (pickup counters; a close's claims and
	// stock buckets), or the drops' settlement reads there (entries and
	// lines).
	written map[string][]shardRange
	// productReads are the placements' reads of products on each node
	// (nodeProductsRead), made once per map.
	productReads map[string]string
	pools        map[string]*pgxpool.Pool
	read         time.Time
	reading      bool
	stale        bool
}

// shardRange is one shard: the merchants whose hash falls in [min, max].
type shardRange struct {
	min, max int32
	id       int64
	node     string
}

// of is the map's shards of table, one it holds.
func (m *nodeMap) of(table string) []shardRange {
	switch table {
	case "merchants":
		return m.shards
	case "events":
		return m.events
	case "outbox":
		return m.outbox
	case "products":
		return m.products
	case "drops":
		return m.drops
	case "orders":
		return m.orders
	}
	if shards, ok := m.written[table]; ok {
		return shards
	}
	panic("store: the shard map holds no shards of " + table)
}

// nodeMapCheck is how old the map may grow before it is read again.
const nodeMapCheck = 5 * time.Second

// nodePoolConns bounds each worker's pool: a placement lane's batch sends
// up to merchantsAtOnce parts at once, one per node.
const nodePoolConns = 8

// merchantNode is the worker holding merchantID's rows on Citus, as
// "host:port"; "" on one PostgreSQL, where nothing is routed.
func (s *Store) merchantNode(ctx context.Context, merchantID uuid.UUID) (string, error) {
	if !s.Distributed(ctx) {
		return "", nil
	}
	shards, err := s.shardMap(ctx)
	if err != nil {
		return "", err
	}
	return shardOf(shards, merchantHash(merchantID)).node, nil
}

// shardOf is the shard whose range holds h; the ranges cover every int32.
func shardOf(shards []shardRange, h int32) shardRange {
	i := sort.Search(len(shards), func(i int) bool { return shards[i].max >= h })
	if i == len(shards) {
		return shardRange{}
	}
	return shards[i]
}

// shardMap returns the merchants' shards, reading the map when it has none
// or was marked stale, and starting a read in the background when it is
// older than nodeMapCheck.
func (s *Store) shardMap(ctx context.Context) ([]shardRange, error) {
	m := &s.nodes
	m.mu.Lock()
	shards, stale, age := m.shards, m.stale, time.Since(m.read)
	if shards != nil && !stale && age > nodeMapCheck && !m.reading {
		m.reading = true
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = s.readNodeMap(ctx) // a failed read leaves the map as it was, asked again later
		}()
	}
	m.mu.Unlock()
	if shards != nil && !stale {
		return shards, nil
	}
	if err := s.readNodeMap(ctx); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.shards, nil
}

// nodeFailed marks the map stale after a transaction on a worker failed: the
// worker may be down, or the shard moved away.
func (s *Store) nodeFailed() {
	s.nodes.mu.Lock()
	s.nodes.stale = true
	s.nodes.mu.Unlock()
}

// readNodeMap reads the shards of merchants, events, outbox, products,
// drops, orders, pickup counters, purchase claims, stock buckets, drop
// entries and drop lines, and where each is placed, from the coordinator's
// catalog.
func (s *Store) readNodeMap(ctx context.Context) error {
	defer func() {
		s.nodes.mu.Lock()
		s.nodes.reading = false
		s.nodes.mu.Unlock()
	}()
	var merchants, events, outbox, products, drops, orders []shardRange
	written := map[string][]shardRange{}
	rows, err := s.pool.Query(ctx, `
		SELECT s.logicalrelid::regclass::text, s.shardid, s.shardminvalue::int, s.shardmaxvalue::int, n.nodename, n.nodeport
		FROM pg_dist_shard s
		JOIN pg_dist_placement p USING (shardid)
		JOIN pg_dist_node n ON n.groupid = p.groupid AND n.noderole = 'primary'
		WHERE s.logicalrelid IN ('merchants'::regclass, 'events'::regclass, 'outbox'::regclass, 'products'::regclass, 'drops'::regclass, 'orders'::regclass, 'pickup_counters'::regclass, 'purchase_claims'::regclass, 'stock_buckets'::regclass, 'drop_entries'::regclass, 'drop_lines'::regclass)
		ORDER BY 1, 4`)
	if err != nil {
		return mapErr(fmt.Errorf("read the shard map: %w", err))
	}
	for rows.Next() {
		var table, host string
		var port int
		var r shardRange
		if err := rows.Scan(&table, &r.id, &r.min, &r.max, &host, &port); err != nil {
			rows.Close()
			return mapErr(fmt.Errorf("read the shard map: %w", err))
		}
		r.node = net.JoinHostPort(host, strconv.Itoa(port))
		switch table {
		case "events":
			events = append(events, r)
		case "outbox":
			outbox = append(outbox, r)
		case "products":
			products = append(products, r)
		case "drops":
			drops = append(drops, r)
		case "orders":
			orders = append(orders, r)
		case "pickup_counters", "purchase_claims", "stock_buckets", "drop_entries", "drop_lines":
			written[table] = append(written[table], r)
		default:
			merchants = append(merchants, r)
		}
	}
	if err := rows.Err(); err != nil {
		return mapErr(fmt.Errorf("read the shard map: %w", err))
	}
	if len(merchants) == 0 {
		return errors.New("read the shard map: merchants has no shards")
	}
	m := &s.nodes
	m.mu.Lock()
	defer m.mu.Unlock()
	m.shards, m.events, m.outbox, m.products, m.drops, m.orders = merchants, events, outbox, products, drops, orders
	m.written = written
	m.read, m.stale = time.Now(), false
	m.productReads = nil
	return nil
}

// nodePool is the pool of connections to node ("host:port"), made on first
// use with the store's pool's settings (user, database, TLS) and the node's
// address.
func (s *Store) nodePool(node string) (*pgxpool.Pool, error) {
	m := &s.nodes
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.pools[node]; ok {
		return p, nil
	}
	host, port, err := net.SplitHostPort(node)
	if err != nil {
		return nil, fmt.Errorf("node %q: %w", node, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("node %q: %w", node, err)
	}
	cfg := s.pool.Config()
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = host, uint16(p), nil
	cfg.MaxConns, cfg.MinConns = nodePoolConns, 0
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to node %s: %w", node, err)
	}
	if m.pools == nil {
		m.pools = map[string]*pgxpool.Pool{}
	}
	m.pools[node] = pool
	return pool, nil
}

// Close closes the store's connections to the workers, its timer locks'
// sessions with them; the pool it was made with is its owner's to close.
func (s *Store) Close() {
	s.closeTimerSessions()
	s.nodes.mu.Lock()
	defer s.nodes.mu.Unlock()
	for node, p := range s.nodes.pools {
		p.Close()
		delete(s.nodes.pools, node)
	}
}

// merchantHash is the hash Citus places a merchant by: PostgreSQL's
// uuid_hash, hash_any (Bob Jenkins' lookup3, as hashfn.c has it) over the
// uuid's 16 bytes, read as a signed 32-bit integer.
func merchantHash(id uuid.UUID) int32 {
	const length = 16
	a := uint32(0x9e3779b9 + length + 3923095)
	b, c := a, a
	k := id[:]
	a += binary.LittleEndian.Uint32(k[0:])
	b += binary.LittleEndian.Uint32(k[4:])
	c += binary.LittleEndian.Uint32(k[8:])
	// mix
	a -= c
	a ^= bits.RotateLeft32(c, 4)
	c += b
	b -= a
	b ^= bits.RotateLeft32(a, 6)
	a += c
	c -= b
	c ^= bits.RotateLeft32(b, 8)
	b += a
	a -= c
	a ^= bits.RotateLeft32(c, 16)
	c += b
	b -= a
	b ^= bits.RotateLeft32(a, 19)
	a += c
	c -= b
	c ^= bits.RotateLeft32(b, 4)
	b += a
	// the last 4 bytes
	a += binary.LittleEndian.Uint32(k[12:])
	// final
	c ^= b
	c -= bits.RotateLeft32(b, 14)
	a ^= c
	a -= bits.RotateLeft32(c, 11)
	b ^= a
	b -= bits.RotateLeft32(a, 25)
	c ^= b
	c -= bits.RotateLeft32(b, 16)
	a ^= c
	a -= bits.RotateLeft32(c, 4)
	b ^= a
	b -= bits.RotateLeft32(a, 14)
	c ^= b
	c -= bits.RotateLeft32(b, 24)
	return int32(c)
}

// insertJobsAfter inserts, on the coordinator, the jobs of a transaction
// that committed on a worker. Its rows are committed already: a job lost
// here (the coordinator down) is a timer the backstop fires a grace period
// after its deadline, as for one lost with a coordinator's crash, so the
// failure is reported and not returned.
func (s *Store) insertJobsAfter(ctx context.Context, jobs []river.InsertManyParams) {
	if len(jobs) == 0 {
		return
	}
	var copied, unique []river.InsertManyParams
	for _, j := range jobs {
		if isUniqueJob(j) {
			unique = append(unique, j)
		} else {
			copied = append(copied, j)
		}
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := s.insertJobs(ctx, tx, unique); err != nil {
			return err
		}
		if len(copied) == 0 {
			return nil
		}
		if _, err := s.cfg.Jobs.InsertManyFastTx(ctx, tx, copied); err != nil {
			return fmt.Errorf("insert jobs: %w", err)
		}
		return nil
	})
	if err != nil {
		slog.WarnContext(ctx, "timers of orders committed on a worker were not queued; the backstop fires them late", "jobs", len(jobs), "err", err)
	}
}

// lockGroups splits ids (merchants) into the groups that one statement
// taking row locks may name: on a Citus worker, which takes row locks only
// in a statement of one shard, one group per shard, each in the order given
// and the groups in the order of their first id; elsewhere all of them.
func lockGroups(tx pgx.Tx, ids [][16]byte) [][][16]byte {
	t, ok := tx.(*txn)
	if !ok || len(t.shards) == 0 || len(ids) < 2 {
		return [][][16]byte{ids}
	}
	return pgkit.GroupBy(ids, func(id [16]byte) int64 { return shardOf(t.shards, merchantHash(id)).id })
}

// lockShardGroups is lockGroups with the table each group's statement
// reads: on a worker holding its batch's shards (shardsHeld), the group's
// shard of merchants by its name; elsewhere merchants.
func lockShardGroups(tx pgx.Tx, ids [][16]byte) (groups [][][16]byte, tables []string) {
	groups = lockGroups(tx, ids)
	for _, g := range groups {
		tables = append(tables, heldTable(tx, "merchants", g[0]))
	}
	return groups, tables
}
