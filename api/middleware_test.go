package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/auth"
)

var testSecret = []byte("middleware-test-secret")

type chainBundle struct {
	handler  http.Handler
	logs     *logBuffer
	metrics  *Metrics
	registry *prometheus.Registry
	auth     *auth.Authenticator
}

// setupChain stacks the middlewares in the order server.go does, around mux.
func setupChain(t *testing.T, timeout time.Duration, register func(mux *http.ServeMux, b *chainBundle)) *chainBundle {
	t.Helper()
	log, logs := newTestLogger()
	reg := prometheus.NewRegistry()
	b := &chainBundle{logs: logs, metrics: NewMetrics(reg), registry: reg, auth: auth.New(testSecret, nil)}
	mux := http.NewServeMux()
	register(mux, b)
	var h http.Handler = mux
	h = b.metrics.Middleware(h)
	h = withTimeout(timeout, h)
	h = recoverPanics(log, h)
	h = accessLog(log, h)
	b.handler = withRequestID(h)
	return b
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	b := setupChain(t, time.Second, func(mux *http.ServeMux, _ *chainBundle) {
		mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, map[string]string{"id": requestIDFrom(r.Context())})
		})
	})
	tests := map[string]struct {
		incoming string
		kept     bool
	}{
		"sane":          {incoming: "abc-DEF_123", kept: true},
		"64 characters": {incoming: strings.Repeat("a", 64), kept: true},
		"too long":      {incoming: strings.Repeat("a", 65)},
		"log injection": {incoming: "a\nlevel=ERROR"},
		"spaces":        {incoming: "a b"},
		"absent":        {},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("GET", "/", nil)
			if tt.incoming != "" {
				r.Header["X-Request-Id"] = []string{tt.incoming}
			}
			rec := httptest.NewRecorder()
			b.handler.ServeHTTP(rec, r)
			id := rec.Header().Get("X-Request-Id")
			require.JSONEq(t, `{"id":"`+id+`"}`, rec.Body.String())
			if tt.kept {
				require.Equal(t, tt.incoming, id)
				return
			}
			_, err := uuid.Parse(id)
			require.NoError(t, err)
		})
	}
}

func TestPanicRecovery(t *testing.T) {
	t.Parallel()
	b := setupChain(t, time.Second, func(mux *http.ServeMux, _ *chainBundle) {
		mux.HandleFunc("POST /boom/{id}", func(http.ResponseWriter, *http.Request) { panic("kaboom") })
	})
	r := httptest.NewRequest("POST", "/boom/1", nil)
	r.Header.Set("X-Request-Id", "req-42")
	rec := httptest.NewRecorder()
	b.handler.ServeHTTP(rec, r)

	require.Equal(t, http.StatusInternalServerError, rec.Code)
	require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	var body map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	require.Equal(t, "Internal error.", body["detail"])
	require.Equal(t, "req-42", body["instance"])
	require.NotContains(t, rec.Body.String(), "kaboom")

	errs := b.logs.atLevel(t, "ERROR")
	require.Len(t, errs, 1)
	require.Equal(t, "req-42", errs[0]["request_id"])
	require.Contains(t, errs[0]["err"], "kaboom")
	require.Contains(t, errs[0]["err"], "middleware_test.go", "the stack is logged")

	access := b.logs.atLevel(t, "WARN")
	require.Len(t, access, 1)
	require.Equal(t, float64(500), access[0]["status"])
	require.Equal(t, "POST /boom/{id}", access[0]["route"])
}

func TestPanicAfterAnswerAbortsConnection(t *testing.T) {
	t.Parallel()
	b := setupChain(t, time.Second, func(mux *http.ServeMux, _ *chainBundle) {
		mux.HandleFunc("GET /half", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusOK)
			panic("late")
		})
	})
	srv := httptest.NewServer(b.handler)
	t.Cleanup(srv.Close)
	res, err := srv.Client().Get(srv.URL + "/half")
	if err == nil {
		_, err = io.ReadAll(res.Body)
		_ = res.Body.Close()
	}
	require.Error(t, err, "the client must not mistake a broken answer for a success")
	require.Eventually(t, func() bool { return len(b.logs.atLevel(t, "ERROR")) == 1 }, time.Second, 5*time.Millisecond)
}

