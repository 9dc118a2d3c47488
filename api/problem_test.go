package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
)

// logBuffer captures one logger's records as JSON lines. It is locked
// because tests read it while a server goroutine may still be logging.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newTestLogger() (*slog.Logger, *logBuffer) {
	buf := &logBuffer{}
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

func (b *logBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(b.String()) {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		out = append(out, rec)
	}
	return out
}

func (b *logBuffer) atLevel(t *testing.T, level string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, rec := range b.records(t) {
		if rec["level"] == level {
			out = append(out, rec)
		}
	}
	return out
}

// problemRequest runs writeProblem for err inside the request-id and logging
// middlewares, as a handler would.
func problemRequest(t *testing.T, err error) (*httptest.ResponseRecorder, map[string]any, *logBuffer) {
	t.Helper()
	log, buf := newTestLogger()
	h := withRequestID(accessLog(log, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, err)
	})))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
	var body map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	return rec, body, buf
}

func TestProblemTable(t *testing.T) {
	t.Parallel()
	want := map[domain.Code]int{
		domain.CodeValidation: 422, domain.CodeMalformedJSON: 400, domain.CodeUnsupportedMedia: 415,
		domain.CodePayloadTooLarge: 413, domain.CodeUnauthorized: 401, domain.CodeForbidden: 403,
		domain.CodeNotFound: 404, domain.CodeMethodNotAllowed: 405, domain.CodeSoldOut: 409, domain.CodePurchaseLimit: 409,
		domain.CodeInvalidTransition: 409, domain.CodeIdempotencyReused: 422,
		domain.CodeIdempotencyRequired: 400, domain.CodeInvalidCursor: 400, domain.CodeUnavailable: 503, domain.CodeConflict: 409,
		domain.CodeRateLimited: 429, domain.CodeInternal: 500, domain.CodeMerchantPaused: 409,
		domain.CodeDropNotOpen: 409, domain.CodeDropEnded: 409, domain.CodeNotInvited: 409,
		domain.CodeMerchantClosed: 409, domain.CodeSlotFull: 409, domain.CodeProductUnavailable: 409,
	}
	require.Len(t, problems, len(want))
	for code, status := range want {
		kind, ok := problems[code]
		require.True(t, ok, code)
		require.Equal(t, status, kind.status, code)
		require.Equal(t, strings.ReplaceAll(string(code), "_", "-"), kind.slug)
		require.NotEmpty(t, kind.title)
	}
}

func TestWriteProblemDomainError(t *testing.T) {
	t.Parallel()
	rec, body, logs := problemRequest(t, fmt.Errorf("place order: %w", domain.Errorf(domain.CodeSoldOut, "milk tea is sold out")))
	require.Equal(t, http.StatusConflict, rec.Code)
	require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	require.Equal(t, map[string]any{
		"type":     "https://orderd.dev/problems/sold-out",
		"title":    "Sold out",
		"status":   float64(409),
		"detail":   "milk tea is sold out",
		"code":     "sold_out",
		"instance": rec.Header().Get("X-Request-Id"),
	}, body)
	require.Empty(t, logs.atLevel(t, "ERROR"))
}

func TestWriteProblemInternalError(t *testing.T) {
	t.Parallel()
	rec, body, logs := problemRequest(t, errors.New("pq: password authentication failed for secret-db"))
	require.Equal(t, http.StatusInternalServerError, rec.Code)
	require.Equal(t, "Internal error.", body["detail"])
	require.Equal(t, "internal", body["code"])
	require.NotContains(t, rec.Body.String(), "secret-db")
	errs := logs.atLevel(t, "ERROR")
	require.Len(t, errs, 1)
	require.Contains(t, errs[0]["err"], "secret-db")
	require.Equal(t, rec.Header().Get("X-Request-Id"), errs[0]["request_id"])
}

func TestWriteProblemHeaders(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		err    error
		status int
		header string
		value  string
	}{
		"unauthorized": {err: domain.Errorf(domain.CodeUnauthorized, "no token"), status: 401,
			header: "WWW-Authenticate", value: `Bearer realm="orderd"`},
		"rate limited rounds up":    {err: rateLimited(1500 * time.Millisecond), status: 429, header: "Retry-After", value: "2"},
		"rate limited at least 1 s": {err: rateLimited(10 * time.Millisecond), status: 429, header: "Retry-After", value: "1"},
		"unavailable":               {err: domain.ErrUnavailable, status: 503, header: "Retry-After", value: "1"},
		"deadline": {err: fmt.Errorf("query: %w", context.DeadlineExceeded), status: 503,
			header: "Retry-After", value: "1"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rec, body, logs := problemRequest(t, tt.err)
			require.Equal(t, tt.status, rec.Code)
			require.Equal(t, float64(tt.status), body["status"])
			require.Equal(t, tt.value, rec.Header().Get(tt.header))
			require.Empty(t, logs.atLevel(t, "ERROR"))
		})
	}
}

func TestWriteProblemTimedOutRequest(t *testing.T) {
	t.Parallel()
	log, logs := newTestLogger()
	h := withRequestID(accessLog(log, withTimeout(time.Millisecond, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		// What a database driver returns may not wrap the context's error.
		writeProblem(w, r, errors.New("conn closed"))
	}))))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Contains(t, rec.Body.String(), `"code":"unavailable"`)
	require.Empty(t, logs.atLevel(t, "ERROR"))
}

func TestWriteJSON(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	writeJSON(rec, http.StatusCreated, map[string]int{"n": 1})
	require.Equal(t, http.StatusCreated, rec.Code)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	require.JSONEq(t, `{"n":1}`, rec.Body.String())
	require.Equal(t, fmt.Sprint(rec.Body.Len()), rec.Header().Get("Content-Length"))

	rec = httptest.NewRecorder()
	writeJSON(rec, http.StatusOK, map[string]any{"bad": make(chan int)})
	require.Equal(t, http.StatusInternalServerError, rec.Code)
	require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	require.Contains(t, rec.Body.String(), `"detail":"Internal error."`)
}
