package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/api"
	"github.com/orderd/orderd/auth"
)

type caller string

const (
	noToken       caller = "no token"
	expired       caller = "expired"
	wrongSig      caller = "wrong signature"
	algNone       caller = "alg none"
	ownerCustomer caller = "customer"
	otherCustomer caller = "other customer"
	ownerMerchant caller = "merchant"
	otherMerchant caller = "other merchant"
	admin         caller = "admin"
	auditor       caller = "auditor"
)

var callers = []caller{noToken, expired, wrongSig, algNone, ownerCustomer, otherCustomer, ownerMerchant, otherMerchant, admin, auditor}

// authzFixture is the world every cell of the matrix acts on: the owner's
// merchant and product, and an order of the owner customer at that merchant.
type authzFixture struct {
	b          *testBundle
	tokens     map[caller]string
	merchantID string
	productID  string
	// checkpointSize is the size of the log's one checkpoint.
	checkpointSize uint64
}

// order places a fresh order of the owner customer, so that a cell's action
// never depends on what another cell did to a shared one.
func (fx *authzFixture) order(t *testing.T, paid bool) string {
	t.Helper()
	ref := ""
	if paid {
		ref = "pay-" + uuid.NewString()
	}
	r := fx.b.placeOrder(t, fx.tokens[ownerCustomer], fx.merchantID, fx.productID, ref)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	return r.body["id"].(string)
}

// drop creates a fresh drop of a fresh limited product of the owner's
// merchant, open for entries (its opening moved into the past in SQL, as
// creation refuses a past time); with joined, the owner customer is in it.
func (fx *authzFixture) drop(t *testing.T, joined bool) string {
	t.Helper()
	product := fx.b.createProduct(t, fx.merchantID, map[string]any{"name": "Osmanthus cup", "price_cents": 500, "stock": 10})
	r := fx.b.do(t, req{method: "POST", path: "/v1/products/" + product + "/drops", token: fx.tokens[admin], body: dropBody()})
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	id := r.body["id"].(string)
	_, err := fx.b.pool.Exec(context.Background(), `UPDATE drops SET opens_at = now() - interval '1 minute' WHERE id = $1`, id)
	require.NoError(t, err)
	if joined {
		r := fx.b.do(t, req{method: "POST", path: "/v1/drops/" + id + "/entries", token: fx.tokens[ownerCustomer]})
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	}
	return id
}

func dropBody() map[string]any {
	return map[string]any{
		"opens_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "starts_at": time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339),
		"mode": "lottery",
	}
}

// deadLetter makes a dead-lettered webhook of merchantID in SQL: reaching one
// through the relay takes a dozen failed deliveries.
func deadLetter(t *testing.T, b *testBundle, merchantID string) string {
	t.Helper()
	ctx := context.Background()
	outboxID, dlID := uuid.New(), uuid.New()
	_, err := b.pool.Exec(ctx, `INSERT INTO outbox (id, merchant_id, order_id, order_version, event_type, payload, status, attempts)
		VALUES ($1, $2, $3, 1, 'order.accepted', '{}', 'dead', 12)`, outboxID, merchantID, uuid.New())
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `INSERT INTO dead_letters (id, kind, ref_id, merchant_id, reason, attempts)
		VALUES ($1, 'webhook', $2, $3, 'receiver answered 500', 12)`, dlID, outboxID, merchantID)
	require.NoError(t, err)
	return dlID.String()
}

// endpoint is one row of the matrix: how to build a request against fresh
// resources, and what each caller gets. Callers absent from allow are
// refused with deny; bad tokens are always 401.
type endpoint struct {
	method  string
	pattern string
	request func(t *testing.T, fx *authzFixture) (path string, body any)
	allow   map[caller]int
	deny    int
}

func fixed(path string, body any) func(*testing.T, *authzFixture) (string, any) {
	return func(*testing.T, *authzFixture) (string, any) { return path, body }
}

