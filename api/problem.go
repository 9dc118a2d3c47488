package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/orderd/orderd/domain"
)

type problemKind struct {
	status int
	slug   string
	title  string
}

// problems is the one table from domain codes to HTTP answers.
var problems = map[domain.Code]problemKind{
	domain.CodeValidation:          {http.StatusUnprocessableEntity, "validation-failed", "The request is not valid"},
	domain.CodeMalformedJSON:       {http.StatusBadRequest, "malformed-json", "The body is not the JSON expected"},
	domain.CodeUnsupportedMedia:    {http.StatusUnsupportedMediaType, "unsupported-media-type", "The body must be application/json"},
	domain.CodePayloadTooLarge:     {http.StatusRequestEntityTooLarge, "payload-too-large", "The body is too large"},
	domain.CodeUnauthorized:        {http.StatusUnauthorized, "unauthorized", "Authentication is required"},
	domain.CodeForbidden:           {http.StatusForbidden, "forbidden", "Not allowed"},
	domain.CodeNotFound:            {http.StatusNotFound, "not-found", "Not found"},
	domain.CodeSoldOut:             {http.StatusConflict, "sold-out", "Sold out"},
	domain.CodePurchaseLimit:       {http.StatusConflict, "purchase-limit-reached", "Purchase limit reached"},
	domain.CodeInvalidTransition:   {http.StatusConflict, "invalid-transition", "The order cannot make this change"},
	domain.CodeIdempotencyReused:   {http.StatusUnprocessableEntity, "idempotency-key-reused", "The Idempotency-Key was used for another request"},
	domain.CodeIdempotencyRequired: {http.StatusBadRequest, "idempotency-key-required", "An Idempotency-Key header is required"},
	domain.CodeUnavailable:         {http.StatusServiceUnavailable, "unavailable", "Temporarily unavailable"},
	domain.CodeConflict:            {http.StatusConflict, "conflict", "Conflicting change"},
	domain.CodeRateLimited:         {http.StatusTooManyRequests, "rate-limited", "Too many requests"},
	domain.CodeInternal:            {http.StatusInternalServerError, "internal", "Internal error"},
}

const problemBase = "https://orderd.dev/problems/"

type problem struct {
	Type     string      `json:"type"`
	Title    string      `json:"title"`
	Status   int         `json:"status"`
	Detail   string      `json:"detail"`
	Code     domain.Code `json:"code"`
	Instance string      `json:"instance,omitempty"`
}

// retryAfterError asks the client to come back later.
type retryAfterError struct {
	err   *domain.Error
	after time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

func rateLimited(after time.Duration) error {
	return &retryAfterError{err: domain.Errorf(domain.CodeRateLimited, "too many requests; retry in %s", after.Round(time.Second)), after: after}
}

// writeProblem answers err as application/problem+json. Errors that are not
// domain errors are internal: logged once here, with the request id, and
// shown to the client only as "Internal error.".
func writeProblem(w http.ResponseWriter, r *http.Request, err error) {
	code := domain.ErrorCode(err)
	if code == domain.CodeInternal && (errors.Is(err, context.DeadlineExceeded) || errors.Is(r.Context().Err(), context.DeadlineExceeded)) {
		err = domain.Errorf(domain.CodeUnavailable, "the request timed out; retry")
		code = domain.CodeUnavailable
	}
	kind := problems[code]
	detail := domain.ErrorMessage(err)
	if code == domain.CodeInternal {
		slog.ErrorContext(r.Context(), "request failed", "err", err, "request_id", requestIDFrom(r.Context()),
			"method", r.Method, "route", r.Pattern)
	}
	switch code {
	case domain.CodeUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="orderd"`)
	case domain.CodeUnavailable:
		w.Header().Set("Retry-After", "1")
	}
	var ra *retryAfterError
	if errors.As(err, &ra) {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(ra.after.Seconds()+0.999))))
	}
	body, _ := json.Marshal(problem{
		Type: problemBase + kind.slug, Title: kind.title, Status: kind.status, Detail: detail, Code: code,
		Instance: requestIDFrom(r.Context()),
	})
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(kind.status)
	_, _ = w.Write(body)
}

// writeJSON encodes v once, then writes it with its length.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		http.Error(w, `{"code":"internal"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
