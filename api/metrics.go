package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the API's Prometheus series, on a registry of the caller's so
// that several servers can live in one test process. The operator listener
// serves them, not the API.
type Metrics struct {
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	transitions *prometheus.CounterVec
}

// NewMetrics registers the series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderd_http_requests_total", Help: "HTTP requests by route, method and status.",
		}, []string{"route", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "orderd_http_request_duration_seconds", Help: "HTTP request latency by route.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route", "method"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderd_order_transitions_total", Help: "Committed order status changes.",
		}, []string{"from", "to"}),
	}
	reg.MustRegister(m.requests, m.duration, m.transitions)
	return m
}

// ObserveTransition counts one committed status change.
func (m *Metrics) ObserveTransition(from, to string) { m.transitions.WithLabelValues(from, to).Inc() }

// Middleware records each request under its route pattern, never the raw
// path, which would explode the series count. It must wrap the mux directly:
// the mux writes the pattern into the very request it is given.
func (m *Metrics) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := wrap(w)
		defer func() {
			v := recover()
			route := r.Pattern
			if route == "" {
				route = "unmatched"
			} else if info := infoFrom(r.Context()); info != nil {
				info.route = route
			}
			method := methodLabel(r.Method)
			m.requests.WithLabelValues(route, method, strconv.Itoa(statusOf(sw, v != nil))).Inc()
			m.duration.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
			if v != nil {
				panic(v)
			}
		}()
		next.ServeHTTP(sw, r)
	})
}

// methodLabel folds methods we do not serve into one label value: clients
// may send any token as a method.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return method
	}
	return "other"
}
