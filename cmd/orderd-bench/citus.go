package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orderd/orderd/internal/bench"
	"github.com/orderd/orderd/migrations"
)

// clusterDatabase is a fresh database of the bench's on a Citus cluster,
// laid out by `orderd migrate citus`, with a small pool to it on every
// node for the bench's readings.
type clusterDatabase struct {
	url   string
	nodes []*bench.Node
	drop  func()
}

// newClusterDatabase makes the database on the cluster whose coordinator
// adminURL names (any database on it), on every node, with the nodes
// registered in it as the coordinator lists its workers, its tables in shards
// shards (0: orderd migrate citus's default). Its name begins as
// the Citus suite's do, so that the suite's sweep drops one a killed run
// left behind.
func newClusterDatabase(ctx context.Context, adminURL string, shards int) (*clusterDatabase, error) {
	cfg, err := pgx.ParseConfig(adminURL)
	if err != nil {
		return nil, fmt.Errorf("--citus-url: %w", err)
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		return nil, fmt.Errorf("--citus-url: %w", err)
	}
	admin, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to the coordinator: %w", err)
	}
	defer admin.Close(context.Background())
	type worker struct {
		host string
		port int
	}
	rows, err := admin.Query(ctx, `SELECT node_name, node_port FROM citus_get_active_worker_nodes() ORDER BY 1, 2`)
	if err != nil {
		return nil, fmt.Errorf("list the workers: %w", err)
	}
	workers, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (worker, error) {
		var w worker
		return w, r.Scan(&w.host, &w.port)
	})
	if err != nil {
		return nil, fmt.Errorf("list the workers: %w", err)
	}
	if len(workers) == 0 {
		return nil, fmt.Errorf("the coordinator at %s:%d has no workers", cfg.Host, cfg.Port)
	}
	name := fmt.Sprintf("orderd_citus_%d_bench", time.Now().Unix())
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := admin.Exec(ctx, `SET citus.enable_create_database_propagation = on`); err != nil {
		return nil, fmt.Errorf("propagate databases: %w", err)
	}
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+ident); err != nil {
		return nil, fmt.Errorf("create %s: %w", name, err)
	}
	db := &clusterDatabase{}
	db.drop = func() {
		for _, n := range db.nodes {
			n.Pool.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			defer conn.Close(context.Background())
			if _, err = conn.Exec(ctx, `SET citus.enable_create_database_propagation = on`); err == nil {
				_, err = conn.Exec(ctx, `DROP DATABASE IF EXISTS `+ident+` WITH (FORCE)`)
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "the bench's database %s is left on the cluster (the Citus suite's sweep drops it after two hours): %v\n", name, err)
		}
	}
	fail := func(err error) (*clusterDatabase, error) {
		db.drop()
		return nil, err
	}
	on := func(host string, port int) string {
		v := *u
		v.Host, v.Path = fmt.Sprintf("%s:%d", host, port), "/"+name
		return v.String()
	}
	coordURL := on(cfg.Host, int(cfg.Port))
	urls := []string{coordURL}
	for _, w := range workers {
		urls = append(urls, on(w.host, w.port))
	}
	for i, nodeURL := range urls {
		pool, err := pgxpool.New(ctx, nodeURL)
		if err != nil {
			return fail(fmt.Errorf("connect to %s: %w", nodeURL, err))
		}
		n := &bench.Node{Name: "coordinator", Pool: pool}
		if i > 0 {
			n.Name, n.Worker = fmt.Sprintf("worker %s:%d", workers[i-1].host, workers[i-1].port), true
		}
		db.nodes = append(db.nodes, n)
		if _, err := pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS citus`); err != nil {
			return fail(fmt.Errorf("citus on %s: %w", n.Name, err))
		}
	}
	register := []string{fmt.Sprintf(`SELECT citus_set_coordinator_host('%s', %d)`, cfg.Host, cfg.Port)}
	for _, w := range workers {
		register = append(register, fmt.Sprintf(`SELECT citus_add_node('%s', %d)`, w.host, w.port))
	}
	for _, s := range register {
		if _, err := db.nodes[0].Pool.Exec(ctx, s); err != nil {
			return fail(fmt.Errorf("%s: %w", s, err))
		}
	}
	if _, err := migrations.Distribute(ctx, coordURL, migrations.DistributeParams{Shards: shards}); err != nil {
		return fail(fmt.Errorf("migrate citus: %w", err))
	}
	db.url = coordURL
	return db, nil
}
