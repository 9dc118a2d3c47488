package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// baselinePool opens conns connections to the target database for a
// baseline, so it runs with the same connection count as the clients.
func baselinePool(ctx context.Context, src *pgxpool.Pool, conns int) (*pgxpool.Pool, error) {
	cfg := src.Config().Copy()
	cfg.MaxConns = int32(conns)
	cfg.MinConns = int32(conns)
	// Hundreds of connections open at once on a busy machine: be patient.
	cfg.ConnConfig.ConnectTimeout = 30 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("baseline pool: %w", err)
	}
	return pool, nil
}

// counterBaseline measures transactions per second of the plain SQL that an
// admission costs with no application around it: INSERT one event row and
// UPDATE one counter row of a merchant drawn by pick, from conns connections.
func counterBaseline(ctx context.Context, src *pgxpool.Pool, conns int, d time.Duration, merchants int, seed uint64) (float64, error) {
	if _, err := src.Exec(ctx, `
		DROP TABLE IF EXISTS bench_baseline_events, bench_baseline_counters;
		CREATE TABLE bench_baseline_events (id bigserial PRIMARY KEY, stream_id uuid NOT NULL, version int NOT NULL,
			type text NOT NULL, data jsonb NOT NULL, recorded_at timestamptz NOT NULL DEFAULT now(), UNIQUE (stream_id, version));
		CREATE TABLE bench_baseline_counters (merchant int PRIMARY KEY, active int NOT NULL DEFAULT 0);
	`); err != nil {
		return 0, fmt.Errorf("baseline tables: %w", err)
	}
	if _, err := src.Exec(ctx, `INSERT INTO bench_baseline_counters (merchant) SELECT generate_series(0, $1 - 1)`, merchants); err != nil {
		return 0, fmt.Errorf("baseline counters: %w", err)
	}
	defer src.Exec(context.Background(), `DROP TABLE IF EXISTS bench_baseline_events, bench_baseline_counters`) //nolint:errcheck // best effort
	pool, err := baselinePool(ctx, src, conns)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	var done atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for w := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for time.Now().Before(deadline) {
				tx, err := pool.Begin(ctx)
				if err != nil {
					errs <- err
					return
				}
				_, err = tx.Exec(ctx, `INSERT INTO bench_baseline_events (stream_id, version, type, data) VALUES ($1, 1, 'order.accepted', '{"n":1}')`, uuid.New())
				if err == nil {
					_, err = tx.Exec(ctx, `UPDATE bench_baseline_counters SET active = active + 1 WHERE merchant = $1`, rng.IntN(merchants))
				}
				if err == nil {
					err = tx.Commit(ctx)
				}
				if err != nil {
					_ = tx.Rollback(ctx)
					errs <- err
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, fmt.Errorf("baseline: %w", err)
	}
	return float64(done.Load()) / d.Seconds(), nil
}

// stockBaseline measures how fast a single stock row sells out under the
// plain "UPDATE ... SET stock = stock - 1 WHERE stock > 0" from conns
// connections: units sold per second until none is left.
func stockBaseline(ctx context.Context, src *pgxpool.Pool, conns, units, buyers int) (float64, time.Duration, error) {
	if _, err := src.Exec(ctx, `DROP TABLE IF EXISTS bench_baseline_stock;
		CREATE TABLE bench_baseline_stock (id int PRIMARY KEY, stock int NOT NULL CHECK (stock >= 0))`); err != nil {
		return 0, 0, fmt.Errorf("baseline stock table: %w", err)
	}
	defer src.Exec(context.Background(), `DROP TABLE IF EXISTS bench_baseline_stock`) //nolint:errcheck // best effort
	if _, err := src.Exec(ctx, `INSERT INTO bench_baseline_stock VALUES (1, $1)`, units); err != nil {
		return 0, 0, err
	}
	pool, err := baselinePool(ctx, src, conns)
	if err != nil {
		return 0, 0, err
	}
	defer pool.Close()
	var next, sold atomic.Int64
	var lastSale atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(buyers) {
				tag, err := pool.Exec(ctx, `UPDATE bench_baseline_stock SET stock = stock - 1 WHERE id = 1 AND stock > 0`)
				if err != nil {
					errs <- err
					return
				}
				if tag.RowsAffected() == 1 {
					sold.Add(1)
					lastSale.Store(int64(time.Since(start)))
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, 0, fmt.Errorf("stock baseline: %w", err)
	}
	sellOut := time.Duration(lastSale.Load())
	return float64(sold.Load()) / sellOut.Seconds(), sellOut, nil
}
