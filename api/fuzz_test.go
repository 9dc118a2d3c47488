package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/api"
	"github.com/orderd/orderd/api/openapitest"
	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/jobs"
	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/store/storetest"
)

// serveWith is setup for tests that need their own server configuration
// (a captured logger, rate limits) or a testing.TB other than *testing.T.
func serveWith(tb testing.TB, configure func(*api.Config)) *testBundle {
	tb.Helper()
	pool := storetest.Pool(tb)
	ins, err := jobs.NewInserter(pool)
	require.NoError(tb, err)
	st := store.New(store.Config{Pool: pool, Jobs: ins})
	a := auth.New(secret, nil)
	cfg := api.Config{Store: st, Auth: a, RequestTimeout: 5 * time.Second, Now: stoppedClock()}
	if configure != nil {
		configure(&cfg)
	}
	srv := httptest.NewServer(api.New(cfg))
	tb.Cleanup(srv.Close)
	tok, err := a.Issue(auth.Principal{Subject: "root", Role: auth.RoleAdmin}, time.Hour)
	require.NoError(tb, err)
	return &testBundle{srv: srv, client: openapitest.Client(tb), pool: pool, store: st, auth: a, admin: tok}
}

// stoppedClock is the rate limits' clock in tests: it stands still, so that
// requests a test means as one burst are one even when a loaded machine
// serves them more slowly than the buckets refill.
func stoppedClock() func() time.Time {
	stopped := time.Now()
	return func() time.Time { return stopped }
}

