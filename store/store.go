package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store/pgkit"
)

// JobInserter is the part of a River client the store needs: jobs are inserted
// in the same transaction as the events that call for them.
type JobInserter interface {
	InsertManyTx(ctx context.Context, tx pgx.Tx, params []river.InsertManyParams) ([]*rivertype.JobInsertResult, error)
	InsertManyFastTx(ctx context.Context, tx pgx.Tx, params []river.InsertManyParams) (int, error)
}

// Config is what a Store is made with.
type Config struct {
	Pool *pgxpool.Pool
	// Jobs inserts River jobs in the store's transactions: a River client,
	// with workers or without.
	Jobs JobInserter
	// Now is read once per transaction, so every event of one decision
	// carries the same time; time.Now unless set. Tests replace it.
	Now func() time.Time
	// InlineDrainLimit bounds how many queued orders a completion,
	// cancellation or capacity change admits in its own transaction; the
	// rest is left to a drain job. 100 unless set; a negative limit admits
	// none inline.
	InlineDrainLimit int
	// SellOutChunk bounds how many waiting entries one transaction of a
	// drop's sell-out turns sold_out (see SettleDrop); 1000 unless set.
	SellOutChunk int
	// RebuildChunk is how many orders a rebuild folds and writes at a
	// time, which bounds its memory; 0 is the default.
	RebuildChunk int
	// OnTransition, when set, hears every committed order status change.
	OnTransition func(from, to domain.OrderStatus)
}

// Store is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	cfg  Config

	// placers are lanes of placement batches, one batch at a time each; a
	// merchant's paid orders always take the same lane, so that they are
	// decided in arrival order and concurrent batches never wait for each
	// other's merchant locks.
	placers []*pgkit.Batcher[*placement, string]
	// nodes maps merchants to the Citus worker holding them, with a pool
	// of connections to each (shards.go).
	nodes nodeMap
	// parked holds, per merchant whose row another transaction held when a
	// batch came to it, the requests waiting for that lock in arrival order
	// (placeParked): a locked merchant holds up its own requests only.
	parkMu sync.Mutex
	parked map[uuid.UUID][]*placement
	closer *pgkit.Batcher[*closeRequest, uuid.UUID]
	// failedCloses are overdue orders whose close failed (timers.go).
	failedCloses failedCloses
	fireFrom     fireFrom
	expireFrom   fireFrom
	// timers are the sessions holding the workers' timer locks on Citus,
	// with where each worker's next look starts (nodetimers.go).
	timers nodeTimers
	// full and fullChecker refuse requests for full slots without their
	// merchant's batch (fullslots.go).
	full        fullSlots
	fullChecker *pgkit.Batcher[*fullCheck, struct{}]
	// citus is 0 until asked, then 1 on one PostgreSQL and 2 on Citus.
	citus  atomic.Int32
	joiner *pgkit.Batcher[*joinRequest, uuid.UUID]
	hints  chan struct{}
	// turns serialize this process's commands on one order (orderTurns).
	turns orderTurns
	// stockProducts are the products last read taking stock (mayNumberFirst).
	stockProducts sync.Map
	// dropMerchants are the merchants of drops joined (dropMerchant).
	dropMu        sync.Mutex
	dropMerchants map[uuid.UUID]uuid.UUID
}

// txn carries what a transaction did, for reporting after it commits.
type txn struct {
	pgx.Tx
	transitions [][2]domain.OrderStatus
	wroteEvents bool
	// citus says the database is laid out on Citus, where some statements
	// take another shape (insertRows).
	citus bool
	// node is the Citus worker ("host:port") the transaction runs on, ""
	// on the coordinator or one PostgreSQL. River's tables are not on a
	// worker: its jobs are inserted on the coordinator once it commits
	// (insertJobsWithCommit).
	node      string
	jobsAfter []river.InsertManyParams
	// shards is the shard map on a worker, for statements that must name
	// one shard's merchants (lockGroups).
	shards []shardRange
	// shardsHeld says the transaction holds Citus's placement lock on the
	// shards of its batch's merchants, checked to be on this worker
	// (addBatchProducts), so that statements may name those shards.
	shardsHeld bool
	// tables are the shards of the tables co-located with merchants that
	// the shard map holds, from the same reading of the map as shards.
	tables map[string][]shardRange
}

