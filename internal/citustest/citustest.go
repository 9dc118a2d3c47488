// Package citustest gives tests a database of their own on a real Citus
// cluster, laid out by `orderd migrate citus`. CITUS_URL names the
// coordinator (any database on it); the workers are the ones registered
// there. Only the tests built with the citus tag use it.
package citustest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orderd/orderd/migrations"
)

// Bare returns the URL of a new database on the cluster with the citus
// extension and the workers, and nothing of orderd's yet; it is dropped when
// the test ends.
func Bare(t testing.TB) string {
	t.Helper()
	base := os.Getenv("CITUS_URL")
	if base == "" {
		t.Fatal("CITUS_URL must name a Citus coordinator for the citus tests")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := pgx.ParseConfig(base)
	if err != nil {
		t.Fatalf("CITUS_URL: %v", err)
	}
	coord, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect to the coordinator: %v", err)
	}
	defer coord.Close(context.Background())
	rows, err := coord.Query(ctx, `SELECT node_name, node_port FROM citus_get_active_worker_nodes() ORDER BY 1, 2`)
	if err != nil {
		t.Fatalf("list workers: %v", err)
	}
	type node struct {
		host string
		port int
	}
	workers, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (node, error) {
		var n node
		return n, r.Scan(&n.host, &n.port)
	})
	if err != nil || len(workers) == 0 {
		t.Fatalf("the coordinator has no workers (%v)", err)
	}
	name := "orderd_citus_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	ident := pgx.Identifier{name}.Sanitize()
	// Citus creates and drops the database on every node.
	if _, err := coord.Exec(ctx, `SET citus.enable_create_database_propagation = on`); err != nil {
		t.Fatalf("propagate databases: %v", err)
	}
	if _, err := coord.Exec(ctx, `CREATE DATABASE `+ident); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	t.Cleanup(func() {
		conn, err := pgx.ConnectConfig(context.Background(), cfg)
		if err != nil {
			t.Logf("drop %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), `SET citus.enable_create_database_propagation = on`); err != nil {
			t.Logf("drop %s: %v", name, err)
			return
		}
		if _, err := conn.Exec(context.Background(), `DROP DATABASE IF EXISTS `+ident+` WITH (FORCE)`); err != nil {
			t.Logf("drop %s: %v", name, err)
		}
	})
	for _, w := range workers {
		wc := cfg.Copy()
		wc.Host, wc.Port, wc.Database = w.host, uint16(w.port), name
		exec(ctx, t, wc, `CREATE EXTENSION IF NOT EXISTS citus`)
	}
	db := cfg.Copy()
	db.Database = name
	exec(ctx, t, db, `CREATE EXTENSION IF NOT EXISTS citus`)
	stmts := []string{fmt.Sprintf(`SELECT citus_set_coordinator_host('%s', %d)`, cfg.Host, cfg.Port)}
	for _, w := range workers {
		stmts = append(stmts, fmt.Sprintf(`SELECT citus_add_node('%s', %d)`, w.host, w.port))
	}
	exec(ctx, t, db, stmts...)
	return urlOf(t, base, name)
}

// URL returns a new database on the cluster, migrated and distributed.
func URL(t testing.TB) string {
	t.Helper()
	dbURL := Bare(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := migrations.Distribute(ctx, dbURL); err != nil {
		t.Fatalf("migrate citus: %v", err)
	}
	return dbURL
}

func exec(ctx context.Context, t testing.TB, cfg *pgx.ConnConfig, stmts ...string) {
	t.Helper()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect to %s:%d: %v", cfg.Host, cfg.Port, err)
	}
	defer conn.Close(context.Background())
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s on %s:%d: %v", s, cfg.Host, cfg.Port, err)
		}
	}
}

// urlOf is base, a URL, with its database replaced by name.
func urlOf(t testing.TB, base, name string) string {
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" {
		t.Fatalf("CITUS_URL must be a postgres:// URL")
	}
	u.Path = "/" + name
	return u.String()
}
