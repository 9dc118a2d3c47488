package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/internal/app"
	"github.com/orderd/orderd/internal/ops"
	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/store/storetest"
)

// runApp starts a whole orderd on loopback with both listeners on free
// ports, stopped when the test ends.
func runApp(t *testing.T, configure func(*app.Config)) *app.App {
	t.Helper()
	cfg := app.DefaultConfig()
	cfg.DatabaseURL = storetest.URL(t)
	cfg.JWTSecret = "ops-test-Jd4kP8wQ2zN6vR9tX3mC7bF1"
	cfg.Addr, cfg.OpsAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Migrate = false
	cfg.MaxConns = 8
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if configure != nil {
		configure(&cfg)
	}
	a, err := app.New(context.Background(), cfg)
	require.NoError(t, err)
	require.NoError(t, a.Listen())
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-done) })
	return a
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// sample reads one series' value from a scrape; ok is false when absent.
func sample(scrape, series string) (float64, bool) {
	for _, line := range strings.Split(scrape, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// TestOperatorListener shows /metrics has left the public listener for the
// operator one, with the queue, River and pool series, and that River UI
// answers there.
func TestOperatorListener(t *testing.T) {
	t.Parallel()
	a := runApp(t, nil)
	ctx := context.Background()
	st := a.Store()

	// 25 merchants that admit nobody: the first 20 with two waiting orders,
	// the last 5 with one. Only the busiest 20 get series of their own.
	var busy, quiet []string
	for i := range 25 {
		m, err := st.CreateMerchant(ctx, domain.MerchantSettings{Name: fmt.Sprintf("line %d", i), Capacity: 0, PrepSeconds: 60,
			MaxQueueWaitSeconds: 3600, PaymentTimeoutSeconds: 900}, store.Meta{})
		require.NoError(t, err)
		p, err := st.CreateProduct(ctx, store.CreateProductParams{MerchantID: m.ID, Name: "tea", PriceCents: 100})
		require.NoError(t, err)
		n := 2
		if i >= 20 {
			n = 1
			quiet = append(quiet, m.ID.String())
		} else {
			busy = append(busy, m.ID.String())
		}
		for j := range n {
			_, err := st.PlaceOrder(ctx, store.PlaceRequest{MerchantID: m.ID, CustomerID: fmt.Sprintf("c%d", j), PaymentRef: "p",
				Lines: []domain.LineRequest{{ProductID: p.ID, Quantity: 1}}, IdempotencyKey: uuid.NewString(), RequestHash: []byte("h")})
			require.NoError(t, err)
		}
	}
	// A pause's end is a River timer.
	pauseFor := 3600
	_, err := st.PauseMerchant(ctx, uuid.MustParse(quiet[0]), domain.PauseRequest{Mode: domain.PauseQueue, ForSeconds: &pauseFor}, store.Meta{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	status, _ := get(t, "http://"+a.Addr()+"/metrics")
	require.Equal(t, http.StatusNotFound, status, "/metrics is not on the public listener")
	get(t, "http://"+a.Addr()+"/healthz")

	opsBase := "http://" + a.OpsAddr()
	var scrape string
	// The sweep job runs when River starts; wait for it to be counted.
	require.Eventually(t, func() bool {
		status, scrape = get(t, opsBase+"/metrics")
		return status == http.StatusOK && strings.Contains(scrape, `orderd_river_jobs_worked_total{kind="sweep",outcome="ok",queue="default"}`)
	}, 10*time.Second, 100*time.Millisecond)

	depth := regexp.MustCompile(`(?m)^orderd_merchant_queue_depth\{merchant_id="([^"]+)"\} (\S+)$`).FindAllStringSubmatch(scrape, -1)
	var labelled []string
	for _, d := range depth {
		labelled = append(labelled, d[1])
		require.Equal(t, "2", d[2])
		wait, ok := sample(scrape, fmt.Sprintf(`orderd_merchant_queue_oldest_wait_seconds{merchant_id=%q}`, d[1]))
		require.True(t, ok)
		require.Greater(t, wait, 0.0)
		require.Less(t, wait, 60.0)
	}
	slices.Sort(labelled)
	slices.Sort(busy)
	require.Equal(t, busy, labelled, "exactly the %d busiest merchants are labelled", ops.BusiestMerchants)
	for _, id := range quiet {
		require.NotContains(t, scrape, id)
	}
	total, _ := sample(scrape, "orderd_queued_orders")
	require.Equal(t, 45.0, total)
	lines, _ := sample(scrape, "orderd_merchants_with_queue")
	require.Equal(t, 25.0, lines)

	require.Regexp(t, `(?m)^orderd_river_jobs\{queue="timers",state="(available|scheduled|pending)"\} [1-9]`, scrape,
		"the pause's end is a timer job waiting for its time (pending while beyond the promotion's look-ahead)")
	require.Contains(t, scrape, `orderd_river_job_wait_seconds_bucket{queue="default",le="+Inf"}`)
	require.Contains(t, scrape, `orderd_river_job_run_seconds_count{queue="default"}`)

	maxConns, ok := sample(scrape, "orderd_db_pool_max_conns")
	require.True(t, ok)
	require.Equal(t, 8.0, maxConns)
	acquires, _ := sample(scrape, "orderd_db_pool_acquires_total")
	require.Greater(t, acquires, 0.0)
	require.Contains(t, scrape, `orderd_http_requests_total{method="GET",route="GET /healthz",status="200"} 1`)

	status, page := get(t, opsBase+"/riverui/")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, page, "<html")
	status, queues := get(t, opsBase+"/riverui/api/queues")
	require.Equal(t, http.StatusOK, status, queues)
	require.Contains(t, queues, `"timers"`)
}

// TestOperatorListenerOffLoopbackNeedsPassword: without a password a
// non-loopback operator address is refused before anything starts; with
// one, every path asks for it.
func TestOperatorListenerOffLoopbackNeedsPassword(t *testing.T) {
	t.Parallel()
	cfg := app.DefaultConfig()
	cfg.DatabaseURL = "postgres://nobody@127.0.0.1:1/none"
	cfg.JWTSecret = "ops-test-Jd4kP8wQ2zN6vR9tX3mC7bF1"
	cfg.OpsAddr = "0.0.0.0:0"
	_, err := app.New(context.Background(), cfg)
	require.ErrorContains(t, err, "ORDERD_OPS_PASSWORD")

	a := runApp(t, func(c *app.Config) { c.OpsAddr, c.OpsUser, c.OpsPassword = "0.0.0.0:0", "ops", "s3cret" })
	_, port, err := net.SplitHostPort(a.OpsAddr())
	require.NoError(t, err)
	base := "http://127.0.0.1:" + port
	for _, path := range []string{"/metrics", "/riverui/", "/riverui/api/queues"} {
		status, _ := get(t, base+path)
		require.Equal(t, http.StatusUnauthorized, status, path)
		req, err := http.NewRequest("GET", base+path, nil)
		require.NoError(t, err)
		req.SetBasicAuth("ops", "s3cret")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
}
