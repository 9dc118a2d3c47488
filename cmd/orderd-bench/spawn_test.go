package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/internal/app"
	"github.com/orderd/orderd/internal/bench"
	"github.com/orderd/orderd/store/storetest"
)

// TestSpawnedServersBindTheirOwnPorts: the bench's servers bind ports the
// kernel gives them and report them, rather than ports found free here and
// bound there, which anyone could take in between; and a server that stops
// before it is ready says why, instead of "exited before it was ready"
// alone, which is all the bench said when servers of busy runs failed.
func TestSpawnedServersBindTheirOwnPorts(t *testing.T) {
	_, orderd := mustBinaries(t)

	cfg := app.DefaultConfig()
	cfg.DatabaseURL = storetest.URL(t)
	cfg.JWTSecret = "a7c1d9e4f0b2368a5d7e9c1b3f5a7d9e"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	instances := make([]*bench.Instance, 3)
	errs := make(chan error, len(instances))
	for i := range instances {
		go func() {
			var err error
			instances[i], err = spawnServe(ctx, orderd, cfg)
			errs <- err
		}()
	}
	for range instances {
		require.NoError(t, <-errs)
	}
	seen := map[string]bool{}
	for _, inst := range instances {
		defer inst.Stop()
		for _, u := range []string{inst.BaseURL + "/readyz", inst.OpsURL + "/metrics"} {
			require.False(t, seen[u], "two servers on one port: %s", u)
			seen[u] = true
			resp, err := http.Get(u)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, u)
		}
	}

	broken := cfg
	broken.DatabaseURL = "postgres://postgres@127.0.0.1:1/nothing?connect_timeout=2"
	_, err := spawnServe(ctx, orderd, broken)
	require.Error(t, err)
	require.Contains(t, err.Error(), "127.0.0.1", "the server's own last words name what failed: %v", err)
}
