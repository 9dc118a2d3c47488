// Package e2e drives a whole orderd from a real browser.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/internal/app"
	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/store/storetest"
)

const chromium = "/usr/bin/chromium"

// world is one orderd and one headless Chromium.
type world struct {
	a       *app.App
	st      *store.Store
	dbURL   string
	base    string
	admin   string
	browser context.Context
}

func setup(t *testing.T) *world {
	t.Helper()
	return setupWith(t, func(*app.Config) {})
}

// setupWith is setup with the orderd's configuration changed first.
func setupWith(t *testing.T, configure func(*app.Config)) *world {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("the browser tests need Debian's chromium at %s: apt-get install chromium", chromium)
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
	configure(&cfg)
	a, err := app.New(ctx, cfg)
	require.NoError(t, err)
	require.NoError(t, a.Listen())
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-done) })
	admin, err := a.Auth().Issue(auth.Principal{Subject: "platform", Role: auth.RoleAdmin}, time.Hour)
	require.NoError(t, err)

	// Chromium may still write to its profile while exiting, which would fail
	// t.TempDir's cleanup: the profile gets a directory of its own, removed
	// on a best-effort basis.
	profile, err := os.MkdirTemp("", "orderd-chromium-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(profile) })
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true), chromedp.UserDataDir(profile))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	// cdproto may not know every event of the installed Chromium; those
	// decoding complaints say nothing about the page.
	quiet := func(string, ...any) {}
	browser, cancelBrowser := chromedp.NewContext(allocCtx, chromedp.WithErrorf(quiet), chromedp.WithLogf(quiet))
	t.Cleanup(cancelBrowser)
	// The test's own bound: every wait below is on a condition of the page,
	// never a sleep, so this is only hit when something is broken.
	browser, cancelTimeout := context.WithTimeout(browser, 3*time.Minute)
	t.Cleanup(cancelTimeout)
	require.NoError(t, chromedp.Run(browser), "start chromium")
	return &world{a: a, st: a.Store(), dbURL: cfg.DatabaseURL, base: "http://" + a.Addr(), admin: admin, browser: browser}
}

// tab opens a browser tab of its own (its own sessionStorage) at a
// phone's or a wall tablet's size. A page that opens a dialog fails the
// test: no text of the page may run script.
func (w *world) tab(t *testing.T, width, height int64) context.Context {
	t.Helper()
	tab, cancel := chromedp.NewContext(w.browser)
	t.Cleanup(cancel)
	chromedp.ListenTarget(tab, func(ev any) {
		if d, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			t.Errorf("the page opened a %s dialog: %q", d.Type, d.Message)
			go func() { _ = chromedp.Run(tab, page.HandleJavaScriptDialog(false)) }()
		}
	})
	require.NoError(t, chromedp.Run(tab, chromedp.EmulateViewport(width, height)))
	return tab
}

// signInLink mints a sign-in code as a platform would, through the admin
// endpoint, and makes the link a person would be sent.
func (w *world) signInLink(t *testing.T, pagePath string, body map[string]any) string {
	t.Helper()
	enc, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest("POST", w.base+"/v1/admin/sign-in-codes", bytes.NewReader(enc))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+w.admin)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var code struct{ Code string }
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&code))
	return w.base + pagePath + "#code=" + code.Code
}

func (w *world) customerLink(t *testing.T, sub string, merchant uuid.UUID) string {
	return w.signInLink(t, "/?merchant="+merchant.String(), map[string]any{"sub": sub, "role": "customer"})
}

func (w *world) kitchenLink(t *testing.T, merchant uuid.UUID) string {
	return w.signInLink(t, "/kitchen", map[string]any{"sub": "kitchen", "role": "merchant", "merchant_id": merchant})
}

func (w *world) merchant(t *testing.T, name string, capacity int, products ...string) (*store.MerchantView, []uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	m, err := w.st.CreateMerchant(ctx, domain.MerchantSettings{Name: name, Capacity: capacity, PrepSeconds: 90,
		MaxQueueWaitSeconds: 1800, PaymentTimeoutSeconds: 900}, store.Meta{})
	require.NoError(t, err)
	var ids []uuid.UUID
	for i, name := range products {
		p, err := w.st.CreateProduct(ctx, store.CreateProductParams{MerchantID: m.ID, Name: name, PriceCents: int64(1200 + 300*i)})
		require.NoError(t, err)
		ids = append(ids, p.ID)
	}
	return m, ids
}

