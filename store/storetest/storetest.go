// Package storetest gives each test a database of its own, cloned from a
// template migrated once, on a real PostgreSQL: TEST_DATABASE_URL if set,
// else the server on localhost:5432, else a throwaway cluster it starts.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orderd/orderd/internal/pglocal"
	"github.com/orderd/orderd/migrations"
	"github.com/orderd/orderd/store/pgkit"
)

var (
	once     sync.Once
	server   *pglocal.Instance
	template string
	setupErr error
)

// templateLockKey serializes template creation across test binaries, which
// go test runs in parallel.
const templateLockKey = 0x6f72646572640002

func prepare() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("orderd-test-pg-%d", os.Getuid()))
	unlock, err := fileLock(dir + ".lock")
	if err != nil {
		setupErr = err
		return
	}
	server, setupErr = pglocal.Find(ctx, pglocal.Options{EnvVar: "TEST_DATABASE_URL", DataDir: dir, Fast: true})
	unlock()
	if setupErr != nil {
		return
	}
	// The cluster is shared by every test binary and left running for the
	// next run; it lives in a temporary directory.
	server.Started = false
	template = "orderd_tpl_" + migrations.Fingerprint()
	setupErr = ensureTemplate(ctx, server.URL, template)
}

func fileLock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

func ensureTemplate(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(templateLockKey)); err != nil {
		return fmt.Errorf("template lock: %w", err)
	}
	defer conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, int64(templateLockKey)) //nolint:errcheck // released with the session
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("look up template: %w", err)
	}
	if exists {
		return nil
	}
	building := name + "_building"
	if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{building}.Sanitize()+` WITH (FORCE)`); err != nil {
		return fmt.Errorf("drop stale template: %w", err)
	}
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{building}.Sanitize()); err != nil {
		return fmt.Errorf("create template: %w", err)
	}
	if err := migrations.Up(ctx, server.DatabaseURL(building)); err != nil {
		return fmt.Errorf("migrate template: %w", err)
	}
	if _, err := conn.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{building}.Sanitize()+` WITH IS_TEMPLATE true`); err != nil {
		return fmt.Errorf("mark template: %w", err)
	}
	// The rename comes last: a template under its final name is complete,
	// even if a run was killed while building one.
	if _, err := conn.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{building}.Sanitize()+` RENAME TO `+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("rename template: %w", err)
	}
	return nil
}

func mustServer(t testing.TB) {
	t.Helper()
	once.Do(prepare)
	if setupErr != nil {
		t.Fatalf("test database: %v", setupErr)
	}
}

// AdminURL is the test server's admin URL, for tests that manage databases
// or roles themselves.
func AdminURL(t testing.TB) string {
	t.Helper()
	mustServer(t)
	return server.URL
}

// URL returns the URL of a new, migrated database for this test only; it is
// dropped when the test ends.
func URL(t testing.TB) string {
	t.Helper()
	mustServer(t)
	ctx := context.Background()
	name := "orderd_test_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	conn, err := pgx.Connect(ctx, server.URL)
	if err != nil {
		t.Fatalf("test database: connect: %v", err)
	}
	defer conn.Close(ctx)
	// Creating from a template fails while anyone else is connected to it;
	// only concurrent clones are, briefly.
	for attempt := 0; ; attempt++ {
		_, err = conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()+` TEMPLATE `+pgx.Identifier{template}.Sanitize())
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" || attempt > 200 {
			break
		}
		time.Sleep(time.Duration(10+attempt*5) * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("test database: create %s: %v", name, err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), server.URL)
		if err != nil {
			t.Logf("drop test database %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
			t.Logf("drop test database %s: %v", name, err)
		}
	})
	return server.DatabaseURL(name)
}

// Pool returns a pool on a new test database, closed when the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(URL(t))
	if err != nil {
		t.Fatalf("test database: %v", err)
	}
	cfg.MaxConns = 20
	cfg.AfterConnect = pgkit.RegisterTypes
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("test database: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}
