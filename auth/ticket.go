package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"time"

	"github.com/orderd/orderd/domain"
)

// TicketTTL is how long a websocket ticket may wait for its connection.
const TicketTTL = 60 * time.Second

// ticketPrefix marks a ticket so that one pasted where a bearer token goes
// (or the reverse) is recognised at a glance in a support conversation.
const ticketPrefix = "wst_"

// ticketBytes of randomness: guessing a live ticket is as hopeless as
// guessing the JWT secret.
const ticketBytes = 32

var ticketLen = len(ticketPrefix) + base64.RawURLEncoding.EncodedLen(ticketBytes)

// TicketHash is what the database keeps of a ticket: whoever reads the table
// learns nothing they could connect with.
type TicketHash [sha256.Size]byte

// NewTicket returns a fresh single-use websocket ticket and its hash.
func NewTicket() (string, TicketHash) {
	b := make([]byte, ticketBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	t := ticketPrefix + base64.RawURLEncoding.EncodeToString(b)
	return t, sha256.Sum256([]byte(t))
}

// ErrBadTicket answers every ticket that does not open a websocket, whatever
// the reason, so that a caller cannot tell a used ticket from a made-up one.
var ErrBadTicket = domain.Errorf(domain.CodeUnauthorized, "the ticket is invalid, expired or already used")

// ParseTicket checks a ticket's shape and returns the hash to look it up by.
// Anything not shaped like NewTicket's output is refused here, without a
// database read.
func ParseTicket(t string) (TicketHash, error) {
	if len(t) != ticketLen || !strings.HasPrefix(t, ticketPrefix) {
		return TicketHash{}, ErrBadTicket
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(t[len(ticketPrefix):])
	if err != nil || len(b) != ticketBytes {
		return TicketHash{}, ErrBadTicket
	}
	return sha256.Sum256([]byte(t)), nil
}
