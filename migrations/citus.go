package migrations

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3"
)

// How each of orderd's tables lives on Citus. Every table is named here:
// Distribute refuses a database holding a table it does not know, since
// guessing wrong either splits a merchant's transaction across nodes or
// makes every write to a global table a two-phase commit on all of them.
var (
	// perMerchant tables are distributed by merchant_id (merchants by its
	// id), all co-located with merchants: a merchant's rows sit on one node,
	// so that a request that touches one merchant is one single-shard
	// transaction. Listed referenced before referencing, the order in which
	// Citus accepts the foreign keys between them.
	perMerchant = []string{
		"merchants", "products", "stock_buckets", "purchase_claims", "orders",
		"outbox", "webhook_attempts", "dead_letters", "drops", "drop_seeds", "drop_lines", "drop_entries",
		"pickup_counters", "pickup_slots", "events",
	}
	// global tables are small, keyed by something other than a merchant
	// and written rarely: a copy on every node.
	global = []string{"ws_tickets", "sign_in_codes"}
	// coordinatorOnly tables stay plain tables on the coordinator: River's
	// queries do not run on distributed tables, and the migration ledgers
	// are the coordinator's own. The tamper-evident logs are kept there
	// too, one per worker, each reading its worker's events against that
	// worker's snapshots (store.Logs).
	coordinatorOnly = []string{"goose_db_version", "river_job", "river_leader", "river_migration", "river_notification", "river_queue",
		"log_heads", "log_leaves", "log_hash_tiles", "checkpoints"}
)

// databaseSettings are set on the database (ALTER DATABASE … SET) for every
// session of orderd's on the cluster.
var databaseSettings = []string{
	// The log's append-only triggers and the merchants' bookkeeping
	// trigger run on the shards with the rows they guard; Citus refuses to
	// distribute a table with triggers unless told so.
	"citus.enable_unsafe_triggers = on",
	// A read of every shard (the relay's, the backstop's, the live feed's)
	// runs over one connection per worker, not up to 16 opened for it: a
	// session keeps max_cached_conns_per_worker (1) connections to each
	// worker after its transaction and closed the others, so every such
	// read forked backends on the workers (docs/scaling-out.md).
	"citus.max_adaptive_executor_pool_size = 1",
	// A worker's shards are held in memory: at the default page costs
	// the planner scanned the whole shard into a hash join for a batch's
	// statements keyed by its rows (a close's UPDATE … FROM unnest of
	// hundreds of orders) rather than look each row up by its key, and
	// such a scan grows with the shard. Set on the coordinator, Citus sets
	// it on every node's database.
	"random_page_cost = 1.1",
}

// ShardsPerWorker is how many shards of merchants (and so of every table
// co-located with it) Distribute lays out for each active worker unless told
// otherwise. A placement batch on a worker sends each of its tables one
// statement per shard its merchants fall in, by the shard's name, so a
// worker's share of the work costs about what one PostgreSQL's does only
// while it holds few shards (docs/scaling-out.md, "Shards per worker").
// Two and not one, so that a worker's merchants are two groups that can be
// moved or split apart; the cluster grows by splitting a shard onto the new
// worker (docs/scaling-out.md, "Growing the cluster").
const ShardsPerWorker = 2

// DistributeParams are Distribute's choices.
type DistributeParams struct {
	// Shards is the shard count of merchants and of every table co-located
	// with it; 0 is ShardsPerWorker for each active worker. It applies when
	// merchants is distributed, and a database laid out already keeps its
	// shards (split them to have more).
	Shards int
}

