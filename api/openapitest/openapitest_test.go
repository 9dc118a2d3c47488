package openapitest_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/api/openapitest"
)

// TestCheckRefusesWhatTheDocumentDoesNotSay shows the checker is not a
// rubber stamp: each answer here differs from the document in one way.
func TestCheckRefusesWhatTheDocumentDoesNotSay(t *testing.T) {
	t.Parallel()
	spec := openapitest.Load(t)
	problem := func(status int, code string) []byte {
		return fmt.Appendf(nil, `{"type":"https://orderd.dev/problems/x","title":"x","status":%d,"detail":"x","code":%q}`, status, code)
	}
	json := http.Header{"Content-Type": {"application/json"}}
	problemJSON := http.Header{"Content-Type": {"application/problem+json"}}
	order := `"queue_position":null,"eta_seconds":null,"items":[{"product_id":"0195f0b4-0000-7000-8000-000000000001","quantity":1,"price_cents":100}],` +
		`"id":"0195f0b4-0000-7000-8000-000000000002","merchant_id":"0195f0b4-0000-7000-8000-000000000003","customer_id":"alice","total_cents":100,` +
		`"status":"accepted","version":2,"placed_at":"2026-11-23T18:00:00Z","payment_deadline":"2026-11-23T18:15:00Z","paid_at":"2026-11-23T18:00:00Z",` +
		`"accepted_at":"2026-11-23T18:00:00Z","completed_at":null,"ended_at":null,"status_reason":null,"load":1,"lane":"normal","pickup_code":"A001","pickup_at":null,"picked_up_at":null`
	getOrder := httptest.NewRequest("GET", "/v1/orders/0195f0b4-0000-7000-8000-000000000002", nil)
	require.NoError(t, spec.Check(getOrder, 200, json, []byte("{"+order+"}")), "the well-formed answer passes")

	for _, tc := range []struct {
		name   string
		req    *http.Request
		status int
		header http.Header
		body   []byte
	}{
		{"unknown field", getOrder, 200, json, []byte(`{` + order + `,"coupon":"x"}`)},
		{"missing field", getOrder, 200, json, []byte(`{"id":"0195f0b4-0000-7000-8000-000000000002"}`)},
		{"unknown order status", getOrder, 200, json, []byte(`{` + strings.Replace(order, `"accepted"`, `"eaten"`, 1) + `}`)},
		{"null where a value is required", getOrder, 200, json, []byte(`{` + strings.Replace(order, `"version":2`, `"version":null`, 1) + `}`)},
		{"undocumented status code", getOrder, 418, problemJSON, problem(418, "not_found")},
		{"code of another status", getOrder, 404, problemJSON, problem(404, "sold_out")},
		{"problem as plain json", getOrder, 404, json, problem(404, "not_found")},
		{"unknown path answered 200", httptest.NewRequest("GET", "/v1/nothing", nil), 200, json, []byte(`{}`)},
		{"405 without Allow", httptest.NewRequest("DELETE", "/v1/orders/0195f0b4-0000-7000-8000-000000000002", nil), 405, problemJSON, problem(405, "method_not_allowed")},
	} {
		require.Error(t, spec.Check(tc.req, tc.status, tc.header, tc.body), tc.name)
	}
	allow := http.Header{"Content-Type": {"application/problem+json"}, "Allow": {"GET, HEAD"}}
	require.NoError(t, spec.Check(httptest.NewRequest("DELETE", "/v1/orders/0195f0b4-0000-7000-8000-000000000002", nil), 405, allow, problem(405, "method_not_allowed")))
}
