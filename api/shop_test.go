package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/api"
	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// teaMenu is a milk tea with a required size, an optional sugar level and
// up to two toppings; the request leaves every id to the server.
func teaMenu() map[string]any {
	return map[string]any{
		"name": "Milk tea", "price_cents": 450,
		"option_groups": []map[string]any{
			{"name": "Size", "min_select": 1, "max_select": 1, "options": []map[string]any{
				{"name": "Regular", "price_delta_cents": 0}, {"name": "Large", "price_delta_cents": 80, "load_units": 1},
			}},
			{"name": "Sugar", "min_select": 0, "max_select": 1, "options": []map[string]any{
				{"name": "Less sugar"}, {"name": "No sugar", "price_delta_cents": -10},
			}},
			{"name": "Toppings", "min_select": 0, "max_select": 2, "options": []map[string]any{
				{"name": "Pearls", "price_delta_cents": 60}, {"name": "Jelly", "price_delta_cents": 50}, {"name": "Pudding", "price_delta_cents": 70},
			}},
		},
	}
}

// shop is a merchant counting items with the tea on its menu: the option
// ids by name, and a token of the merchant.
type shop struct {
	merchantID, teaID, kitchen string
	option, group              map[string]string
}

func newShop(t *testing.T, b *testBundle) shop {
	t.Helper()
	r := b.do(t, req{method: "POST", path: "/v1/merchants", token: b.admin, body: map[string]any{"name": "Tea Lab", "capacity": 10, "capacity_unit": "items"}})
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	s := shop{merchantID: r.body["id"].(string), option: map[string]string{}, group: map[string]string{}}
	r = b.do(t, req{method: "POST", path: "/v1/merchants/" + s.merchantID + "/products", token: b.admin, body: teaMenu()})
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	s.teaID = r.body["id"].(string)
	for _, g := range r.body["option_groups"].([]any) {
		g := g.(map[string]any)
		s.group[g["name"].(string)] = g["id"].(string)
		for _, o := range g["options"].([]any) {
			o := o.(map[string]any)
			s.option[o["name"].(string)] = o["id"].(string)
		}
	}
	s.kitchen = b.token(t, auth.Principal{Subject: "kitchen", Role: auth.RoleMerchant, MerchantID: uuid.MustParse(s.merchantID)})
	return s
}

func (s shop) order(options ...string) map[string]any {
	return map[string]any{"merchant_id": s.merchantID, "items": []map[string]any{{"product_id": s.teaID, "quantity": 2, "options": options}}, "payment_ref": "card-" + uuid.NewString()}
}

func (s shop) ids(names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = s.option[n]
	}
	return out
}

func (b *testBundle) place(t *testing.T, token string, body map[string]any) response {
	t.Helper()
	return b.do(t, req{method: "POST", path: "/v1/orders", token: token, body: body, header: map[string]string{"Idempotency-Key": uuid.NewString()}})
}

