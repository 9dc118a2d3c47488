package api_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/auth"
)

// TestWeightedCapacityPausePriority walks a cup-counting kitchen through the
// v1.1 features over HTTP: weighted admission with nothing overtaking the
// head, a merchant changing its own capacity (and nothing else), pause in
// both modes, resume draining in order, and the priority lane.
func TestWeightedCapacityPausePriority(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, req{method: "POST", path: "/v1/merchants", token: b.admin, body: map[string]any{
		"name": "Cups", "capacity": 10, "capacity_unit": "items", "timezone": "Asia/Shanghai", "pickup_prefix": "A",
	}})
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	mid := r.body["id"].(string)
	require.Equal(t, "items", r.body["capacity_unit"])
	require.Equal(t, "Asia/Shanghai", r.body["timezone"])
	tea := b.createProduct(t, mid, map[string]any{"name": "Milk tea", "price_cents": 500})
	carrier := b.createProduct(t, mid, map[string]any{"name": "Six-cup carrier", "price_cents": 2700, "load_units": 6})
	alice := b.customer(t, "alice")
	staff := b.token(t, auth.Principal{Subject: "staff", Role: auth.RoleCustomer, Lane: "priority"})
	shop := b.token(t, auth.Principal{Subject: "shop", Role: auth.RoleMerchant, MerchantID: uuid.MustParse(mid)})

	place := func(token, product string, quantity int) map[string]any {
		t.Helper()
		r := b.do(t, req{method: "POST", path: "/v1/orders", token: token, header: map[string]string{"Idempotency-Key": uuid.NewString()},
			body: map[string]any{"merchant_id": mid, "items": []map[string]any{{"product_id": product, "quantity": quantity}}, "payment_ref": uuid.NewString()}})
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		return r.body
	}
	get := func(id string) map[string]any {
		t.Helper()
		r := b.do(t, req{method: "GET", path: "/v1/orders/" + id, token: b.admin})
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		return r.body
	}

	first := place(alice, carrier, 1) // 6 cups
	require.Equal(t, "accepted", first["status"])
	require.EqualValues(t, 6, first["load"])
	big := place(alice, tea, 5) // 5 cups: 6 + 5 > 10
	require.Equal(t, "queued", big["status"])
	small := place(alice, tea, 1) // would fit in the 4 free cups, but must not pass big
	require.Equal(t, "queued", small["status"])
	require.EqualValues(t, 2, small["queue_position"])
	require.Equal(t, "normal", small["lane"])

	// The priority lane goes first; its order is admitted since it fits.
	vip := place(staff, tea, 2)
	require.Equal(t, "accepted", vip["status"])
	require.Equal(t, "priority", vip["lane"])

	// The merchant may change its own capacity, and nothing else.
	r = b.do(t, req{method: "PATCH", path: "/v1/merchants/" + mid, token: shop, body: map[string]any{"prep_seconds": 30}})
	requireProblem(t, r, http.StatusForbidden, "forbidden")
	r = b.do(t, req{method: "PATCH", path: "/v1/merchants/" + mid, token: shop, body: map[string]any{"capacity_unit": "orders"}})
	requireProblem(t, r, http.StatusForbidden, "forbidden")
	r = b.do(t, req{method: "PATCH", path: "/v1/merchants/" + mid, token: b.admin, body: map[string]any{"capacity_unit": "orders"}})
	requireProblem(t, r, http.StatusConflict, "conflict")
	r = b.do(t, req{method: "PATCH", path: "/v1/merchants/" + mid, token: shop, body: map[string]any{"capacity": 13}})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "accepted", get(big["id"].(string))["status"], "6 + 2 + 5 = 13 fit")
	require.Equal(t, "queued", get(small["id"].(string))["status"])
	require.EqualValues(t, 1, get(small["id"].(string))["queue_position"])

	// Pause: queue mode takes placements but admits nobody.
	r = b.do(t, req{method: "POST", path: "/v1/merchants/" + mid + "/pause", token: shop, body: map[string]any{"mode": "queue"}})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, true, r.body["load"].(map[string]any)["paused"])
	r = b.do(t, req{method: "POST", path: "/v1/orders/" + first["id"].(string) + "/complete", token: shop})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "queued", get(small["id"].(string))["status"], "paused: nobody is admitted")
	late := place(alice, tea, 1)
	require.Equal(t, "queued", late["status"])

	// Prioritize moves a queued order to the priority lane, ahead of small.
	r = b.do(t, req{method: "POST", path: "/v1/orders/" + late["id"].(string) + "/prioritize", token: shop, body: map[string]any{"reason": "regular"}})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "priority", r.body["lane"])
	require.EqualValues(t, 1, r.body["queue_position"])
	require.EqualValues(t, 2, get(small["id"].(string))["queue_position"], "a priority order joined ahead")
	r = b.do(t, req{method: "POST", path: "/v1/orders/" + first["id"].(string) + "/prioritize", token: shop})
	requireProblem(t, r, http.StatusConflict, "invalid_transition")
	r = b.do(t, req{method: "POST", path: "/v1/orders/" + small["id"].(string) + "/prioritize", token: alice})
	requireProblem(t, r, http.StatusForbidden, "forbidden")

	// Refuse mode answers placements 409 merchant_paused with Retry-After.
	r = b.do(t, req{method: "POST", path: "/v1/merchants/" + mid + "/pause", token: b.admin, body: map[string]any{"mode": "refuse", "for_seconds": 600}})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	r = b.do(t, req{method: "POST", path: "/v1/orders", token: alice, header: map[string]string{"Idempotency-Key": uuid.NewString()},
		body: map[string]any{"merchant_id": mid, "items": []map[string]any{{"product_id": tea, "quantity": 1}}}})
	requireProblem(t, r, http.StatusConflict, "merchant_paused")
	retry, err := strconv.Atoi(r.header.Get("Retry-After"))
	require.NoError(t, err)
	require.InDelta(t, 600, retry, 5)

	// Resume drains in order: the priority order, then small.
	r = b.do(t, req{method: "POST", path: "/v1/merchants/" + mid + "/resume", token: shop})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, false, r.body["load"].(map[string]any)["paused"])
	require.Equal(t, "accepted", get(late["id"].(string))["status"])
	require.Equal(t, "accepted", get(small["id"].(string))["status"])
	r = b.do(t, req{method: "POST", path: "/v1/merchants/" + mid + "/resume", token: shop})
	require.Equal(t, http.StatusOK, r.status, "resuming an unpaused merchant is a no-op")
}

