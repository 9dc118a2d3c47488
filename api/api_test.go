package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/api"
	"github.com/orderd/orderd/api/openapitest"
	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/jobs"
	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/store/storetest"
)

var secret = []byte("test-secret-0123456789")

type testBundle struct {
	srv *httptest.Server
	// client checks every answer against api/openapi.json.
	client *http.Client
	pool   *pgxpool.Pool
	store  *store.Store
	auth   *auth.Authenticator
	admin  string
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool := storetest.Pool(t)
	ins, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	st := store.New(store.Config{Pool: pool, Jobs: ins})
	a := auth.New(secret, nil)
	srv := httptest.NewServer(api.New(api.Config{Store: st, Auth: a, RequestTimeout: 5 * time.Second}))
	t.Cleanup(srv.Close)
	b := &testBundle{srv: srv, client: openapitest.Client(t), pool: pool, store: st, auth: a}
	b.admin = b.token(t, auth.Principal{Subject: "root", Role: auth.RoleAdmin})
	return b
}

func (b *testBundle) token(t *testing.T, p auth.Principal) string {
	t.Helper()
	tok, err := b.auth.Issue(p, time.Hour)
	require.NoError(t, err)
	return tok
}

func (b *testBundle) customer(t *testing.T, sub string) string {
	return b.token(t, auth.Principal{Subject: sub, Role: auth.RoleCustomer})
}

type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

type req struct {
	method, path, token string
	body                any // string sent as is, anything else JSON-encoded
	header              map[string]string
}

