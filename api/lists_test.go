package api_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/auth"
)

// pageAll follows next_cursor from path until it is null and returns the
// ids of every item, in the order read.
func (b *testBundle) pageAll(t *testing.T, path, token, items string) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 100)
		p := path
		if cursor != "" {
			p += "&cursor=" + url.QueryEscape(cursor)
		}
		r := b.do(t, req{method: "GET", path: p, token: token})
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		for _, it := range r.body[items].([]any) {
			ids = append(ids, it.(map[string]any)["id"].(string))
		}
		next, ok := r.body["next_cursor"].(string)
		if !ok {
			require.Nil(t, r.body["next_cursor"])
			return ids
		}
		cursor = next
	}
}

func reversed(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

// TestOwnOrderList: a customer pages through its own orders, newest first,
// and sees nobody else's.
func TestOwnOrderList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	merchantID := b.createMerchant(t, 100)
	productID := b.createProduct(t, merchantID, map[string]any{"name": "Tea", "price_cents": 300})
	alice, bob := b.customer(t, "alice"), b.customer(t, "bob")
	var placed []string
	for i := range 12 {
		ref := ""
		if i%3 == 0 {
			ref = "pay-" + uuid.NewString()
		}
		r := b.placeOrder(t, alice, merchantID, productID, ref)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		placed = append(placed, r.body["id"].(string))
	}
	b.placeOrder(t, bob, merchantID, productID, "")

	require.Equal(t, reversed(placed), b.pageAll(t, "/v1/orders?limit=5", alice, "orders"))
	paid := b.pageAll(t, "/v1/orders?status=accepted&limit=1", alice, "orders")
	require.Equal(t, []string{placed[9], placed[6], placed[3], placed[0]}, paid)

	first := b.do(t, req{method: "GET", path: "/v1/orders", token: alice})
	require.Equal(t, http.StatusOK, first.status)
	require.Len(t, first.body["orders"], 12, "the default page holds them all")
	require.Nil(t, first.body["next_cursor"])
	require.Len(t, b.do(t, req{method: "GET", path: "/v1/orders", token: bob}).body["orders"], 1)
}

// TestListsRefuseBadInput: limits outside 1-200, unknown statuses and
// cursors that their list did not give out are refused with a problem.
func TestListsRefuseBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	merchantID := b.createMerchant(t, 0)
	productID := b.createProduct(t, merchantID, map[string]any{"name": "Tea", "price_cents": 300})
	alice := b.customer(t, "alice")
	for range 3 {
		b.placeOrder(t, alice, merchantID, productID, "pay-"+uuid.NewString())
	}
	merchant := b.token(t, auth.Principal{Subject: "shop", Role: auth.RoleMerchant, MerchantID: uuid.MustParse(merchantID)})
	cursorOf := func(path, token string) string {
		t.Helper()
		r := b.do(t, req{method: "GET", path: path, token: token})
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		next, ok := r.body["next_cursor"].(string)
		require.True(t, ok, string(r.raw))
		return next
	}
	own := cursorOf("/v1/orders?limit=1", alice)
	queue := cursorOf("/v1/merchants/"+merchantID+"/orders?status=queued&limit=1", merchant)

	tampered := []byte(own)
	tampered[len(tampered)/2] ^= 1
	raw, err := base64.RawURLEncoding.DecodeString(own)
	require.NoError(t, err)
	raw[len(raw)-1] ^= 0x80

	for _, c := range []struct {
		path, token string
		status      int
		code        string
	}{
		{"/v1/orders?limit=0", alice, 422, "validation_failed"},
		{"/v1/orders?limit=201", alice, 422, "validation_failed"},
		{"/v1/orders?limit=ten", alice, 422, "validation_failed"},
		{"/v1/orders?status=lost", alice, 422, "validation_failed"},
		{"/v1/merchants/" + merchantID + "/orders?status=lost", merchant, 422, "validation_failed"},
		{"/v1/admin/dead-letters?limit=1000", b.admin, 422, "validation_failed"},
		{"/v1/orders?cursor=" + url.QueryEscape(string(tampered)), alice, 400, "invalid_cursor"},
		{"/v1/orders?cursor=" + base64.RawURLEncoding.EncodeToString(raw), alice, 400, "invalid_cursor"},
		{"/v1/orders?cursor=not-a-cursor", alice, 400, "invalid_cursor"},
		{"/v1/orders?cursor=" + own[:len(own)-4], alice, 400, "invalid_cursor"},
		// A cursor works only on the list, with the filters, that gave it out.
		{"/v1/orders?cursor=" + own, b.customer(t, "mallory"), 400, "invalid_cursor"},
		{"/v1/orders?status=accepted&cursor=" + own, alice, 400, "invalid_cursor"},
		{"/v1/orders?cursor=" + queue, alice, 400, "invalid_cursor"},
		{"/v1/merchants/" + merchantID + "/orders?status=accepted&cursor=" + queue, merchant, 400, "invalid_cursor"},
		{"/v1/admin/dead-letters?cursor=" + queue, b.admin, 400, "invalid_cursor"},
	} {
		requireProblem(t, b.do(t, req{method: "GET", path: c.path, token: c.token}), c.status, c.code)
	}
	// The untouched cursors still work.
	require.Equal(t, http.StatusOK, b.do(t, req{method: "GET", path: "/v1/orders?cursor=" + own, token: alice}).status)
	require.Equal(t, http.StatusOK, b.do(t, req{method: "GET", path: "/v1/merchants/" + merchantID + "/orders?status=queued&cursor=" + queue, token: merchant}).status)
}

// TestMerchantAndDeadLetterListsPage: the merchant's queue pages in queue
// order with its positions, and dead letters page newest first.
func TestMerchantAndDeadLetterListsPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	merchantID := b.createMerchant(t, 0)
	productID := b.createProduct(t, merchantID, map[string]any{"name": "Tea", "price_cents": 300})
	alice := b.customer(t, "alice")
	var queued []string
	for range 7 {
		r := b.placeOrder(t, alice, merchantID, productID, "pay-"+uuid.NewString())
		require.Equal(t, "queued", r.body["status"])
		queued = append(queued, r.body["id"].(string))
	}
	require.Equal(t, queued, b.pageAll(t, "/v1/merchants/"+merchantID+"/orders?status=queued&limit=3", b.admin, "orders"))
	page := b.do(t, req{method: "GET", path: "/v1/merchants/" + merchantID + "/orders?status=queued&limit=3&cursor=" +
		url.QueryEscape(b.do(t, req{method: "GET", path: "/v1/merchants/" + merchantID + "/orders?status=queued&limit=3", token: b.admin}).body["next_cursor"].(string)),
		token: b.admin})
	for i, o := range page.body["orders"].([]any) {
		require.EqualValues(t, 4+i, o.(map[string]any)["queue_position"])
	}

	var letters []string
	for range 5 {
		letters = append(letters, deadLetter(t, b, merchantID))
	}
	require.Equal(t, reversed(letters), b.pageAll(t, "/v1/admin/dead-letters?merchant_id="+merchantID+"&limit=2", b.admin, "dead_letters"))
}
