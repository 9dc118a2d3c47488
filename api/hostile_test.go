package api_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/api"
	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/store"
)

// injections are classic SQL-injection payloads. Sent in every string field,
// header and query parameter, each must be refused cleanly or stored as
// plain text.
var injections = []string{
	`'; DROP TABLE orders; --`,
	`' OR 1=1 --`,
	`" OR ""="`,
	`Robert'); DROP TABLE merchants;--`,
	`1; SELECT pg_sleep(3)`,
	`' UNION SELECT webhook_secret FROM merchants --`,
	`\'; TRUNCATE events CASCADE; --`,
	`$1::text`,
	`%' AND 1=0 --`,
}

// TestSQLInjectionIsData sends the payloads in every string a client controls:
// names, payment references, reasons, notes, the Idempotency-Key and
// X-Request-Id headers, query parameters and path ids. Each answers without a
// 5xx and without delay; stored text comes back verbatim; no table is harmed.
func TestSQLInjectionIsData(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	merchantID := b.createMerchant(t, 1000)
	productID := b.createProduct(t, merchantID, map[string]any{"name": "Tea", "price_cents": 100})
	alice := b.customer(t, "alice")
	merchant := b.token(t, auth.Principal{Subject: "shop", Role: auth.RoleMerchant, MerchantID: uuid.MustParse(merchantID)})

	// Each request on its own must answer before an injected pg_sleep(3)
	// would have: timing the whole loop instead failed on a loaded machine.
	do := func(r req) response {
		t.Helper()
		begin := time.Now()
		out := b.do(t, r)
		require.Less(t, time.Since(begin), 3*time.Second, "pg_sleep must stay text: %s %s", r.method, r.path)
		return out
	}
	clean := func(r response, what string) {
		t.Helper()
		require.Less(t, r.status, 500, "%s: %s", what, r.raw)
	}
	for _, inj := range injections {
		m := do(req{method: "POST", path: "/v1/merchants", token: b.admin, body: map[string]any{"name": inj, "capacity": 1}})
		require.Equal(t, http.StatusCreated, m.status, string(m.raw))
		require.Equal(t, inj, m.body["name"])
		got := do(req{method: "GET", path: "/v1/merchants/" + m.body["id"].(string), token: alice})
		require.Equal(t, inj, got.body["name"], "stored verbatim")
		patched := do(req{method: "PATCH", path: "/v1/merchants/" + merchantID, token: b.admin, body: map[string]any{"name": inj}})
		require.Equal(t, inj, patched.body["name"], string(patched.raw))

		p := do(req{method: "POST", path: "/v1/merchants/" + merchantID + "/products", token: merchant, body: map[string]any{"name": inj, "price_cents": 1}})
		require.Equal(t, http.StatusCreated, p.status, string(p.raw))
		require.Equal(t, inj, p.body["name"])

		// The key and the payment reference are stored; the request id is
		// replaced, since it would reach the logs.
		placed := do(req{method: "POST", path: "/v1/orders", token: alice,
			body:   map[string]any{"merchant_id": merchantID, "items": []map[string]any{{"product_id": productID, "quantity": 1}}, "payment_ref": inj},
			header: map[string]string{"Idempotency-Key": inj, "X-Request-Id": inj}})
		require.Equal(t, http.StatusCreated, placed.status, string(placed.raw))
		require.NotEqual(t, inj, placed.header.Get("X-Request-Id"))
		orderID := placed.body["id"].(string)
		var storedKey, storedRef string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT idempotency_key, payment_ref FROM orders WHERE id = $1`,
			orderID).Scan(&storedKey, &storedRef))
		require.Equal(t, inj, storedKey)
		require.Equal(t, inj, storedRef)

		unpaid := b.placeOrder(t, alice, merchantID, productID, "")
		require.Equal(t, http.StatusCreated, unpaid.status, string(unpaid.raw))
		unpaidID := unpaid.body["id"].(string)
		paid := do(req{method: "POST", path: "/v1/orders/" + unpaidID + "/pay", token: alice, body: map[string]any{"payment_ref": inj}})
		require.Equal(t, http.StatusOK, paid.status, string(paid.raw))
		cancelled := do(req{method: "POST", path: "/v1/orders/" + unpaidID + "/cancel", token: merchant, body: map[string]any{"reason": inj}})
		require.Equal(t, http.StatusOK, cancelled.status, string(cancelled.raw))
		require.Equal(t, inj, cancelled.body["status_reason"])

		q := url.QueryEscape(inj)
		for _, path := range []string{
			"/v1/merchants/" + merchantID + "/orders?status=" + q,
			"/v1/merchants/" + merchantID + "/orders?limit=" + q,
			"/v1/admin/dead-letters?kind=" + q,
			"/v1/admin/dead-letters?merchant_id=" + q,
			"/v1/admin/dead-letters?unresolved=" + q,
			"/v1/admin/webhook-attempts?outbox_id=" + q,
			"/v1/admin/webhook-attempts?merchant_id=" + merchantID + "&limit=" + q,
			"/v1/orders/" + url.PathEscape(inj),
			"/v1/products/" + url.PathEscape(inj),
			"/v1/merchants/" + url.PathEscape(inj),
		} {
			r := do(req{method: "GET", path: path, token: b.admin})
			clean(r, path)
			require.Contains(t, []int{200, 404, 422}, r.status, "%s: %s", path, r.raw)
		}
		dl := deadLetter(t, b, merchantID)
		resolved := do(req{method: "POST", path: "/v1/admin/dead-letters/" + dl + "/resolve", token: b.admin, body: map[string]any{"note": inj}})
		require.Equal(t, http.StatusOK, resolved.status, string(resolved.raw))
		var note string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT note FROM dead_letters WHERE id = $1`, dl).Scan(&note))
		require.Equal(t, inj, note)
	}

	var tables int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'
		AND tablename IN ('orders', 'merchants', 'events', 'products')`).Scan(&tables))
	require.Equal(t, 4, tables, "tables intact")
	var orders, events int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM events)`).Scan(&orders, &events))
	require.Equal(t, 2*len(injections), orders)
	require.Positive(t, events)
}