func (b *testBundle) do(t *testing.T, r req) response {
	t.Helper()
	var body io.Reader
	switch v := r.body.(type) {
	case nil:
	case string:
		body = strings.NewReader(v)
	case []byte:
		body = bytes.NewReader(v)
	default:
		enc, err := json.Marshal(v)
		require.NoError(t, err)
		body = bytes.NewReader(enc)
	}
	hr, err := http.NewRequest(r.method, b.srv.URL+r.path, body)
	require.NoError(t, err)
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if r.token != "" {
		hr.Header.Set("Authorization", "Bearer "+r.token)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	resp, err := b.client.Do(hr)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := response{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 && raw[0] == '{' {
		require.NoError(t, json.Unmarshal(raw, &out.body), string(raw))
	}
	return out
}

func (b *testBundle) createMerchant(t *testing.T, capacity int) string {
	t.Helper()
	r := b.do(t, req{method: "POST", path: "/v1/merchants", token: b.admin, body: map[string]any{"name": "Tea Lab", "capacity": capacity}})
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	return r.body["id"].(string)
}

func (b *testBundle) createProduct(t *testing.T, merchantID string, body map[string]any) string {
	t.Helper()
	r := b.do(t, req{method: "POST", path: "/v1/merchants/" + merchantID + "/products", token: b.admin, body: body})
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	return r.body["id"].(string)
}

func (b *testBundle) placeOrder(t *testing.T, token, merchantID, productID string, paymentRef string) response {
	t.Helper()
	body := map[string]any{"merchant_id": merchantID, "items": []map[string]any{{"product_id": productID, "quantity": 1}}}
	if paymentRef != "" {
		body["payment_ref"] = paymentRef
	}
	return b.do(t, req{method: "POST", path: "/v1/orders", token: token, body: body, header: map[string]string{"Idempotency-Key": uuid.NewString()}})
}

func requireProblem(t *testing.T, r response, status int, code string) {
	t.Helper()
	require.Equal(t, status, r.status, string(r.raw))
	require.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
	require.Equal(t, code, r.body["code"], string(r.raw))
	require.EqualValues(t, status, r.body["status"])
	require.NotEmpty(t, r.body["detail"])
	require.NotEmpty(t, r.body["type"])
	require.NotEmpty(t, r.body["title"])
}

func TestTour(t *testing.T) {
	t.Parallel()
	b := setup(t)
	merchantID := b.createMerchant(t, 1)
	m := b.do(t, req{method: "GET", path: "/v1/merchants/" + merchantID, token: b.customer(t, "x")})
	require.Equal(t, http.StatusOK, m.status)
	require.Nil(t, m.body["webhook_secret"], "the secret is shown only at creation")
	require.EqualValues(t, 120, m.body["prep_seconds"])
	require.EqualValues(t, 1800, m.body["max_queue_wait_seconds"])
	require.EqualValues(t, 900, m.body["payment_timeout_seconds"])
	require.EqualValues(t, map[string]any{"capacity": 1.0, "capacity_unit": "orders", "active": 0.0, "active_orders": 0.0, "queued": 0.0,
		"queued_units": 0.0, "est_wait_seconds": 0.0, "paused": false, "pause_mode": nil, "paused_until": nil}, m.body["load"])

	productID := b.createProduct(t, merchantID, map[string]any{"name": "Milk tea", "price_cents": 500, "stock": 10, "per_user_limit": 2})
	p := b.do(t, req{method: "GET", path: "/v1/products/" + productID, token: b.customer(t, "x")})
	require.EqualValues(t, 10, p.body["stock_remaining"])

	alice, bob := b.customer(t, "alice"), b.customer(t, "bob")
	first := b.placeOrder(t, alice, merchantID, productID, "")
	require.Equal(t, http.StatusCreated, first.status, string(first.raw))
	require.Equal(t, "awaiting_payment", first.body["status"])
	require.Equal(t, "alice", first.body["customer_id"])
	id := first.body["id"].(string)

	require.Equal(t, http.StatusNotFound, b.do(t, req{method: "GET", path: "/v1/orders/" + id, token: bob}).status)
	paid := b.do(t, req{method: "POST", path: "/v1/orders/" + id + "/pay", token: alice, body: map[string]any{"payment_ref": "pay-1"}})
	require.Equal(t, http.StatusOK, paid.status, string(paid.raw))
	require.Equal(t, "accepted", paid.body["status"])

	second := b.placeOrder(t, bob, merchantID, productID, "pay-2")
	require.Equal(t, "queued", second.body["status"])
	require.EqualValues(t, 1, second.body["queue_position"])
	require.NotNil(t, second.body["eta_seconds"])
	secondID := second.body["id"].(string)

	merchant := b.token(t, auth.Principal{Subject: "shop", Role: auth.RoleMerchant, MerchantID: uuid.MustParse(merchantID)})
	board := b.do(t, req{method: "GET", path: "/v1/merchants/" + merchantID + "/orders?status=queued", token: merchant})
	require.Equal(t, http.StatusOK, board.status)
	require.Len(t, board.body["orders"], 1)

	requireProblem(t, b.do(t, req{method: "POST", path: "/v1/orders/" + secondID + "/complete", token: merchant}), 409, "invalid_transition")
	done := b.do(t, req{method: "POST", path: "/v1/orders/" + id + "/complete", token: merchant})
	require.Equal(t, "completed", done.body["status"])
	now := b.do(t, req{method: "GET", path: "/v1/orders/" + secondID, token: bob})
	require.Equal(t, "accepted", now.body["status"])

	cancelled := b.do(t, req{method: "POST", path: "/v1/orders/" + secondID + "/cancel", token: merchant, body: map[string]any{"reason": "out of tapioca"}})
	require.Equal(t, "cancelled", cancelled.body["status"])
	require.Equal(t, "out of tapioca", cancelled.body["status_reason"])
	requireProblem(t, b.do(t, req{method: "POST", path: "/v1/orders/" + secondID + "/cancel", token: merchant}), 409, "invalid_transition")

	history := b.do(t, req{method: "GET", path: "/v1/orders/" + id + "/events", token: alice})
	require.Equal(t, http.StatusOK, history.status)
	events := history.body["events"].([]any)
	require.Len(t, events, 4)
	require.Equal(t, "order.placed", events[0].(map[string]any)["type"])

	restocked := b.do(t, req{method: "POST", path: "/v1/products/" + productID + "/restock", token: merchant, body: map[string]any{"quantity": 5}})
	require.Equal(t, http.StatusOK, restocked.status, string(restocked.raw))
	require.EqualValues(t, 15, restocked.body["stock_total"])
}

func TestIdempotencyOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	merchantID := b.createMerchant(t, 5)
	productID := b.createProduct(t, merchantID, map[string]any{"name": "Tea", "price_cents": 100})
	alice := b.customer(t, "alice")
	body := fmt.Sprintf(`{"merchant_id":%q,"items":[{"product_id":%q,"quantity":1}],"payment_ref":"p"}`, merchantID, productID)
	key := map[string]string{"Idempotency-Key": "abc"}
	first := b.do(t, req{method: "POST", path: "/v1/orders", token: alice, body: body, header: key})
	require.Equal(t, http.StatusCreated, first.status)
	spaced := b.do(t, req{method: "POST", path: "/v1/orders", token: alice, body: " " + body + "\n", header: key})
	require.Equal(t, http.StatusOK, spaced.status)
	require.Equal(t, "true", spaced.header.Get("Idempotent-Replayed"))
	require.Equal(t, first.body["id"], spaced.body["id"])
	other := strings.Replace(body, `"quantity":1`, `"quantity":2`, 1)
	requireProblem(t, b.do(t, req{method: "POST", path: "/v1/orders", token: alice, body: other, header: key}), 422, "idempotency_key_reused")
	requireProblem(t, b.do(t, req{method: "POST", path: "/v1/orders", token: alice, body: body}), 400, "idempotency_key_required")
	requireProblem(t, b.do(t, req{method: "POST", path: "/v1/orders", token: alice, body: body,
		header: map[string]string{"Idempotency-Key": strings.Repeat("k", 256)}}), 422, "validation_failed")
}

func TestBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	merchantID := b.createMerchant(t, 5)
	productID := b.createProduct(t, merchantID, map[string]any{"name": "Tea", "price_cents": 100, "stock": 5})
	alice := b.customer(t, "alice")
	counts := func() map[string]int {
		out := map[string]int{}
		for _, tbl := range []string{"events", "orders", "merchants", "products"} {
			var n int
			require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+tbl).Scan(&n))
			out[tbl] = n
		}
		return out
	}
	before := counts()
	lines := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(`{"product_id":%q,"quantity":1}`, uuid.NewString())
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	order := func(items string) string {
		return fmt.Sprintf(`{"merchant_id":%q,"items":%s}`, merchantID, items)
	}
	oneLine := fmt.Sprintf(`[{"product_id":%q,"quantity":1}]`, productID)
	cases := []struct {
		name        string
		path        string
		token       string
		body        string
		contentType string
		status      int
		code        string
	}{
		{"too large", "/v1/orders", alice, `{"merchant_id":"` + strings.Repeat("a", 2<<20) + `"}`, "", 413, "payload_too_large"},
		{"not json", "/v1/orders", alice, order(oneLine), "text/plain", 415, "unsupported_media_type"},
		{"malformed", "/v1/orders", alice, `{"merchant_id":`, "", 400, "malformed_json"},
		{"trailing", "/v1/orders", alice, order(oneLine) + `{}`, "", 400, "malformed_json"},
		{"unknown field", "/v1/orders", alice, `{"merchant_id":"x","items":[],"coupon":"FREE"}`, "", 400, "malformed_json"},
		{"string quantity", "/v1/orders", alice, order(fmt.Sprintf(`[{"product_id":%q,"quantity":"1"}]`, productID)), "", 400, "malformed_json"},
		{"fractional quantity", "/v1/orders", alice, order(fmt.Sprintf(`[{"product_id":%q,"quantity":1.5}]`, productID)), "", 400, "malformed_json"},
		{"zero quantity", "/v1/orders", alice, order(fmt.Sprintf(`[{"product_id":%q,"quantity":0}]`, productID)), "", 422, "validation_failed"},
		{"quantity 101", "/v1/orders", alice, order(fmt.Sprintf(`[{"product_id":%q,"quantity":101}]`, productID)), "", 422, "validation_failed"},
		{"51 lines", "/v1/orders", alice, order(lines(51)), "", 422, "validation_failed"},
		{"no lines", "/v1/orders", alice, order(`[]`), "", 422, "validation_failed"},
		{"bad merchant uuid", "/v1/orders", alice, `{"merchant_id":"nope","items":` + oneLine + `}`, "", 422, "validation_failed"},
		{"bad product uuid", "/v1/orders", alice, order(`[{"product_id":"nope","quantity":1}]`), "", 422, "validation_failed"},
		{"unknown merchant", "/v1/orders", alice, fmt.Sprintf(`{"merchant_id":%q,"items":%s}`, uuid.NewString(), oneLine), "", 404, "not_found"},
		{"unknown product", "/v1/orders", alice, order(fmt.Sprintf(`[{"product_id":%q,"quantity":1}]`, uuid.NewString())), "", 404, "not_found"},
		{"over stock", "/v1/orders", alice, order(fmt.Sprintf(`[{"product_id":%q,"quantity":6}]`, productID)), "", 409, "sold_out"},
		{"nul in payment_ref", "/v1/orders", alice, fmt.Sprintf(`{"merchant_id":%q,"items":%s,"payment_ref":"a\u0000b"}`, merchantID, oneLine), "", 422, "validation_failed"},
		{"blank payment_ref", "/v1/orders", alice, fmt.Sprintf(`{"merchant_id":%q,"items":%s,"payment_ref":"   "}`, merchantID, oneLine), "", 422, "validation_failed"},
		{"long payment_ref", "/v1/orders", alice, fmt.Sprintf(`{"merchant_id":%q,"items":%s,"payment_ref":%q}`, merchantID, oneLine, strings.Repeat("p", 256)), "", 422, "validation_failed"},
		{"invalid utf-8", "/v1/merchants", b.admin, "{\"name\":\"\xff\xfe\",\"capacity\":1}", "", 422, "validation_failed"},
		{"negative capacity", "/v1/merchants", b.admin, `{"name":"x","capacity":-1}`, "", 422, "validation_failed"},
		{"huge capacity", "/v1/merchants", b.admin, `{"name":"x","capacity":100001}`, "", 422, "validation_failed"},
		{"missing capacity", "/v1/merchants", b.admin, `{"name":"x"}`, "", 422, "validation_failed"},
		{"capacity too big for int", "/v1/merchants", b.admin, `{"name":"x","capacity":1e40}`, "", 400, "malformed_json"},
		{"customer creates merchant", "/v1/merchants", alice, `{"name":"x","capacity":1}`, "", 403, "forbidden"},
		{"no token", "/v1/merchants", "", `{"name":"x","capacity":1}`, "", 401, "unauthorized"},
		{"bad webhook", "/v1/merchants", b.admin, `{"name":"x","capacity":1,"webhook_url":"ftp://x"}`, "", 422, "validation_failed"},
		{"negative stock", "/v1/merchants/" + merchantID + "/products", b.admin, `{"name":"x","price_cents":1,"stock":-1}`, "", 422, "validation_failed"},
		{"absurd stock", "/v1/merchants/" + merchantID + "/products", b.admin, `{"name":"x","price_cents":1,"stock":1000000000}`, "", 422, "validation_failed"},
		{"restock zero", "/v1/products/" + productID + "/restock", b.admin, `{"quantity":0}`, "", 422, "validation_failed"},
		{"restock too many", "/v1/products/" + productID + "/restock", b.admin, `{"quantity":1000001}`, "", 422, "validation_failed"},
	}
	for _, tc := range cases {
		hr, err := http.NewRequest("POST", b.srv.URL+tc.path, strings.NewReader(tc.body))
		require.NoError(t, err)
		ct := tc.contentType
		if ct == "" {
			ct = "application/json"
		}
		hr.Header.Set("Content-Type", ct)
		hr.Header.Set("Idempotency-Key", uuid.NewString())
		if tc.token != "" {
			hr.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := b.client.Do(hr)
		require.NoError(t, err, tc.name)
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var body map[string]any
		require.NoError(t, json.Unmarshal(raw, &body), tc.name)
		require.Equal(t, tc.status, resp.StatusCode, "%s: %s", tc.name, raw)
		require.Equal(t, tc.code, body["code"], "%s: %s", tc.name, raw)
	}
	require.Equal(t, before, counts())

	requireProblem(t, b.do(t, req{method: "GET", path: "/v1/orders/not-a-uuid", token: alice}), 404, "not_found")
	requireProblem(t, b.do(t, req{method: "PATCH", path: "/v1/merchants/" + merchantID, token: b.admin, body: `{"capacity":"5"}`}), 400, "malformed_json")
}