func everyone(status int) map[caller]int {
	return map[caller]int{ownerCustomer: status, otherCustomer: status, ownerMerchant: status, otherMerchant: status, admin: status}
}

func authzEndpoints() []endpoint {
	onMerchant := func(suffix string, body any) func(*testing.T, *authzFixture) (string, any) {
		return func(_ *testing.T, fx *authzFixture) (string, any) {
			return "/v1/merchants/" + fx.merchantID + suffix, body
		}
	}
	forMerchant := func(path string) func(*testing.T, *authzFixture) (string, any) {
		return func(_ *testing.T, fx *authzFixture) (string, any) { return path + "?merchant_id=" + fx.merchantID, nil }
	}
	onProduct := func(suffix string, body any) func(*testing.T, *authzFixture) (string, any) {
		return func(_ *testing.T, fx *authzFixture) (string, any) {
			return "/v1/products/" + fx.productID + suffix, body
		}
	}
	onOrder := func(paid bool, suffix string, body any) func(*testing.T, *authzFixture) (string, any) {
		return func(t *testing.T, fx *authzFixture) (string, any) {
			return "/v1/orders/" + fx.order(t, paid) + suffix, body
		}
	}
	onDrop := func(joined bool, suffix string) func(*testing.T, *authzFixture) (string, any) {
		return func(t *testing.T, fx *authzFixture) (string, any) {
			return "/v1/drops/" + fx.drop(t, joined) + suffix, nil
		}
	}
	onDeadLetter := func(suffix string, body any) func(*testing.T, *authzFixture) (string, any) {
		return func(t *testing.T, fx *authzFixture) (string, any) {
			return "/v1/admin/dead-letters/" + deadLetter(t, fx.b, fx.merchantID) + suffix, body
		}
	}
	// The order's owners see it; anybody else must not learn that it exists.
	orderReaders := map[caller]int{ownerCustomer: 200, ownerMerchant: 200, admin: 200}
	// An auditor reads every order, its events and its proof.
	orderAuditors := map[caller]int{ownerCustomer: 200, ownerMerchant: 200, admin: 200, auditor: 200}
	auditors := map[caller]int{admin: 200, auditor: 200}
	shopOwners := func(status int) map[caller]int { return map[caller]int{ownerMerchant: status, admin: status} }
	adminOnly := func(status int) map[caller]int { return map[caller]int{admin: status} }
	return []endpoint{
		{"POST", "/v1/merchants", fixed("/v1/merchants", map[string]any{"name": "New", "capacity": 1}), adminOnly(201), 403},
		{"GET", "/v1/merchants/{id}", onMerchant("", nil), everyone(200), 0},
		{"PATCH", "/v1/merchants/{id}", onMerchant("", map[string]any{"prep_seconds": 60}), adminOnly(200), 403},
		{"POST", "/v1/merchants/{id}/webhook-secret", onMerchant("/webhook-secret", nil), shopOwners(200), 403},
		{"POST", "/v1/merchants/{id}/products", onMerchant("/products", map[string]any{"name": "Tea", "price_cents": 100}), shopOwners(201), 403},
		{"GET", "/v1/merchants/{id}/products", onMerchant("/products", nil), everyone(200), 0},
		{"GET", "/v1/merchants/{id}/orders", onMerchant("/orders?status=accepted", nil), shopOwners(200), 403},
		{"GET", "/v1/merchants/{id}/slots", onMerchant("/slots", nil), everyone(200), 0},
		{"GET", "/v1/products/{id}", onProduct("", nil), everyone(200), 0},
		{"POST", "/v1/products/{id}/restock", onProduct("/restock", map[string]any{"quantity": 1}), shopOwners(200), 403},
		{"POST", "/v1/orders", func(_ *testing.T, fx *authzFixture) (string, any) {
			return "/v1/orders", map[string]any{"merchant_id": fx.merchantID, "items": []map[string]any{{"product_id": fx.productID, "quantity": 1}}}
		}, map[caller]int{ownerCustomer: 201, otherCustomer: 201}, 403},
		{"GET", "/v1/orders/{id}", onOrder(false, "", nil), orderAuditors, 404},
		{"GET", "/v1/orders/{id}/events", onOrder(false, "/events", nil), orderAuditors, 404},
		// Only customers pay, so merchants and admins are refused before the
		// order is looked up, which reveals nothing either.
		{"POST", "/v1/orders/{id}/pay", onOrder(false, "/pay", map[string]any{"payment_ref": "p"}),
			map[caller]int{ownerCustomer: 200, otherCustomer: 404, ownerMerchant: 403, otherMerchant: 403, admin: 403}, 0},
		{"POST", "/v1/orders/{id}/cancel", onOrder(false, "/cancel", map[string]any{"reason": "changed my mind"}), orderReaders, 404},
		// The owner customer sees the order but may not complete it.
		{"POST", "/v1/orders/{id}/complete", onOrder(true, "/complete", nil),
			map[caller]int{ownerCustomer: 403, ownerMerchant: 200, admin: 200}, 404},
		{"GET", "/v1/admin/dead-letters", fixed("/v1/admin/dead-letters?kind=webhook", nil), adminOnly(200), 403},
		{"POST", "/v1/admin/dead-letters/{id}/retry", onDeadLetter("/retry", nil), adminOnly(200), 403},
		{"POST", "/v1/admin/dead-letters/{id}/resolve", onDeadLetter("/resolve", map[string]any{"note": "handled"}), adminOnly(200), 403},
		{"POST", "/v1/admin/dead-letters/retry", forMerchant("/v1/admin/dead-letters/retry"), adminOnly(200), 403},
		{"GET", "/v1/admin/webhook-attempts", forMerchant("/v1/admin/webhook-attempts"), adminOnly(200), 403},
		{"GET", "/v1/admin/audit", fixed("/v1/admin/audit", nil), adminOnly(200), 403},
		// v1.1
		{"POST", "/v1/ws/tickets", fixed("/v1/ws/tickets", nil), everyone(201), 0},
		// Each customer lists its own orders; nobody else has such a list.
		{"GET", "/v1/orders", fixed("/v1/orders", nil), map[caller]int{ownerCustomer: 200, otherCustomer: 200}, 403},
		{"POST", "/v1/products/{id}/drops", func(t *testing.T, fx *authzFixture) (string, any) {
			product := fx.b.createProduct(t, fx.merchantID, map[string]any{"name": "Osmanthus cup", "price_cents": 500, "stock": 10})
			return "/v1/products/" + product + "/drops", dropBody()
		}, shopOwners(201), 403},
		{"GET", "/v1/drops/{id}", onDrop(false, ""), everyone(200), 0},
		{"POST", "/v1/drops/{id}/entries", onDrop(false, "/entries"), map[caller]int{ownerCustomer: 201, otherCustomer: 201}, 403},
		// An entry is its customer's: another customer has none to see.
		{"GET", "/v1/drops/{id}/entries/me", onDrop(true, "/entries/me"), map[caller]int{ownerCustomer: 200, otherCustomer: 404}, 403},
		{"GET", "/v1/drops/{id}/draw", onDrop(false, "/draw"), everyone(200), 0},
		{"POST", "/v1/admin/sign-in-codes", func(_ *testing.T, fx *authzFixture) (string, any) {
			return "/v1/admin/sign-in-codes", map[string]any{"sub": "kitchen", "role": "merchant", "merchant_id": fx.merchantID}
		}, adminOnly(201), 403},
		// The fixture's orders are accepted at once (capacity 1000): the
		// callers allowed to prioritize get past the check to the rule that
		// only a queued order moves; the owner customer sees the order but
		// may not move it.
		{"POST", "/v1/orders/{id}/prioritize", onOrder(true, "/prioritize", map[string]any{"reason": "staff"}),
			map[caller]int{ownerCustomer: 403, ownerMerchant: 409, admin: 409}, 404},
		// Rows run at once on one merchant, which a pause would stop admitting:
		// the callers allowed to pause get past the check to the validation.
		{"POST", "/v1/merchants/{id}/pause", onMerchant("/pause", map[string]any{"mode": "queue", "for_seconds": 0}), shopOwners(422), 403},
		{"POST", "/v1/merchants/{id}/resume", onMerchant("/resume", nil), shopOwners(200), 403},
		// v1.2
		{"GET", "/v1/orders/{id}/proof", onOrder(false, "/proof", nil), orderAuditors, 404},
		{"GET", "/v1/audit/checkpoints/latest", fixed("/v1/audit/checkpoints/latest", nil), auditors, 403},
		{"GET", "/v1/audit/checkpoints/consistency", func(_ *testing.T, fx *authzFixture) (string, any) {
			return fmt.Sprintf("/v1/audit/checkpoints/consistency?from=%d&to=%d", fx.checkpointSize, fx.checkpointSize), nil
		}, auditors, 403},
		// v1.2: a shop can run on it.
		{"PATCH", "/v1/merchants/{mid}/products/{pid}", onMenuItem(map[string]any{"price_cents": 550}), shopOwners(200), 403},
		{"DELETE", "/v1/merchants/{mid}/products/{pid}", onMenuItem(nil), shopOwners(204), 403},
		// The owner customer sees its order but may not hand it over.
		{"POST", "/v1/orders/{id}/picked-up", onCompletedOrder("/picked-up"), map[caller]int{ownerCustomer: 403, ownerMerchant: 200, admin: 200}, 404},
		{"POST", "/v1/orders/{id}/reopen", onCompletedOrder("/reopen"), map[caller]int{ownerCustomer: 403, ownerMerchant: 200, admin: 200}, 404},
	}
}