// syncBuffer is a log sink the server writes from many goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// TestSecretsStayOutOfLogsAndAnswers captures everything the server logs at
// debug level while tokens travel in headers and access_token parameters,
// webhook secrets are made and rotated, and requests fail in every way,
// internal errors included. No token, JWT secret or webhook secret may
// appear in the logs, and webhook secrets appear in no answer but the one
// that creates them.
func TestSecretsStayOutOfLogsAndAnswers(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b := serveWith(t, func(c *api.Config) { c.Logger = logger })
	tokens := badTokens(t)
	alice := b.customer(t, "alice")
	var answers []response
	call := func(r req) response {
		t.Helper()
		out := b.do(t, r)
		answers = append(answers, out)
		return out
	}

	created := call(req{method: "POST", path: "/v1/merchants", token: b.admin,
		body: map[string]any{"name": "Hooked", "capacity": 5, "webhook_url": "https://hooks.example.com/orderd"}})
	require.Equal(t, http.StatusCreated, created.status, string(created.raw))
	merchantID := created.body["id"].(string)
	secrets := []string{created.body["webhook_secret"].(string)}
	require.NotEmpty(t, secrets[0])
	merchant := b.token(t, auth.Principal{Subject: "shop", Role: auth.RoleMerchant, MerchantID: uuid.MustParse(merchantID)})
	rotated := call(req{method: "POST", path: "/v1/merchants/" + merchantID + "/webhook-secret", token: merchant})
	require.Equal(t, http.StatusOK, rotated.status, string(rotated.raw))
	secrets = append(secrets, rotated.body["webhook_secret"].(string))
	require.NotEqual(t, secrets[0], secrets[1])
	// Only the creating and rotating answers may carry a secret.
	answers = answers[:0]

	productID := b.createProduct(t, merchantID, map[string]any{"name": "Tea", "price_cents": 100})
	order := b.placeOrder(t, alice, merchantID, productID, "pay-1")
	require.Equal(t, http.StatusCreated, order.status, string(order.raw))
	orderID := order.body["id"].(string)
	for _, r := range []req{
		{method: "GET", path: "/v1/merchants/" + merchantID, token: alice},
		{method: "GET", path: "/v1/merchants/" + merchantID + "?access_token=" + merchant},
		{method: "PATCH", path: "/v1/merchants/" + merchantID, token: b.admin, body: map[string]any{"webhook_url": "https://hooks.example.com/v2"}},
		{method: "GET", path: "/v1/merchants/" + merchantID + "/products", token: merchant},
		{method: "GET", path: "/v1/merchants/" + merchantID + "/orders?status=accepted&access_token=" + merchant},
		{method: "GET", path: "/v1/orders/" + orderID + "?access_token=" + alice},
		{method: "GET", path: "/v1/orders/" + orderID + "/events", token: merchant},
		{method: "POST", path: "/v1/orders/" + orderID + "/complete", token: merchant},
		{method: "GET", path: "/v1/admin/webhook-attempts?merchant_id=" + merchantID, token: b.admin},
		{method: "GET", path: "/v1/admin/dead-letters", token: b.admin},
		{method: "GET", path: "/v1/admin/audit", token: b.admin},
		// Failures, each with a credential somewhere in the request.
		{method: "GET", path: "/v1/orders/" + orderID, token: tokens[expired]},
		{method: "GET", path: "/v1/orders/" + orderID, token: tokens[wrongSig]},
		{method: "GET", path: "/v1/orders/" + orderID + "?access_token=" + tokens[algNone]},
		{method: "GET", path: "/v1/orders/" + orderID, token: b.customer(t, "mallory")},
		{method: "POST", path: "/v1/merchants", token: merchant, body: map[string]any{"name": "x", "capacity": 1}},
		{method: "POST", path: "/v1/orders", token: alice, body: `{"merchant_id":`, header: map[string]string{"Idempotency-Key": alice}},
		{method: "POST", path: "/v1/orders/" + orderID + "/pay", token: alice, body: map[string]any{"payment_ref": "pay-2"}},
		{method: "GET", path: "/v1/nowhere?access_token=" + b.admin},
	} {
		call(r)
	}

	// A server whose database pool is closed fails every store call with an
	// error that is not a domain error: the internal-error path.
	closed, err := pgxpool.New(context.Background(), b.pool.Config().ConnString())
	require.NoError(t, err)
	closed.Close()
	broken := serveWith(t, func(c *api.Config) { c.Logger = logger; c.Store = store.New(store.Config{Pool: closed}) })
	internal := 0
	for _, r := range []req{
		{method: "GET", path: "/v1/orders/" + orderID, token: alice},
		{method: "GET", path: "/v1/merchants/" + merchantID, token: alice},
		{method: "POST", path: "/v1/orders", token: alice, header: map[string]string{"Idempotency-Key": uuid.NewString()},
			body: map[string]any{"merchant_id": merchantID, "items": []map[string]any{{"product_id": productID, "quantity": 1}}, "payment_ref": "pay-3"}},
	} {
		out := broken.do(t, r)
		answers = append(answers, out)
		require.GreaterOrEqual(t, out.status, 500, string(out.raw))
		if out.status == 500 {
			internal++
			require.Equal(t, "Internal error.", out.body["detail"])
		}
	}
	require.Positive(t, internal, "no request reached the internal-error path")

	captured := logs.String()
	require.Contains(t, captured, `"msg":"request failed"`, "the internal errors were logged")
	forbidden := append([]string{string(secret), alice, merchant, b.admin, tokens[expired], tokens[wrongSig], tokens[algNone]}, secrets...)
	for _, s := range forbidden {
		require.NotContains(t, captured, s, "a secret reached the logs")
		for _, a := range answers {
			require.NotContains(t, string(a.raw), s, "a secret reached an answer: %s", a.raw)
		}
	}
}