// FuzzPlaceOrderDecoding sends arbitrary bodies to POST /v1/orders through the
// whole handler stack and a real database. "$M" and "$P" in a body stand for
// an existing merchant and product, so that the fuzzer can reach the store
// and not only the decoder. Whatever arrives, the answer is a created or
// replayed order, or a problem+json 4xx that wrote nothing; never a 5xx.
func FuzzPlaceOrderDecoding(f *testing.F) {
	for _, seed := range []struct{ body, key string }{
		{`{"merchant_id":"$M","items":[{"product_id":"$P","quantity":1}]}`, ""},
		{`{"merchant_id":"$M","items":[{"product_id":"$P","quantity":2}],"payment_ref":"pay-1"}`, ""},
		{`{"merchant_id":"$M","items":[{"product_id":"$P","quantity":1}],"payment_ref":"pay-1"}`, "fixed-key"},
		{`{"merchant_id":"$M","items":[{"product_id":"$P","quantity":3}],"payment_ref":"pay-1"}`, "fixed-key"},
		{` {"items":[{"quantity":1,"product_id":"$P"}],"merchant_id":"$M"} `, ""},
		{`{"merchant_id":"$M","items":[{"product_id":"$P","quantity":1},{"product_id":"$P","quantity":1}]}`, ""},
		{`{"merchant_id":"$M","items":[{"product_id":"$P","quantity":101}]}`, ""},
		{`{"merchant_id":"$M","items":[{"product_id":"$P","quantity":-1}]}`, ""},
		{`{"merchant_id":"$M","items":[{"product_id":"$P","quantity":1e400}]}`, ""},
		{`{"merchant_id":"$M","items":[{"product_id":"$P","quantity":9223372036854775808}]}`, ""},
		{`{"merchant_id":"$M","items":[{"product_id":"$P","quantity":1}],"payment_ref":""}`, ""},
		{`{"merchant_id":"$M","items":[{"product_id":"$P","quantity":1}],"payment_ref":"a\u0000b"}`, ""},
		{"{\"merchant_id\":\"$M\",\"items\":[{\"product_id\":\"$P\",\"quantity\":1}],\"payment_ref\":\"\xff\"}", ""},
		{`{"merchant_id":"$M","items":null}`, ""},
		{`{"merchant_id":"$M","merchant_id":"$M","items":[{"product_id":"$P","quantity":1}]}`, ""},
		{`{"merchant_id":"$M","items":[{"product_id":"$P","quantity":1}],"coupon":"FREE"}`, ""},
		{`{"merchant_id":"'; DROP TABLE orders; --","items":[{"product_id":"$P","quantity":1}]}`, "' OR 1=1 --"},
		{`{"merchant_id":"$M","items":[{"product_id":"$P","quantity":1}]}{}`, ""},
		{`[]`, ""},
		{`null`, ""},
		{``, ""},
		{`{"merchant_id":{"$ne":null}}`, ""},
		{`{"merchant_id":"$M","items":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`, ""},
		{`{"merchant_id":"00000000-0000-0000-0000-000000000000","items":[{"product_id":"$P","quantity":1}]}`, ""},
		{`{"merchant_id":"$M","items":[{"product_id":"{$P}","quantity":1}]}`, ""},
		{`{"merchant_id":"$M","items":[{"product_id":"urn:uuid:$P","quantity":1}]}`, ""},
	} {
		f.Add(seed.body, seed.key)
	}

	// Logging every one of millions of requests would drown the fuzzer.
	b := serveWith(f, func(c *api.Config) { c.Logger = slog.New(slog.DiscardHandler) })
	ctx := context.Background()
	meta := store.Meta{Actor: domain.ActorAdmin, Subject: "root"}
	m, err := b.store.CreateMerchant(ctx, domain.MerchantSettings{Name: "Fuzz", Capacity: 1 << 16, PrepSeconds: 60,
		MaxQueueWaitSeconds: 600, PaymentTimeoutSeconds: 600}, meta)
	require.NoError(f, err)
	p, err := b.store.CreateProduct(ctx, store.CreateProductParams{MerchantID: m.ID, Name: "Tea", PriceCents: 100, Meta: meta})
	require.NoError(f, err)
	customer, err := b.auth.Issue(auth.Principal{Subject: "fuzzer", Role: auth.RoleCustomer}, 24*time.Hour)
	require.NoError(f, err)
	placeholders := strings.NewReplacer("$M", m.ID.String(), "$P", p.ID.String())

	written := func(t *testing.T) (n [3]int) {
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM events),
			(SELECT count(*) FROM orders WHERE idempotency_key IS NOT NULL)`).Scan(&n[0], &n[1], &n[2]))
		return n
	}

	f.Fuzz(func(t *testing.T, body, key string) {
		if key == "" {
			key = uuid.NewString()
		}
		before := written(t)
		hr, err := http.NewRequest("POST", b.srv.URL+"/v1/orders", bytes.NewReader([]byte(placeholders.Replace(body))))
		require.NoError(t, err)
		hr.Header.Set("Content-Type", "application/json")
		hr.Header.Set("Authorization", "Bearer "+customer)
		// A key Go's client refuses to send is not one a server can receive.
		hr.Header["Idempotency-Key"] = []string{key}
		resp, err := http.DefaultClient.Do(hr)
		if err != nil && strings.Contains(err.Error(), "invalid header field value") {
			return
		}
		require.NoError(t, err)
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.NoError(t, openapitest.Load(t).Check(hr, resp.StatusCode, resp.Header, raw))

		var answer map[string]any
		require.NoError(t, json.Unmarshal(raw, &answer), "answer %d is not JSON: %q", resp.StatusCode, raw)
		switch {
		case resp.StatusCode == http.StatusCreated:
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			require.Contains(t, []any{"awaiting_payment", "accepted", "queued"}, answer["status"], string(raw))
			require.Equal(t, before[0]+1, written(t)[0], "a created order is one new row")
		case resp.StatusCode == http.StatusOK:
			require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
			require.Equal(t, before, written(t), "a replay writes nothing")
		case resp.StatusCode >= 400 && resp.StatusCode < 500:
			require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
			require.EqualValues(t, resp.StatusCode, answer["status"], string(raw))
			require.NotEmpty(t, answer["code"], string(raw))
			require.Equal(t, before, written(t), "a refused request writes nothing: %s", raw)
		default:
			t.Fatalf("body %q with key %q answered %d: %s", body, key, resp.StatusCode, raw)
		}
	})
}