func TestOptionsArePricedEchoedAndWeighed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := newShop(t, b)
	alice := b.customer(t, "alice")

	r := b.place(t, alice, s.order(s.ids("Large", "Less sugar", "Pearls")...))
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	require.EqualValues(t, 2*(450+80+60), r.body["total_cents"])
	require.EqualValues(t, 2*(1+1), r.body["load"], "a large tea weighs its own unit and the size's")
	line := r.body["items"].([]any)[0].(map[string]any)
	require.EqualValues(t, 450+80+60, line["price_cents"], "a unit's price includes its options")
	require.Equal(t, []any{
		map[string]any{"id": s.option["Large"], "name": "Large", "price_delta_cents": float64(80)},
		map[string]any{"id": s.option["Less sugar"], "name": "Less sugar", "price_delta_cents": float64(0)},
		map[string]any{"id": s.option["Pearls"], "name": "Pearls", "price_delta_cents": float64(60)},
	}, line["options"])
	orderID := r.body["id"].(string)

	// The kitchen reads the merchant's load in units: the order holds 4.
	m := b.do(t, req{method: "GET", path: "/v1/merchants/" + s.merchantID, token: s.kitchen})
	require.EqualValues(t, 4, m.body["load"].(map[string]any)["active"])

	// A menu change leaves the placed order as it was.
	menu := teaMenu()
	groups := menu["option_groups"].([]map[string]any)
	groups[0]["options"].([]map[string]any)[1]["name"] = "Huge"
	p := b.do(t, req{method: "PATCH", path: "/v1/merchants/" + s.merchantID + "/products/" + s.teaID, token: s.kitchen,
		body: map[string]any{"price_cents": 500, "name": "Royal milk tea", "option_groups": groups}})
	require.Equal(t, http.StatusOK, p.status, string(p.raw))
	require.EqualValues(t, 500, p.body["price_cents"])
	require.Equal(t, "Royal milk tea", p.body["name"])
	o := b.do(t, req{method: "GET", path: "/v1/orders/" + orderID, token: alice})
	require.EqualValues(t, 2*(450+80+60), o.body["total_cents"])
	require.Equal(t, line, o.body["items"].([]any)[0], "the order keeps its price and its options' names")

	// New groups sent without ids got new ones: the old ids are gone.
	r = b.place(t, alice, s.order(s.ids("Large")...))
	requireProblem(t, r, http.StatusUnprocessableEntity, "validation_failed")
}

func TestMenuChanges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := newShop(t, b)
	alice := b.customer(t, "alice")
	path := "/v1/merchants/" + s.merchantID + "/products/" + s.teaID
	cake := b.createProduct(t, s.merchantID, map[string]any{"name": "Cheesecake", "price_cents": 380})

	menu := b.do(t, req{method: "GET", path: "/v1/merchants/" + s.merchantID + "/products", token: alice})
	require.Equal(t, http.StatusOK, menu.status)
	require.Len(t, menu.body["products"], 2)

	placed := b.place(t, alice, s.order(s.ids("Regular")...))
	require.Equal(t, http.StatusCreated, placed.status, string(placed.raw))

	// Sold out today: still on the menu, not orderable.
	r := b.do(t, req{method: "PATCH", path: path, token: s.kitchen, body: map[string]any{"available": false}})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, false, r.body["available"])
	r = b.place(t, alice, s.order(s.ids("Regular")...))
	requireProblem(t, r, http.StatusConflict, "product_unavailable")
	require.Contains(t, r.body["detail"], "items[0].product_id")
	menu = b.do(t, req{method: "GET", path: "/v1/merchants/" + s.merchantID + "/products", token: alice})
	require.Len(t, menu.body["products"], 2)

	r = b.do(t, req{method: "PATCH", path: path, token: s.kitchen, body: map[string]any{"available": true}})
	require.Equal(t, true, r.body["available"])
	r = b.place(t, alice, s.order(s.ids("Regular")...))
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))

	// Hidden: off the menu and not orderable; the orders that name it keep
	// their lines; hiding it again is a no-op.
	r = b.do(t, req{method: "DELETE", path: "/v1/merchants/" + s.merchantID + "/products/" + cake, token: s.kitchen})
	require.Equal(t, http.StatusNoContent, r.status, string(r.raw))
	r = b.do(t, req{method: "DELETE", path: "/v1/merchants/" + s.merchantID + "/products/" + cake, token: s.kitchen})
	require.Equal(t, http.StatusNoContent, r.status, string(r.raw))
	r = b.do(t, req{method: "DELETE", path: path, token: s.kitchen})
	require.Equal(t, http.StatusNoContent, r.status, string(r.raw))
	menu = b.do(t, req{method: "GET", path: "/v1/merchants/" + s.merchantID + "/products", token: alice})
	require.Empty(t, menu.body["products"])
	r = b.place(t, alice, s.order(s.ids("Regular")...))
	requireProblem(t, r, http.StatusConflict, "product_unavailable")
	o := b.do(t, req{method: "GET", path: "/v1/orders/" + placed.body["id"].(string), token: alice})
	require.Equal(t, placed.body["items"], o.body["items"])
	requireProblem(t, b.do(t, req{method: "PATCH", path: path, token: s.kitchen, body: map[string]any{"price_cents": 1}}), http.StatusNotFound, "not_found")

	// Every change is an event of the product's stream.
	var types []string
	rows, err := b.pool.Query(context.Background(), `SELECT type FROM events WHERE stream_id = $1 ORDER BY version`, s.teaID)
	require.NoError(t, err)
	for rows.Next() {
		var typ string
		require.NoError(t, rows.Scan(&typ))
		types = append(types, typ)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"product.created", "product.updated", "product.updated", "product.hidden"}, types)
}

