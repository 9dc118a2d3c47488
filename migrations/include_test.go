package migrations_test

import (
	"context"
	"io/fs"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/migrations"
)

// TestDownsPutBackTheFunctionsTheyReplaced: after each migration's down,
// every function and trigger is as the migration before it left them. A
// trigger function that a migration replaced is put back from the file
// both include (functions/); an include left unexpanded reads as a comment,
// and would leave the newer function in place.
func TestDownsPutBackTheFunctionsTheyReplaced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := emptyDatabase(t)
	names, err := fs.Glob(migrations.FS, "*.sql")
	require.NoError(t, err)
	var versions []int64
	for _, n := range names {
		v, err := strconv.ParseInt(strings.SplitN(n, "_", 2)[0], 10, 64)
		require.NoError(t, err, n)
		versions = append(versions, v)
	}
	defined := map[int64]string{}
	for _, v := range versions {
		require.NoError(t, migrations.UpTo(ctx, url, v))
		defined[v] = functionsAndTriggers(ctx, t, url)
	}
	for i := len(versions) - 1; i > 0; i-- {
		require.NoError(t, migrations.DownTo(ctx, url, versions[i-1]))
		require.Equal(t, defined[versions[i-1]], functionsAndTriggers(ctx, t, url), "after the down of migration %d", versions[i])
	}
	for _, n := range names {
		text, err := fs.ReadFile(migrations.FS, n)
		require.NoError(t, err)
		require.NotContains(t, string(text), "+orderd include", "goose reads %s expanded", n)
	}
}

// functionsAndTriggers is the definition of every function and trigger of
// the public schema.
func functionsAndTriggers(ctx context.Context, t *testing.T, url string) string {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var defs string
	require.NoError(t, conn.QueryRow(ctx, `
		SELECT coalesce((SELECT string_agg(pg_get_functiondef(p.oid), E'\n' ORDER BY p.proname)
			FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public' AND p.prokind = 'f'), '')
		|| E'\n' || coalesce((SELECT string_agg(pg_get_triggerdef(g.oid), E'\n' ORDER BY g.tgname)
			FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = 'public' AND NOT g.tgisinternal), '')`).Scan(&defs))
	return defs
}

// TestIncludesWithinIncludes: an included file's own includes are expanded,
// and a file that includes itself is refused instead of expanded for ever.
func TestIncludesWithinIncludes(t *testing.T) {
	t.Parallel()
	fsys := migrations.Expanded(fstest.MapFS{
		"00001_a.sql":        {Data: []byte("up\n-- +orderd include functions/f.sql\ndown\n")},
		"functions/f.sql":    {Data: []byte("begin\n-- +orderd include functions/end.sql\n")},
		"functions/end.sql":  {Data: []byte("end\n")},
		"00002_b.sql":        {Data: []byte("-- +orderd include functions/self.sql\n")},
		"functions/self.sql": {Data: []byte("-- +orderd include functions/self.sql\n")},
	})
	text, err := fs.ReadFile(fsys, "00001_a.sql")
	require.NoError(t, err)
	require.Equal(t, "up\nbegin\nend\ndown\n", string(text))
	_, err = fs.ReadFile(fsys, "00002_b.sql")
	require.ErrorContains(t, err, "includes deep")
}
