package auth_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/domain"
)

var (
	secret = []byte("0123456789abcdef0123456789abcdef")
	now    = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	shopID = uuid.MustParse("0190f1e2-3b4c-7d5e-8f60-718293a4b5c6")
)

func clock() time.Time { return now }

func sign(t *testing.T, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(method, claims).SignedString(key)
	require.NoError(t, err)
	return tok
}

// unsigned builds an "alg: none" token by hand, the way an attacker would.
func unsigned(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc([]byte(claims)) + "."
}

func TestIssueParseRoundTrip(t *testing.T) {
	t.Parallel()
	a := auth.New(secret, clock)
	for _, p := range []auth.Principal{
		{Subject: "alice", Role: auth.RoleCustomer},
		{Subject: "shop-owner", Role: auth.RoleMerchant, MerchantID: shopID},
		{Subject: "root", Role: auth.RoleAdmin},
	} {
		t.Run(string(p.Role), func(t *testing.T) {
			t.Parallel()
			tok, err := a.Issue(p, time.Hour)
			require.NoError(t, err)
			got, err := a.Parse(tok)
			require.NoError(t, err)
			require.Equal(t, p, got)
		})
	}
}

func TestIssueClaims(t *testing.T) {
	t.Parallel()
	a := auth.New(secret, clock)
	tok, err := a.Issue(auth.Principal{Subject: "s", Role: auth.RoleMerchant, MerchantID: shopID}, time.Minute)
	require.NoError(t, err)
	var c jwt.MapClaims
	_, _, err = jwt.NewParser().ParseUnverified(tok, &c)
	require.NoError(t, err)
	require.Equal(t, "s", c["sub"])
	require.Equal(t, "merchant", c["role"])
	require.Equal(t, shopID.String(), c["merchant_id"])
	require.EqualValues(t, now.Unix(), c["iat"])
	require.EqualValues(t, now.Add(time.Minute).Unix(), c["exp"])

	tok, err = a.Issue(auth.Principal{Subject: "c", Role: auth.RoleCustomer}, time.Minute)
	require.NoError(t, err)
	c = jwt.MapClaims{}
	_, _, err = jwt.NewParser().ParseUnverified(tok, &c)
	require.NoError(t, err)
	require.NotContains(t, c, "merchant_id")
}

func TestIssueRefusesInvalidPrincipal(t *testing.T) {
	t.Parallel()
	a := auth.New(secret, clock)
	for name, p := range map[string]auth.Principal{
		"no subject":          {Role: auth.RoleCustomer},
		"long subject":        {Subject: strings.Repeat("x", 256), Role: auth.RoleCustomer},
		"unknown role":        {Subject: "x", Role: "root"},
		"merchant without id": {Subject: "x", Role: auth.RoleMerchant},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := a.Issue(p, time.Hour)
			require.Error(t, err)
		})
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	a := auth.New(secret, clock)
	exp := now.Add(time.Hour).Unix()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	valid := sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "a", "role": "customer", "exp": exp})

	tests := map[string]struct {
		token string
		msg   string
	}{
		"expired": {token: sign(t, jwt.SigningMethodHS256, secret,
			jwt.MapClaims{"sub": "a", "role": "customer", "exp": now.Add(-time.Minute).Unix()}), msg: "expired"},
		"no exp": {token: sign(t, jwt.SigningMethodHS256, secret,
			jwt.MapClaims{"sub": "a", "role": "customer"})},
		"wrong signature": {token: sign(t, jwt.SigningMethodHS256, []byte("another secret"),
			jwt.MapClaims{"sub": "a", "role": "customer", "exp": exp})},
		"tampered payload": {token: func() string {
			parts := strings.Split(valid, ".")
			parts[1] = base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"a","role":"admin","exp":` + strconv.FormatInt(exp, 10) + `}`))
			return strings.Join(parts, ".")
		}()},
		"alg none":          {token: unsigned(`{"sub":"a","role":"admin","exp":4102444800}`)},
		"alg none with sig": {token: unsigned(`{"sub":"a","role":"admin","exp":4102444800}`) + "c2ln"},
		"HS512": {token: sign(t, jwt.SigningMethodHS512, secret,
			jwt.MapClaims{"sub": "a", "role": "customer", "exp": exp})},
		"RS256": {token: sign(t, jwt.SigningMethodRS256, rsaKey,
			jwt.MapClaims{"sub": "a", "role": "customer", "exp": exp})},
		"missing role": {token: sign(t, jwt.SigningMethodHS256, secret,
			jwt.MapClaims{"sub": "a", "exp": exp}), msg: "role"},
		"unknown role": {token: sign(t, jwt.SigningMethodHS256, secret,
			jwt.MapClaims{"sub": "a", "role": "superuser", "exp": exp}), msg: "role"},
		"merchant without merchant_id": {token: sign(t, jwt.SigningMethodHS256, secret,
			jwt.MapClaims{"sub": "a", "role": "merchant", "exp": exp}), msg: "merchant_id"},
		"merchant with bad merchant_id": {token: sign(t, jwt.SigningMethodHS256, secret,
			jwt.MapClaims{"sub": "a", "role": "merchant", "merchant_id": "shop-1", "exp": exp}), msg: "merchant_id"},
		"missing sub": {token: sign(t, jwt.SigningMethodHS256, secret,
			jwt.MapClaims{"role": "customer", "exp": exp}), msg: "sub"},
		"long sub": {token: sign(t, jwt.SigningMethodHS256, secret,
			jwt.MapClaims{"sub": strings.Repeat("s", 256), "role": "customer", "exp": exp}), msg: "sub"},
		"garbage":  {token: "not.a.jwt"},
		"empty":    {token: ""},
		"one part": {token: "eyJhbGciOiJIUzI1NiJ9"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := a.Parse(tt.token)
			require.Error(t, err)
			var de *domain.Error
			require.True(t, errors.As(err, &de))
			require.Equal(t, domain.CodeUnauthorized, de.Code)
			require.Contains(t, de.Message, tt.msg)
			if tt.token != "" {
				require.NotContains(t, err.Error(), tt.token)
			}
			require.NotContains(t, err.Error(), string(secret))
		})
	}
}

// A token is verified once and remembered, but only until it expires, and a
// token that fails never becomes one that passes.
func TestRememberedTokensStillExpire(t *testing.T) {
	t.Parallel()
	at := now
	a := auth.New(secret, func() time.Time { return at })
	tok, err := a.Issue(auth.Principal{Subject: "alice", Role: auth.RoleCustomer}, time.Minute)
	require.NoError(t, err)
	for range 2 {
		p, err := a.Parse(tok)
		require.NoError(t, err)
		require.Equal(t, "alice", p.Subject)
	}
	parts := strings.Split(tok, ".")
	forged := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"alice","role":"admin","exp":4102444800}`)) + "." + parts[2]
	_, err = a.Parse(forged)
	require.Error(t, err)

	at = now.Add(time.Minute + 6*time.Second) // past the expiry and its 5 s leeway
	_, err = a.Parse(tok)
	require.ErrorContains(t, err, "expired")
}

