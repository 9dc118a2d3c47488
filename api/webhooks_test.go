package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/store"
)

func TestWebhookDeadLettersRetryAndAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r := b.do(t, req{method: "POST", path: "/v1/merchants", token: b.admin,
		body: map[string]any{"name": "Hooked", "capacity": 5, "webhook_url": "http://example.com/hook"}})
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	merchantID := r.body["id"].(string)
	productID := b.createProduct(t, merchantID, map[string]any{"name": "tea", "price_cents": 100})
	require.Equal(t, http.StatusCreated, b.placeOrder(t, b.customer(t, "alice"), merchantID, productID, "pay-1").status)

	// The endpoint fails its only attempt: the message is dead-lettered.
	claimed, err := b.store.ClaimWebhooks(ctx, store.ClaimParams{Limit: 10, Lease: time.Minute})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.NoError(t, b.store.RecordWebhookAttempts(ctx, []store.AttemptResult{{
		Delivery: claimed[0], StartedAt: time.Now(), Latency: 12 * time.Millisecond, StatusCode: 503, Error: "answered 503",
	}}, store.RetryPolicy{First: time.Second, Max: time.Second, MaxAttempts: 1}))
	outboxID := claimed[0].ID.String()

	r = b.do(t, req{method: "GET", path: "/v1/admin/webhook-attempts?outbox_id=" + outboxID, token: b.admin})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	attempts := r.body["attempts"].([]any)
	require.Len(t, attempts, 1)
	a := attempts[0].(map[string]any)
	require.EqualValues(t, 503, a["status_code"])
	require.EqualValues(t, 12, a["latency_ms"])
	require.Equal(t, "answered 503", a["error"])
	r = b.do(t, req{method: "GET", path: "/v1/admin/webhook-attempts?merchant_id=" + merchantID, token: b.admin})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Len(t, r.body["attempts"], 1)

	merchantToken := b.token(t, auth.Principal{Subject: "owner", Role: auth.RoleMerchant, MerchantID: uuid.MustParse(merchantID)})
	for _, who := range []string{merchantToken, b.customer(t, "alice")} {
		requireProblem(t, b.do(t, req{method: "POST", path: "/v1/admin/dead-letters/retry?merchant_id=" + merchantID, token: who}), http.StatusForbidden, "forbidden")
		requireProblem(t, b.do(t, req{method: "GET", path: "/v1/admin/webhook-attempts?outbox_id=" + outboxID, token: who}), http.StatusForbidden, "forbidden")
	}
	requireProblem(t, b.do(t, req{method: "POST", path: "/v1/admin/dead-letters/retry", token: b.admin}), http.StatusUnprocessableEntity, "validation_failed")
	requireProblem(t, b.do(t, req{method: "POST", path: "/v1/admin/dead-letters/retry?merchant_id=nope", token: b.admin}), http.StatusUnprocessableEntity, "validation_failed")
	requireProblem(t, b.do(t, req{method: "POST", path: "/v1/admin/dead-letters/retry?merchant_id=" + uuid.NewString(), token: b.admin}), http.StatusNotFound, "not_found")
	requireProblem(t, b.do(t, req{method: "GET", path: "/v1/admin/webhook-attempts", token: b.admin}), http.StatusUnprocessableEntity, "validation_failed")

	r = b.do(t, req{method: "POST", path: "/v1/admin/dead-letters/retry?merchant_id=" + merchantID, token: b.admin})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.EqualValues(t, 1, r.body["retried"])
	again, err := b.store.ClaimWebhooks(ctx, store.ClaimParams{Limit: 10, Lease: time.Minute})
	require.NoError(t, err)
	require.Len(t, again, 1, "back with the relay")
	require.Equal(t, 1, again[0].Attempt, "with a fresh set of attempts")

	r = b.do(t, req{method: "POST", path: "/v1/admin/dead-letters/retry?merchant_id=" + merchantID, token: b.admin})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.EqualValues(t, 0, r.body["retried"], "nothing left to retry")
}
