// Package citustest gives tests a database of their own on a real Citus
// cluster, laid out by `orderd migrate citus`. CITUS_URL names the
// coordinator (any database on it); the workers are the ones registered
// there. Only the tests built with the citus tag use it.
package citustest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/orderd/orderd/migrations"
)

// Bare returns the URL of a new database on the cluster with the citus
// extension and the workers, and nothing of orderd's yet; it is dropped when
// the test ends.
func Bare(t testing.TB) string {
	t.Helper()
	return bare(t, false)
}

// Growing returns a new database laid out like URL's on every worker of
// the cluster but the last, and that worker ("host:port"), which has the
// database and the extension but is not one of its nodes: the test grows
// the cluster by adding it (citus_add_node), as an operator adds a new
// machine. The cluster needs two workers at least.
func Growing(t testing.TB) (string, string) {
	t.Helper()
	dbURL := distribute(t, bare(t, true))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _, workers := cluster(ctx, t)
	spare := workers[len(workers)-1]
	return dbURL, net.JoinHostPort(spare.host, strconv.Itoa(spare.port))
}

// bare is Bare, with the last worker left out of the database's nodes when
// spare is set.
func bare(t testing.TB, spare bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base, cfg, workers := cluster(ctx, t)
	coord, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect to the coordinator: %v", err)
	}
	defer coord.Close(context.Background())
	sweepOnce.Do(func() { sweep(ctx, t, cfg, workers) })
	name := fmt.Sprintf("%s%d_%s", prefix, time.Now().Unix(), strings.ReplaceAll(uuid.NewString(), "-", "")[:12])
	// Citus creates the database on every node.
	if _, err := coord.Exec(ctx, `SET citus.enable_create_database_propagation = on`); err != nil {
		t.Fatalf("propagate databases: %v", err)
	}
	if _, err := coord.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := drop(ctx, cfg, workers, name); err != nil {
			t.Errorf("the test's database is left behind: %v", err)
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
	members := workers
	if spare {
		if len(workers) < 2 {
			t.Fatalf("growing the cluster needs two workers at least, and the coordinator has %d", len(workers))
		}
		members = workers[:len(workers)-1]
	}
	for _, w := range members {
		stmts = append(stmts, fmt.Sprintf(`SELECT citus_add_node('%s', %d)`, w.host, w.port))
	}
	exec(ctx, t, db, stmts...)
	return urlOf(t, base, name)
}

// URL returns a new database on the cluster, migrated and distributed.
func URL(t testing.TB) string {
	t.Helper()
	return distribute(t, Bare(t))
}

// distribute lays orderd's schema out on the database dbURL names
// (`orderd migrate citus`) and returns dbURL.
func distribute(t testing.TB, dbURL string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := migrations.Distribute(ctx, dbURL, migrations.DistributeParams{}); err != nil {
		t.Fatalf("migrate citus: %v", err)
	}
	return dbURL
}

// cluster is CITUS_URL, its settings and the coordinator's workers.
func cluster(ctx context.Context, t testing.TB) (string, *pgx.ConnConfig, []node) {
	t.Helper()
	base := os.Getenv("CITUS_URL")
	if base == "" {
		t.Fatal("CITUS_URL must name a Citus coordinator for the citus tests")
	}
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
	workers, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (node, error) {
		var n node
		return n, r.Scan(&n.host, &n.port)
	})
	if err != nil || len(workers) == 0 {
		t.Fatalf("the coordinator has no workers (%v)", err)
	}
	return base, cfg, workers
}

// node is a worker of the cluster.
type node struct {
	host string
	port int
}

// prefix begins the name of every database the tests make, followed by
// the Unix time of its creation.
const prefix = "orderd_citus_"

// staleAfter is the age past which a test database is left over from a
// run that could not drop it (killed, or timed out, which runs no
// cleanup): longer than the longest run of the suite.
const staleAfter = 2 * time.Hour

// sweepOnce sweeps once per test binary.
var sweepOnce sync.Once

