// Package ops serves the operator listener: Prometheus metrics, River UI and
// Go's profiles, apart from the public API so that none is exposed with it.
package ops

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Config is what the operator listener serves and who may see it.
type Config struct {
	// User and Password, when Password is set, are required by basic auth
	// on every path.
	User     string
	Password string
	Registry *prometheus.Registry
	// RiverUI is served under /riverui/; nil leaves it out.
	RiverUI http.Handler
	// ErrorLog receives failures of collectors while scraping.
	ErrorLog promhttp.Logger
}

// CheckAddr refuses an operator address that is not loopback when no
// password protects it: metrics name merchants and River UI can cancel and
// retry jobs.
func CheckAddr(addr, password string) error {
	if password != "" || IsLoopback(addr) {
		return nil
	}
	return fmt.Errorf("ORDERD_OPS_ADDR %q is not a loopback address: set ORDERD_OPS_PASSWORD (and ORDERD_OPS_USER) for basic auth, or listen on 127.0.0.1", addr)
}

// IsLoopback says whether addr listens on loopback only. An empty host
// listens on every interface.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Handler serves /metrics, /riverui/ and /debug/pprof/ behind basic auth when
// a password is configured, and an index at /. The profiles are what a
// performance change starts from, taken from the server under real load;
// /debug/pprof/heap?gc=1 also lets a benchmark weigh a server right after a
// collection instead of waiting for the runtime's own.
func Handler(cfg Config) (http.Handler, error) {
	if cfg.Password != "" && cfg.User == "" {
		return nil, errors.New("ORDERD_OPS_USER must be set with ORDERD_OPS_PASSWORD")
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{
		Registry: cfg.Registry,
		// A collector that reads the database fails while it is down; the
		// process's own series still matter then.
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      cfg.ErrorLog,
	}))
	if cfg.RiverUI != nil {
		mux.Handle("/riverui/", cfg.RiverUI)
	}
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(`<!doctype html><title>orderd operations</title><ul><li><a href="/metrics">metrics</a></li><li><a href="/riverui/">River UI</a></li><li><a href="/debug/pprof/">profiles</a></li></ul>`))
	})
	if cfg.Password == "" {
		return mux, nil
	}
	return basicAuth(cfg.User, cfg.Password, mux), nil
}

func basicAuth(user, password string, next http.Handler) http.Handler {
	// Hashing first makes the comparison's time independent of lengths.
	wantUser, wantPassword := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(password))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		gotUser, gotPassword := sha256.Sum256([]byte(u)), sha256.Sum256([]byte(p))
		if !ok || subtle.ConstantTimeCompare(gotUser[:], wantUser[:])&subtle.ConstantTimeCompare(gotPassword[:], wantPassword[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="orderd operations", charset="UTF-8"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
