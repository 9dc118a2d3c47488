package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SweepConns are the connection counts every SQL baseline runs at: a
// baseline run only at the scenario's client count may be measured in a
// lock convoy of its own making, so the best of them is the baseline.
var SweepConns = []int{1, 2, 4, 8, 16, 32, 64}

// defaultBaselineStep is how long each connection count of a sweep runs.
const defaultBaselineStep = 2 * time.Second

// Baseline is one plain-SQL baseline measured at every connection count of
// SweepConns; the best of them is what a scenario is compared with.
type Baseline struct {
	// Name is "plain" for pgbench-like tables or "orderd_tables" for the
	// same statements on copies of orderd's own tables.
	Name       string       `json:"name"`
	Statements string       `json:"statements"`
	Sweep      []SweepPoint `json:"sweep"`
	BestConns  int          `json:"best_conns"`
	BestPerS   float64      `json:"best_per_s"`
}

// SweepPoint is one connection count of a sweep.
type SweepPoint struct {
	Conns   int     `json:"conns"`
	Done    int64   `json:"done"`
	Seconds float64 `json:"seconds"`
	PerS    float64 `json:"per_s"`
	// CPU is microseconds of CPU per transaction, by party.
	CPU map[string]any `json:"cpu_us,omitempty"`
}

// baselineStep is the run time of one point of a sweep.
func (o Options) baselineStep() time.Duration {
	return orDefault(o.BaselineStep, defaultBaselineStep)
}

// setBaselines records the sweeps on res and compares res.PerS with the
// best point of the first of them.
func setBaselines(res *Result, sweeps ...Baseline) {
	res.Baselines = append(res.Baselines, sweeps...)
	if len(sweeps) == 0 {
		return
	}
	res.BaselinePerS, res.BaselineConns = sweeps[0].BestPerS, sweeps[0].BestConns
	res.Ratio = ratio(res.PerS, res.BaselinePerS)
}

// runSweep measures step at every connection count; step reports what it
// completed in how long.
func runSweep(ctx context.Context, t *Target, o Options, name, statements string,
	step func(ctx context.Context, conns int) (int64, time.Duration, error)) (Baseline, error) {
	b := Baseline{Name: name, Statements: statements}
	for _, conns := range SweepConns {
		cpu := t.readCPU()
		done, elapsed, err := step(ctx, conns)
		if err != nil {
			return b, fmt.Errorf("baseline %s at %d connections: %w", name, conns, err)
		}
		p := SweepPoint{Conns: conns, Done: done, Seconds: elapsed.Seconds(), CPU: map[string]any{}}
		if elapsed > 0 {
			p.PerS = round1(float64(done) / elapsed.Seconds())
		}
		t.perUnit(p.CPU, "tx", cpu, done)
		b.Sweep = append(b.Sweep, p)
		if p.PerS > b.BestPerS {
			b.BestPerS, b.BestConns = p.PerS, conns
		}
		if o.Progress {
			fmt.Fprintf(o.Out, "  baseline %s: %d connections %.0f/s\n", name, conns, p.PerS)
		}
	}
	return b, nil
}

func round3(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }

// baselinePool opens conns connections to the target database and holds
// them all once before it is used, so a point's time is not spent
// connecting.
func baselinePool(ctx context.Context, src *pgxpool.Pool, conns int) (*pgxpool.Pool, error) {
	cfg := src.Config().Copy()
	cfg.MaxConns = int32(conns)
	cfg.MinConns = 0
	cfg.ConnConfig.ConnectTimeout = 30 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("baseline pool: %w", err)
	}
	// Connections open in parallel, as many clients would.
	held := make([]*pgxpool.Conn, conns)
	errs := make([]error, conns)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			held[i], errs[i] = pool.Acquire(ctx)
		}()
	}
	wg.Wait()
	for _, c := range held {
		if c != nil {
			c.Release()
		}
	}
	if err := errors.Join(errs...); err != nil {
		pool.Close()
		return nil, fmt.Errorf("baseline pool: %w", err)
	}
	return pool, nil
}

// timed runs work from conns connections until the deadline or until work
// says it is finished, and counts what it did.
func timed(ctx context.Context, src *pgxpool.Pool, conns int, d time.Duration,
	work func(ctx context.Context, pool *pgxpool.Pool, rng *rand.Rand) (done, finished bool, err error)) (int64, time.Duration, error) {
	pool, err := baselinePool(ctx, src, conns)
	if err != nil {
		return 0, 0, err
	}
	defer pool.Close()
	var count atomic.Int64
	var finished atomic.Bool
	var lastDone atomic.Int64
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for w := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(conns), uint64(w)))
			for !finished.Load() && time.Now().Before(deadline) {
				done, fin, err := work(ctx, pool, rng)
				if err != nil {
					errs <- err
					return
				}
				if done {
					count.Add(1)
					storeMax(&lastDone, int64(time.Since(start)))
				}
				if fin {
					finished.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, 0, err
	}
	elapsed := time.Since(start)
	if finished.Load() {
		// Timed to the last unit done, as a sell-out is.
		elapsed = time.Duration(lastDone.Load())
	}
	return count.Load(), elapsed, nil
}

