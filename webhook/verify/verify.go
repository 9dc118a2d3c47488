// Package verify checks orderd's webhook signatures on the receiving side.
// It uses the standard library only, so a receiver may import it or copy it.
//
// Every delivery carries
//
//	X-Orderd-Timestamp: <unix seconds>
//	X-Orderd-Signature-V2: t=<unix seconds>,v1=<hex HMAC-SHA256(webhook_secret, "<unix seconds>.<body>")>
//
// The timestamp is inside the signed text, so a captured delivery cannot be
// given a new one; Verify refuses any older than MaxAge. Within MaxAge a
// replay still verifies: receivers dedupe by X-Orderd-Delivery, which stays
// the same on every attempt of one message.
package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

const (
	// HeaderTimestamp is the header with the delivery's unix time.
	HeaderTimestamp = "X-Orderd-Timestamp"
	// HeaderSignature is the header with the timestamped signature.
	HeaderSignature = "X-Orderd-Signature-V2"
	// MaxAge is how far a signature's time may be from the receiver's clock,
	// either way, before the delivery is refused.
	MaxAge = 5 * time.Minute
	// maxHeader bounds the header Verify parses.
	maxHeader = 1024
)

var (
	// ErrMalformed is returned for a missing or unparseable signature header.
	ErrMalformed = errors.New("webhook signature header missing or malformed")
	// ErrMismatch is returned when no signature matches the body and secret.
	ErrMismatch = errors.New("webhook signature does not match")
	// ErrTooOld is returned for a signature whose time is more than MaxAge
	// from now: a replay of an old delivery, or a clock far off.
	ErrTooOld = errors.New("webhook signature timestamp outside the tolerated window")
)

// Sign returns the X-Orderd-Signature-V2 value of body sent at t.
func Sign(secret string, t time.Time, body []byte) string {
	unix := strconv.FormatInt(t.Unix(), 10)
	return "t=" + unix + ",v1=" + hex.EncodeToString(mac(secret, unix, body))
}

func mac(secret, unix string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(unix))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks an X-Orderd-Signature-V2 value against body, the secret and
// the receiver's clock now. It accepts the header if any of its v1 entries
// matches, so that a sender may sign with two secrets while one replaces the
// other.
func Verify(secret, header string, body []byte, now time.Time) error {
	unix, sigs, err := parse(header)
	if err != nil {
		return err
	}
	t, err := strconv.ParseInt(unix, 10, 64)
	if err != nil {
		return ErrMalformed
	}
	// Compare in seconds: a duration of unix seconds could overflow.
	if age := now.Unix() - t; age > int64(MaxAge/time.Second) || age < -int64(MaxAge/time.Second) {
		return fmt.Errorf("%w: signed at %d, now %d", ErrTooOld, t, now.Unix())
	}
	want := mac(secret, unix, body)
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			return nil
		}
	}
	return ErrMismatch
}

// parse splits "t=…,v1=…[,v1=…]"; entries of other schemes are skipped, so
// that a later scheme can be added beside v1.
func parse(header string) (unix string, sigs [][]byte, err error) {
	if header == "" || len(header) > maxHeader {
		return "", nil, ErrMalformed
	}
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return "", nil, ErrMalformed
		}
		switch k {
		case "t":
			if unix != "" || v == "" {
				return "", nil, ErrMalformed
			}
			for _, c := range v {
				if c < '0' || c > '9' {
					return "", nil, ErrMalformed
				}
			}
			unix = v
		case "v1":
			s, err := hex.DecodeString(v)
			if err != nil || len(s) != sha256.Size {
				return "", nil, ErrMalformed
			}
			sigs = append(sigs, s)
		}
	}
	if unix == "" || len(sigs) == 0 {
		return "", nil, ErrMalformed
	}
	return unix, sigs, nil
}

// maxBody bounds what Request reads; orderd's payloads are a few KiB.
const maxBody = 1 << 20

// Request reads r's body and verifies its signature at now. It returns the
// body only when the signature holds; a handler answers a non-nil error
// with 400 or 401 so that orderd does not count the delivery as received.
func Request(r *http.Request, secret string, now time.Time) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("read webhook body: %w", err)
	}
	if len(body) > maxBody {
		return nil, fmt.Errorf("webhook body over %d bytes", maxBody)
	}
	if err := Verify(secret, r.Header.Get(HeaderSignature), body, now); err != nil {
		return nil, err
	}
	return body, nil
}
