package ops_test

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/internal/ops"
)

func TestCheckAddr(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"127.0.0.1:9090", "127.0.0.2:9090", "[::1]:9090", "localhost:9090", "LOCALHOST:0"} {
		require.NoError(t, ops.CheckAddr(addr, ""), addr)
	}
	for _, addr := range []string{":9090", "0.0.0.0:9090", "[::]:9090", "10.0.0.7:9090", "ops.internal:9090", "nonsense"} {
		err := ops.CheckAddr(addr, "")
		require.Error(t, err, addr)
		require.NotContains(t, err.Error(), "\n", "one line")
		require.Contains(t, err.Error(), "ORDERD_OPS_PASSWORD")
		require.NoError(t, ops.CheckAddr(addr, "s3cret"), "a password makes any address acceptable: %s", addr)
	}
}

func TestBasicAuthWhenPasswordIsSet(t *testing.T) {
	t.Parallel()
	h, err := ops.Handler(ops.Config{User: "ops", Password: "s3cret", Registry: prometheus.NewRegistry()})
	require.NoError(t, err)
	for _, tc := range []struct {
		name, user, password string
		set                  bool
		want                 int
	}{
		{"no credentials", "", "", false, http.StatusUnauthorized},
		{"wrong password", "ops", "guess", true, http.StatusUnauthorized},
		{"wrong user", "root", "s3cret", true, http.StatusUnauthorized},
		{"right", "ops", "s3cret", true, http.StatusOK},
	} {
		r := httptest.NewRequest("GET", "/metrics", nil)
		if tc.set {
			r.SetBasicAuth(tc.user, tc.password)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		require.Equal(t, tc.want, rec.Code, tc.name)
		if tc.want == http.StatusUnauthorized {
			require.Contains(t, rec.Header().Get("WWW-Authenticate"), "Basic")
		}
	}

	_, err = ops.Handler(ops.Config{Password: "s3cret", Registry: prometheus.NewRegistry()})
	require.Error(t, err, "a password without a user")

	open, err := ops.Handler(ops.Config{Registry: prometheus.NewRegistry()})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	open.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code, "no password: no auth (loopback only, which CheckAddr enforces)")
}

func TestProfilesAreServedBehindTheSameAuth(t *testing.T) {
	// Not parallel: it counts this process's garbage collections.
	guarded, err := ops.Handler(ops.Config{User: "ops", Password: "s3cret", Registry: prometheus.NewRegistry()})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	guarded.ServeHTTP(rec, httptest.NewRequest("GET", "/debug/pprof/heap?gc=1", nil))
	require.Equal(t, http.StatusUnauthorized, rec.Code, "profiles name the code and cost CPU: never without the password")

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := httptest.NewRequest("GET", "/debug/pprof/heap?gc=1", nil)
	r.SetBasicAuth("ops", "s3cret")
	rec = httptest.NewRecorder()
	guarded.ServeHTTP(rec, r)
	require.Equal(t, http.StatusOK, rec.Code)
	require.NotEmpty(t, rec.Body.Bytes(), "a heap profile")
	runtime.ReadMemStats(&after)
	require.Greater(t, after.NumGC, before.NumGC, "gc=1 collects before profiling, which the benchmark's weighing relies on")

	for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline"} {
		r := httptest.NewRequest("GET", path, nil)
		r.SetBasicAuth("ops", "s3cret")
		rec := httptest.NewRecorder()
		guarded.ServeHTTP(rec, r)
		require.Equal(t, http.StatusOK, rec.Code, path)
	}
}
