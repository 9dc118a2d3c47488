package app

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/store/storetest"
)

// TestReadyzUsesTheServingPool floods /readyz, which answers anyone, while
// orderd connects as a role that PostgreSQL allows one connection more than
// the serving pool holds: every probe must answer ready, so none opened a
// connection of its own.
func TestReadyzUsesTheServingPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.URL(t)
	admin, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { admin.Close(context.Background()) })
	// A role of the cluster: superusers are exempt from connection limits.
	role := "orderd_readyz_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	const poolConns = 2
	_, err = admin.Exec(ctx, `CREATE ROLE `+role+` LOGIN CONNECTION LIMIT 3;
		GRANT USAGE ON SCHEMA public TO `+role+`;
		GRANT SELECT ON ALL TABLES IN SCHEMA public TO `+role)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := admin.Exec(context.Background(), `DROP OWNED BY `+role+`; DROP ROLE `+role)
		require.NoError(t, err)
	})

	cfg := DefaultConfig()
	u, err := neturl.Parse(url)
	require.NoError(t, err)
	u.User = neturl.User(role)
	cfg.DatabaseURL = u.String()
	cfg.JWTSecret = "readyz-test-Hq7vT2kX9pR4mW8sZ3nB6yL1"
	cfg.OpsAddr = "127.0.0.1:0"
	cfg.Migrate = false
	cfg.MaxConns = poolConns
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := New(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(a.Close)
	srv := httptest.NewServer(a.api)
	t.Cleanup(srv.Close)

	const probes = 40
	var wg sync.WaitGroup
	codes := make(chan int, probes)
	for range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := http.Get(srv.URL + "/readyz")
			if err != nil {
				codes <- 0
				return
			}
			_ = res.Body.Close()
			codes <- res.StatusCode
		}()
	}
	wg.Wait()
	close(codes)
	for code := range codes {
		require.Equal(t, http.StatusOK, code)
	}
}
