package app_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/api/openapitest"
	"github.com/orderd/orderd/internal/app"
	"github.com/orderd/orderd/store/storetest"
)

// TestOpenAPIDocumentsEveryRoute holds api/openapi.json to the routes of a
// whole orderd, mounted pages and websocket included, both ways: every
// route is documented with its method, and every documented operation is
// served.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	cfg := app.DefaultConfig()
	cfg.DatabaseURL = storetest.URL(t)
	cfg.JWTSecret = "routes-test-Vn5cK1xM8qT3wZ7pH2rJ9sD4"
	cfg.OpsAddr = "127.0.0.1:0"
	cfg.Migrate = false
	cfg.MaxConns = 2
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := app.New(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(a.Close)

	doc := openapitest.Load(t).Doc
	var served []string
	for _, pattern := range a.Routes() {
		method, path, ok := strings.Cut(pattern, " ")
		require.True(t, ok, "route %q names no method: every route must say which it serves", pattern)
		// "/{$}" is the mux's way to say exactly "/".
		path = strings.TrimSuffix(path, "{$}")
		served = append(served, method+" "+path)
		item := doc.Paths.Value(path)
		require.NotNil(t, item, "api/openapi.json has no path %s (route %q)", path, pattern)
		require.NotNil(t, item.GetOperation(method), "api/openapi.json has no %s operation on %s", method, path)
	}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			require.True(t, slices.Contains(served, method+" "+path), "api/openapi.json documents %s %s, which no route serves", method, path)
		}
	}
	require.Contains(t, served, http.MethodGet+" /openapi.json")
}

// TestNewJWTSecretsPassTheirCheck: the secrets orderd makes itself (dev,
// the bench's servers) must never be refused by its own strength check; a
// shorter random secret was, now and then, and a bench run failed to start.
func TestNewJWTSecretsPassTheirCheck(t *testing.T) {
	t.Parallel()
	for range 200 {
		secret, err := app.NewJWTSecret()
		require.NoError(t, err)
		require.NoError(t, app.CheckJWTSecret(secret))
	}
}
