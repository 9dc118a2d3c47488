package api

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// Pages of lists (API.md v1.1 "Lists").
const (
	defaultPageLimit = 50
	maxPageLimit     = 200
)

// cursors seals the key a list's next page starts after into an opaque
// next_cursor, and opens it again. A cursor is authenticated and bound to
// the list that gave it out (who lists, with which filters), so that one
// altered, made up or carried to another list is refused with 400 instead
// of paging from somewhere nobody was.
type cursors struct{ key []byte }

const (
	cursorVersion = 1
	cursorMACSize = 16
	// version, seq, time in microseconds, id, MAC
	cursorSize = 1 + 8 + 8 + 16 + cursorMACSize
)

var errBadCursor = domain.Errorf(domain.CodeInvalidCursor, "cursor is not one this list gave out; start again without it")

// newCursors keys cursors with key, or with a random key when there is none,
// which only that process then accepts.
func newCursors(key []byte) cursors {
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
	}
	return cursors{key: key}
}

func (c cursors) mac(scope string, payload []byte) []byte {
	h := hmac.New(sha256.New, c.key)
	h.Write([]byte(scope))
	h.Write([]byte{0})
	h.Write(payload)
	return h.Sum(nil)[:cursorMACSize]
}

// seal returns the cursor for the page after k in the list scope names, or
// nil (JSON null) when there is no next page.
func (c cursors) seal(scope string, k *store.PageKey) *string {
	if k == nil {
		return nil
	}
	b := make([]byte, 0, cursorSize)
	b = append(b, cursorVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(k.Seq))
	b = binary.BigEndian.AppendUint64(b, uint64(k.At.UnixMicro()))
	b = append(b, k.ID[:]...)
	b = append(b, c.mac(scope, b)...)
	s := base64.RawURLEncoding.EncodeToString(b)
	return &s
}

// open reads the request's cursor parameter for the list scope names: nil
// for the first page.
func (c cursors) open(r *http.Request, scope string) (*store.PageKey, error) {
	raw := r.URL.Query().Get("cursor")
	if raw == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil || len(b) != cursorSize || b[0] != cursorVersion {
		return nil, errBadCursor
	}
	payload, sum := b[:cursorSize-cursorMACSize], b[cursorSize-cursorMACSize:]
	if !hmac.Equal(sum, c.mac(scope, payload)) {
		return nil, errBadCursor
	}
	k := &store.PageKey{
		Seq: int64(binary.BigEndian.Uint64(payload[1:9])),
		At:  time.UnixMicro(int64(binary.BigEndian.Uint64(payload[9:17]))).UTC(),
		ID:  uuid.UUID(payload[17:33]),
	}
	return k, nil
}

// listScope names a list and its filters, so that a cursor opens only on
// the list that sealed it.
func listScope(parts ...string) string {
	s := ""
	for _, p := range parts {
		s += strconv.Quote(p)
	}
	return s
}

// parsePageLimit reads a paged list's limit parameter.
func parsePageLimit(r *http.Request) (int, error) {
	raw := r.URL.Query().Get("limit")
	if raw == "" {
		return defaultPageLimit, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > maxPageLimit {
		return 0, domain.Errorf(domain.CodeValidation, "limit must be an integer between 1 and %d", maxPageLimit)
	}
	return n, nil
}
