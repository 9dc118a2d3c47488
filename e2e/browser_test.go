// Package e2e drives a whole orderd from a real browser.
package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/internal/app"
	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/store/storetest"
)

const chromium = "/usr/bin/chromium"

// TestCustomerPageCountsDownToAccepted opens the live page in headless
// Chromium, places an order behind a queue, completes the orders ahead
// through the API and waits for the page to show the order accepted.
func TestCustomerPageCountsDownToAccepted(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("this test needs Debian's chromium at %s: apt-get install chromium", chromium)
	}
	ctx := context.Background()
	cfg := app.DefaultConfig()
	cfg.DatabaseURL = storetest.URL(t)
	cfg.JWTSecret = "browser-test-secret-of-32-bytes-or-more"
	cfg.Addr = "127.0.0.1:0"
	cfg.OpsAddr = "127.0.0.1:0"
	cfg.Migrate = false
	cfg.MaxConns = 10
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := app.New(ctx, cfg)
	require.NoError(t, err)
	require.NoError(t, a.Listen())
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-done) })

	st := a.Store()
	m, err := st.CreateMerchant(ctx, domain.MerchantSettings{Name: "Browser Tea", Capacity: 1, PrepSeconds: 30,
		MaxQueueWaitSeconds: 1800, PaymentTimeoutSeconds: 900}, store.Meta{})
	require.NoError(t, err)
	p, err := st.CreateProduct(ctx, store.CreateProductParams{MerchantID: m.ID, Name: "Osmanthus oolong", PriceCents: 1800})
	require.NoError(t, err)
	var ahead []uuid.UUID
	for i := range 3 {
		res, err := st.PlaceOrder(ctx, store.PlaceParams{MerchantID: m.ID, CustomerID: fmt.Sprintf("c%d", i), PaymentRef: "p",
			Lines: []domain.LineRequest{{ProductID: p.ID.String(), Quantity: 1}}, IdempotencyKey: uuid.NewString(), RequestHash: []byte("h")})
		require.NoError(t, err)
		ahead = append(ahead, res.Order.ID)
	}
	alice, err := a.Auth().Issue(auth.Principal{Subject: "alice", Role: auth.RoleCustomer}, time.Hour)
	require.NoError(t, err)

	// Chromium may still write to its profile while exiting, which would fail
	// t.TempDir's cleanup: the profile gets a directory of its own, removed
	// on a best-effort basis.
	profile, err := os.MkdirTemp("", "orderd-chromium-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(profile) })
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("no-first-run", true), chromedp.UserDataDir(profile))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	// cdproto may not know every event of the installed Chromium; those
	// decoding complaints say nothing about the page.
	quiet := func(string, ...any) {}
	browser, cancelBrowser := chromedp.NewContext(allocCtx, chromedp.WithErrorf(quiet), chromedp.WithLogf(quiet))
	defer cancelBrowser()
	browser, cancelTimeout := context.WithTimeout(browser, 60*time.Second)
	defer cancelTimeout()

	page := fmt.Sprintf("http://%s/?token=%s&merchant=%s&autoplace=1", a.Addr(), url.QueryEscape(alice), m.ID)
	var position string
	require.NoError(t, chromedp.Run(browser,
		chromedp.Navigate(page),
		chromedp.WaitVisible(`#status.queued`, chromedp.ByQuery),
		chromedp.Text(`#position`, &position, chromedp.ByQuery),
	))
	require.Equal(t, "3", position, "behind the accepted order and two queued ones")

	seen := []string{position}
	for _, id := range ahead {
		_, err := st.CompleteOrder(ctx, id, store.Access{Actor: domain.ActorAdmin}, "")
		require.NoError(t, err)
		var status string
		require.NoError(t, chromedp.Run(browser, chromedp.Poll(`document.querySelector('#position').textContent !== `+
			fmt.Sprintf("%q", seen[len(seen)-1])+` || document.querySelector('#status').textContent === 'accepted'`, nil),
			chromedp.Text(`#position`, &position, chromedp.ByQuery), chromedp.Text(`#status`, &status, chromedp.ByQuery)))
		seen = append(seen, position)
		if status == "accepted" {
			break
		}
	}
	var status string
	var shot []byte
	require.NoError(t, chromedp.Run(browser,
		chromedp.WaitVisible(`#status.accepted`, chromedp.ByQuery),
		chromedp.Text(`#status`, &status, chromedp.ByQuery),
		chromedp.FullScreenshot(&shot, 100)))
	require.Equal(t, "accepted", status)
	require.Equal(t, []string{"3", "2", "1", "—"}, seen, "the page counted down")
	saveScreenshot(t, "customer-page.png", shot)

	// The merchant view lists alice's order as preparing; its Complete
	// button frees the unit, and the live load says so.
	admin, err := a.Auth().Issue(auth.Principal{Subject: "ops", Role: auth.RoleAdmin}, time.Hour)
	require.NoError(t, err)
	page = fmt.Sprintf("http://%s/?mtoken=%s&merchant=%s&autowatch=1", a.Addr(), url.QueryEscape(admin), m.ID)
	var active string
	require.NoError(t, chromedp.Run(browser,
		chromedp.Navigate(page),
		chromedp.WaitVisible(`#preparing button`, chromedp.ByQuery),
		chromedp.Click(`#preparing button`, chromedp.ByQuery),
		chromedp.Poll(`document.querySelector('#active').textContent === '0'`, nil),
		chromedp.Text(`#active`, &active, chromedp.ByQuery),
		chromedp.FullScreenshot(&shot, 100)))
	require.Equal(t, "0", active)
	saveScreenshot(t, "merchant-page.png", shot)
}

func saveScreenshot(t *testing.T, name string, png []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot: %s", path)
	if dir := os.Getenv("ORDERD_SCREENSHOT_DIR"); dir != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
	}
}