// onCompletedOrder names a fresh order of the owner customer that the
// admin completed.
func onCompletedOrder(suffix string) func(*testing.T, *authzFixture) (string, any) {
	return func(t *testing.T, fx *authzFixture) (string, any) {
		id := fx.order(t, true)
		r := fx.b.do(t, req{method: "POST", path: "/v1/orders/" + id + "/complete", token: fx.tokens[admin]})
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		return "/v1/orders/" + id + suffix, nil
	}
}

// onMenuItem names a fresh product of the owner's merchant, so that one
// cell's change (hiding it) leaves the others' alone.
func onMenuItem(body any) func(*testing.T, *authzFixture) (string, any) {
	return func(t *testing.T, fx *authzFixture) (string, any) {
		product := fx.b.createProduct(t, fx.merchantID, map[string]any{"name": "Oolong", "price_cents": 400})
		return "/v1/merchants/" + fx.merchantID + "/products/" + product, body
	}
}

// badTokens are forged with admin claims, so that accepting any of them would
// grant the most.
func badTokens(t *testing.T) map[caller]string {
	t.Helper()
	claims := func(exp time.Time) jwt.MapClaims {
		return jwt.MapClaims{"sub": "root", "role": "admin", "iat": time.Now().Add(-time.Hour).Unix(), "exp": exp.Unix()}
	}
	sign := func(c jwt.MapClaims, key []byte) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(key)
		require.NoError(t, err)
		return s
	}
	payload, err := json.Marshal(claims(time.Now().Add(time.Hour)))
	require.NoError(t, err)
	enc := base64.RawURLEncoding.EncodeToString
	return map[caller]string{
		noToken:  "",
		expired:  sign(claims(time.Now().Add(-time.Minute)), secret),
		wrongSig: sign(claims(time.Now().Add(time.Hour)), []byte("not-the-server-secret")),
		algNone:  enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc(payload) + ".",
	}
}