func TestAccessLogNeverLogsTokens(t *testing.T) {
	t.Parallel()
	b := setupChain(t, time.Second, func(mux *http.ServeMux, b *chainBundle) {
		mux.Handle("GET /v1/orders/{id}", requireAuth(b.auth, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, map[string]string{"sub": principalOf(r).Subject})
		})))
	})
	tok, err := b.auth.Issue(auth.Principal{Subject: "alice", Role: auth.RoleCustomer}, time.Hour)
	require.NoError(t, err)

	// The second request also carries the token in its URL, which is
	// refused; neither request's token reaches the log.
	for i, r := range []*http.Request{
		httptest.NewRequest("GET", "/v1/orders/1", nil),
		httptest.NewRequest("GET", "/v1/orders/2?access_token="+tok, nil),
	} {
		r.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		b.handler.ServeHTTP(rec, r)
		if i == 0 {
			require.Equal(t, http.StatusOK, rec.Code)
			require.JSONEq(t, `{"sub":"alice"}`, rec.Body.String())
		} else {
			require.Equal(t, http.StatusUnauthorized, rec.Code)
		}
	}
	require.NotContains(t, b.logs.String(), tok)
	require.NotContains(t, b.logs.String(), "access_token")
	records := b.logs.records(t)
	require.Len(t, records, 2)
	for i, rec := range records {
		require.Equal(t, "request", rec["msg"])
		require.Equal(t, []string{"alice", ""}[i], rec["sub"])
		require.Equal(t, "GET /v1/orders/{id}", rec["route"])
		require.Equal(t, []float64{200, 401}[i], rec["status"])
		require.NotEmpty(t, rec["request_id"])
		require.Contains(t, rec, "duration")
		require.Contains(t, rec, "bytes")
	}
}

func TestRequireAuthRefuses(t *testing.T) {
	t.Parallel()
	b := setupChain(t, time.Second, func(mux *http.ServeMux, b *chainBundle) {
		mux.Handle("GET /private", requireAuth(b.auth, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			t.Error("the handler must not run")
		})))
	})
	for _, header := range []string{"", "Bearer nope", "Basic YTpi"} {
		r := httptest.NewRequest("GET", "/private", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		rec := httptest.NewRecorder()
		b.handler.ServeHTTP(rec, r)
		require.Equal(t, http.StatusUnauthorized, rec.Code)
		require.Equal(t, `Bearer realm="orderd"`, rec.Header().Get("WWW-Authenticate"))
		require.Contains(t, rec.Body.String(), `"code":"unauthorized"`)
	}
	require.Empty(t, b.logs.atLevel(t, "ERROR"))
}