// Distribute applies the migrations and then lays the schema out on Citus:
// per-merchant tables distributed by merchant and co-located, global ones as
// reference tables, River's left on the coordinator. It returns what it did;
// on a database already laid out it does nothing and returns nothing.
func Distribute(ctx context.Context, url string, p DistributeParams) ([]string, error) {
	if p.Shards < 0 {
		return nil, fmt.Errorf("shards: %d is not a shard count", p.Shards)
	}
	if err := Up(ctx, url); err != nil {
		return nil, err
	}
	var done []string
	err := withLock(ctx, url, func(pool *pgxpool.Pool, _ *goose.Provider) error {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		defer conn.Release()
		workers, err := checkCitus(ctx, conn.Conn())
		if err != nil {
			return err
		}
		shards := p.Shards
		if shards == 0 {
			shards = ShardsPerWorker * workers
		}
		if err := checkClassified(ctx, conn.Conn()); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, `SET citus.enable_unsafe_triggers = on`); err != nil {
			return fmt.Errorf("allow triggers: %w", err)
		}
		dbName := conn.Conn().Config().Database
		for _, set := range databaseSettings {
			if _, err := conn.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{dbName}.Sanitize()+` SET `+set); err != nil {
				return fmt.Errorf("set %s: %w", set, err)
			}
		}
		laid, err := laidOut(ctx, conn.Conn())
		if err != nil {
			return err
		}
		if err := nodeTxIDs(ctx, conn.Conn()); err != nil {
			return err
		}
		for _, t := range perMerchant {
			if _, ok := laid[t]; ok {
				continue
			}
			// merchants sets the shard count; the others take its shards
			// with its co-location.
			sql, args, what := `SELECT create_distributed_table($1, 'merchant_id', colocate_with => 'merchants')`, []any{t}, "distributed "+t+" by merchant_id"
			if t == "merchants" {
				sql, args, what = `SELECT create_distributed_table($1, 'id', shard_count => $2)`, []any{t, shards}, fmt.Sprintf("distributed merchants by id in %d shards", shards)
			}
			if _, err := conn.Exec(ctx, sql, args...); err != nil {
				return fmt.Errorf("distribute %s: %w", t, err)
			}
			done = append(done, what)
		}
		for _, t := range global {
			if _, ok := laid[t]; ok {
				continue
			}
			if _, err := conn.Exec(ctx, `SELECT create_reference_table($1)`, t); err != nil {
				return fmt.Errorf("replicate %s: %w", t, err)
			}
			done = append(done, "replicated "+t+" to every node")
		}
		return nil
	})
	return done, err
}

// nodeTxIDs makes every event's tx_id the transaction id of the worker that
// holds it, and its global_position a number of that worker's sequence.
// orderd sends a placement to its merchant's worker, where the columns'
// defaults are evaluated by that worker, while a write sent through the
// coordinator would get the coordinator's (Citus evaluates defaults there).
// The log is read node by node, each worker's rows against that worker's
// snapshots (store.ChangedStreams), so every row must carry its worker's
// transaction id; and a merchant's events are ordered by position (the
// audit views), which two sequences, the coordinator's and the worker's
// (Citus starts each worker's copy of a sequence in a range of its own),
// would interleave out of order. The trigger runs on the shards with the
// rows.
func nodeTxIDs(ctx context.Context, conn *pgx.Conn) error {
	if _, err := conn.Exec(ctx, `CREATE OR REPLACE FUNCTION events_node_tx_id() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.tx_id := pg_current_xact_id();
	NEW.global_position := nextval('events_global_position_seq');
	RETURN NEW;
END $$`); err != nil {
		return fmt.Errorf("the log's node transaction ids: %w", err)
	}
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'events'::regclass AND tgname = 'events_node_tx_id')`).Scan(&exists); err != nil {
		return fmt.Errorf("the log's node transaction ids: %w", err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, `CREATE TRIGGER events_node_tx_id BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION events_node_tx_id()`); err != nil {
		return fmt.Errorf("the log's node transaction ids: %w", err)
	}
	return nil
}

// checkCitus makes sure there is a cluster to distribute to, and returns
// its active workers' count.
func checkCitus(ctx context.Context, conn *pgx.Conn) (int, error) {
	var installed bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`).Scan(&installed); err != nil {
		return 0, fmt.Errorf("look for citus: %w", err)
	}
	if !installed {
		return 0, errors.New("the citus extension is not installed in this database: CREATE EXTENSION citus and add the workers first")
	}
	var workers int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM citus_get_active_worker_nodes()`).Scan(&workers); err != nil {
		return 0, fmt.Errorf("list citus workers: %w", err)
	}
	if workers == 0 {
		return 0, errors.New("citus has no active worker: add them with citus_add_node first")
	}
	return workers, nil
}

// checkClassified refuses a table that has no place in the lists above.
func checkClassified(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, `SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p') ORDER BY relname`)
	if err != nil {
		return fmt.Errorf("list tables: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list tables: %w", err)
	}
	var unknown []string
	for _, n := range names {
		if !slices.Contains(perMerchant, n) && !slices.Contains(global, n) && !slices.Contains(coordinatorOnly, n) {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("tables with no place on citus: %s (name them in migrations/citus.go)", strings.Join(unknown, ", "))
	}
	return nil
}

// laidOut returns the tables Citus already manages, with their partition
// method ('h' distributed, 'n' reference).
func laidOut(ctx context.Context, conn *pgx.Conn) (map[string]string, error) {
	rows, err := conn.Query(ctx, `SELECT logicalrelid::regclass::text, partmethod::text FROM pg_dist_partition`)
	if err != nil {
		return nil, fmt.Errorf("list citus tables: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, method string
		if err := rows.Scan(&name, &method); err != nil {
			return nil, fmt.Errorf("list citus tables: %w", err)
		}
		out[name] = method
	}
	return out, rows.Err()
}
