package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	fastjson "github.com/segmentio/encoding/json"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// decodeStdlib is encoding/json's reading of a placement's body, as
// decodeJSON reads what goccy/go-json refuses.
func decodeStdlib(body []byte) (placeOrderRequest, bool) {
	var req placeOrderRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return placeOrderRequest{}, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return placeOrderRequest{}, false
	}
	return req, true
}

var placeBodies = []string{
	`{"merchant_id":"5d3c0b4e-8f1a-4c2b-9d7e-6a5f4e3d2c1b","items":[{"product_id":"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0","quantity":2}],"payment_ref":"pay-1"}`,
	"{\n  \"merchant_id\": \"m\",\n  \"items\": [ {\"product_id\": \"p\", \"quantity\": 1, \"options\": [\"a\", \"b\"]}, {\"product_id\": \"q\", \"quantity\": 3, \"options\": null} ],\n  \"payment_ref\": null,\n  \"pickup_at\": \"2026-11-28T10:00:00Z\"\n}\n",
	`{"merchant_id":"m","items":[]}`,
	`{"items":[{}],"pickup_at":null}`,
	`{}`,
	` {"merchant_id":"m","items":[{"product_id":"p","quantity":-0,"options":[]}]} `,
	`{"merchant_id":"m","items":[{"product_id":"p","quantity":-12}]}`,
	`{"merchant_id":"<&>","items":[{"product_id":"p","quantity":1}],"payment_ref":""}`,
}

// Bodies at the edges of what a placement's body may be: escapes, other
// spellings of keys and numbers, repeated keys, unknown fields, trailing
// values, NUL and invalid UTF-8.
var placeBodiesForEncodingJSON = []string{
	`{"Merchant_ID":"m","items":[]}`,
	`{"merchant_id":"m","merchant_id":"n"}`,
	`{"merchant_id":"m","items":null}`,
	`{"merchant_id":"caf\u00e9","items":[]}`,
	`{"merchant_id":"café","items":[]}`,
	`{"merchant_id":"m","items":[{"product_id":"p","quantity":1.0}]}`,
	`{"merchant_id":"m","items":[{"product_id":"p","quantity":1e2}]}`,
	`{"merchant_id":"m","items":[{"product_id":"p","quantity":012}]}`,
	`{"merchant_id":"m","items":[{"product_id":"p","quantity":99999999999999999999}]}`,
	`{"merchant_id":"m","items":[{"product_id":"p","quantity":1,"quantity":2}]}`,
	`{"merchant_id":"m","extra":1}`,
	`{"merchant_id":"m"} {}`,
	`{"merchant_id":"m",}`,
	`{"merchant_id":1}`,
	`[]`,
	``,
	`{"merchant_id":"a\u0000b"}`,
	"{\"merchant_id\":\"a\x00b\"}",
	"{\"merchant_id\":\"\xff\"}",
}

// decodeCompiled reads a placement's body as encoding/json does: what it
// accepts, encoding/json accepts into the same request; the rest decodeJSON
// reads again with encoding/json.
func TestCompiledDecodeReadsAsEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, body := range append(append([]string{}, placeBodies...), placeBodiesForEncodingJSON...) {
		requireDecodesAsEncodingJSON(t, []byte(body))
	}
}

func requireDecodesAsEncodingJSON(t *testing.T, body []byte) {
	t.Helper()
	var got placeOrderRequest
	ok := decodeCompiled(body, &got)
	want, stdOK := decodeStdlib(body)
	if !ok {
		// decodeJSON reads it again with encoding/json.
		return
	}
	require.True(t, stdOK, "goccy/go-json accepted what encoding/json refuses: %q", body)
	require.Equal(t, want, got, "%q", body)
	require.Equal(t, string(mustMarshal(t, want)), string(mustMarshalCompiled(t, got)), "%q", body)
}