// The tokens of a burst's customers stay remembered until they come again:
// twenty thousand customers ordering a few times each verify each token
// once.
func TestTokensOfABurstStayRemembered(t *testing.T) {
	t.Parallel()
	a := auth.New(secret, clock)
	const customers = 20000
	for i := range customers {
		tok, err := a.Issue(auth.Principal{Subject: fmt.Sprintf("c%d", i), Role: auth.RoleCustomer}, time.Hour)
		require.NoError(t, err)
		_, err = a.Parse(tok)
		require.NoError(t, err)
	}
	require.Equal(t, customers, auth.Remembered(a))
}

func TestFromRequest(t *testing.T) {
	t.Parallel()
	a := auth.New(secret, clock)
	tok, err := a.Issue(auth.Principal{Subject: "alice", Role: auth.RoleCustomer}, time.Hour)
	require.NoError(t, err)

	// viaHeader is FromRequest's verdict (every REST route); viaQuery is
	// FromRequestOrQuery's (the websocket endpoint only).
	tests := map[string]struct {
		target, header      string
		viaHeader, viaQuery bool
	}{
		"header":                 {target: "/", header: "Bearer " + tok, viaHeader: true, viaQuery: true},
		"lower-case scheme":      {target: "/", header: "bearer " + tok, viaHeader: true, viaQuery: true},
		"query":                  {target: "/v1/ws?access_token=" + tok, viaQuery: true},
		"none":                   {target: "/"},
		"basic scheme":           {target: "/", header: "Basic YTpi"},
		"empty bearer":           {target: "/", header: "Bearer "},
		"bad header beats query": {target: "/?access_token=" + tok, header: "Bearer nope"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("GET", tt.target, nil)
			if tt.header != "" {
				r.Header.Set("Authorization", tt.header)
			}
			for _, check := range []struct {
				from func(*http.Request) (auth.Principal, error)
				ok   bool
			}{{a.FromRequest, tt.viaHeader}, {a.FromRequestOrQuery, tt.viaQuery}} {
				p, err := check.from(r)
				if !check.ok {
					require.Equal(t, domain.CodeUnauthorized, domain.ErrorCode(err))
					continue
				}
				require.NoError(t, err)
				require.Equal(t, "alice", p.Subject)
			}
		})
	}
}