// TestAuthorizationMatrix sends every endpoint of API.md as every kind of
// caller, from the one table above.
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fx := &authzFixture{b: b, tokens: badTokens(t)}
	fx.merchantID = b.createMerchant(t, 1000)
	otherShop := b.createMerchant(t, 1000)
	fx.productID = b.createProduct(t, fx.merchantID, map[string]any{"name": "Milk tea", "price_cents": 500, "stock": 100000})
	fx.tokens[ownerCustomer] = b.customer(t, "alice")
	fx.tokens[otherCustomer] = b.customer(t, "mallory")
	fx.tokens[ownerMerchant] = b.token(t, auth.Principal{Subject: "shop", Role: auth.RoleMerchant, MerchantID: uuid.MustParse(fx.merchantID)})
	fx.tokens[otherMerchant] = b.token(t, auth.Principal{Subject: "rival", Role: auth.RoleMerchant, MerchantID: uuid.MustParse(otherShop)})
	fx.tokens[admin] = b.admin
	fx.tokens[auditor] = b.token(t, auth.Principal{Subject: "inspector", Role: auth.RoleAuditor})
	fx.checkpointSize = b.checkpoint(t)

	for _, ep := range authzEndpoints() {
		for _, c := range callers {
			want, ok := ep.allow[c]
			switch {
			case fx.tokens[c] == "" || c == expired || c == wrongSig || c == algNone:
				want = http.StatusUnauthorized
			case !ok && c == auditor && ep.method != "GET":
				want = http.StatusForbidden // an auditor changes nothing
			case !ok && c == auditor && ep.deny == 0:
				want = ep.allow[admin] // a read open to everyone
			case !ok:
				want = ep.deny
			}
			require.NotZero(t, want, "%s %s: no expectation for %s", ep.method, ep.pattern, c)
			t.Run(ep.method+" "+ep.pattern+"/"+string(c), func(t *testing.T) {
				t.Parallel()
				path, body := ep.request(t, fx)
				r := b.do(t, req{method: ep.method, path: path, token: fx.tokens[c], body: body,
					header: map[string]string{"Idempotency-Key": uuid.NewString()}})
				if want < 300 {
					require.Equal(t, want, r.status, string(r.raw))
					return
				}
				requireProblem(t, r, want, map[int]string{401: "unauthorized", 403: "forbidden", 404: "not_found", 409: "invalid_transition", 422: "validation_failed"}[want])
				if want == http.StatusUnauthorized {
					require.Contains(t, r.header.Get("WWW-Authenticate"), "Bearer")
				}
			})
		}
	}
}

