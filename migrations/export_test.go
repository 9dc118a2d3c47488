package migrations

import (
	"context"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3"
)

// UpTo applies our migrations up to version only, without River's or the
// views, as a database an older release migrated stands.
func UpTo(ctx context.Context, url string, version int64) error {
	return withLock(ctx, url, func(_ *pgxpool.Pool, provider *goose.Provider) error {
		_, err := provider.UpTo(ctx, version)
		return err
	})
}

// ViewFiles lists the files of views/.
var ViewFiles = viewFiles

// DownTo rolls our migrations back to version.
func DownTo(ctx context.Context, url string, version int64) error {
	return withLock(ctx, url, func(_ *pgxpool.Pool, provider *goose.Provider) error {
		_, err := provider.DownTo(ctx, version)
		return err
	})
}

// Expanded is fsys as goose would read it, includes expanded.
func Expanded(fsys fs.FS) fs.FS { return expanded{fsys} }
