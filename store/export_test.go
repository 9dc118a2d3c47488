package store

import (
	"context"
	"encoding/json"
	"math"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/ledger/verify"
)

// SamePlacementLane reports whether two merchants' paid orders share a
// placement lane, so that a test can put a locked merchant next to others.
func SamePlacementLane(a, b uuid.UUID) bool {
	return laneOf(&placement{p: PlaceRequest{MerchantID: a, PaymentRef: "r"}}) ==
		laneOf(&placement{p: PlaceRequest{MerchantID: b, PaymentRef: "r"}})
}

// PagePlans returns PostgreSQL's plan for the page query of each list, made
// with sequential and bitmap scans priced out: an index that serves a list
// then shows as an index scan with no sort above it.
func (s *Store) PagePlans(ctx context.Context, lists []OrderList, deadLetters ListDeadLettersParams) ([]string, error) {
	type query struct {
		sql  string
		args []any
	}
	var queries []query
	for _, l := range lists {
		sql, args := pageQuery(l)
		queries = append(queries, query{sql, args})
	}
	sql, args := deadLetterPageQuery(deadLetters, 50)
	queries = append(queries, query{sql, args})
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read only
	if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off`); err != nil {
		return nil, err
	}
	var plans []string
	for _, q := range queries {
		rows, err := tx.Query(ctx, `EXPLAIN (COSTS OFF) `+q.sql, q.args...)
		if err != nil {
			return nil, err
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, err
		}
		plans = append(plans, strings.Join(lines, "\n"))
	}
	return plans, nil
}

// QueueEntriesRead runs the view query of an order (by id) or of a list's
// page under EXPLAIN ANALYZE and returns how many entries of
// orders_queue_idx it read, those its filters then dropped included.
func (s *Store) QueueEntriesRead(ctx context.Context, orderID uuid.UUID, list *OrderList) (int, error) {
	sql, args := orderByIDQuery, []any{orderID}
	if list != nil {
		sql, args = pageQuery(*list)
	}
	var out []struct{ Plan planNode }
	var doc []byte
	if err := s.pool.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+sql, args...).Scan(&doc); err != nil {
		return 0, err
	}
	if err := json.Unmarshal(doc, &out); err != nil {
		return 0, err
	}
	return out[0].Plan.queueEntries(), nil
}

// JoinedEntriesOnOnePostgreSQL is a join batch's read of the entries it
// would make, on one PostgreSQL, where it does not name the merchants.
var JoinedEntriesOnOnePostgreSQL, _ = joinedEntriesSQL(false, nil, nil)

// JoinedEntriesRead runs a join batch's read of the entries it would make
// under EXPLAIN ANALYZE and returns how many rows of drop_entries it read,
// those its filters then dropped included.
func (s *Store) JoinedEntriesRead(ctx context.Context, merchantID, dropID uuid.UUID, customers []string) (int, error) {
	var ids []uuid.UUID
	for _, c := range customers {
		ids = append(ids, domain.EntryID(dropID, c))
	}
	var out []struct{ Plan planNode }
	var doc []byte
	sql, args := joinedEntriesSQL(false, ids, []uuid.UUID{merchantID})
	if err := s.pool.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+sql, args...).Scan(&doc); err != nil {
		return 0, err
	}
	if err := json.Unmarshal(doc, &out); err != nil {
		return 0, err
	}
	return out[0].Plan.rowsOf("drop_entries"), nil
}

type planNode struct {
	RelationName  string     `json:"Relation Name"`
	IndexName     string     `json:"Index Name"`
	ActualRows    float64    `json:"Actual Rows"`
	ActualLoops   float64    `json:"Actual Loops"`
	RemovedByFilt float64    `json:"Rows Removed by Filter"`
	SharedHit     int        `json:"Shared Hit Blocks"`
	SharedRead    int        `json:"Shared Read Blocks"`
	Plans         []planNode `json:"Plans"`
}

// rowsOf counts the rows the plan's scans of table read.
func (n planNode) rowsOf(table string) int {
	total := 0
	if n.RelationName == table {
		total += int((n.ActualRows + n.RemovedByFilt) * n.ActualLoops)
	}
	for _, c := range n.Plans {
		total += c.rowsOf(table)
	}
	return total
}

func (n planNode) queueEntries() int {
	total := 0
	if n.IndexName == "orders_queue_idx" {
		total += int((n.ActualRows + n.RemovedByFilt) * n.ActualLoops)
	}
	for _, c := range n.Plans {
		total += c.queueEntries()
	}
	return total
}

// ClaimByMerchant makes s claim webhooks the way it does on Citus, on one
// PostgreSQL: the outbox stands as the one shard (a view, outbox_0, made
// here) of one worker, the database s's pool reaches, whose map is never
// read again.
func ClaimByMerchant(t testing.TB, s *Store) {
	t.Helper()
	if _, err := s.pool.Exec(context.Background(), `CREATE VIEW outbox_0 AS SELECT * FROM outbox`); err != nil {
		t.Fatalf("the outbox as a shard: %v", err)
	}
	s.citus.Store(2)
	cfg := s.pool.Config().ConnConfig
	all := []shardRange{{min: math.MinInt32, max: math.MaxInt32, node: net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))}}
	s.nodes.mu.Lock()
	defer s.nodes.mu.Unlock()
	s.nodes.shards, s.nodes.outbox, s.nodes.read = all, all, time.Now().Add(time.Hour)
}

// SettleDropOnce runs one transaction of SettleDrop, as a process stopped
// right after it commits would, and reports whether it left work behind.
func (s *Store) SettleDropOnce(ctx context.Context, merchantID, dropID uuid.UUID) (more bool, err error) {
	err = s.inTx(ctx, func(tx pgx.Tx) (err error) {
		more, err = s.settleDrop(ctx, tx, merchantID, dropID)
		return err
	})
	return more, err
}

// OrderProofOf is the receipt of a stream without an order row to check
// access against (the benchmark's streams have none).
func (s *Store) OrderProofOf(ctx context.Context, merchantID, streamID uuid.UUID, log string, size int64) (*verify.Proof, error) {
	return s.streamProof(ctx, merchantID, streamID, log, size)
}

// KeyReadPlan returns PostgreSQL's plan, generic or custom, for reading
// the orders (in table, orders or a table like it) of n keys of one
// merchant as a placement batch does.
func KeyReadPlan(ctx context.Context, conn *pgx.Conn, table string, merchant uuid.UUID, customers, keys []string, generic bool) (string, error) {
	mode := "force_custom_plan"
	if generic {
		mode = "force_generic_plan"
	}
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
		return "", err
	}
	merchants := make([]uuid.UUID, len(keys))
	for i := range keys {
		merchants[i] = merchant
	}
	// A statement of its own, as pgx prepares it, so that the plan is the
	// one the plan cache would keep.
	if _, err := conn.Exec(ctx, "PREPARE keyread(uuid[], text[], text[]) AS "+keyReadSQL(table, false)); err != nil {
		return "", err
	}
	defer conn.Exec(ctx, "DEALLOCATE keyread") //nolint:errcheck // the connection goes with the test
	// EXPLAIN takes no parameters of its own: the arrays go as literals
	// (of plain names and keys).
	ids := make([]string, len(merchants))
	for i, m := range merchants {
		ids[i] = m.String()
	}
	array := func(items []string) string { return "{" + strings.Join(items, ",") + "}" }
	rows, err := conn.Query(ctx, "EXPLAIN EXECUTE keyread($1::uuid[], $2::text[], $3::text[])", pgx.QueryExecModeSimpleProtocol,
		array(ids), array(customers), array(keys))
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(lines, "\n"), err
}

// MerchantHash is the hash by which Citus places a merchant (merchantHash).
func MerchantHash(id uuid.UUID) int32 { return merchantHash(id) }

// MerchantNode is the worker the store sends merchantID's placements to
// (merchantNode).
func (s *Store) MerchantNode(ctx context.Context, merchantID uuid.UUID) (string, error) {
	return s.merchantNode(ctx, merchantID)
}

// SetNodePool makes the store reach node through p, as a test's stand-in
// for a worker that is down.
func (s *Store) SetNodePool(node string, p *pgxpool.Pool) {
	s.nodes.mu.Lock()
	defer s.nodes.mu.Unlock()
	if s.nodes.pools == nil {
		s.nodes.pools = map[string]*pgxpool.Pool{}
	}
	s.nodes.pools[node] = p
}

// QueuePositionsPlan returns PostgreSQL's plan, as run, of ranking the
// lines of merchants as QueuePositions does.
func QueuePositionsPlan(ctx context.Context, pool *pgxpool.Pool, merchants []uuid.UUID) (string, error) {
	rows, err := pool.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF) "+queuePositionsSQL, merchants)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(lines, "\n"), err
}

// PromoteTimersBlocks runs the timers' promotion (FireDueTimers and
// LookAtTimers, with ahead 0) under
// EXPLAIN ANALYZE, with a generic or a custom plan, in a transaction it
// rolls back, and returns the pages its scans of river_job touched, and its
// plan.
func PromoteTimersBlocks(ctx context.Context, conn *pgx.Conn, queue string, ahead time.Duration, limit int, generic bool) (int, string, error) {
	mode := "force_custom_plan"
	if generic {
		mode = "force_generic_plan"
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, "", err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a rollback is the point
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = "+mode); err != nil {
		return 0, "", err
	}
	var plan []byte
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+promoteTimersSQL, queue, ahead, limit).Scan(&plan); err != nil {
		return 0, "", err
	}
	var root []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(plan, &root); err != nil {
		return 0, "", err
	}
	return root[0].Plan.scanBlocks(), string(plan), nil
}

// CloseDueUnpaidBlocks runs the read of the orders past their deadline that
// CloseDueUnpaid's next look would make (from the store's fireFrom, or from
// the start) under EXPLAIN ANALYZE, in a transaction it rolls back, and
// returns the pages it touched.
func CloseDueUnpaidBlocks(ctx context.Context, s *Store, conn *pgx.Conn, limit int, fromStart bool) (int, error) {
	from := s.fireFrom.at()
	if fromStart {
		from = time.Time{}
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a rollback is the point
	var plan []byte
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+overdueUnpaidSQL, from, s.now(), limit, []uuid.UUID{}).Scan(&plan); err != nil {
		return 0, err
	}
	var root []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(plan, &root); err != nil {
		return 0, err
	}
	return root[0].Plan.scanBlocks(), nil
}

// scanBlocks sums the shared pages of the plan's scans (its leaves; a
// node's own count includes its children's).
func (n planNode) scanBlocks() int {
	if len(n.Plans) == 0 {
		return n.SharedHit + n.SharedRead
	}
	total := 0
	for _, c := range n.Plans {
		total += c.scanBlocks()
	}
	return total
}

// HoldShardMap keeps the store's shard map from being read again but after
// a failed transaction on a worker, as a test's stand-in for a map behind a
// shard move.
func (s *Store) HoldShardMap() {
	s.nodes.mu.Lock()
	defer s.nodes.mu.Unlock()
	s.nodes.read = time.Now().Add(time.Hour)
}

// PlaceTogether decides the requests in one placement batch, in this
// order, as a lane decides requests that arrive while its last batch
// commits, and returns each request's error.
func (s *Store) PlaceTogether(ctx context.Context, reqs []PlaceRequest) []error {
	batch := make([]*placement, len(reqs))
	for i, p := range reqs {
		batch[i] = &placement{p: p, orderID: newID(), done: make(chan struct{})}
		batch[i].deadline, _ = ctx.Deadline()
	}
	s.decideBatch(batch, batchMode{})
	errs := make([]error, len(batch))
	for i, pl := range batch {
		<-pl.done
		errs[i] = pl.err
	}
	return errs
}

// ClaimRowsRead runs a claim of p, as ClaimWebhooks makes it on one
// PostgreSQL, under EXPLAIN ANALYZE in a transaction it rolls back, and
// returns how many rows of outbox its scans read, those its filters then
// dropped included.
func (s *Store) ClaimRowsRead(ctx context.Context, p ClaimParams) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // the claim is only measured
	var out []struct{ Plan planNode }
	var doc []byte
	if err := tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+claimSQL, claimArgs(p)...).Scan(&doc); err != nil {
		return 0, err
	}
	if err := json.Unmarshal(doc, &out); err != nil {
		return 0, err
	}
	return out[0].Plan.rowsOf("outbox"), nil
}

// DeliveredRowsRead runs the statements that RecordWebhookAttempts makes on
// one PostgreSQL to mark results delivered, under EXPLAIN ANALYZE in a
// transaction it rolls back, and returns how many rows of outbox their
// scans read, those their filters then dropped included.
func (s *Store) DeliveredRowsRead(ctx context.Context, results []AttemptResult) (int, error) {
	b := &pgx.Batch{}
	addAttempts(b, results, RetryPolicy{First: time.Second, Max: time.Second, MaxAttempts: 2}, time.Now(), false)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // the statements are only measured
	read := 0
	for _, q := range b.QueuedQueries {
		if !strings.Contains(q.SQL, "SET status = 'delivered'") {
			continue
		}
		var out []struct{ Plan planNode }
		var doc []byte
		if err := tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+q.SQL, q.Arguments...).Scan(&doc); err != nil {
			return 0, err
		}
		if err := json.Unmarshal(doc, &out); err != nil {
			return 0, err
		}
		read += out[0].Plan.rowsOf("outbox")
	}
	return read, nil
}