func TestDatabaseDownAnswers503(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	a := auth.New(secret, nil)
	srv := httptest.NewServer(api.New(api.Config{Store: store.New(store.Config{Pool: pool}), Auth: a, RequestTimeout: 3 * time.Second}))
	t.Cleanup(srv.Close)
	b := &testBundle{srv: srv, client: openapitest.Client(t), auth: a}
	start := time.Now()
	r := b.do(t, req{method: "GET", path: "/v1/merchants/" + uuid.NewString(), token: b.customer(t, "x")})
	requireProblem(t, r, 503, "unavailable")
	require.Less(t, time.Since(start), 4*time.Second)
}

// TestWrongMethodAnswers405 asks known paths with methods they do not
// serve: 405 method_not_allowed naming the methods they do, where an
// unknown path stays 404.
func TestWrongMethodAnswers405(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := uuid.NewString()
	for _, tc := range []struct{ method, path, allow string }{
		{"GET", "/v1/merchants", "POST"},
		{"DELETE", "/v1/merchants/" + id, "GET, HEAD, PATCH"},
		{"PUT", "/v1/orders/" + id, "GET, HEAD"},
		{"GET", "/v1/orders/" + id + "/pay", "POST"},
		{"POST", "/healthz", "GET, HEAD"},
		{"DELETE", "/openapi.json", "GET, HEAD"},
	} {
		r := b.do(t, req{method: tc.method, path: tc.path, token: b.admin})
		requireProblem(t, r, http.StatusMethodNotAllowed, "method_not_allowed")
		require.Equal(t, tc.allow, r.header.Get("Allow"), "%s %s", tc.method, tc.path)
	}
	requireProblem(t, b.do(t, req{method: "GET", path: "/v1/nothing/here", token: b.admin}), http.StatusNotFound, "not_found")
	requireProblem(t, b.do(t, req{method: "DELETE", path: "/v1/nothing/here", token: b.admin}), http.StatusNotFound, "not_found")
}