// paidOrder places and pays an order of one product, as another customer's
// phone would.
func (w *world) paidOrder(t *testing.T, merchant, product uuid.UUID, customer string) *store.OrderView {
	t.Helper()
	res, err := w.st.PlaceOrder(context.Background(), store.PlaceRequest{MerchantID: merchant, CustomerID: customer, PaymentRef: "p-" + customer,
		Lines: []domain.LineRequest{{ProductID: product, Quantity: 1}}, IdempotencyKey: uuid.NewString(), RequestHash: []byte("h")})
	require.NoError(t, err)
	return res.Order
}

func text(ctx context.Context, t *testing.T, sel string) string {
	t.Helper()
	var s string
	require.NoError(t, chromedp.Run(ctx, chromedp.Text(sel, &s, chromedp.ByQuery)))
	return strings.TrimSpace(s)
}

func value(ctx context.Context, t *testing.T, sel string) string {
	t.Helper()
	var s string
	require.NoError(t, chromedp.Run(ctx, chromedp.Value(sel, &s, chromedp.ByQuery)))
	return s
}

func click(ctx context.Context, t *testing.T, sel string) {
	t.Helper()
	require.NoError(t, chromedp.Run(ctx, chromedp.WaitEnabled(sel, chromedp.ByQuery), chromedp.Click(sel, chromedp.ByQuery)))
}

// until waits for a JavaScript condition of the page to hold.
func until(ctx context.Context, t *testing.T, cond string) {
	t.Helper()
	require.NoError(t, chromedp.Run(ctx, chromedp.Poll(cond, nil, chromedp.WithPollingInterval(50*time.Millisecond))), "waiting for %s", cond)
}

