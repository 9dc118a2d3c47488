// Package auth issues and checks orderd's bearer tokens (HS256 JWTs) and
// carries the caller's identity through a request.
package auth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/orderd/orderd/domain"
)

// Role is what a caller may do.
type Role string

const (
	RoleCustomer Role = "customer"
	RoleMerchant Role = "merchant"
	RoleAdmin    Role = "admin"
	// RoleAuditor reads orders, their events and proofs, and the audit
	// endpoints; it changes nothing.
	RoleAuditor Role = "auditor"
)

// Principal is an authenticated caller.
type Principal struct {
	Subject    string
	Role       Role
	MerchantID uuid.UUID // set for RoleMerchant only
	// Lane is the queue lane a customer's orders go to: "" (normal) or
	// priority, for staff or members the platform trusts.
	Lane domain.Lane
}

// IsAdmin reports whether p may do everything.
func (p Principal) IsAdmin() bool { return p.Role == RoleAdmin }

// ActsForMerchant reports whether p may act on merchant id's behalf (the
// rule is domain.Party.MayActForMerchant).
func (p Principal) ActsForMerchant(id uuid.UUID) bool {
	// A zero id never matches, so a principal built without one grants nothing.
	if id == uuid.Nil {
		return false
	}
	return p.Party().MayActForMerchant(id)
}

// Party is p in the domain's terms.
func (p Principal) Party() domain.Party {
	return domain.Party{Actor: p.Actor(), Subject: p.Subject, MerchantID: p.MerchantID}
}

type claims struct {
	Role       Role        `json:"role"`
	MerchantID string      `json:"merchant_id,omitempty"`
	Lane       domain.Lane `json:"lane,omitempty"`
	jwt.RegisteredClaims
}

// Authenticator signs and verifies tokens with one HS256 secret.
type Authenticator struct {
	secret   []byte
	issuer   string
	audience string
	now      func() time.Time
	parser   *jwt.Parser

	// verified remembers tokens already checked, until they expire: a
	// client sends the same token with every request, and decoding and
	// checking it again cost a placement more CPU than its SQL encoding.
	// The key is the whole token, signature included, so only a token that
	// was itself verified is ever found.
	mu       sync.Mutex
	verified map[string]verifiedToken
}

type verifiedToken struct {
	principal Principal
	expires   time.Time
}

// maxVerified bounds the memory of verified tokens (a few hundred bytes
// each); when full, they are forgotten all at once and verified again as
// they come. It is above the customers of a busy burst: below their number,
// customers who each order a few times have their tokens forgotten before
// they come again, and every request verifies its signature.
const maxVerified = 50000

// New returns an Authenticator; now nil means time.Now.
func New(secret []byte, now func() time.Time) *Authenticator {
	return NewWith(Options{Secret: secret, Now: now})
}

// Options configure an Authenticator.
type Options struct {
	Secret []byte
	// Issuer and Audience, when set, are written into every token issued and
	// required in every token accepted, so that a token minted for another
	// service sharing the secret is refused.
	Issuer   string
	Audience string
	// Now nil means time.Now.
	Now func() time.Time
}

// NewWith returns an Authenticator configured by o.
func NewWith(o Options) *Authenticator {
	if o.Now == nil {
		o.Now = time.Now
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(o.Now),
		jwt.WithLeeway(5 * time.Second),
	}
	if o.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(o.Issuer))
	}
	if o.Audience != "" {
		opts = append(opts, jwt.WithAudience(o.Audience))
	}
	return &Authenticator{
		secret:   o.Secret,
		issuer:   o.Issuer,
		audience: o.Audience,
		now:      o.Now,
		verified: map[string]verifiedToken{},
		parser:   jwt.NewParser(opts...),
	}
}

// Issue signs a token for p valid for ttl.
func (a *Authenticator) Issue(p Principal, ttl time.Duration) (string, error) {
	token, _, err := a.IssueExpiring(p, ttl)
	return token, err
}

// IssueExpiring is Issue, also answering when the token expires.
func (a *Authenticator) IssueExpiring(p Principal, ttl time.Duration) (string, time.Time, error) {
	if err := p.validate(); err != nil {
		return "", time.Time{}, err
	}
	now := a.now()
	c := claims{
		Role: p.Role,
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    a.issuer,
			Subject:   p.Subject,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		},
	}
	if a.audience != "" {
		c.Audience = jwt.ClaimStrings{a.audience}
	}
	if p.Role == RoleMerchant {
		c.MerchantID = p.MerchantID.String()
	}
	c.Lane = p.Lane
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(a.secret)
	return token, c.ExpiresAt.Time, err
}

