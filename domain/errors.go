// Package domain holds orderd's business rules: the order, merchant and product
// state machines, admission decisions and the ETA estimator. It performs no I/O
// and never reads the clock; callers pass time in.
package domain

import (
	"errors"
	"fmt"
	"time"
)

// Code is a stable, machine-readable error code. The api package maps each
// code to an HTTP status and problem type in one table.
type Code string

const (
	CodeValidation          Code = "validation_failed"
	CodeMalformedJSON       Code = "malformed_json"
	CodeUnsupportedMedia    Code = "unsupported_media_type"
	CodePayloadTooLarge     Code = "payload_too_large"
	CodeUnauthorized        Code = "unauthorized"
	CodeForbidden           Code = "forbidden"
	CodeNotFound            Code = "not_found"
	CodeMethodNotAllowed    Code = "method_not_allowed"
	CodeSoldOut             Code = "sold_out"
	CodePurchaseLimit       Code = "purchase_limit_reached"
	CodeInvalidTransition   Code = "invalid_transition"
	CodeIdempotencyReused   Code = "idempotency_key_reused"
	CodeIdempotencyRequired Code = "idempotency_key_required"
	CodeInvalidCursor       Code = "invalid_cursor"
	CodeUnavailable         Code = "unavailable"
	CodeConflict            Code = "conflict"
	CodeRateLimited         Code = "rate_limited"
	CodeDropNotOpen         Code = "drop_not_open"
	CodeDropEnded           Code = "drop_ended"
	CodeNotInvited          Code = "not_invited"
	CodeMerchantPaused      Code = "merchant_paused"
	CodeMerchantClosed      Code = "merchant_closed"
	CodeSlotFull            Code = "slot_full"
	CodeProductUnavailable  Code = "product_unavailable"
	CodeInternal            Code = "internal"
)

// Error is the one application error type. Message is safe to show to users.
type Error struct {
	Code    Code
	Message string
	// RetryAfter, when set, is how long until the refusal may end.
	RetryAfter time.Duration
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Is makes errors.Is(err, &Error{Code: c}) match on the code alone.
func (e *Error) Is(target error) bool {
	var t *Error
	if !errors.As(target, &t) {
		return false
	}
	return t.Code == e.Code && (t.Message == "" || t.Message == e.Message)
}

// Errorf builds an *Error with a formatted user-facing message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, or CodeInternal.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrorMessage returns the user-facing message of err, hiding internal details.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "Internal error."
}

// MerchantPausedError refuses a placement at a merchant paused in refuse
// mode, saying when the pause ends if it is known.
func MerchantPausedError(p Pause, now time.Time) *Error {
	e := Errorf(CodeMerchantPaused, "the merchant is not taking orders right now")
	if after := p.RetryAfter(now); after > 0 {
		e.Message = fmt.Sprintf("the merchant is not taking orders until %s", p.Until.UTC().Format(time.RFC3339))
		e.RetryAfter = after
	}
	return e
}

// Sentinels for matching with errors.Is.
var (
	ErrNotFound          = &Error{Code: CodeNotFound}
	ErrSoldOut           = &Error{Code: CodeSoldOut}
	ErrPurchaseLimit     = &Error{Code: CodePurchaseLimit}
	ErrInvalidTransition = &Error{Code: CodeInvalidTransition}
	ErrConflict          = &Error{Code: CodeConflict}
	ErrUnavailable       = &Error{Code: CodeUnavailable}
	ErrSlotFull          = &Error{Code: CodeSlotFull}
	ErrMerchantClosed    = &Error{Code: CodeMerchantClosed}
)
