package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"
)

func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	body, err := io.ReadAll(rec.Body)
	require.NoError(t, err)
	return string(body)
}

func TestMetricsUseRoutePatterns(t *testing.T) {
	t.Parallel()
	b := setupChain(t, time.Second, func(mux *http.ServeMux, _ *chainBundle) {
		mux.HandleFunc("GET /v1/orders/{id}", func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, map[string]string{})
		})
		mux.HandleFunc("POST /v1/orders/{id}/pay", func(http.ResponseWriter, *http.Request) { panic("boom") })
	})
	for _, req := range []struct{ method, target string }{
		{"GET", "/v1/orders/0190f1e2-3b4c-7d5e-8f60-718293a4b5c6"},
		{"GET", "/v1/orders/0190f1e2-3b4c-7d5e-8f60-718293a4b5c7"},
		{"POST", "/v1/orders/1/pay"},
		{"GET", "/nowhere/at/all"},
		{"BREW", "/v1/orders/1"},
	} {
		b.handler.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(req.method, req.target, nil))
	}
	b.metrics.ObserveTransition("awaiting_payment", "queued")

	out := scrape(t, b.registry)
	require.Contains(t, out, `orderd_http_requests_total{method="GET",route="GET /v1/orders/{id}",status="200"} 2`)
	require.Contains(t, out, `orderd_http_requests_total{method="POST",route="POST /v1/orders/{id}/pay",status="500"} 1`)
	require.Contains(t, out, `orderd_http_requests_total{method="GET",route="unmatched",status="404"} 1`)
	require.Contains(t, out, `orderd_http_requests_total{method="other",route="unmatched",status="405"} 1`)
	require.Contains(t, out, `orderd_http_request_duration_seconds_bucket{method="GET",route="GET /v1/orders/{id}",le="0.001"}`)
	require.Contains(t, out, `orderd_http_request_duration_seconds_bucket{method="GET",route="GET /v1/orders/{id}",le="10"} 2`)
	require.Contains(t, out, `orderd_order_transitions_total{from="awaiting_payment",to="queued"} 1`)
	require.NotContains(t, out, "718293a4b5c6", "raw paths must never become labels")
}

func TestMetricsRegistriesAreIndependent(t *testing.T) {
	t.Parallel()
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	a := NewMetrics(regA)
	NewMetrics(regB)
	a.ObserveTransition("queued", "accepted")
	require.Contains(t, scrape(t, regA), `orderd_order_transitions_total{from="queued",to="accepted"} 1`)
	require.NotContains(t, scrape(t, regB), `from="queued"`)
}
