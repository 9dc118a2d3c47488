// Package migrations holds orderd's schema as goose SQL files embedded in the
// binary, and applies them together with River's own migrations.
package migrations

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sort"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

//go:embed *.sql views/*.sql functions/*.sql
var files embed.FS

// FS is the embedded migration files, as goose reads them: includes
// expanded (include.go).
var FS fs.FS = expanded{files}

// lockKey serializes migrations across processes that start at once.
const lockKey = 0x6f72646572640001

// Fingerprint identifies the embedded migrations' and views' contents, so
// that a test template built from others is never reused and a database
// whose views are older is given these.
func Fingerprint() string {
	h := sha256.New()
	names, _ := fs.Glob(files, "*.sql")
	views, _ := viewFiles()
	names = append(names, views...)
	sort.Strings(names)
	for _, n := range names {
		b, _ := fs.ReadFile(FS, n)
		h.Write([]byte(n))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// open connects twice over: pgx for River, database/sql over the same pool for
// goose. River migrates from Go with rivermigrate rather than through goose
// because its migrations cannot share one transaction.
func open(ctx context.Context, url string) (*pgxpool.Pool, *goose.Provider, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, stdlib.OpenDBFromPool(pool), FS)
	if err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("goose: %w", err)
	}
	return pool, provider, nil
}

// withLock runs fn holding the migration lock, so that processes starting at
// once migrate one after the other and the later ones find nothing to do.
func withLock(ctx context.Context, url string, fn func(pool *pgxpool.Pool, provider *goose.Provider) error) error {
	pool, provider, err := open(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	defer provider.Close()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(lockKey)); err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	defer conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, int64(lockKey)) //nolint:errcheck // released with the session anyway
	return fn(pool, provider)
}

func riverMigrator(pool *pgxpool.Pool) (*rivermigrate.Migrator[pgx.Tx], error) {
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return nil, fmt.Errorf("river migrator: %w", err)
	}
	return m, nil
}

// Up brings an empty or older database to current: River's schema, then
// ours, then the audit views (views.go).
func Up(ctx context.Context, url string) error {
	return withLock(ctx, url, func(pool *pgxpool.Pool, provider *goose.Provider) error {
		rm, err := riverMigrator(pool)
		if err != nil {
			return err
		}
		if _, err := rm.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
			return fmt.Errorf("river migrations: %w", err)
		}
		pending, err := provider.HasPending(ctx)
		if err != nil {
			return fmt.Errorf("orderd migrations: %w", err)
		}
		if pending {
			if err := removeViews(ctx, pool); err != nil {
				return err
			}
			if _, err := provider.Up(ctx); err != nil {
				return fmt.Errorf("orderd migrations: %w", err)
			}
		} else if current, err := viewsCurrent(ctx, pool); err != nil || current {
			return err
		}
		return createViews(ctx, pool)
	})
}

// Down rolls back our newest migration; with none left, it removes River's
// schema too.
func Down(ctx context.Context, url string) error {
	return withLock(ctx, url, func(pool *pgxpool.Pool, provider *goose.Provider) error {
		version, err := provider.GetDBVersion(ctx)
		if err != nil {
			return fmt.Errorf("orderd version: %w", err)
		}
		if version > 0 {
			if err := removeViews(ctx, pool); err != nil {
				return err
			}
			if _, err := provider.Down(ctx); err != nil {
				return fmt.Errorf("orderd down: %w", err)
			}
			return nil
		}
		return riverDown(ctx, pool)
	})
}

// Reset removes every migration, ours and River's.
func Reset(ctx context.Context, url string) error {
	return withLock(ctx, url, func(pool *pgxpool.Pool, provider *goose.Provider) error {
		if err := removeViews(ctx, pool); err != nil {
			return err
		}
		if _, err := provider.DownTo(ctx, 0); err != nil {
			return fmt.Errorf("orderd down: %w", err)
		}
		return riverDown(ctx, pool)
	})
}

func riverDown(ctx context.Context, pool *pgxpool.Pool) error {
	rm, err := riverMigrator(pool)
	if err != nil {
		return err
	}
	if _, err := rm.Migrate(ctx, rivermigrate.DirectionDown, &rivermigrate.MigrateOpts{TargetVersion: -1}); err != nil {
		return fmt.Errorf("river down: %w", err)
	}
	return nil
}

// MigrationStatus is one migration and whether it is applied.
type MigrationStatus struct {
	Source  string
	Version int64
	Applied bool
}

func (s MigrationStatus) String() string {
	state := "pending"
	if s.Applied {
		state = "applied"
	}
	return fmt.Sprintf("%s\t%d\t%s", s.Source, s.Version, state)
}

// Status lists River's and our migrations. It does not wait for a migration
// in progress, so a readiness probe never queues behind one.
func Status(ctx context.Context, url string) ([]MigrationStatus, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	return StatusOn(ctx, pool)
}

// StatusOn is Status through an open pool, which it leaves open: a serving
// process asks through its own connections instead of opening new ones.
func StatusOn(ctx context.Context, pool *pgxpool.Pool) ([]MigrationStatus, error) {
	// Closing the provider closes its database/sql handle, which leaves
	// the pool it borrows from open.
	provider, err := goose.NewProvider(goose.DialectPostgres, stdlib.OpenDBFromPool(pool), FS)
	if err != nil {
		return nil, fmt.Errorf("goose: %w", err)
	}
	defer provider.Close()
	rm, err := riverMigrator(pool)
	if err != nil {
		return nil, err
	}
	existing, err := rm.ExistingVersions(ctx)
	if err != nil {
		return nil, fmt.Errorf("river status: %w", err)
	}
	applied := make(map[int]bool, len(existing))
	for _, v := range existing {
		applied[v.Version] = true
	}
	var out []MigrationStatus
	for _, v := range rm.AllVersions() {
		out = append(out, MigrationStatus{Source: "river/" + v.Name, Version: int64(v.Version), Applied: applied[v.Version]})
	}
	statuses, err := provider.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("orderd status: %w", err)
	}
	for _, s := range statuses {
		out = append(out, MigrationStatus{Source: s.Source.Path, Version: s.Source.Version, Applied: s.State == goose.StateApplied})
	}
	return out, nil
}

// Current reports whether every migration, River's and ours, is applied.
func Current(ctx context.Context, url string) (bool, error) {
	statuses, err := Status(ctx, url)
	if err != nil {
		return false, err
	}
	return allApplied(statuses), nil
}

// CurrentOn is Current through an open pool, which it leaves open.
func CurrentOn(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	statuses, err := StatusOn(ctx, pool)
	if err != nil {
		return false, err
	}
	return allApplied(statuses), nil
}

func allApplied(statuses []MigrationStatus) bool {
	for _, s := range statuses {
		if !s.Applied {
			return false
		}
	}
	return true
}