// onCitusTx reports whether tx, one of the store's transactions, runs on
// Citus; any other transaction (rebuild's) takes PostgreSQL's shapes.
func onCitusTx(tx pgx.Tx) bool {
	t, ok := tx.(*txn)
	return ok && t.citus
}

func noteTransition(tx pgx.Tx, from, to domain.OrderStatus) {
	if t, ok := tx.(*txn); ok && from != to {
		t.transitions = append(t.transitions, [2]domain.OrderStatus{from, to})
	}
}

// New returns a Store as cfg says.
func New(cfg Config) *Store {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.InlineDrainLimit == 0 {
		cfg.InlineDrainLimit = 100
	}
	cfg.InlineDrainLimit = max(0, cfg.InlineDrainLimit)
	if cfg.SellOutChunk == 0 {
		cfg.SellOutChunk = 1000
	}
	s := &Store{pool: cfg.Pool, cfg: cfg, hints: make(chan struct{}, 1),
		parked: map[uuid.UUID][]*placement{}, dropMerchants: map[uuid.UUID]uuid.UUID{}}
	s.placers = make([]*pgkit.Batcher[*placement, string], placementLanes)
	for i := range s.placers {
		// A placement batch is split by node: each node's part is decided
		// in a transaction on that worker, whose statements touch its
		// shards alone (placeBatch).
		s.placers[i] = pgkit.NewBatcher[*placement, string](1, maxPlacementBatch, s.placeBatch).
			SplitBy(s.splitOnCitus, func(pl *placement) string { return pl.node }, merchantsAtOnce)
	}
	s.fullChecker = newFullChecker(s)
	s.closer = pgkit.NewBatcher[*closeRequest, uuid.UUID](2, 200, s.closeBatch).
		SplitBy(s.splitOnCitus, closeMerchant, merchantsAtOnce)
	s.joiner = pgkit.NewBatcher[*joinRequest, uuid.UUID](joinLanes, maxJoinBatch, s.joinBatch).
		SplitBy(s.splitOnCitus, func(r *joinRequest) uuid.UUID { return r.merchantID }, merchantsAtOnce)
	return s
}

// merchantsAtOnce bounds how many merchants (a placement batch's nodes)
// of a batch split by merchant (splitOnCitus) are decided at once, each
// in a transaction on a connection of its own.
const merchantsAtOnce = 4

// Distributed reports whether the database is laid out on Citus, where a
// read of every shard costs each worker a statement per shard, so that
// background work looks less often; a failed question answers no.
func (s *Store) Distributed(ctx context.Context) bool {
	citus, err := s.onCitus(ctx)
	return err == nil && citus
}

// splitOnCitus reports whether batches are split before they are decided:
// on Citus, where a transaction that writes rows of several shards commits
// in two phases, the coordinator's first, so that the log reader could read
// past an event before the worker holding it commits. Placements split by
// shard, closes and drop joins by merchant. A failed question keeps the
// batch whole; its own transaction meets the same trouble and reports it.
func (s *Store) splitOnCitus() bool {
	return s.Distributed(context.Background())
}

// Config is what the store was made with (its defaults filled in), for a
// second store alike.
func (s *Store) Config() Config { return s.cfg }

// Pool exposes the pool for components that share it (River, the log tailer).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

func (s *Store) now() time.Time { return s.cfg.Now().UTC().Truncate(time.Microsecond) }

func newID() uuid.UUID { return uuid.Must(uuid.NewV7()) }

// Meta describes who caused a change; it is stored with every event.
type Meta struct {
	Actor     domain.Actor `json:"actor"`
	Subject   string       `json:"sub,omitempty"`
	RequestID string       `json:"request_id,omitempty"`
}

// metaOf is the metadata of a request of p's.
func metaOf(p domain.Party, requestID string) Meta {
	return Meta{Actor: p.Actor, Subject: p.Subject, RequestID: requestID}
}

// inTx runs fn in a transaction and retries it on deadlock or serialization
// failure, which PostgreSQL may report under contention and which are always
// safe to retry because nothing was committed.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return retryTx(ctx, func() error { return s.tryTx(ctx, fn) })
}

// inPipelinedTx is inTx for a transaction that sends its BEGIN with its first
// statements and its COMMIT with its last: fn ends it with CommitWith.
func (s *Store) inPipelinedTx(ctx context.Context, fn func(tx *txn, pt *pgkit.PipelinedTx) error) error {
	return retryTx(ctx, func() error { return s.tryPipelinedTx(ctx, "", fn) })
}