// TestPublicEndpointsNeedNoToken keeps probes and scrapes working without
// credentials, and shows that a forged token does not break them either.
func TestPublicEndpointsNeedNoToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tokens := badTokens(t)
	for _, path := range []string{"/healthz", "/readyz", "/openapi.json"} {
		for _, c := range []caller{noToken, expired, wrongSig, algNone} {
			r := b.do(t, req{method: "GET", path: path, token: tokens[c]})
			require.Equal(t, http.StatusOK, r.status, "%s as %s: %s", path, c, r.raw)
		}
	}
}

// TestUnknownIDsAreNotFound sends every endpoint that takes an id a fresh
// one, as a caller who could act on it if it existed: the answer is 404, not
// a refusal or a conflict that would describe something that is not there.
func TestUnknownIDsAreNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	alice := b.customer(t, "alice")
	bodies := map[string]any{
		"PATCH /v1/merchants/{id}":                 map[string]any{"capacity": 1},
		"POST /v1/merchants/{id}/products":         map[string]any{"name": "Tea", "price_cents": 1},
		"POST /v1/products/{id}/restock":           map[string]any{"quantity": 1},
		"POST /v1/orders/{id}/pay":                 map[string]any{"payment_ref": "p"},
		"POST /v1/admin/dead-letters/{id}/resolve": map[string]any{"note": "n"},
		"POST /v1/products/{id}/drops":             map[string]any{"opens_at": "2099-01-01T00:00:00Z", "starts_at": "2099-01-02T00:00:00Z", "mode": "fifo"},
		"POST /v1/merchants/{id}/pause":            map[string]any{"mode": "refuse"},
		"PATCH /v1/merchants/{mid}/products/{pid}": map[string]any{"price_cents": 1},
	}
	for _, ep := range []struct{ method, path, token string }{
		{"GET", "/v1/merchants/{id}", b.admin},
		{"PATCH", "/v1/merchants/{id}", b.admin},
		{"POST", "/v1/merchants/{id}/webhook-secret", b.admin},
		{"POST", "/v1/merchants/{id}/products", b.admin},
		{"GET", "/v1/merchants/{id}/products", b.admin},
		{"GET", "/v1/merchants/{id}/orders", b.admin},
		{"GET", "/v1/merchants/{id}/slots", b.admin},
		{"GET", "/v1/products/{id}", b.admin},
		{"POST", "/v1/products/{id}/restock", b.admin},
		{"GET", "/v1/orders/{id}", b.admin},
		{"GET", "/v1/orders/{id}/events", b.admin},
		{"POST", "/v1/orders/{id}/pay", alice},
		{"POST", "/v1/orders/{id}/cancel", b.admin},
		{"POST", "/v1/orders/{id}/complete", b.admin},
		{"POST", "/v1/orders/{id}/prioritize", b.admin},
		{"POST", "/v1/merchants/{id}/pause", b.admin},
		{"POST", "/v1/merchants/{id}/resume", b.admin},
		{"POST", "/v1/admin/dead-letters/{id}/retry", b.admin},
		{"POST", "/v1/admin/dead-letters/{id}/resolve", b.admin},
		{"POST", "/v1/products/{id}/drops", b.admin},
		{"GET", "/v1/drops/{id}", b.admin},
		{"POST", "/v1/drops/{id}/entries", alice},
		{"GET", "/v1/drops/{id}/entries/me", alice},
		{"GET", "/v1/drops/{id}/draw", b.admin},
		{"PATCH", "/v1/merchants/{mid}/products/{pid}", b.admin},
		{"DELETE", "/v1/merchants/{mid}/products/{pid}", b.admin},
		{"POST", "/v1/orders/{id}/picked-up", b.admin},
		{"POST", "/v1/orders/{id}/reopen", b.admin},
	} {
		path := strings.Replace(ep.path, "{id}", uuid.NewString(), 1)
		path = strings.Replace(path, "{mid}", uuid.NewString(), 1)
		path = strings.Replace(path, "{pid}", uuid.NewString(), 1)
		r := b.do(t, req{method: ep.method, path: path, token: ep.token, body: bodies[ep.method+" "+ep.path]})
		require.Equal(t, http.StatusNotFound, r.status, "%s %s: %s", ep.method, ep.path, r.raw)
	}
}

// TestAuthorizationMatrixCoversEveryRoute makes whoever adds an endpoint add
// its row to the matrix: every route that takes a bearer token must be in
// authzEndpoints, so no endpoint ships without its nine callers tried.
func TestAuthorizationMatrixCoversEveryRoute(t *testing.T) {
	t.Parallel()
	// POST /v1/sign-in takes a code instead of a token: TestSignIn tries it.
	// Guest sessions take none: TestGuestSessions tries every caller.
	public := []string{"GET /healthz", "GET /readyz", "GET /openapi.json", "POST /v1/sign-in", "POST /v1/merchants/{id}/guest-sessions"}
	var rows []string
	for _, ep := range authzEndpoints() {
		rows = append(rows, ep.method+" "+ep.pattern)
	}
	srv := api.New(api.Config{Auth: auth.New(secret, nil)})
	for _, route := range srv.Routes() {
		if slices.Contains(public, route) {
			continue
		}
		require.Contains(t, rows, route, "api/authz_test.go: authzEndpoints has no row for %q", route)
	}
}