// copyTable creates name with table's columns, defaults, constraints,
// indexes and triggers, so a baseline on it pays what orderd's table costs.
func copyTable(ctx context.Context, pool *pgxpool.Pool, table, name string) error {
	if _, err := pool.Exec(ctx, fmt.Sprintf(`DROP TABLE IF EXISTS %[2]s; CREATE TABLE %[2]s (LIKE %[1]s INCLUDING ALL)`, table, name)); err != nil {
		return fmt.Errorf("copy %s: %w", table, err)
	}
	rows, err := pool.Query(ctx, `SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = $1::regclass AND NOT tgisinternal`, table)
	if err != nil {
		return fmt.Errorf("triggers of %s: %w", table, err)
	}
	defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("triggers of %s: %w", table, err)
	}
	for _, def := range defs {
		def = strings.Replace(def, " ON public."+table+" ", " ON "+name+" ", 1)
		def = strings.Replace(def, " ON "+table+" ", " ON "+name+" ", 1)
		if _, err := pool.Exec(ctx, def); err != nil {
			return fmt.Errorf("copy trigger of %s: %w", table, err)
		}
	}
	return nil
}

const (
	plainOrderStatements = "INSERT one history row (no index) + UPDATE one counter row by primary key, pipelined in one transaction (one round trip)"
	ownOrderStatements   = "INSERT one event (events' columns, indexes and triggers, its chain link computed in the statement as orderd's) + UPDATE one merchant row's active count (merchants' columns, indexes and triggers), pipelined in one transaction"
)

// eventData is an order.placed event's data of typical size.
const eventData = `{"customer_id":"bench-customer-0001","items":[{"product_id":"5f0c6e7e-58c1-4a54-9d4c-2d5cb1c0a3f1","quantity":2,"price_cents":300},{"product_id":"0b6c7a52-0f8e-4e7c-b8c2-6f4f0e3d2b11","quantity":1,"price_cents":301}],"total_cents":901,"payment_ref":"pay"}`

// orderBaselines measures what admitting one order costs in plain SQL with no
// application around it (record it, count it on its merchant's row) for a
// merchant drawn from merchants, swept over SweepConns: on pgbench-like
// tables, and the same statements on copies of orderd's own tables.
func orderBaselines(ctx context.Context, t *Target, o Options, merchants int) ([]Baseline, error) {
	defer t.Pool.Exec(context.Background(), `DROP TABLE IF EXISTS bench_plain_history, bench_plain_merchants, bench_own_events, bench_own_merchants`) //nolint:errcheck // best effort
	plain, err := runSweep(ctx, t, o, "plain", plainOrderStatements, func(ctx context.Context, conns int) (int64, time.Duration, error) {
		if _, err := t.Pool.Exec(ctx, `
			DROP TABLE IF EXISTS bench_plain_history, bench_plain_merchants;
			CREATE TABLE bench_plain_merchants (merchant int PRIMARY KEY, active int NOT NULL DEFAULT 0, filler char(84)) WITH (fillfactor = 100);
			CREATE TABLE bench_plain_history (merchant int NOT NULL, order_id uuid NOT NULL, quantity int NOT NULL,
				recorded_at timestamptz NOT NULL DEFAULT now(), filler char(22))`); err != nil {
			return 0, 0, fmt.Errorf("tables: %w", err)
		}
		if _, err := t.Pool.Exec(ctx, `INSERT INTO bench_plain_merchants (merchant) SELECT generate_series(0, $1 - 1)`, merchants); err != nil {
			return 0, 0, err
		}
		return timed(ctx, t.Pool, conns, o.baselineStep(), func(ctx context.Context, pool *pgxpool.Pool, rng *rand.Rand) (bool, bool, error) {
			m := rng.IntN(merchants)
			var b pgx.Batch
			b.Queue(`INSERT INTO bench_plain_history (merchant, order_id, quantity) VALUES ($1, $2, 1)`, m, uuid.New())
			b.Queue(`UPDATE bench_plain_merchants SET active = active + 1 WHERE merchant = $1`, m)
			return true, false, pool.SendBatch(ctx, &b).Close()
		})
	})
	if err != nil {
		return nil, err
	}
	own, err := runSweep(ctx, t, o, "orderd_tables", ownOrderStatements, func(ctx context.Context, conns int) (int64, time.Duration, error) {
		if err := copyTable(ctx, t.Pool, "events", "bench_own_events"); err != nil {
			return 0, 0, err
		}
		if err := copyTable(ctx, t.Pool, "merchants", "bench_own_merchants"); err != nil {
			return 0, 0, err
		}
		rows, err := t.Pool.Query(ctx, `
			INSERT INTO bench_own_merchants (id, name, capacity, prep_seconds, max_queue_wait_seconds, payment_timeout_seconds, webhook_secret, created_at, version)
			SELECT gen_random_uuid(), 'bench-' || g, 1000000, 300, 3600, 600, 'secret', now(), 1 FROM generate_series(1, $1) g
			RETURNING id`, merchants)
		if err != nil {
			return 0, 0, err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return 0, 0, err
		}
		return timed(ctx, t.Pool, conns, o.baselineStep(), func(ctx context.Context, pool *pgxpool.Pool, rng *rand.Rand) (bool, bool, error) {
			m := ids[rng.IntN(len(ids))]
			var b pgx.Batch
			// Chained in the statement, as orderd's insert chains a stream's
			// first event, so that the events' trigger does not run.
			b.Queue(`INSERT INTO bench_own_events (stream_id, merchant_id, stream_type, version, type, data, recorded_at, hash)
				SELECT $1, $3, 'order', 1, 'order.placed', $2::jsonb, n.t,
					sha256('\x0000000000000000000000000000000000000000000000000000000000000000'::bytea ||
						convert_to($1::uuid::text || E'\n1\norder.placed\n' || $2::jsonb::text || E'\n{}\n' ||
							(extract(epoch from n.t) * 1000000)::bigint::text, 'UTF8'))
				FROM (SELECT now() AS t) n`, uuid.New(), eventData, m)
			b.Queue(`UPDATE bench_own_merchants SET active = active + 1, updated_at = now() WHERE id = $1`, m)
			return true, false, pool.SendBatch(ctx, &b).Close()
		})
	})
	if err != nil {
		return nil, err
	}
	return []Baseline{plain, own}, nil
}