// inNodeTx is inPipelinedTx on the Citus worker node ("host:port"); on
// "" (one PostgreSQL, or a coordinator) it is inPipelinedTx. A failure
// there marks the shard map stale: the node may be down, or its shards may
// have moved.
func (s *Store) inNodeTx(ctx context.Context, node string, fn func(tx *txn, pt *pgkit.PipelinedTx) error) error {
	err := retryTx(ctx, func() error { return s.tryPipelinedTx(ctx, node, fn) })
	if node != "" && nodeMayHaveMoved(err) {
		s.nodeFailed()
	}
	return err
}

// nodeMayHaveMoved reports whether a transaction on a worker failed in a way
// a down worker or a moved shard explains: unavailable, or an error of the
// database's that no decision of orderd's made.
func nodeMayHaveMoved(err error) bool {
	if err == nil || errors.Is(err, errAbandoned) || errors.Is(err, errNumberLast) {
		return false
	}
	var de *domain.Error
	return !errors.As(err, &de) || de.Code == domain.CodeUnavailable
}

func retryTx(ctx context.Context, try func() error) error {
	const attempts = 5
	var err error
	for i := range attempts {
		err = try()
		if !isRetryable(err) {
			return mapErr(err)
		}
		if i < attempts-1 {
			select {
			case <-ctx.Done():
				return mapErr(ctx.Err())
			case <-time.After(time.Duration(i+1) * 5 * time.Millisecond):
			}
		}
	}
	return mapErr(err)
}

func (s *Store) tryTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	citus, err := s.onCitus(ctx)
	if err != nil {
		return err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after commit
	t := &txn{Tx: tx, citus: citus}
	if err := fn(t); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	s.committed(t)
	return nil
}

func (s *Store) tryPipelinedTx(ctx context.Context, node string, fn func(tx *txn, pt *pgkit.PipelinedTx) error) error {
	citus, err := s.onCitus(ctx)
	if err != nil {
		return err
	}
	pool := s.pool
	var shards []shardRange
	var tables map[string][]shardRange
	if node != "" {
		if pool, err = s.nodePool(node); err != nil {
			return err
		}
		if _, err = s.shardMap(ctx); err != nil {
			return err
		}
		s.nodes.mu.Lock()
		shards = s.nodes.shards
		tables = map[string][]shardRange{"merchants": shards, "events": s.nodes.events, "orders": s.nodes.orders, "outbox": s.nodes.outbox,
			"pickup_counters": s.nodes.written["pickup_counters"],
			"purchase_claims": s.nodes.written["purchase_claims"], "stock_buckets": s.nodes.written["stock_buckets"]}
		s.nodes.mu.Unlock()
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	// A connection left inside a transaction is closed by the pool, not reused.
	defer conn.Release()
	pt := pgkit.NewPipelinedTx(conn.Conn())
	defer pt.Rollback(ctx) //nolint:errcheck // a no-op after commit
	t := &txn{Tx: pt, citus: citus, node: node, shards: shards, tables: tables}
	if err := fn(t, pt); err != nil {
		return err
	}
	if !pt.Committed() {
		return errors.New("store: a pipelined transaction ended without its commit")
	}
	s.committed(t)
	s.insertJobsAfter(ctx, t.jobsAfter)
	return nil
}

// committed reports what a committed transaction did.
func (s *Store) committed(t *txn) {
	if t.wroteEvents {
		s.logWritten()
	}
	if s.cfg.OnTransition != nil {
		for _, tr := range t.transitions {
			s.cfg.OnTransition(tr[0], tr[1])
		}
	}
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	return mapErr(s.pool.Ping(ctx))
}

// onCitus reports whether the database is laid out on Citus (`orderd
// migrate citus`), for the few statements that must take another shape
// there. Asked once; a failed question is asked again next time.
func (s *Store) onCitus(ctx context.Context) (bool, error) {
	if v := s.citus.Load(); v != 0 {
		return v == 2, nil
	}
	var distributed bool
	err := s.pool.QueryRow(ctx, `SELECT to_regclass('pg_dist_partition') IS NOT NULL`).Scan(&distributed)
	if err == nil && distributed {
		err = s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'outbox'::regclass)`).Scan(&distributed)
	}
	if err != nil {
		return false, mapErr(fmt.Errorf("look for citus: %w", err))
	}
	v := int32(1)
	if distributed {
		v = 2
	}
	s.citus.Store(v)
	return distributed, nil
}
