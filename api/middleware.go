package api

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"runtime/debug"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/domain"
)

// requestInfo is shared, by pointer, between the outer middlewares and the
// inner ones: net/http's mux and requireAuth learn the route and the caller
// on a copy of the request that the access log never sees. requireAuth
// leaves the caller here too, for the handler (principalOf), instead of
// copying the request once more for a context that carries it.
type requestInfo struct {
	id        string
	log       *slog.Logger
	route     string
	sub       string
	principal auth.Principal
	authed    bool
}

type requestInfoKey struct{}

func infoFrom(ctx context.Context) *requestInfo {
	info, _ := ctx.Value(requestInfoKey{}).(*requestInfo)
	return info
}

// withInfo returns r's requestInfo, adding one to r's context if it has none.
func withInfo(r *http.Request) (*http.Request, *requestInfo) {
	if info := infoFrom(r.Context()); info != nil {
		return r, info
	}
	info := &requestInfo{}
	return r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, info)), info
}

func requestIDFrom(ctx context.Context) string {
	if info := infoFrom(ctx); info != nil {
		return info.id
	}
	return ""
}

// loggerFrom returns the server's logger, so that tests capturing one
// server's logs do not depend on the process-wide default.
func loggerFrom(ctx context.Context) *slog.Logger {
	if info := infoFrom(ctx); info != nil && info.log != nil {
		return info.log
	}
	return slog.Default()
}

var validRequestID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// withRequestID keeps a sane incoming X-Request-Id, so that a caller's id
// follows the request through our logs, or makes one; either way it is
// echoed. Anything else is replaced: it would end up in logs verbatim.
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, info := withInfo(r)
		info.id = r.Header.Get("X-Request-Id")
		if !validRequestID.MatchString(info.id) {
			info.id = uuid.NewString()
		}
		w.Header().Set("X-Request-Id", info.id)
		next.ServeHTTP(w, r)
	})
}

// statusWriter remembers what was written, for logs and metrics.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 && code >= 200 {
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

// Unwrap lets http.ResponseController reach the connection.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Hijack and Flush are spelled out because websocket libraries still look
// for them with type assertions rather than http.ResponseController.
func (s *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(s.ResponseWriter).Hijack()
	if err == nil && s.status == 0 {
		s.status = http.StatusSwitchingProtocols
	}
	return conn, rw, err
}

func (s *statusWriter) Flush() { _ = http.NewResponseController(s.ResponseWriter).Flush() }

func wrap(w http.ResponseWriter) *statusWriter {
	if sw, ok := w.(*statusWriter); ok {
		return sw
	}
	return &statusWriter{ResponseWriter: w}
}

// statusOf is what the client got, or will get: a handler that panicked
// before writing answers 500.
func statusOf(sw *statusWriter, panicked bool) int {
	switch {
	case sw.status != 0:
		return sw.status
	case panicked:
		return http.StatusInternalServerError
	}
	return http.StatusOK
}

// accessLog writes one structured line per request. It never logs headers or
// query strings, which may carry tokens. Failures were already logged at
// error level where they happened, so 5xx lines are only warnings.
func accessLog(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := wrap(w)
		r, info := withInfo(r)
		info.log = log
		defer func() {
			v := recover()
			status := statusOf(sw, v != nil)
			level := slog.LevelInfo
			if status >= 500 {
				level = slog.LevelWarn
			}
			route := info.route
			if route == "" {
				route = r.Pattern
			}
			if ctx := r.Context(); log.Enabled(ctx, level) {
				// Straight to the handler: Logger.LogAttrs would first walk
				// the stack for the caller's program counter, which only a
				// handler adding the source reads, and it would name this
				// closure.
				now := time.Now()
				rec := slog.NewRecord(now, level, "request", 0)
				rec.AddAttrs(slog.String("method", r.Method), slog.String("route", route),
					slog.Int("status", status), slog.Int("bytes", sw.bytes),
					slog.Duration("duration", now.Sub(start)), slog.String("request_id", info.id),
					slog.String("sub", info.sub))
				_ = log.Handler().Handle(ctx, rec)
			}
			if v != nil {
				panic(v)
			}
		}()
		next.ServeHTTP(sw, r)
	})
}

// recoverPanics turns a panic into a 500 problem, logged once with its stack
// to log, unless an outer accessLog already chose the logger.
func recoverPanics(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := wrap(w)
		r, info := withInfo(r)
		if info.log == nil {
			info.log = log
		}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			err := fmt.Errorf("panic: %v\n%s", v, debug.Stack())
			if sw.status != 0 {
				// Too late for a problem body: log, and cut the connection so
				// the client sees a failure rather than a truncated success.
				ctx := r.Context()
				loggerFrom(ctx).LogAttrs(ctx, slog.LevelError, "request failed after answering",
					slog.String("err", err.Error()), slog.String("request_id", requestIDFrom(ctx)))
				panic(http.ErrAbortHandler)
			}
			writeProblem(sw, r, err)
		}()
		next.ServeHTTP(sw, r)
	})
}

// withTimeout bounds a request, so that a slow database answers 503 in time
// instead of piling requests up, and its body's arrival by the same time: a
// context does not bound a read from the connection, and a client trickling
// a body in (to an unauthenticated route as well) would otherwise hold the
// connection and a goroutine for as long as it likes. Websocket upgrades
// are exempt: their context lives as long as the connection, whose reads
// the hub bounds itself.
func withTimeout(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			next.ServeHTTP(w, r)
			return
		}
		// The server sets the connection's deadlines afresh for its next
		// request. A writer that cannot (a test's recorder) has no
		// connection to hold.
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

var errTokenInURL = domain.Errorf(domain.CodeUnauthorized,
	"access_token in a URL is refused (it ends up in proxy logs and Referer headers); send Authorization: Bearer <token>")

// requireAuth authenticates the request by its Authorization header or
// answers 401. A request carrying access_token in its query string is
// refused, valid or not and whatever its header says, so that a client
// leaking its token into proxy logs finds out at once instead of working by
// accident. Only the websocket endpoint, which does not come through here,
// still reads it.
func requireAuth(a *auth.Authenticator, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "" && r.URL.Query().Has("access_token") {
			writeProblem(w, r, errTokenInURL)
			return
		}
		p, err := a.FromRequest(r)
		if err != nil {
			writeProblem(w, r, err)
			return
		}
		info := infoFrom(r.Context())
		if info != nil {
			info.sub = p.Subject
			info.route = r.Pattern
		}
		if p.Actor() == domain.ActorAuditor && !domain.AuditorMayCall(r.Method) {
			writeProblem(w, r, errAuditorReadsOnly)
			return
		}
		if info != nil {
			info.principal, info.authed = p, true
		} else {
			r = r.WithContext(auth.WithPrincipal(r.Context(), p))
		}
		next.ServeHTTP(w, r)
	})
}