// sellOutTimeout bounds one sell-out of a stock baseline.
const sellOutTimeout = 2 * time.Minute

// stockBaselines measures how fast a single stock row sells units out under
// the plain "UPDATE ... SET stock = stock - 1 WHERE stock > 0", one
// statement per buyer, swept over SweepConns: units sold per second until
// none is left, on a pgbench-like table and on a copy of orderd's
// stock_buckets.
func stockBaselines(ctx context.Context, t *Target, o Options, units int) ([]Baseline, error) {
	defer t.Pool.Exec(context.Background(), `DROP TABLE IF EXISTS bench_plain_stock, bench_own_stock`) //nolint:errcheck // best effort
	sellOut := func(ctx context.Context, conns int, update string, args ...any) (int64, time.Duration, error) {
		return timed(ctx, t.Pool, conns, sellOutTimeout, func(ctx context.Context, pool *pgxpool.Pool, _ *rand.Rand) (bool, bool, error) {
			tag, err := pool.Exec(ctx, update, args...)
			if err != nil {
				return false, false, err
			}
			// A buyer that finds none left ends the sale.
			return tag.RowsAffected() == 1, tag.RowsAffected() == 0, nil
		})
	}
	plain, err := runSweep(ctx, t, o, "plain", "UPDATE one stock row SET stock = stock - 1 WHERE stock > 0, one statement per buyer, until sold out",
		func(ctx context.Context, conns int) (int64, time.Duration, error) {
			if _, err := t.Pool.Exec(ctx, `DROP TABLE IF EXISTS bench_plain_stock;
				CREATE TABLE bench_plain_stock (id int PRIMARY KEY, stock int NOT NULL CHECK (stock >= 0), filler char(84))`); err != nil {
				return 0, 0, err
			}
			if _, err := t.Pool.Exec(ctx, `INSERT INTO bench_plain_stock (id, stock) VALUES (1, $1)`, units); err != nil {
				return 0, 0, err
			}
			return sellOut(ctx, conns, `UPDATE bench_plain_stock SET stock = stock - 1 WHERE id = 1 AND stock > 0`)
		})
	if err != nil {
		return nil, err
	}
	own, err := runSweep(ctx, t, o, "orderd_tables", "the same UPDATE on one row of a copy of stock_buckets (remaining = remaining - 1 WHERE remaining > 0)",
		func(ctx context.Context, conns int) (int64, time.Duration, error) {
			if err := copyTable(ctx, t.Pool, "stock_buckets", "bench_own_stock"); err != nil {
				return 0, 0, err
			}
			product, merchant := uuid.New(), uuid.New()
			if _, err := t.Pool.Exec(ctx, `INSERT INTO bench_own_stock (product_id, bucket, merchant_id, remaining) VALUES ($1, 0, $2, $3)`, product, merchant, units); err != nil {
				return 0, 0, err
			}
			return sellOut(ctx, conns, `UPDATE bench_own_stock SET remaining = remaining - 1
				WHERE merchant_id = $2 AND product_id = $1 AND bucket = 0 AND remaining > 0`, product, merchant)
		})
	if err != nil {
		return nil, err
	}
	for _, b := range []Baseline{plain, own} {
		for _, p := range b.Sweep {
			if p.Done != int64(units) {
				return nil, errors.New("stock baseline: the sale ended before every unit sold")
			}
		}
	}
	return []Baseline{plain, own}, nil
}
