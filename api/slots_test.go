package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestPickupSlotsOverHTTP: an admin publishes slots and hours, a customer
// reads the day's slots and takes the last place of one; the next answers
// 409 slot_full, a time that is no slot 422 naming pickup_at, and bad slot
// settings or hours 422.
func TestPickupSlotsOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mid := b.createMerchant(t, 1)
	tea := b.createProduct(t, mid, map[string]any{"name": "Tea", "price_cents": 300})
	alice := b.customer(t, "alice")

	for name, body := range map[string]map[string]any{
		"slot minutes":         {"slots": map[string]any{"minutes": 3, "capacity": 1, "lead_minutes": 0, "horizon_days": 1}},
		"closes before opens":  {"hours": []map[string]any{{"day": 1, "opens": "12:00", "closes": "08:00"}}},
		"overlapping hours":    {"hours": []map[string]any{{"day": 1, "opens": "08:00", "closes": "12:00"}, {"day": 1, "opens": "11:00", "closes": "13:00"}}},
		"malformed opening at": {"hours": []map[string]any{{"day": 1, "opens": "8am", "closes": "12:00"}}},
	} {
		r := b.do(t, req{method: "PATCH", path: "/v1/merchants/" + mid, token: b.admin, body: body})
		require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s: %s", name, r.raw)
	}

	r := b.do(t, req{method: "PATCH", path: "/v1/merchants/" + mid, token: b.admin, body: map[string]any{
		"slots": map[string]any{"minutes": 15, "capacity": 1, "lead_minutes": 0, "horizon_days": 2},
	}})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.EqualValues(t, 15, r.body["slots"].(map[string]any)["minutes"])
	require.Empty(t, r.body["hours"])

	at := time.Now().Add(time.Hour).UTC().Truncate(15 * time.Minute).Add(15 * time.Minute)
	r = b.do(t, req{method: "GET", path: "/v1/merchants/" + mid + "/slots?date=" + at.Format(time.DateOnly), token: alice})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	var listed map[string]any
	for _, s := range r.body["slots"].([]any) {
		if s.(map[string]any)["starts_at"] == at.Format(time.RFC3339) {
			listed = s.(map[string]any)
		}
	}
	require.NotNil(t, listed, "the slot is published")
	require.EqualValues(t, 1, listed["available"])

	place := func(pickupAt string) response {
		return b.do(t, req{method: "POST", path: "/v1/orders", token: alice, header: map[string]string{"Idempotency-Key": uuid.NewString()},
			body: map[string]any{"merchant_id": mid, "items": []map[string]any{{"product_id": tea, "quantity": 1}},
				"payment_ref": uuid.NewString(), "pickup_at": pickupAt}})
	}
	r = place(at.Format(time.RFC3339))
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	require.Equal(t, "scheduled", r.body["status"])
	require.Equal(t, at.Format(time.RFC3339), r.body["pickup_at"])
	r = place(at.Format(time.RFC3339))
	require.Equal(t, http.StatusConflict, r.status, string(r.raw))
	require.Equal(t, "slot_full", r.body["code"])
	for _, bad := range []string{at.Add(time.Minute).Format(time.RFC3339), "tomorrow", at.Add(-24 * time.Hour).Format(time.RFC3339)} {
		r = place(bad)
		require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.raw))
		require.Contains(t, r.body["detail"], "pickup_at")
	}

	// Closed all week but the day after tomorrow: an order for as soon as
	// possible is refused, with when it opens.
	day := int(time.Now().UTC().Add(48 * time.Hour).Weekday())
	r = b.do(t, req{method: "PATCH", path: "/v1/merchants/" + mid, token: b.admin, body: map[string]any{
		"hours": []map[string]any{{"day": day, "opens": "00:00", "closes": "24:00", "capacity": 3}},
	}})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	r = b.do(t, req{method: "POST", path: "/v1/orders", token: alice, header: map[string]string{"Idempotency-Key": uuid.NewString()},
		body: map[string]any{"merchant_id": mid, "items": []map[string]any{{"product_id": tea, "quantity": 1}}}})
	require.Equal(t, http.StatusConflict, r.status, string(r.raw))
	require.Equal(t, "merchant_closed", r.body["code"])
	require.NotEmpty(t, r.header.Get("Retry-After"))
}
