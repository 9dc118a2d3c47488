package api_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/api"
	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// TestPaymentAndCancelRateLimits: with ORDERD_RATE_PER_CUSTOMER = 1 a
// customer may pay twice at once and cancel twice at once (bursts of twice
// the rate), each from a bucket of its own; the next answers 429 with
// Retry-After and changes nothing. Other customers, and merchants cancelling
// for their shop, are not held back.
func TestPaymentAndCancelRateLimits(t *testing.T) {
	t.Parallel()
	b := serveWith(t, func(c *api.Config) { c.RatePerCustomer = 1 })
	ctx := context.Background()
	merchantID, productID := seedShop(t, b)
	unpaid := func(customer string) string {
		res, err := b.store.PlaceOrder(ctx, store.PlaceRequest{MerchantID: uuid.MustParse(merchantID), CustomerID: customer,
			Lines: []domain.LineRequest{{ProductID: uuid.MustParse(productID), Quantity: 1}}, IdempotencyKey: uuid.NewString(), RequestHash: []byte("h")})
		require.NoError(t, err)
		return res.Order.ID.String()
	}
	status := func(id string) string {
		var s string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT status FROM orders WHERE id = $1`, id).Scan(&s))
		return s
	}
	requireLimited := func(r response) {
		t.Helper()
		requireProblem(t, r, http.StatusTooManyRequests, "rate_limited")
		retry, err := strconv.Atoi(r.header.Get("Retry-After"))
		require.NoError(t, err, "Retry-After %q", r.header.Get("Retry-After"))
		require.GreaterOrEqual(t, retry, 1)
	}
	alice, bob := b.customer(t, "alice"), b.customer(t, "bob")
	pay := func(token, id string) response {
		return b.do(t, req{method: "POST", path: "/v1/orders/" + id + "/pay", token: token, body: map[string]any{"payment_ref": "p-" + id}})
	}
	cancel := func(token, id string) response {
		return b.do(t, req{method: "POST", path: "/v1/orders/" + id + "/cancel", token: token, body: map[string]any{"reason": "r"}})
	}

	var orders []string
	for range 5 {
		orders = append(orders, unpaid("alice"))
	}
	for _, id := range orders[:2] {
		require.Equal(t, http.StatusOK, pay(alice, id).status)
	}
	requireLimited(pay(alice, orders[2]))
	require.Equal(t, "awaiting_payment", status(orders[2]), "the refused payment wrote nothing")
	require.Equal(t, http.StatusOK, pay(bob, unpaid("bob")).status, "bob has his own bucket")

	// Cancels have their own bucket: alice's payments did not use it up.
	for _, id := range orders[2:4] {
		require.Equal(t, http.StatusOK, cancel(alice, id).status)
	}
	requireLimited(cancel(alice, orders[4]))
	require.Equal(t, "awaiting_payment", status(orders[4]), "the refused cancel wrote nothing")
	shop := b.token(t, auth.Principal{Subject: "shop", Role: auth.RoleMerchant, MerchantID: uuid.MustParse(merchantID)})
	require.Equal(t, http.StatusOK, cancel(shop, orders[4]).status, "merchants are not limited")

	// And placements theirs.
	require.Equal(t, http.StatusCreated, b.placeOrder(t, alice, merchantID, productID, "").status)

	// 0 turns the limits off.
	off := serveWith(t, func(c *api.Config) { c.RatePerCustomer = 0 })
	offMerchant, offProduct := seedShop(t, off)
	for range 5 {
		res, err := off.store.PlaceOrder(ctx, store.PlaceRequest{MerchantID: uuid.MustParse(offMerchant), CustomerID: "alice",
			Lines: []domain.LineRequest{{ProductID: uuid.MustParse(offProduct), Quantity: 1}}, IdempotencyKey: uuid.NewString(), RequestHash: []byte("h")})
		require.NoError(t, err)
		r := off.do(t, req{method: "POST", path: "/v1/orders/" + res.Order.ID.String() + "/cancel", token: off.customer(t, "alice")})
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
	}
}

// TestTicketRateLimit: tickets are writes too, limited per caller like
// payments.
func TestTicketRateLimit(t *testing.T) {
	t.Parallel()
	b := serveWith(t, func(c *api.Config) { c.RatePerCustomer = 1 })
	alice := b.customer(t, "alice")
	for range 2 {
		require.Equal(t, http.StatusCreated, b.do(t, req{method: "POST", path: "/v1/ws/tickets", token: alice}).status)
	}
	r := b.do(t, req{method: "POST", path: "/v1/ws/tickets", token: alice})
	requireProblem(t, r, http.StatusTooManyRequests, "rate_limited")
	require.NotEmpty(t, r.header.Get("Retry-After"))
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM ws_tickets`).Scan(&n))
	require.Equal(t, 2, n, "the refused ticket was not stored")
}
