package api

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	fastjson "github.com/segmentio/encoding/json"

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
	domain.CodeMethodNotAllowed:    {http.StatusMethodNotAllowed, "method-not-allowed", "The resource does not serve this method"},
	domain.CodeSoldOut:             {http.StatusConflict, "sold-out", "Sold out"},
	domain.CodePurchaseLimit:       {http.StatusConflict, "purchase-limit-reached", "Purchase limit reached"},
	domain.CodeInvalidTransition:   {http.StatusConflict, "invalid-transition", "The order cannot make this change"},
	domain.CodeIdempotencyReused:   {http.StatusUnprocessableEntity, "idempotency-key-reused", "The Idempotency-Key was used for another request"},
	domain.CodeIdempotencyRequired: {http.StatusBadRequest, "idempotency-key-required", "An Idempotency-Key header is required"},
	domain.CodeInvalidCursor:       {http.StatusBadRequest, "invalid-cursor", "The cursor is not valid for this list"},
	domain.CodeUnavailable:         {http.StatusServiceUnavailable, "unavailable", "Temporarily unavailable"},
	domain.CodeConflict:            {http.StatusConflict, "conflict", "Conflicting change"},
	domain.CodeRateLimited:         {http.StatusTooManyRequests, "rate-limited", "Too many requests"},
	domain.CodeDropNotOpen:         {http.StatusConflict, "drop-not-open", "The drop is not open yet"},
	domain.CodeDropEnded:           {http.StatusConflict, "drop-ended", "The drop has ended"},
	domain.CodeNotInvited:          {http.StatusConflict, "not-invited", "Not invited to buy this drop's product"},
	domain.CodeMerchantPaused:      {http.StatusConflict, "merchant-paused", "The merchant is paused"},
	domain.CodeMerchantClosed:      {http.StatusConflict, "merchant-closed", "The merchant is closed"},
	domain.CodeSlotFull:            {http.StatusConflict, "slot-full", "The pickup slot is full"},
	domain.CodeProductUnavailable:  {http.StatusConflict, "product-unavailable", "The product is not available"},
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

// retryAfterError carries how long the client should wait, for the
// Retry-After header, alongside the domain error it answers.
type retryAfterError struct {
	err   *domain.Error
	after time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// rateLimited is the answer to a caller over its rate; after is how long
// until its next request would be allowed.
func rateLimited(after time.Duration) error {
	return &retryAfterError{
		err:   domain.Errorf(domain.CodeRateLimited, "too many requests; retry in %d s", ceilSeconds(after)),
		after: after,
	}
}

// ceilSeconds rounds up, and to at least 1, because Retry-After counts whole
// seconds and "0" would invite an immediate, equally refused retry.
func ceilSeconds(d time.Duration) int {
	return max(1, int((d+time.Second-1)/time.Second))
}

var (
	errTimedOut  = domain.Errorf(domain.CodeUnavailable, "the request timed out; retry later")
	errCancelled = domain.Errorf(domain.CodeUnavailable, "the request was cancelled")
)

// handlerFunc is a route's handler: it writes its answer, or returns the
// error that ServeHTTP, the one adapter, answers as a problem.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (h handlerFunc) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := h(w, r); err != nil {
		writeProblem(w, r, err)
	}
}

// writeProblem answers err as application/problem+json. Errors that are not
// domain errors are internal: logged once here, with the request id, and
// shown to the client only as "Internal error.".
func writeProblem(w http.ResponseWriter, r *http.Request, err error) {
	ctx := r.Context()
	if domain.ErrorCode(err) == domain.CodeInternal {
		switch {
		// A deadline is our own request timeout (or the database's), which
		// clients may retry like any other unavailability.
		case errors.Is(err, context.DeadlineExceeded), errors.Is(ctx.Err(), context.DeadlineExceeded):
			err = errTimedOut
		// The client hung up: nobody reads the answer and nothing is broken.
		case errors.Is(err, context.Canceled) && ctx.Err() != nil:
			err = errCancelled
		default:
			loggerFrom(ctx).LogAttrs(ctx, slog.LevelError, "request failed",
				slog.String("err", err.Error()), slog.String("request_id", requestIDFrom(ctx)),
				slog.String("method", r.Method), slog.String("route", r.Pattern))
		}
	}
	code := domain.ErrorCode(err)
	kind := problems[code]
	h := w.Header()
	switch code {
	case domain.CodeUnauthorized:
		h.Set("WWW-Authenticate", `Bearer realm="orderd"`)
	case domain.CodeUnavailable:
		h.Set("Retry-After", "1")
	}
	var ra *retryAfterError
	var de *domain.Error
	switch {
	case errors.As(err, &ra):
		h.Set("Retry-After", strconv.Itoa(ceilSeconds(ra.after)))
	case errors.As(err, &de) && de.RetryAfter > 0:
		h.Set("Retry-After", strconv.Itoa(ceilSeconds(de.RetryAfter)))
	}
	body, _ := fastjson.Marshal(problem{
		Type: problemBase + kind.slug, Title: kind.title, Status: kind.status,
		Detail: domain.ErrorMessage(err), Code: code, Instance: requestIDFrom(ctx),
	})
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(kind.status)
	_, _ = w.Write(body)
}

// writeJSON encodes v before writing anything, so that an encoding failure
// can still be answered with a clean 500 rather than half a body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	if err := fastjson.NewEncoder(&buf).Encode(v); err != nil {
		slog.Error("encode response", "err", err)
		body, _ := fastjson.Marshal(problem{
			Type: problemBase + "internal", Title: "Internal error", Status: http.StatusInternalServerError,
			Detail: "Internal error.", Code: domain.CodeInternal,
		})
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write(body)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
