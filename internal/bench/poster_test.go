package bench

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// The poster's hand-written body must be the request http.Client sent.
func TestPlaceBodyIsWhatJSONWrites(t *testing.T) {
	for _, b := range []placeBody{
		{MerchantID: "6c4e0b9e-4d2b-4f55-a1c1-6b8f1f7e2a10", Items: []line{{ProductID: "a", Quantity: 1}}, PaymentRef: "pay"},
		{MerchantID: "m", Items: []line{{ProductID: "p0", Quantity: 3}, {ProductID: "p1", Quantity: 2}, {ProductID: "p2", Quantity: 1}}},
		{MerchantID: `quote " back \ <tag> & ü`, Items: []line{}, PaymentRef: "\n"},
	} {
		want, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendPlaceBody(nil, b); string(got) != string(want) {
			t.Errorf("appendPlaceBody:\n got %s\nwant %s", got, want)
		}
	}
}

// A poster sends what the handler reads (headers, body, a fresh key each
// time) over one connection, returns problems as *httpError, and sends a
// request again on a new connection when the server closed the old one.
func TestPosterPlacesOverOneConnection(t *testing.T) {
	var mu sync.Mutex
	keys := map[string]bool{}
	conns := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var b placeBody
		if r.Method != "POST" || r.URL.Path != "/v1/orders" || r.Header.Get("Authorization") != "Bearer tok" ||
			r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &b) != nil || b.MerchantID != "m" {
			w.WriteHeader(http.StatusTeapot)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		key := r.Header.Get("Idempotency-Key")
		if key == "" || keys[key] {
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"code":"reused"}`))
			return
		}
		keys[key] = true
		conns[r.RemoteAddr] = true
		if b.PaymentRef == "refuse" {
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = w.Write([]byte(`{"code":"refused"}`))
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"o"}`))
	}))
	defer srv.Close()

	tgt := NewTarget(srv.URL, nil, nil)
	ps := tgt.newPosters(1)
	defer closePosters(ps)
	p := ps[0]
	ctx := context.Background()
	order := placeBody{MerchantID: "m", Items: []line{{ProductID: "p", Quantity: 1}}, PaymentRef: "pay"}
	for range 3 {
		if status, err := p.placeOrder(ctx, "tok", order); err != nil || status != http.StatusCreated {
			t.Fatalf("placeOrder: %d %v", status, err)
		}
	}
	if len(conns) != 1 {
		t.Fatalf("three requests came over %d connections, want 1", len(conns))
	}

	refused := order
	refused.PaymentRef = "refuse"
	_, err := p.placeOrder(ctx, "tok", refused)
	var he *httpError
	if !errors.As(err, &he) || he.Status != http.StatusUnprocessableEntity || he.Code != "refused" {
		t.Fatalf("a refused order: %v, want HTTP 422 refused", err)
	}

	srv.CloseClientConnections()
	if status, err := p.placeOrder(ctx, "tok", order); err != nil || status != http.StatusCreated {
		t.Fatalf("after the server closed the connection: %d %v", status, err)
	}
	if len(conns) != 2 || len(keys) != 5 {
		t.Fatalf("%d connections and %d keys, want 2 and 5", len(conns), len(keys))
	}
}
