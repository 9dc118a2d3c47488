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

// secretBytes of randomness in every single-use secret: guessing a live one
// is as hopeless as guessing the JWT secret.
const secretBytes = 32

// TicketHash is what the database keeps of a single-use secret: whoever
// reads the table learns nothing they could use.
type TicketHash [sha256.Size]byte

// singleUse is a kind of single-use secret. Each kind has its own prefix, so
// that one pasted where another (or a bearer token) goes is recognised at a
// glance in a support conversation and refused without a database read.
type singleUse struct {
	prefix string
	// invalid answers every secret of this kind that does not work, whatever
	// the reason, so that a caller cannot tell a used one from a made-up one.
	invalid error
}

func (k singleUse) new() (string, TicketHash) {
	b := make([]byte, secretBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	s := k.prefix + base64.RawURLEncoding.EncodeToString(b)
	return s, sha256.Sum256([]byte(s))
}

// parse checks a secret's shape and returns the hash to look it up by.
func (k singleUse) parse(s string) (TicketHash, error) {
	if len(s) != len(k.prefix)+base64.RawURLEncoding.EncodedLen(secretBytes) || !strings.HasPrefix(s, k.prefix) {
		return TicketHash{}, k.invalid
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s[len(k.prefix):])
	if err != nil || len(b) != secretBytes {
		return TicketHash{}, k.invalid
	}
	return sha256.Sum256([]byte(s)), nil
}

var (
	// ErrBadTicket answers every ticket that does not open a websocket.
	ErrBadTicket = domain.Errorf(domain.CodeUnauthorized, "the ticket is invalid, expired or already used")
	// ErrBadSignInCode answers every sign-in code that does not sign in.
	ErrBadSignInCode = domain.Errorf(domain.CodeUnauthorized, "the sign-in code is invalid, expired or already used; ask for a new sign-in link")

	wsTicket   = singleUse{prefix: "wst_", invalid: ErrBadTicket}
	signInCode = singleUse{prefix: "sic_", invalid: ErrBadSignInCode}
)

// NewTicket returns a fresh single-use websocket ticket and its hash.
func NewTicket() (string, TicketHash) { return wsTicket.new() }

// ParseTicket checks a ticket's shape and returns the hash to look it up by.
// Anything not shaped like NewTicket's output is refused here, without a
// database read.
func ParseTicket(t string) (TicketHash, error) { return wsTicket.parse(t) }

// NewSignInCode returns a fresh single-use sign-in code and its hash.
func NewSignInCode() (string, TicketHash) { return signInCode.new() }

// ParseSignInCode checks a sign-in code's shape and returns the hash to look
// it up by.
func ParseSignInCode(c string) (TicketHash, error) { return signInCode.parse(c) }
