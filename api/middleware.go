package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"time"

	"github.com/google/uuid"

	"github.com/orderd/orderd/auth"
)

type requestIDKey struct{}

var validRequestID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func requestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// withRequestID keeps a sane incoming X-Request-Id or makes one, and echoes it.
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !validRequestID.MatchString(id) {
			id = uuid.NewString()
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id)))
	})
}

// statusWriter remembers what was written, for logs and metrics. It passes
// Hijack through so that websockets can upgrade.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += n
	return n, err
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func wrap(w http.ResponseWriter) *statusWriter {
	if sw, ok := w.(*statusWriter); ok {
		return sw
	}
	return &statusWriter{ResponseWriter: w}
}

// principalHolder lets the access log learn who called after auth ran deeper.
type principalHolder struct{ sub string }

type holderKey struct{}

// accessLog writes one structured line per request. It never logs headers or
// query strings, which may carry tokens.
func accessLog(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := wrap(w)
		holder := &principalHolder{}
		r = r.WithContext(context.WithValue(r.Context(), holderKey{}, holder))
		next.ServeHTTP(sw, r)
		level := slog.LevelInfo
		if sw.status >= 500 {
			level = slog.LevelWarn
		}
		log.LogAttrs(r.Context(), level, "request",
			slog.String("method", r.Method), slog.String("route", r.Pattern), slog.String("path", r.URL.Path),
			slog.Int("status", sw.status), slog.Int("bytes", sw.bytes),
			slog.Duration("duration", time.Since(start)), slog.String("request_id", requestIDFrom(r.Context())),
			slog.String("sub", holder.sub))
	})
}

// recoverPanics turns a panic into a 500 problem, logged once.
func recoverPanics(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.ErrorContext(r.Context(), "panic", "panic", fmt.Sprint(v), "request_id", requestIDFrom(r.Context()),
					"stack", string(debug.Stack()))
				writeProblem(w, r, errPanic)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

var errPanic = &panicError{}

type panicError struct{}

func (*panicError) Error() string { return "handler panicked (logged above)" }

// withTimeout bounds a request, so that a slow database answers 503 in time
// instead of piling requests up.
func withTimeout(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// requireAuth authenticates the request or answers 401.
func requireAuth(a *auth.Authenticator, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.FromRequest(r)
		if err != nil {
			writeProblem(w, r, err)
			return
		}
		if h, ok := r.Context().Value(holderKey{}).(*principalHolder); ok {
			h.sub = p.Subject
		}
		next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
	})
}