// TestPlacementRateLimits refuses a customer's (2n+1)th immediate placement
// with 429 and Retry-After, writes nothing for it, and leaves other customers
// alone; the per-address limit does the same for any request.
func TestPlacementRateLimits(t *testing.T) {
	t.Parallel()
	const n = 1
	b := serveWith(t, func(c *api.Config) { c.RatePerCustomer = n })
	ctx := context.Background()
	merchantID, productID := seedShop(t, b)
	alice := b.customer(t, "alice")
	for range 2 * n {
		r := b.placeOrder(t, alice, merchantID, productID, "")
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	}
	refused := b.placeOrder(t, alice, merchantID, productID, "")
	requireProblem(t, refused, http.StatusTooManyRequests, "rate_limited")
	retry, err := strconv.Atoi(refused.header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After %q", refused.header.Get("Retry-After"))
	require.GreaterOrEqual(t, retry, 1)
	require.Equal(t, http.StatusCreated, b.placeOrder(t, b.customer(t, "bob"), merchantID, productID, "").status)
	var orders int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&orders))
	require.Equal(t, 2*n+1, orders, "the refused placement wrote nothing")

	perIP := serveWith(t, func(c *api.Config) { c.RatePerIP = n })
	for range 2 * n {
		require.Equal(t, http.StatusOK, perIP.do(t, req{method: "GET", path: "/healthz"}).status)
	}
	r := perIP.do(t, req{method: "GET", path: "/v1/merchants/" + uuid.NewString(), token: alice})
	requireProblem(t, r, http.StatusTooManyRequests, "rate_limited")
	require.NotEmpty(t, r.header.Get("Retry-After"))
}

func seedShop(t *testing.T, b *testBundle) (merchantID, productID string) {
	t.Helper()
	merchantID = b.createMerchant(t, 100)
	return merchantID, b.createProduct(t, merchantID, map[string]any{"name": "Tea", "price_cents": 100})
}