// Through decodeJSON, a body goccy/go-json refuses answers encoding/json's
// problem, and leaves nothing of goccy's partial read behind.
func TestDecodeJSONRefusesAsEncodingJSON(t *testing.T) {
	t.Parallel()
	decode := func(body string, dst any) error {
		r := httptest.NewRequest("POST", "/v1/orders", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		return decodeJSON(httptest.NewRecorder(), r, dst)
	}
	for _, body := range placeBodiesForEncodingJSON {
		var req placeOrderRequest
		err := decode(body, &req)
		want, ok := decodeStdlib([]byte(body))
		if ok {
			require.Equal(t, want, req, body)
			continue
		}
		require.Error(t, err, body)
		require.Equal(t, domain.CodeMalformedJSON, domain.ErrorCode(err), body)
	}
	var req placeOrderRequest
	require.EqualError(t, decode(`{"merchant_id":"m","items":[{"product_id":"p","quantity":1.5}]}`, &req),
		"malformed_json: field items.quantity must be an integer, not number 1.5")
}

func FuzzDecodePlaceOrder(f *testing.F) {
	for _, b := range append(append([]string{}, placeBodies...), placeBodiesForEncodingJSON...) {
		f.Add([]byte(b))
	}
	f.Fuzz(requireDecodesAsEncodingJSON)
}

func mustMarshalCompiled(t testing.TB, v any) []byte {
	t.Helper()
	b, err := fastjson.Marshal(v)
	require.NoError(t, err)
	return b
}

func mustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

var awkwardStrings = []string{"", "a", "pay-1", "<script>&", `quote " and \ back`, "tab\tnew\nline", "café ☕", "\u2028\u2029", "bad \xff utf-8", "nul \x00", "\x7f"}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

func randomStringPtr(r *rand.Rand) *string {
	if r.IntN(3) == 0 {
		return nil
	}
	s := pick(r, awkwardStrings)
	return &s
}

// The idempotency hash's text is json.Marshal's, byte for byte, so that a
// replay across versions still matches its first request.
func TestPlaceOrderRequestHashesAsJSONMarshal(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(31, 1))
	for range 2000 {
		req := placeOrderRequest{MerchantID: pick(r, awkwardStrings), PaymentRef: randomStringPtr(r), PickupAt: randomStringPtr(r)}
		switch r.IntN(4) {
		case 0: // nil items
		case 1:
			req.Items = []orderLine{}
		default:
			for range 1 + r.IntN(3) {
				l := orderLine{ProductID: pick(r, awkwardStrings), Quantity: r.IntN(2000) - 1000}
				switch r.IntN(3) {
				case 1:
					l.Options = []string{}
				case 2:
					for range 1 + r.IntN(3) {
						l.Options = append(l.Options, pick(r, awkwardStrings))
					}
				}
				req.Items = append(req.Items, l)
			}
		}
		require.Equal(t, string(mustMarshal(t, req)), string(mustMarshalCompiled(t, req)))
	}
}

func randomTime(r *rand.Rand) time.Time {
	zones := []*time.Location{time.UTC, time.FixedZone("", 8*3600), time.FixedZone("", -(3*3600 + 30*60)), time.Local}
	t := time.Unix(r.Int64N(4e9), r.Int64N(1e9)).In(pick(r, zones))
	if r.IntN(4) == 0 {
		t = t.Truncate(time.Second)
	}
	return t
}

func randomTimePtr(r *rand.Rand) *time.Time {
	if r.IntN(2) == 0 {
		return nil
	}
	t := randomTime(r)
	return &t
}

func randomIntPtr(r *rand.Rand) *int {
	if r.IntN(2) == 0 {
		return nil
	}
	n := r.IntN(1000) - 10
	return &n
}

func randomOrderView(r *rand.Rand) *store.OrderView {
	o := &store.OrderView{
		ID: uuid.New(), MerchantID: uuid.New(), CustomerID: pick(r, awkwardStrings),
		TotalCents: r.Int64N(1e6), Status: domain.OrderStatus(pick(r, []string{"accepted", "queued", "pending_payment", "<&>"})),
		Version: r.IntN(9), PlacedAt: randomTime(r), PaymentDeadline: randomTime(r),
		PaidAt: randomTimePtr(r), AcceptedAt: randomTimePtr(r), CompletedAt: randomTimePtr(r), EndedAt: randomTimePtr(r),
		StatusReason: randomStringPtr(r), QueuePosition: randomIntPtr(r), EtaSeconds: randomIntPtr(r),
		Load: r.IntN(5), Lane: domain.Lane(pick(r, []string{"", "normal", "priority"})), PickupCode: randomStringPtr(r),
		PickupAt: randomTimePtr(r), PickedUpAt: randomTimePtr(r), LineSeq: r.Int64N(100),
	}
	if r.IntN(5) > 0 {
		o.Items = []domain.Item{}
		for range r.IntN(4) {
			it := domain.Item{ProductID: uuid.New(), Quantity: r.IntN(5), PriceCents: r.Int64N(1000) - 10}
			if r.IntN(2) == 0 {
				it.Name = pick(r, awkwardStrings)
			}
			switch r.IntN(3) {
			case 1:
				it.Options = []domain.ChosenOption{}
			case 2:
				for range 1 + r.IntN(2) {
					it.Options = append(it.Options, domain.ChosenOption{ID: pick(r, awkwardStrings), Name: pick(r, awkwardStrings), PriceDeltaCents: r.Int64N(100) - 50})
				}
			}
			o.Items = append(o.Items, it)
		}
	}
	return o
}

// An order's answer is what encoding/json writes for it, byte for byte.
func TestOrderViewEncodesAsJSONMarshal(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(31, 2))
	for range 2000 {
		o := randomOrderView(r)
		w := httptest.NewRecorder()
		writeJSON(w, 201, o)
		var buf bytes.Buffer
		require.NoError(t, json.NewEncoder(&buf).Encode(o))
		require.Equal(t, buf.String(), w.Body.String())
		require.Equal(t, fmt.Sprint(buf.Len()), w.Header().Get("Content-Length"))
		require.Equal(t, "application/json", w.Header().Get("Content-Type"))
		require.Equal(t, 201, w.Code)
	}
}

type unencodable struct{}

func (unencodable) MarshalJSON() ([]byte, error) { return nil, errors.New("cannot") }

// An answer that cannot be encoded is a clean 500, with nothing of it written.
func TestWriteJSONAnswersAnEncodingFailure(t *testing.T) {
	t.Parallel()
	w := httptest.NewRecorder()
	writeJSON(w, 201, struct{ V unencodable }{})
	require.Equal(t, 500, w.Code)
	require.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
	require.Contains(t, w.Body.String(), `"code":"internal"`)
}