func (p Principal) validate() error {
	if p.Subject == "" || len(p.Subject) > domain.MaxIDLength {
		return domain.Errorf(domain.CodeUnauthorized, "the token's sub must be 1-%d characters", domain.MaxIDLength)
	}
	switch p.Role {
	case RoleCustomer, RoleAdmin, RoleAuditor:
	case RoleMerchant:
		if p.MerchantID == uuid.Nil {
			return domain.Errorf(domain.CodeUnauthorized, "a merchant token needs a merchant_id")
		}
	default:
		return domain.Errorf(domain.CodeUnauthorized, "the token's role must be customer, merchant, admin or auditor")
	}
	if p.Lane != "" && (!p.Lane.Valid() || p.Role != RoleCustomer) {
		return domain.Errorf(domain.CodeUnauthorized, `the token's lane must be "normal" or "priority", on a customer token`)
	}
	return nil
}

// Parse verifies a token and returns its principal. Only HS256 with this
// secret is accepted; "alg: none" and other algorithms are refused.
func (a *Authenticator) Parse(token string) (Principal, error) {
	now := a.now()
	a.mu.Lock()
	v, ok := a.verified[token]
	a.mu.Unlock()
	if ok && now.Before(v.expires) {
		return v.principal, nil
	}
	p, expires, err := a.verify(token)
	if err != nil {
		return Principal{}, err
	}
	a.mu.Lock()
	if len(a.verified) >= maxVerified {
		clear(a.verified)
	}
	a.verified[token] = verifiedToken{principal: p, expires: expires}
	a.mu.Unlock()
	return p, nil
}

func (a *Authenticator) verify(token string) (Principal, time.Time, error) {
	var c claims
	if _, err := a.parser.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return a.secret, nil }); err != nil {
		msg := "the bearer token is invalid"
		switch {
		case errors.Is(err, jwt.ErrTokenExpired):
			msg = "the bearer token has expired"
		case errors.Is(err, jwt.ErrTokenInvalidIssuer), errors.Is(err, jwt.ErrTokenInvalidAudience):
			msg = "the bearer token was issued for another service"
		}
		return Principal{}, time.Time{}, domain.Errorf(domain.CodeUnauthorized, "%s", msg)
	}
	p := Principal{Subject: c.Subject, Role: c.Role, Lane: c.Lane}
	if c.Role == RoleMerchant {
		id, err := uuid.Parse(c.MerchantID)
		if err != nil {
			return Principal{}, time.Time{}, domain.Errorf(domain.CodeUnauthorized, "a merchant token needs a valid merchant_id")
		}
		p.MerchantID = id
	}
	if err := p.validate(); err != nil {
		return Principal{}, time.Time{}, err
	}
	// Remembered until its expiry without the leeway: a token inside the
	// leeway is verified again, and accepted or refused by the parser.
	return p, c.ExpiresAt.Time, nil
}

var errNoToken = domain.Errorf(domain.CodeUnauthorized, "a bearer token is required (Authorization: Bearer <token>)")

// FromRequest authenticates r by its Authorization header.
func (a *Authenticator) FromRequest(r *http.Request) (Principal, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return Principal{}, errNoToken
	}
	scheme, rest, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return Principal{}, domain.Errorf(domain.CodeUnauthorized, "the Authorization header must be 'Bearer <token>'")
	}
	token := strings.TrimSpace(rest)
	if token == "" {
		return Principal{}, errNoToken
	}
	return a.Parse(token)
}

// FromRequestOrQuery is FromRequest, falling back to the access_token query
// parameter. Only the websocket endpoint may use it, for browsers written
// before tickets: a token in a URL ends up in proxy logs and Referer headers.
func (a *Authenticator) FromRequestOrQuery(r *http.Request) (Principal, error) {
	if r.Header.Get("Authorization") != "" {
		return a.FromRequest(r)
	}
	token := r.URL.Query().Get("access_token")
	if token == "" {
		return Principal{}, errNoToken
	}
	return a.Parse(token)
}

type ctxKey struct{}

// WithPrincipal stores p in ctx.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// PrincipalFrom returns the principal stored in ctx.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(ctxKey{}).(Principal)
	return p, ok
}

// Actor is the principal's role in the domain's terms.
func (p Principal) Actor() domain.Actor {
	switch p.Role {
	case RoleAdmin:
		return domain.ActorAdmin
	case RoleMerchant:
		return domain.ActorMerchant
	case RoleAuditor:
		return domain.ActorAuditor
	}
	return domain.ActorCustomer
}

// GuestPrefix starts the subject of every guest session's token.
const GuestPrefix = "guest:"

// NewGuestSubject is a fresh walk-in customer's subject: GuestPrefix and
// 128 random bits, which nobody can guess to read another guest's orders.
func NewGuestSubject() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return GuestPrefix + hex.EncodeToString(b)
}
