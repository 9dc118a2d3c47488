package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/api"
)

// TestDropsOverHTTP walks a drop's endpoints as API.md states them, every
// answer checked against api/openapi.json: bad input is 422 and writes
// nothing, a join before opens_at is 409 drop_not_open, joining twice
// answers 201 then 200 with the same entry, the draw hides the seed, and
// joins are rate limited per customer.
func TestDropsOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// The same store behind a server whose drop entries are limited to
	// one per second per customer (bursts of two).
	limited := httptest.NewServer(api.New(api.Config{Store: b.store, Auth: b.auth, RequestTimeout: 5 * time.Second, RateDropEntries: 1,
		Now: stoppedClock()}))
	t.Cleanup(limited.Close)
	merchant := b.createMerchant(t, 10)
	product := b.createProduct(t, merchant, map[string]any{"name": "Cup", "price_cents": 500, "stock": 10})
	unlimited := b.createProduct(t, merchant, map[string]any{"name": "Tea", "price_cents": 300})
	at := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(time.RFC3339) }
	create := func(productID string, body map[string]any) response {
		return b.do(t, req{method: "POST", path: "/v1/products/" + productID + "/drops", token: b.admin, body: body})
	}
	for _, body := range map[string]map[string]any{
		"opens in the past":  {"opens_at": at(-time.Minute), "starts_at": at(time.Hour), "mode": "lottery"},
		"starts before open": {"opens_at": at(2 * time.Hour), "starts_at": at(time.Hour), "mode": "lottery"},
		"short window":       {"opens_at": at(time.Hour), "starts_at": at(2 * time.Hour), "mode": "lottery", "purchase_window_seconds": 29},
		"units over stock":   {"opens_at": at(time.Hour), "starts_at": at(2 * time.Hour), "mode": "fifo", "units": 11},
		"no mode":            {"opens_at": at(time.Hour), "starts_at": at(2 * time.Hour)},
		"no starts_at":       {"opens_at": at(time.Hour), "mode": "fifo"},
	} {
		requireProblem(t, create(product, body), http.StatusUnprocessableEntity, "validation_failed")
	}
	requireProblem(t, create(unlimited, map[string]any{"opens_at": at(time.Hour), "starts_at": at(2 * time.Hour), "mode": "lottery"}),
		http.StatusUnprocessableEntity, "validation_failed")
	var drops int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM drops`).Scan(&drops))
	require.Zero(t, drops, "nothing written")

	r := create(product, map[string]any{"opens_at": at(time.Hour), "starts_at": at(2 * time.Hour), "mode": "lottery", "units": 5, "purchase_window_seconds": 60})
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	drop := r.body["id"].(string)
	require.Equal(t, "/v1/drops/"+drop, r.header.Get("Location"))
	require.Equal(t, "scheduled", r.body["state"])
	require.Nil(t, r.body["seed"])
	require.Len(t, r.body["seed_commitment"], 64)

	alice := b.customer(t, "alice")
	limitedBundle := *b
	limitedBundle.srv = limited
	join := func(via *testBundle, token string) response {
		return via.do(t, req{method: "POST", path: "/v1/drops/" + drop + "/entries", token: token})
	}
	requireProblem(t, join(b, alice), http.StatusConflict, "drop_not_open")
	_, err := b.pool.Exec(context.Background(), `UPDATE drops SET opens_at = now() - interval '1 second' WHERE id = $1`, drop)
	require.NoError(t, err)
	first := join(b, alice)
	require.Equal(t, http.StatusCreated, first.status, string(first.raw))
	again := join(b, alice)
	require.Equal(t, http.StatusOK, again.status, string(again.raw))
	require.Equal(t, first.body["id"], again.body["id"])
	me := b.do(t, req{method: "GET", path: "/v1/drops/" + drop + "/entries/me", token: alice})
	require.Equal(t, http.StatusOK, me.status)
	require.Equal(t, "waiting", me.body["status"])
	requireProblem(t, b.do(t, req{method: "GET", path: "/v1/drops/" + drop + "/entries/me", token: b.customer(t, "bob")}), http.StatusNotFound, "not_found")
	draw := b.do(t, req{method: "GET", path: "/v1/drops/" + drop + "/draw", token: alice})
	require.Equal(t, http.StatusOK, draw.status)
	require.Nil(t, draw.body["seed"])
	require.Len(t, draw.body["entries"], 1)

	carol := b.customer(t, "carol")
	for range 2 {
		require.Less(t, join(&limitedBundle, carol).status, 300)
	}
	refused := join(&limitedBundle, carol)
	requireProblem(t, refused, http.StatusTooManyRequests, "rate_limited")
	require.NotEmpty(t, refused.header.Get("Retry-After"))
	require.Less(t, join(&limitedBundle, b.customer(t, "dave")).status, 300, "per customer")
}
