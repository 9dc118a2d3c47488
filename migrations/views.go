package migrations

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"sort"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The audit schema's views, and the functions they call, are defined once
// each in views/ rather than in the migrations, which create the schema and
// the auditors' role only. A view only reads, so it need not be migrated
// step by step: Up drops every view and function of the schema before
// migrating (a migration may then change the columns they read) and creates
// them all afresh from views/ after, in file order (functions first, their
// names starting with 00_), whenever a migration ran or the files changed
// since the database last received them. A database rolled back (Down) has
// no audit views until it is migrated up again: the views read the newest
// schema.
//
// Every view runs on Citus as well as on one PostgreSQL: a join of two
// per-merchant tables names merchant_id on both sides, a window over a
// stream partitions by merchant too, and nothing is correlated into a
// subquery that Citus cannot push down to the shard holding the merchant.
// The answers are the same: a stream, an order and its products belong to
// one merchant.
const viewsDir = "views"

// viewsMark, the audit schema's comment, names the views' fingerprint that
// the database holds, so that an Up with nothing to do does no DDL.
const viewsMark = "orderd views "

func viewFiles() ([]string, error) {
	names, err := fs.Glob(files, path.Join(viewsDir, "*.sql"))
	if err != nil {
		return nil, fmt.Errorf("list views: %w", err)
	}
	sort.Strings(names)
	return names, nil
}

// viewsCurrent reports whether the database holds the views of these files.
func viewsCurrent(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	var mark *string
	if err := pool.QueryRow(ctx, `SELECT obj_description(to_regnamespace('audit'), 'pg_namespace')`).Scan(&mark); err != nil {
		return false, fmt.Errorf("read the views' mark: %w", err)
	}
	return mark != nil && *mark == viewsMark+Fingerprint(), nil
}

// dropViews drops every view and function of the audit schema, those an
// older release made included.
func dropViews(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, `
		SELECT format('DROP VIEW IF EXISTS %s CASCADE', c.oid::regclass)
		FROM pg_class c WHERE c.relnamespace = to_regnamespace('audit') AND c.relkind IN ('v', 'm')
		UNION ALL
		SELECT format('DROP FUNCTION IF EXISTS %s CASCADE', p.oid::regprocedure)
		FROM pg_proc p WHERE p.pronamespace = to_regnamespace('audit')`)
	if err != nil {
		return fmt.Errorf("list audit views: %w", err)
	}
	drops, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list audit views: %w", err)
	}
	for _, drop := range drops {
		if _, err := tx.Exec(ctx, drop); err != nil {
			return fmt.Errorf("%s: %w", drop, err)
		}
	}
	return nil
}

// removeViews drops the audit views in a transaction of its own.
func removeViews(ctx context.Context, pool *pgxpool.Pool) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return dropViews(ctx, tx) })
}

// createViews replaces the audit schema's views and functions with those of
// views/ in one transaction, lets the auditors read them and marks the
// schema with their fingerprint.
func createViews(ctx context.Context, pool *pgxpool.Pool) error {
	names, err := viewFiles()
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := dropViews(ctx, tx); err != nil {
			return err
		}
		for _, name := range names {
			sql, err := files.ReadFile(name)
			if err != nil {
				return fmt.Errorf("read %s: %w", name, err)
			}
			if _, err := tx.Exec(ctx, string(sql)); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		if _, err := tx.Exec(ctx, `GRANT SELECT ON ALL TABLES IN SCHEMA audit TO orderd_auditor`); err != nil {
			return fmt.Errorf("grant the audit views: %w", err)
		}
		// The mark is letters, a space and hex digits: nothing to escape.
		if _, err := tx.Exec(ctx, `COMMENT ON SCHEMA audit IS '`+viewsMark+Fingerprint()+`'`); err != nil {
			return fmt.Errorf("mark the views: %w", err)
		}
		return nil
	})
}