// sweep drops the test databases on the cluster that are stale, and those
// named before names carried their time.
func sweep(ctx context.Context, t testing.TB, coord *pgx.ConnConfig, workers []node) {
	t.Helper()
	stale := map[string]bool{}
	for _, n := range nodes(coord, workers) {
		conn, err := pgx.ConnectConfig(ctx, n)
		if err != nil {
			t.Fatalf("connect to %s:%d: %v", n.Host, n.Port, err)
		}
		rows, err := conn.Query(ctx, `SELECT datname FROM pg_database WHERE datname LIKE $1`, prefix+"%")
		var names []string
		if err == nil {
			names, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		conn.Close(ctx)
		if err != nil {
			t.Fatalf("list test databases on %s:%d: %v", n.Host, n.Port, err)
		}
		for _, name := range names {
			created, _, _ := strings.Cut(strings.TrimPrefix(name, prefix), "_")
			at, err := strconv.ParseInt(created, 10, 64)
			if err != nil || time.Since(time.Unix(at, 0)) > staleAfter {
				stale[name] = true
			}
		}
	}
	for name := range stale {
		if err := drop(ctx, coord, workers, name); err != nil {
			t.Fatalf("drop a stale test database: %v", err)
		}
	}
}

// drop drops the database name on every node. First the transactions it
// left prepared on any are rolled back (a DROP DATABASE fails while there
// are, and the coordinator that would resolve them is gone with it), and
// every node stops taking connections to it and ends the ones it has,
// waiting for them: Citus's maintenance daemons connect to each other's
// copy of the database, and one connecting while the DROP waited for the
// others to end, or ending later than the 5 s it waits, made it fail.
// Then it is dropped on the coordinator, which Citus propagates to the
// workers, and on each worker in case it was not (a database made there
// alone, or a propagation cut short).
func drop(ctx context.Context, coord *pgx.ConnConfig, workers []node, name string) error {
	ident := pgx.Identifier{name}.Sanitize()
	all := nodes(coord, workers)
	for _, n := range all {
		if err := rollbackPrepared(ctx, n, name); err != nil {
			return fmt.Errorf("%s on %s:%d: %w", name, n.Host, n.Port, err)
		}
		if err := onNode(ctx, n, func(conn *pgx.Conn) error {
			var exists bool
			err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, name).Scan(&exists)
			if err != nil || !exists {
				return err
			}
			_, err = conn.Exec(ctx, `SET citus.enable_ddl_propagation = off`)
			if err == nil {
				_, err = conn.Exec(ctx, `ALTER DATABASE `+ident+` ALLOW_CONNECTIONS false`)
			}
			if err == nil {
				_, err = conn.Exec(ctx, `SELECT pg_terminate_backend(pid, 30000) FROM pg_stat_activity WHERE datname = $1`, name)
			}
			return err
		}); err != nil {
			return fmt.Errorf("close %s on %s:%d: %w", name, n.Host, n.Port, err)
		}
	}
	for i, n := range all {
		for {
			err := onNode(ctx, n, func(conn *pgx.Conn) error {
				if i == 0 {
					if _, err := conn.Exec(ctx, `SET citus.enable_create_database_propagation = on`); err != nil {
						return err
					}
				}
				_, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+ident+` WITH (FORCE)`)
				return err
			})
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || ctx.Err() != nil {
				if err != nil {
					return fmt.Errorf("drop %s on %s:%d: %w", name, n.Host, n.Port, err)
				}
				break
			}
			switch {
			case pgErr.Code == pgerrcode.ObjectInUse:
				// Something still ends; the next try finds it gone.
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			case pgErr.Code == pgerrcode.InvalidCatalogName && i == 0:
				// A try cut short dropped it on some workers, and Citus
				// refuses to propagate the DROP to a worker without it:
				// those get an empty one again.
				if err := recreate(ctx, coord, workers, name); err != nil {
					return err
				}
			default:
				return fmt.Errorf("drop %s on %s:%d: %w", name, n.Host, n.Port, err)
			}
		}
	}
	return nil
}

// recreate makes the database name, empty, on the workers without it.
func recreate(ctx context.Context, coord *pgx.ConnConfig, workers []node, name string) error {
	for _, n := range nodes(coord, workers)[1:] {
		if err := onNode(ctx, n, func(conn *pgx.Conn) error {
			var exists bool
			err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, name).Scan(&exists)
			if err != nil || exists {
				return err
			}
			_, err = conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()+` ALLOW_CONNECTIONS false`)
			return err
		}); err != nil {
			return fmt.Errorf("make %s again on %s:%d: %w", name, n.Host, n.Port, err)
		}
	}
	return nil
}

// onNode runs f on a connection of its own to n.
func onNode(ctx context.Context, n *pgx.ConnConfig, f func(*pgx.Conn) error) error {
	conn, err := pgx.ConnectConfig(ctx, n)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return f(conn)
}

// rollbackPrepared rolls back the transactions prepared in the database
// name on node n; a prepared transaction is ended only from its own
// database, which a drop cut short may have closed to connections.
func rollbackPrepared(ctx context.Context, n *pgx.ConnConfig, name string) error {
	var gids []string
	if err := onNode(ctx, n, func(conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, `SELECT gid FROM pg_prepared_xacts WHERE database = $1`, name)
		if err == nil {
			gids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		if err != nil || len(gids) == 0 {
			return err
		}
		_, err = conn.Exec(ctx, `SET citus.enable_ddl_propagation = off`)
		if err == nil {
			_, err = conn.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{name}.Sanitize()+` ALLOW_CONNECTIONS true`)
		}
		return err
	}); err != nil || len(gids) == 0 {
		return err
	}
	db := n.Copy()
	db.Database = name
	return onNode(ctx, db, func(conn *pgx.Conn) error {
		for _, gid := range gids {
			if _, err := conn.Exec(ctx, `ROLLBACK PREPARED `+quote(gid)); err != nil {
				return fmt.Errorf("roll back %s: %w", gid, err)
			}
		}
		return nil
	})
}

// quote is s as an SQL string literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// nodes is the coordinator's connection settings followed by each
// worker's, all in the coordinator's database.
func nodes(coord *pgx.ConnConfig, workers []node) []*pgx.ConnConfig {
	out := []*pgx.ConnConfig{coord}
	for _, w := range workers {
		c := coord.Copy()
		c.Host, c.Port = w.host, uint16(w.port)
		out = append(out, c)
	}
	return out
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