// TestCapacityBadInputs: every bad input the issue lists is a 4xx with a
// clear problem, and writes nothing.
func TestCapacityBadInputs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mid := b.createMerchant(t, 1)
	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	cases := []struct {
		name, method, path string
		body               map[string]any
		status             int
		code               string
	}{
		{"load_units 0", "POST", "/v1/merchants/" + mid + "/products", map[string]any{"name": "x", "price_cents": 1, "load_units": 0}, 422, "validation_failed"},
		{"load_units 101", "POST", "/v1/merchants/" + mid + "/products", map[string]any{"name": "x", "price_cents": 1, "load_units": 101}, 422, "validation_failed"},
		{"unknown capacity_unit", "PATCH", "/v1/merchants/" + mid, map[string]any{"capacity_unit": "cups"}, 422, "validation_failed"},
		{"bad timezone", "PATCH", "/v1/merchants/" + mid, map[string]any{"timezone": "Mars/Olympus"}, 422, "validation_failed"},
		{"bad pickup_prefix", "PATCH", "/v1/merchants/" + mid, map[string]any{"pickup_prefix": "abc"}, 422, "validation_failed"},
		{"bad timezone at creation", "POST", "/v1/merchants", map[string]any{"name": "x", "capacity": 1, "timezone": "Nowhere"}, 422, "validation_failed"},
		{"until in the past", "POST", "/v1/merchants/" + mid + "/pause", map[string]any{"mode": "queue", "until": past}, 422, "validation_failed"},
		{"until and for_seconds", "POST", "/v1/merchants/" + mid + "/pause", map[string]any{"mode": "queue", "until": future, "for_seconds": 60}, 422, "validation_failed"},
		{"unknown mode", "POST", "/v1/merchants/" + mid + "/pause", map[string]any{"mode": "nap"}, 422, "validation_failed"},
		{"pausing an unknown merchant", "POST", "/v1/merchants/" + uuid.NewString() + "/pause", map[string]any{"mode": "queue"}, 404, "not_found"},
	}
	for _, tc := range cases {
		r := b.do(t, req{method: tc.method, path: tc.path, token: b.admin, body: tc.body})
		require.Equal(t, tc.status, r.status, "%s: %s", tc.name, r.raw)
		require.Equal(t, tc.code, r.body["code"], tc.name)
	}
	r := b.do(t, req{method: "GET", path: "/v1/merchants/" + mid, token: b.admin})
	require.Equal(t, "orders", r.body["capacity_unit"])
	require.Equal(t, "UTC", r.body["timezone"])
	require.Equal(t, false, r.body["load"].(map[string]any)["paused"])
	require.EqualValues(t, 1, r.body["version"], "nothing was written")
}

// TestPickupCodeFromPlacementOverHTTP: the answer of an unpaid placement
// carries its pickup code, as does a paid one in the priority lane, and
// reading or paying the order answers the same code.
func TestPickupCodeFromPlacementOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, req{method: "POST", path: "/v1/merchants", token: b.admin, body: map[string]any{
		"name": "Codes", "capacity": 10, "timezone": "Europe/Paris", "pickup_prefix": "PC",
	}})
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	mid := r.body["id"].(string)
	tea := b.createProduct(t, mid, map[string]any{"name": "Milk tea", "price_cents": 500})
	alice := b.customer(t, "alice")
	staff := b.token(t, auth.Principal{Subject: "staff", Role: auth.RoleCustomer, Lane: "priority"})
	place := func(token string, body map[string]any) map[string]any {
		t.Helper()
		body["merchant_id"], body["items"] = mid, []map[string]any{{"product_id": tea, "quantity": 1}}
		r := b.do(t, req{method: "POST", path: "/v1/orders", token: token, header: map[string]string{"Idempotency-Key": uuid.NewString()}, body: body})
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		return r.body
	}

	unpaid := place(alice, map[string]any{})
	require.Equal(t, "awaiting_payment", unpaid["status"])
	require.Equal(t, "PC001", unpaid["pickup_code"], "an unpaid placement answers its code")
	vip := place(staff, map[string]any{"payment_ref": "pay-vip"})
	require.Equal(t, "priority", vip["lane"])
	require.Equal(t, "PC002", vip["pickup_code"])

	id := unpaid["id"].(string)
	r = b.do(t, req{method: "GET", path: "/v1/orders/" + id, token: alice})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "PC001", r.body["pickup_code"])
	r = b.do(t, req{method: "POST", path: "/v1/orders/" + id + "/pay", token: alice, body: map[string]any{"payment_ref": "pay-alice"}})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "accepted", r.body["status"])
	require.Equal(t, "PC001", r.body["pickup_code"], "payment keeps the code")
}
