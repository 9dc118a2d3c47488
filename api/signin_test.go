package api_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/api"
	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/store"
)

func (b *testBundle) mintSignInCode(t *testing.T, body map[string]any) string {
	t.Helper()
	r := b.do(t, req{method: "POST", path: "/v1/admin/sign-in-codes", token: b.admin, body: body})
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	require.Equal(t, "no-store", r.header.Get("Cache-Control"))
	return r.body["code"].(string)
}

// TestSignIn: a code minted by an admin buys a working token of exactly the
// holder it names, once; the database keeps only its hash.
func TestSignIn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	shop := b.createMerchant(t, 1)
	code := b.mintSignInCode(t, map[string]any{"sub": "kitchen-tablet", "role": "merchant", "merchant_id": shop, "token_ttl_seconds": 3600})

	var stored int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM sign_in_codes WHERE hash = $1`, hashOf(code)).Scan(&stored))
	require.Equal(t, 1, stored, "kept by its hash")
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM sign_in_codes WHERE hash = $1`, []byte(code)).Scan(&stored))
	require.Zero(t, stored, "never in clear")

	r := b.do(t, req{method: "POST", path: "/v1/sign-in", body: map[string]any{"code": code}})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "no-store", r.header.Get("Cache-Control"))
	require.Equal(t, "merchant", r.body["role"])
	require.Equal(t, "kitchen-tablet", r.body["sub"])
	require.Equal(t, shop, r.body["merchant_id"])
	expires, err := time.Parse(time.RFC3339, r.body["expires_at"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(time.Hour), expires, 10*time.Second)
	token := r.body["token"].(string)
	p, err := b.auth.Parse(token)
	require.NoError(t, err)
	require.Equal(t, auth.Principal{Subject: "kitchen-tablet", Role: auth.RoleMerchant, MerchantID: uuid.MustParse(shop)}, p)
	r = b.do(t, req{method: "GET", path: "/v1/merchants/" + shop + "/orders?status=queued", token: token})
	require.Equal(t, http.StatusOK, r.status, "the token acts for its merchant: %s", r.raw)

	r = b.do(t, req{method: "POST", path: "/v1/sign-in", body: map[string]any{"code": code}})
	requireProblem(t, r, http.StatusUnauthorized, "unauthorized")
	require.Contains(t, r.body["detail"], "already used")

	ticket, _ := auth.NewTicket()
	for _, bad := range []string{"", "sic_nope", ticket, token} {
		r = b.do(t, req{method: "POST", path: "/v1/sign-in", body: map[string]any{"code": bad}})
		requireProblem(t, r, http.StatusUnauthorized, "unauthorized")
	}
}

// TestSignInCodeWorksOnce races one code from many goroutines: exactly one
// gets a token.
func TestSignInCodeWorksOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code := b.mintSignInCode(t, map[string]any{"sub": "alice", "role": "customer"})
	const racers = 8
	statuses := make(chan int, racers)
	var wg sync.WaitGroup
	for range racers {
		wg.Go(func() {
			statuses <- b.do(t, req{method: "POST", path: "/v1/sign-in", body: map[string]any{"code": code}}).status
		})
	}
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for s := range statuses {
		counts[s]++
	}
	require.Equal(t, map[int]int{http.StatusOK: 1, http.StatusUnauthorized: racers - 1}, counts)
}

// TestSignInCodeExpires: a code not used in time never signs in.
func TestSignInCodeExpires(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code, hash := auth.NewSignInCode()
	_, err := b.store.IssueSignInCode(context.Background(), &store.IssueSignInCodeParams{Hash: hash,
		Holder: store.TicketHolder{Subject: "alice", Role: "customer"}, TTL: -time.Second, TokenTTL: time.Hour})
	require.NoError(t, err)
	r := b.do(t, req{method: "POST", path: "/v1/sign-in", body: map[string]any{"code": code}})
	requireProblem(t, r, http.StatusUnauthorized, "unauthorized")
}

// TestMintSignInCodeValidates: a code names a real holder.
func TestMintSignInCodeValidates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	shop := b.createMerchant(t, 1)
	for _, body := range []map[string]any{
		{"role": "customer"},
		{"sub": "x", "role": "root"},
		{"sub": "x", "role": "merchant"},
		{"sub": "x", "role": "customer", "merchant_id": shop},
		{"sub": "x", "role": "customer", "expires_in_seconds": 7200},
		{"sub": "x", "role": "customer", "token_ttl_seconds": 1},
		{"sub": "x", "role": "customer", "lane": "vip"},
		{"sub": "x", "role": "merchant", "merchant_id": shop, "lane": "priority"},
	} {
		r := b.do(t, req{method: "POST", path: "/v1/admin/sign-in-codes", token: b.admin, body: body})
		requireProblem(t, r, http.StatusUnprocessableEntity, "validation_failed")
	}
	r := b.do(t, req{method: "POST", path: "/v1/admin/sign-in-codes", token: b.admin,
		body: map[string]any{"sub": "x", "role": "merchant", "merchant_id": uuid.NewString()}})
	requireProblem(t, r, http.StatusNotFound, "not_found")
}

// TestSignInIsRateLimitedPerAddress: guesses cost a database read each, so a
// client address gets a few per second, spent whether the code works or not.
func TestSignInIsRateLimitedPerAddress(t *testing.T) {
	t.Parallel()
	limited := serveWith(t, func(c *api.Config) { c.RateSignIn = 1 })
	made, _ := auth.NewSignInCode()
	var statuses []int
	for range 3 {
		statuses = append(statuses, limited.do(t, req{method: "POST", path: "/v1/sign-in", body: map[string]any{"code": made}}).status)
	}
	require.Equal(t, []int{http.StatusUnauthorized, http.StatusUnauthorized, http.StatusTooManyRequests}, statuses, "a burst of two")
}

func hashOf(code string) []byte {
	h := sha256.Sum256([]byte(code))
	return h[:]
}

// TestSignInCodeCarriesTheLane: a platform signs a member in to the
// priority lane with a code; the token it buys places priority orders.
func TestSignInCodeCarriesTheLane(t *testing.T) {
	t.Parallel()
	b := setup(t)
	shop := b.createMerchant(t, 1)
	product := b.createProduct(t, shop, map[string]any{"name": "Tea", "price_cents": 100})
	for _, lane := range []string{"priority", "normal"} {
		code := b.mintSignInCode(t, map[string]any{"sub": "member-" + lane, "role": "customer", "lane": lane})
		r := b.do(t, req{method: "POST", path: "/v1/sign-in", body: map[string]any{"code": code}})
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.Equal(t, lane, r.body["lane"])
		placed := b.placeOrder(t, r.body["token"].(string), shop, product, "pay-"+lane)
		require.Equal(t, http.StatusCreated, placed.status, string(placed.raw))
		require.Equal(t, lane, placed.body["lane"])
	}
	code := b.mintSignInCode(t, map[string]any{"sub": "kitchen", "role": "merchant", "merchant_id": shop})
	r := b.do(t, req{method: "POST", path: "/v1/sign-in", body: map[string]any{"code": code}})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Nil(t, r.body["lane"], "a merchant has no lane")
}