// TestShopBadInputWritesNothing sends every bad input of issue 36: each
// answers problem+json naming the field, and nothing is written.
func TestShopBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := newShop(t, b)
	other := newShop(t, b)
	alice := b.customer(t, "alice")
	gone := b.createProduct(t, s.merchantID, map[string]any{"name": "Taro", "price_cents": 400})
	r := b.do(t, req{method: "PATCH", path: "/v1/merchants/" + s.merchantID + "/products/" + gone, token: s.kitchen, body: map[string]any{"available": false}})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	hidden := b.createProduct(t, s.merchantID, map[string]any{"name": "Matcha", "price_cents": 400})
	r = b.do(t, req{method: "DELETE", path: "/v1/merchants/" + s.merchantID + "/products/" + hidden, token: s.kitchen})
	require.Equal(t, http.StatusNoContent, r.status, string(r.raw))
	before := tableCounts(t, b)

	line := func(product string, options ...string) map[string]any {
		return map[string]any{"merchant_id": s.merchantID, "items": []map[string]any{{"product_id": product, "quantity": 1, "options": options}}}
	}
	menuItem := "/v1/merchants/" + s.merchantID + "/products/" + s.teaID
	badGroup := func(change func(g map[string]any)) map[string]any {
		menu := teaMenu()
		change(menu["option_groups"].([]map[string]any)[2])
		return menu
	}
	cases := []struct {
		name, method, path, token string
		body                      any
		status                    int
		code, field               string
	}{
		{"an option of another product", "POST", "/v1/orders", alice, line(s.teaID, s.option["Regular"], other.option["Pearls"]), 422, "validation_failed", "items[0].options[1]"},
		{"a group over max_select", "POST", "/v1/orders", alice, line(s.teaID, s.ids("Regular", "Pearls", "Jelly", "Pudding")...), 422, "validation_failed", `items[0]: group "Toppings"`},
		{"a missing required group", "POST", "/v1/orders", alice, line(s.teaID, s.option["Pearls"]), 422, "validation_failed", `items[0]: group "Size"`},
		{"a repeated option", "POST", "/v1/orders", alice, line(s.teaID, s.ids("Regular", "Pearls", "Pearls")...), 422, "validation_failed", "items[0].options[2]"},
		{"an unavailable product", "POST", "/v1/orders", alice, line(gone), 409, "product_unavailable", "items[0].product_id"},
		{"a hidden product", "POST", "/v1/orders", alice, line(hidden), 409, "product_unavailable", "items[0].product_id"},
		{"a new product with max_select 0", "POST", "/v1/merchants/" + s.merchantID + "/products", b.admin, badGroup(func(g map[string]any) { g["max_select"] = 0 }), 422, "validation_failed", "option_groups[2].max_select"},
		{"a new product with min above max", "POST", "/v1/merchants/" + s.merchantID + "/products", b.admin, badGroup(func(g map[string]any) { g["min_select"] = 3 }), 422, "validation_failed", "option_groups[2].min_select"},
		{"a discount below 0", "POST", "/v1/merchants/" + s.merchantID + "/products", b.admin, badGroup(func(g map[string]any) {
			g["options"].([]map[string]any)[0]["price_delta_cents"] = -1000
		}), 422, "validation_failed", "option_groups[2]"},
		{"an empty option name", "PATCH", menuItem, s.kitchen, map[string]any{"option_groups": badGroup(func(g map[string]any) { g["options"].([]map[string]any)[1]["name"] = "" })["option_groups"]}, 422, "validation_failed", "option_groups[2].options[1].name"},
		{"a price the discounts take below 0", "PATCH", menuItem, s.kitchen, map[string]any{"price_cents": 5}, 422, "validation_failed", "option_groups[1]"},
		{"a negative price", "PATCH", menuItem, s.kitchen, map[string]any{"price_cents": -1}, 422, "validation_failed", "price_cents"},
		{"an empty name", "PATCH", menuItem, s.kitchen, map[string]any{"name": " "}, 422, "validation_failed", "name"},
		{"a string price", "PATCH", menuItem, s.kitchen, `{"price_cents":"5"}`, 400, "malformed_json", "price_cents"},
		{"an unknown field", "PATCH", menuItem, s.kitchen, map[string]any{"stock": 5}, 400, "malformed_json", "stock"},
		{"another merchant's product", "PATCH", "/v1/merchants/" + s.merchantID + "/products/" + other.teaID, s.kitchen, map[string]any{"price_cents": 5}, 404, "not_found", "product"},
		{"another merchant's menu", "PATCH", "/v1/merchants/" + other.merchantID + "/products/" + other.teaID, s.kitchen, map[string]any{"price_cents": 5}, 403, "forbidden", "merchant"},
		{"a hidden product's change", "PATCH", "/v1/merchants/" + s.merchantID + "/products/" + hidden, s.kitchen, map[string]any{"price_cents": 5}, 404, "not_found", "product"},
		{"a customer hides a product", "DELETE", menuItem, alice, nil, 403, "forbidden", "merchant"},
	}
	for _, tc := range cases {
		r := b.do(t, req{method: tc.method, path: tc.path, token: tc.token, body: tc.body, header: map[string]string{"Idempotency-Key": uuid.NewString()}})
		requireProblem(t, r, tc.status, tc.code)
		require.Contains(t, r.body["detail"], tc.field, "%s: %s", tc.name, r.raw)
	}
	require.Equal(t, before, tableCounts(t, b))
}