func TestRequestTimeout(t *testing.T) {
	t.Parallel()
	b := setupChain(t, 20*time.Millisecond, func(mux *http.ServeMux, _ *chainBundle) {
		mux.HandleFunc("GET /slow", func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
			writeProblem(w, r, r.Context().Err())
		})
		mux.HandleFunc("GET /ws", func(w http.ResponseWriter, r *http.Request) {
			_, has := r.Context().Deadline()
			writeJSON(w, http.StatusOK, map[string]bool{"deadline": has})
		})
	})
	rec := httptest.NewRecorder()
	b.handler.ServeHTTP(rec, httptest.NewRequest("GET", "/slow", nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Contains(t, rec.Body.String(), `"code":"unavailable"`)
	require.Equal(t, "1", rec.Header().Get("Retry-After"))

	r := httptest.NewRequest("GET", "/ws", nil)
	r.Header.Set("Connection", "Upgrade")
	r.Header.Set("Upgrade", "websocket")
	rec = httptest.NewRecorder()
	b.handler.ServeHTTP(rec, r)
	require.JSONEq(t, `{"deadline":false}`, rec.Body.String(), "websockets outlive the request timeout")
}

func TestHijackThroughMiddlewares(t *testing.T) {
	t.Parallel()
	b := setupChain(t, time.Second, func(mux *http.ServeMux, _ *chainBundle) {
		mux.HandleFunc("GET /upgrade", func(w http.ResponseWriter, _ *http.Request) {
			hj, ok := w.(http.Hijacker)
			require.True(t, ok)
			conn, rw, err := hj.Hijack()
			require.NoError(t, err)
			defer conn.Close()
			_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\n")
			_ = rw.Flush()
		})
	})
	srv := httptest.NewServer(b.handler)
	t.Cleanup(srv.Close)
	req, err := http.NewRequestWithContext(context.Background(), "GET", srv.URL+"/upgrade", nil)
	require.NoError(t, err)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "test")
	res, err := srv.Client().Do(req)
	require.NoError(t, err)
	_ = res.Body.Close()
	require.Equal(t, http.StatusSwitchingProtocols, res.StatusCode)
	require.Eventually(t, func() bool {
		for _, rec := range b.logs.records(t) {
			if rec["status"] == float64(101) {
				return true
			}
		}
		return false
	}, time.Second, 5*time.Millisecond)
}

func TestStatusWriterFlushes(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	sw := wrap(rec)
	_, err := sw.Write([]byte("x"))
	require.NoError(t, err)
	sw.Flush()
	require.True(t, rec.Flushed, "streaming handlers need Flush through the wrapper")
	require.Equal(t, http.StatusOK, sw.status)
	require.Equal(t, 1, sw.bytes)
}

// requireAuth hands the handler its caller through the request's info when
// the chain made one, and through the request's context when it runs alone;
// a request it refuses leaves no caller behind for the access log's outer
// layers to mistake for one.
func TestRequireAuthHandsTheCallerOn(t *testing.T) {
	t.Parallel()
	a := auth.New(testSecret, nil)
	merchant := auth.Principal{Subject: "shop-1", Role: auth.RoleMerchant, MerchantID: uuid.New()}
	tok, err := a.Issue(merchant, time.Hour)
	require.NoError(t, err)
	auditor, err := a.Issue(auth.Principal{Subject: "aud", Role: auth.RoleAuditor}, time.Hour)
	require.NoError(t, err)

	var seen []auth.Principal
	var infos []*requestInfo
	handler := requireAuth(a, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, principalOf(r))
		w.WriteHeader(http.StatusNoContent)
	}))
	mux := http.NewServeMux()
	mux.Handle("POST /x", handler)
	chained := withRequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		infos = append(infos, infoFrom(r.Context()))
		mux.ServeHTTP(w, r)
	}))

	for name, h := range map[string]http.Handler{"chained": chained, "alone": handler} {
		seen = nil
		r := httptest.NewRequest("POST", "/x", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		require.Equal(t, http.StatusNoContent, rec.Code, name)
		require.Equal(t, []auth.Principal{merchant}, seen, name)
	}
	require.Len(t, infos, 1)
	require.True(t, infos[0].authed)
	require.Equal(t, "shop-1", infos[0].sub)

	// An auditor may not POST: refused before the handler, and the info
	// holds no caller.
	seen = nil
	r := httptest.NewRequest("POST", "/x", nil)
	r.Header.Set("Authorization", "Bearer "+auditor)
	rec := httptest.NewRecorder()
	chained.ServeHTTP(rec, r)
	require.Equal(t, http.StatusForbidden, rec.Code)
	require.Empty(t, seen)
	require.Len(t, infos, 2)
	require.False(t, infos[1].authed)
	require.Equal(t, auth.Principal{}, principalOf(r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, infos[1]))))
}