func js(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestCustomerOrdersWhileKitchenCompletes: a customer signs in with a
// one-time link, orders two products from the menu on a phone, and watches
// their ticket count down to accepted while the kitchen, in another tab,
// completes the orders ahead; then the kitchen completes theirs and the
// ticket says ready.
func TestCustomerOrdersWhileKitchenCompletes(t *testing.T) {
	w := setup(t)
	m, products := w.merchant(t, "Autumn Milk Tea", 1, "Osmanthus oolong", "Jasmine green tea")
	var ahead []*store.OrderView
	for i := range 3 {
		ahead = append(ahead, w.paidOrder(t, m.ID, products[i%2], fmt.Sprintf("c%d", i)))
	}

	phone := w.tab(t, 390, 844)
	link := w.customerLink(t, "alice", m.ID)
	require.NoError(t, chromedp.Run(phone, chromedp.Navigate(link), chromedp.WaitVisible(`#menu li .more`, chromedp.ByQuery)))
	var href string
	var token bool
	require.NoError(t, chromedp.Run(phone, chromedp.Location(&href),
		chromedp.Evaluate(`JSON.parse(sessionStorage.getItem("orderd.session")).token.length > 0`, &token)))
	require.NotContains(t, href, "code=", "the code leaves the address bar")
	require.NotContains(t, href, "token")
	require.True(t, token, "the token is kept in sessionStorage")
	// The menu and the merchant are read side by side: the menu may be
	// drawn before the header has the shop's name.
	until(phone, t, `document.querySelector("#shop").textContent === "Autumn Milk Tea"`)

	oolong := fmt.Sprintf(`#menu li[data-product-id=%q] .more`, products[0])
	jasmine := fmt.Sprintf(`#menu li[data-product-id=%q] .more`, products[1])
	click(phone, t, oolong)
	click(phone, t, oolong)
	click(phone, t, jasmine)
	until(phone, t, `document.querySelector("#cart-count").textContent === "3 items"`)
	require.Contains(t, text(phone, t, "#cart-total"), "39.00", "2 × 12.00 + 15.00")
	click(phone, t, "#place")
	until(phone, t, `document.querySelector("#status").dataset.status === "queued"`)
	require.Equal(t, "3", text(phone, t, "#position"), "behind the accepted order and two queued ones")
	require.Contains(t, text(phone, t, "#ticket-items"), "2 × Osmanthus oolong")
	require.Contains(t, text(phone, t, "#ticket-items"), "1 × Jasmine green tea")

	kitchen := w.tab(t, 1280, 800)
	require.NoError(t, chromedp.Run(kitchen, chromedp.Navigate(w.kitchenLink(t, m.ID))))
	until(kitchen, t, fmt.Sprintf(`document.querySelectorAll("#line li[data-order-id]").length === 3 && !!document.querySelector(%s)`,
		js(fmt.Sprintf(`.kticket[data-order-id=%q]`, ahead[0].ID))))

	// place is the ticket's place in line while queued, else its status.
	place := func() string {
		var s string
		require.NoError(t, chromedp.Run(phone, chromedp.Evaluate(`document.querySelector("#status").dataset.status === "queued" ?
			document.querySelector("#position").textContent : document.querySelector("#status").dataset.status`, &s)))
		return s
	}
	seen := []string{place()}
	for i, o := range ahead {
		click(kitchen, t, fmt.Sprintf(`.kticket[data-order-id=%q] .complete`, o.ID))
		// The phone's ticket moves by itself: one place per completion, and
		// accepted after the last one ahead.
		until(phone, t, fmt.Sprintf(`document.querySelector("#position").textContent !== %s || document.querySelector("#status").dataset.status !== "queued"`,
			js(seen[len(seen)-1])))
		seen = append(seen, place())
		if i == 0 {
			saveScreenshot(t, phone, "customer.png")
		}
		if i+1 < len(ahead) {
			// The kitchen's next ticket is the next order ahead.
			until(kitchen, t, fmt.Sprintf(`!!document.querySelector(%s)`, js(fmt.Sprintf(`.kticket[data-order-id=%q]`, ahead[i+1].ID))))
		}
	}
	require.Equal(t, []string{"3", "2", "1", "accepted"}, seen, "the ticket counted down")
	require.Equal(t, "Being prepared", text(phone, t, "#status"))

	// Two more customers queue behind, so the kitchen shows a line.
	w.paidOrder(t, m.ID, products[0], "dave")
	w.paidOrder(t, m.ID, products[1], "erin")
	var mine string
	require.NoError(t, chromedp.Run(phone, chromedp.Evaluate(`sessionStorage.getItem("orderd.order."+new URLSearchParams(location.search).get("merchant"))`, &mine)))
	ticket := fmt.Sprintf(`.kticket[data-order-id=%q]`, mine)
	until(kitchen, t, fmt.Sprintf(`!!document.querySelector(%s) && document.querySelectorAll("#line li[data-order-id]").length === 2`, js(ticket)))
	require.Contains(t, text(kitchen, t, ticket), "2 × Osmanthus oolong")
	require.Contains(t, text(kitchen, t, ticket), "1 × Jasmine green tea")
	// The load may come a moment after the lists (another read, or the next
	// live message).
	until(kitchen, t, `document.querySelector("#active").textContent === "1" && document.querySelector("#queued").textContent === "2"`)
	saveScreenshot(t, kitchen, "kitchen.png")

	click(kitchen, t, ticket+" .complete")
	until(phone, t, `document.querySelector("#status").dataset.status === "completed" && !document.querySelector("#ready").classList.contains("hidden")`)
	require.Equal(t, "Ready for pickup", text(phone, t, "#status"))

	// The link worked once: opened again, it signs nobody in.
	again := w.tab(t, 390, 844)
	require.NoError(t, chromedp.Run(again, chromedp.Navigate(link), chromedp.WaitVisible(`#signin`, chromedp.ByQuery)))
	require.Contains(t, text(again, t, "#signin-why"), "already used")
}

// TestKitchenCancelsAndSetsCapacity: the kitchen cancels a ticket with a
// reason the customer sees, and raising the capacity admits the next order.
func TestKitchenCancelsAndSetsCapacity(t *testing.T) {
	w := setup(t)
	m, products := w.merchant(t, "Noodle Bar", 1, "Dan dan noodles")
	first := w.paidOrder(t, m.ID, products[0], "c1")
	second := w.paidOrder(t, m.ID, products[0], "c2")

	kitchen := w.tab(t, 1280, 800)
	require.NoError(t, chromedp.Run(kitchen, chromedp.Navigate(w.signInLink(t, "/kitchen?merchant="+m.ID.String(),
		map[string]any{"sub": "ops", "role": "admin"}))))
	card := fmt.Sprintf(`.kticket[data-order-id=%q]`, first.ID)
	until(kitchen, t, fmt.Sprintf(`!!document.querySelector(%s)`, js(card)))
	click(kitchen, t, card+" .cancel")
	require.NoError(t, chromedp.Run(kitchen, chromedp.SendKeys(card+` input`, "out of noodles", chromedp.ByQuery)))
	click(kitchen, t, card+" .confirm-cancel")
	until(kitchen, t, fmt.Sprintf(`!!document.querySelector(%s)`, js(fmt.Sprintf(`.kticket[data-order-id=%q]`, second.ID))))
	got, err := w.st.GetOrder(context.Background(), first.ID, domain.Party{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	require.Equal(t, domain.StatusCancelled, got.Status)
	require.Equal(t, "out of noodles", *got.StatusReason)

	// An error shows until the next request succeeds.
	// Typed as a person would (key events, not a value set by script), so
	// that the page knows the field is being edited.
	// A live update that arrives after the field lost its focus leaves what
	// was typed alone.
	require.NoError(t, chromedp.Run(kitchen, chromedp.SendKeys("#capacity", kb.End+kb.Backspace+kb.Backspace+kb.Backspace, chromedp.ByQuery)))
	until(kitchen, t, `document.querySelector("#capacity").value === ""`)
	require.NoError(t, chromedp.Run(kitchen, chromedp.Evaluate(`document.activeElement.blur()`, nil)))
	third := w.paidOrder(t, m.ID, products[0], "c3")
	until(kitchen, t, `document.querySelector("#queued").textContent === "1"`)
	require.Empty(t, value(kitchen, t, "#capacity"), "a live update put the old capacity back into the field being edited")
	click(kitchen, t, "#capacity-set")
	until(kitchen, t, `document.querySelector("#error").textContent !== ""`)

	click(kitchen, t, "#capacity-more")
	until(kitchen, t, fmt.Sprintf(`!!document.querySelector(%s) && document.querySelector("#capacity-now").textContent === "2"`,
		js(fmt.Sprintf(`.kticket[data-order-id=%q]`, third.ID))))
	require.Empty(t, text(kitchen, t, "#error"), "cleared by the success")
}

// TestNoUserTextBecomesMarkup: names that are markup show as text on both
// pages, and nothing they hold runs.
func TestNoUserTextBecomesMarkup(t *testing.T) {
	w := setup(t)
	const evil = `<img src=x onerror=alert(1)>`
	m, products := w.merchant(t, `<b>Bold</b> Tea <script>alert(2)</script>`, 1, evil)
	w.paidOrder(t, m.ID, products[0], `<i>mallory</i>`)

	phone := w.tab(t, 390, 844)
	require.NoError(t, chromedp.Run(phone, chromedp.Navigate(w.customerLink(t, "alice", m.ID)), chromedp.WaitVisible(`#menu li .more`, chromedp.ByQuery)))
	require.Equal(t, `<b>Bold</b> Tea <script>alert(2)</script>`, text(phone, t, "#shop"))
	require.True(t, strings.HasPrefix(text(phone, t, "#menu li .name"), evil), text(phone, t, "#menu li .name"))
	click(phone, t, "#menu li .more")
	click(phone, t, "#place")
	until(phone, t, `document.querySelector("#status").dataset.status === "queued"`)
	require.Equal(t, "1 × "+evil, text(phone, t, "#ticket-items"))

	kitchen := w.tab(t, 1280, 800)
	require.NoError(t, chromedp.Run(kitchen, chromedp.Navigate(w.kitchenLink(t, m.ID))))
	until(kitchen, t, `document.querySelectorAll("#line li[data-order-id]").length === 1 && document.querySelectorAll(".kticket").length === 1`)
	require.Contains(t, text(kitchen, t, ".kticket"), "1 × "+evil)
	require.Contains(t, text(kitchen, t, "#line"), "1 × "+evil)

	for _, tab := range []context.Context{phone, kitchen} {
		var markup int
		require.NoError(t, chromedp.Run(tab, chromedp.Evaluate(`[...document.querySelectorAll("body *")].filter((e) =>
			["IMG", "SCRIPT", "I"].includes(e.tagName) || (e.tagName === "B" && e.textContent === "Bold")).length`, &markup)))
		require.Zero(t, markup, "no element was made from a name")
	}
}

func saveScreenshot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	var png []byte
	require.NoError(t, chromedp.Run(tab, chromedp.FullScreenshot(&png, 100)))
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot: %s", path)
	if dir := os.Getenv("ORDERD_SCREENSHOT_DIR"); dir != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
	}
}