// tableCounts counts the rows of every table a refused request could write.
func tableCounts(t *testing.T, b *testBundle) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, tbl := range []string{"events", "orders", "merchants", "products", "stock_buckets"} {
		var n int
		require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+tbl).Scan(&n))
		out[tbl] = n
	}
	var versions int
	require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT coalesce(sum(version), 0) FROM products").Scan(&versions))
	out["product versions"] = versions
	return out
}

// TestGuestSessions: a merchant that takes guests gives anyone, with or
// without a token (a bad one included), a customer token of a new guest,
// which orders like any customer; one that does not answers 404, as does
// an unknown merchant, and nothing is written.
func TestGuestSessions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := newShop(t, b)
	r := b.do(t, req{method: "PATCH", path: "/v1/merchants/" + s.merchantID, token: b.admin, body: map[string]any{"guest_checkout": true}})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, true, r.body["guest_checkout"])
	closed := newShop(t, b)
	require.Equal(t, false, b.do(t, req{method: "GET", path: "/v1/merchants/" + closed.merchantID, token: b.admin}).body["guest_checkout"])

	before := tableCounts(t, b)
	for _, tc := range []struct{ name, merchant string }{{"no guest_checkout", closed.merchantID}, {"unknown merchant", uuid.NewString()}} {
		r := b.do(t, req{method: "POST", path: "/v1/merchants/" + tc.merchant + "/guest-sessions"})
		requireProblem(t, r, http.StatusNotFound, "not_found")
		require.Contains(t, r.body["detail"], "guest", tc.name)
	}
	requireProblem(t, b.do(t, req{method: "POST", path: "/v1/merchants/not-a-uuid/guest-sessions"}), http.StatusNotFound, "not_found")
	require.Equal(t, before, tableCounts(t, b))

	tokens := badTokens(t)
	subs := map[string]bool{}
	for _, token := range []string{"", tokens[expired], tokens[wrongSig], b.admin} {
		r := b.do(t, req{method: "POST", path: "/v1/merchants/" + s.merchantID + "/guest-sessions", token: token})
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		require.Equal(t, "no-store", r.header.Get("Cache-Control"))
		require.Equal(t, "Bearer", r.body["token_type"])
		sub := r.body["sub"].(string)
		require.Regexp(t, `^guest:[0-9a-f]{32}$`, sub)
		require.False(t, subs[sub], "every guest is new")
		subs[sub] = true
		expires, err := time.Parse(time.RFC3339, r.body["expires_at"].(string))
		require.NoError(t, err)
		require.WithinDuration(t, time.Now().Add(api.DefaultGuestTTL), expires, time.Minute)

		guest := r.body["token"].(string)
		placed := b.place(t, guest, s.order(s.ids("Regular")...))
		require.Equal(t, http.StatusCreated, placed.status, string(placed.raw))
		require.Equal(t, sub, placed.body["customer_id"])
		mine := b.do(t, req{method: "GET", path: "/v1/orders", token: guest})
		require.Len(t, mine.body["orders"], 1, "a guest sees its own orders only")
	}
}