// TestIssuerAndAudience: when configured, both claims are written into
// issued tokens and required in accepted ones, so a token of another service
// sharing the secret (or one minted without them) is refused.
func TestIssuerAndAudience(t *testing.T) {
	t.Parallel()
	strict := auth.NewWith(auth.Options{Secret: secret, Issuer: "orderd-prod", Audience: "orderd-api", Now: clock})
	alice := auth.Principal{Subject: "alice", Role: auth.RoleCustomer}
	tok, err := strict.Issue(alice, time.Hour)
	require.NoError(t, err)
	p, err := strict.Parse(tok)
	require.NoError(t, err)
	require.Equal(t, alice, p)

	claims := func(extra jwt.MapClaims) jwt.MapClaims {
		c := jwt.MapClaims{"sub": "alice", "role": "customer", "exp": now.Add(time.Hour).Unix()}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	plain, err := auth.New(secret, clock).Issue(alice, time.Hour)
	require.NoError(t, err)
	for name, bad := range map[string]string{
		"neither":        plain,
		"issuer only":    sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"iss": "orderd-prod"})),
		"audience only":  sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"aud": "orderd-api"})),
		"other issuer":   sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"iss": "billing", "aud": "orderd-api"})),
		"other audience": sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"iss": "orderd-prod", "aud": "billing"})),
	} {
		_, err := strict.Parse(bad)
		require.Error(t, err, name)
		require.Equal(t, domain.CodeUnauthorized, domain.ErrorCode(err), name)
	}
	// A token listing several audiences, ours among them, is ours.
	multi := sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"iss": "orderd-prod", "aud": []string{"billing", "orderd-api"}}))
	_, err = strict.Parse(multi)
	require.NoError(t, err)
}

func TestTickets(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 100 {
		tk, hash := auth.NewTicket()
		require.False(t, seen[tk], "tickets repeat")
		seen[tk] = true
		got, err := auth.ParseTicket(tk)
		require.NoError(t, err)
		require.Equal(t, hash, got)
	}
	tk, _ := auth.NewTicket()
	for _, bad := range []string{"", "wst_", tk[:len(tk)-1], tk + "A", "xyz_" + tk[4:], tk[:len(tk)-1] + "=", tk[:10] + "+" + tk[11:]} {
		_, err := auth.ParseTicket(bad)
		require.ErrorIs(t, err, auth.ErrBadTicket, "%q", bad)
	}
}

// TestSignInCodes: codes are tickets of their own kind, so a websocket
// ticket never signs in and a sign-in code never opens a websocket.
func TestSignInCodes(t *testing.T) {
	t.Parallel()
	code, hash := auth.NewSignInCode()
	require.True(t, strings.HasPrefix(code, "sic_"))
	got, err := auth.ParseSignInCode(code)
	require.NoError(t, err)
	require.Equal(t, hash, got)
	_, err = auth.ParseTicket(code)
	require.ErrorIs(t, err, auth.ErrBadTicket)
	tk, _ := auth.NewTicket()
	for _, bad := range []string{"", "sic_", tk, code[:len(code)-1], code + "A"} {
		_, err := auth.ParseSignInCode(bad)
		require.ErrorIs(t, err, auth.ErrBadSignInCode, "%q", bad)
	}
}

func TestPrincipalHelpers(t *testing.T) {
	t.Parallel()
	other := uuid.New()
	admin := auth.Principal{Subject: "root", Role: auth.RoleAdmin}
	merchant := auth.Principal{Subject: "m", Role: auth.RoleMerchant, MerchantID: shopID}
	customer := auth.Principal{Subject: "c", Role: auth.RoleCustomer}

	require.True(t, admin.IsAdmin())
	require.False(t, merchant.IsAdmin())
	require.True(t, admin.ActsForMerchant(other))
	require.True(t, merchant.ActsForMerchant(shopID))
	require.False(t, merchant.ActsForMerchant(other))
	require.False(t, customer.ActsForMerchant(uuid.Nil))
	require.False(t, (auth.Principal{Role: auth.RoleMerchant}).ActsForMerchant(uuid.Nil))

	ctx := auth.WithPrincipal(t.Context(), merchant)
	got, ok := auth.PrincipalFrom(ctx)
	require.True(t, ok)
	require.Equal(t, merchant, got)
	_, ok = auth.PrincipalFrom(t.Context())
	require.False(t, ok)
}

// FuzzParseTicket: no string makes ParseTicket panic, and it accepts only
// NewTicket's own shape, spelled one way: the prefix and the canonical
// unpadded base64url of 32 bytes. Its hash is always the SHA-256 of the
// whole ticket, which is what IssueTicket stored.
func FuzzParseTicket(f *testing.F) {
	tk, _ := auth.NewTicket()
	f.Add(tk)
	f.Add(tk[:len(tk)-1] + "B")
	f.Add("wst_")
	f.Add("wst_" + strings.Repeat("A", 43))
	f.Add("wst_" + strings.Repeat("_", 42) + "=")
	f.Add("eyJhbGciOiJIUzI1NiJ9.e30.")
	f.Fuzz(func(t *testing.T, s string) {
		hash, err := auth.ParseTicket(s)
		if err != nil {
			require.ErrorIs(t, err, auth.ErrBadTicket)
			return
		}
		rest, ok := strings.CutPrefix(s, "wst_")
		require.True(t, ok)
		raw, err := base64.RawURLEncoding.DecodeString(rest)
		require.NoError(t, err)
		require.Len(t, raw, 32)
		require.Equal(t, rest, base64.RawURLEncoding.EncodeToString(raw), "one spelling per ticket")
		require.Equal(t, auth.TicketHash(sha256.Sum256([]byte(s))), hash)
	})
}