// TestGuestSessionsAreLimitedPerAddress: ORDERD_RATE_GUEST bounds the
// sessions one client address takes, answering 429 with Retry-After, and
// a refused request writes nothing.
func TestGuestSessionsAreLimitedPerAddress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := newShop(t, b)
	r := b.do(t, req{method: "PATCH", path: "/v1/merchants/" + s.merchantID, token: b.admin, body: map[string]any{"guest_checkout": true}})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	frozen := time.Now()
	srv := httptest.NewServer(api.New(api.Config{Store: b.store, Auth: b.auth, RateGuest: 1, GuestTTL: time.Hour, Now: func() time.Time { return frozen }}))
	t.Cleanup(srv.Close)
	limited := &testBundle{srv: srv, client: b.client, pool: b.pool, store: b.store, auth: b.auth, admin: b.admin}
	path := "/v1/merchants/" + s.merchantID + "/guest-sessions"
	for range 2 { // the burst is twice the rate
		r := limited.do(t, req{method: "POST", path: path})
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		expires, err := time.Parse(time.RFC3339, r.body["expires_at"].(string))
		require.NoError(t, err)
		require.WithinDuration(t, time.Now().Add(time.Hour), expires, time.Minute, "ORDERD_GUEST_TTL")
	}
	r = limited.do(t, req{method: "POST", path: path})
	requireProblem(t, r, http.StatusTooManyRequests, "rate_limited")
	require.Equal(t, "1", r.header.Get("Retry-After"))
}

// TestPickedUpAndReopen walks a rush at a one-cup kitchen: a completion
// frees the cup for the next order, its undo takes the cup back at once,
// ahead of the line and past capacity, and a pickup clears it for good.
func TestPickedUpAndReopen(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := newShop(t, b)
	r := b.do(t, req{method: "PATCH", path: "/v1/merchants/" + s.merchantID, token: b.admin, body: map[string]any{"capacity": 2}})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	alice, bob := b.customer(t, "alice"), b.customer(t, "bob")
	first := b.place(t, alice, s.order(s.ids("Regular")...)) // two cups
	require.Equal(t, "accepted", first.body["status"], string(first.raw))
	second := b.place(t, bob, s.order(s.ids("Regular")...))
	require.Equal(t, "queued", second.body["status"], string(second.raw))
	firstPath, secondPath := "/v1/orders/"+first.body["id"].(string), "/v1/orders/"+second.body["id"].(string)
	load := func() map[string]any {
		return b.do(t, req{method: "GET", path: "/v1/merchants/" + s.merchantID, token: s.kitchen}).body["load"].(map[string]any)
	}

	requireProblem(t, b.do(t, req{method: "POST", path: firstPath + "/reopen", token: s.kitchen}), http.StatusConflict, "invalid_transition")
	requireProblem(t, b.do(t, req{method: "POST", path: firstPath + "/picked-up", token: s.kitchen}), http.StatusConflict, "invalid_transition")

	r = b.do(t, req{method: "POST", path: firstPath + "/complete", token: s.kitchen})
	require.Equal(t, "completed", r.body["status"], string(r.raw))
	require.Equal(t, "accepted", b.do(t, req{method: "GET", path: secondPath, token: bob}).body["status"], "the freed cups went to the next order")

	r = b.do(t, req{method: "POST", path: firstPath + "/reopen", token: s.kitchen})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "accepted", r.body["status"])
	require.Nil(t, r.body["completed_at"])
	require.Nil(t, r.body["ended_at"])
	require.EqualValues(t, 4, load()["active"], "the reopened order holds its cups again, past capacity")
	require.EqualValues(t, 2, load()["active_orders"])

	r = b.do(t, req{method: "POST", path: firstPath + "/complete", token: s.kitchen})
	require.Equal(t, "completed", r.body["status"], string(r.raw))
	require.EqualValues(t, 2, load()["active"])
	r = b.do(t, req{method: "POST", path: firstPath + "/picked-up", token: s.kitchen})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "completed", r.body["status"])
	pickedUp := r.body["picked_up_at"]
	require.NotNil(t, pickedUp)
	again := b.do(t, req{method: "POST", path: firstPath + "/picked-up", token: s.kitchen})
	require.Equal(t, http.StatusOK, again.status, string(again.raw))
	require.Equal(t, pickedUp, again.body["picked_up_at"], "picking up again is a no-op")
	require.Equal(t, r.body["version"], again.body["version"])

	before := tableCounts(t, b)
	r = b.do(t, req{method: "POST", path: firstPath + "/reopen", token: s.kitchen})
	requireProblem(t, r, http.StatusConflict, "invalid_transition")
	require.Contains(t, r.body["detail"], "picked up")
	require.Equal(t, before, tableCounts(t, b))

	// A minute later the second order's completion can no longer be undone.
	r = b.do(t, req{method: "POST", path: secondPath + "/complete", token: s.kitchen})
	require.Equal(t, "completed", r.body["status"], string(r.raw))
	before = tableCounts(t, b)
	late := store.New(store.Config{Pool: b.pool, Now: func() time.Time { return time.Now().Add(domain.ReopenWindow + time.Second) }})
	lateSrv := httptest.NewServer(api.New(api.Config{Store: late, Auth: b.auth}))
	t.Cleanup(lateSrv.Close)
	lateBundle := &testBundle{srv: lateSrv, client: b.client, pool: b.pool, store: late, auth: b.auth, admin: b.admin}
	r = lateBundle.do(t, req{method: "POST", path: secondPath + "/reopen", token: s.kitchen})
	requireProblem(t, r, http.StatusConflict, "invalid_transition")
	require.Contains(t, r.body["detail"], "60 s")
	require.Equal(t, before, tableCounts(t, b), "a refused reopening writes nothing")

	events := b.do(t, req{method: "GET", path: firstPath + "/events", token: s.kitchen})
	var types []string
	for _, e := range events.body["events"].([]any) {
		types = append(types, e.(map[string]any)["type"].(string))
	}
	require.Equal(t, []string{"order.accepted", "order.completed", "order.reopened", "order.completed", "order.picked_up"}, types)

	audit := b.do(t, req{method: "GET", path: "/v1/admin/audit", token: b.admin})
	require.Equal(t, true, audit.body["ok"], string(audit.raw))
}
