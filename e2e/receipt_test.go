package e2e

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/internal/app"
	"github.com/orderd/orderd/ledger/verify"
	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/store/storetest"
)

var admin = domain.Party{Actor: domain.ActorAdmin, Subject: "root"}

// setupLogged is setup with an orderd that keeps the tamper-evident log,
// checkpointed at least every interval while it grows.
func setupLogged(t *testing.T, interval time.Duration) *world {
	t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	seed[0] = 35
	key := filepath.Join(t.TempDir(), "checkpoint.key")
	require.NoError(t, os.WriteFile(key, []byte(base64.StdEncoding.EncodeToString(seed)), 0o600))
	return setupWith(t, func(c *app.Config) {
		c.CheckpointKey = key
		c.CheckpointInterval = interval
	})
}

// completedInPage is a customer's order, placed on their phone's page and
// completed by the kitchen, with the page showing it ready.
func (w *world) completedInPage(t *testing.T, customer string) (context.Context, uuid.UUID) {
	t.Helper()
	m, products := w.merchant(t, "Receipt Tea "+customer, 2, "Oolong")
	phone := w.tab(t, 390, 844)
	require.NoError(t, chromedp.Run(phone, chromedp.Navigate(w.customerLink(t, customer, m.ID)), chromedp.WaitVisible(`#menu li .more`, chromedp.ByQuery)))
	click(phone, t, fmt.Sprintf(`#menu li[data-product-id=%q] .more`, products[0]))
	click(phone, t, "#place")
	until(phone, t, `document.querySelector("#status").dataset.status === "accepted"`)
	var id string
	require.NoError(t, chromedp.Run(phone, chromedp.Evaluate(`sessionStorage.getItem("orderd.order."+new URLSearchParams(location.search).get("merchant"))`, &id)))
	_, err := w.st.CompleteOrder(context.Background(), uuid.MustParse(id), admin, "")
	require.NoError(t, err)
	until(phone, t, `document.querySelector("#status").dataset.status === "completed"`)
	return phone, uuid.MustParse(id)
}

// checkpointed waits until the latest checkpoint holds the order's
// completion, as the log writer makes it.
func (w *world) checkpointed(t *testing.T, order uuid.UUID) {
	t.Helper()
	require.Eventually(t, func() bool {
		p, err := w.st.OrderProof(context.Background(), order, admin, "", 0)
		if err != nil {
			return false
		}
		for _, e := range p.Events {
			if e.Type == "order.completed" {
				return true
			}
		}
		return false
	}, time.Minute, 50*time.Millisecond, "the log never checkpointed the completion")
}

// receiptSays reloads the page, as a customer who comes back would, and
// waits for its receipt check to settle: what the receipt line says and
// its state.
func receiptSays(phone context.Context, t *testing.T) (string, string) {
	t.Helper()
	require.NoError(t, chromedp.Run(phone, chromedp.Reload()))
	until(phone, t, `document.querySelector("#status").dataset.status === "completed" && !!document.querySelector("#receipt").dataset.state`)
	var state string
	require.NoError(t, chromedp.Run(phone, chromedp.Evaluate(`document.querySelector("#receipt").dataset.state`, &state)))
	var shown bool
	require.NoError(t, chromedp.Run(phone, chromedp.Evaluate(`!document.querySelector("#receipt").classList.contains("hidden")`, &shown)))
	require.True(t, shown, "the receipt line is hidden in state %s", state)
	return state, text(phone, t, "#receipt")
}

// tamper runs a statement as a superuser would, with the events' triggers
// off (which is what lets anyone change a row of the append-only table).
func (w *world) tamper(t *testing.T, statement string, order uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, w.dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	require.NoError(t, pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, statement, order)
		return err
	}), statement)
}

// TestReceiptIsVerifiedInThePage: a completed order whose events are in a
// checkpoint shows "verified" on the customer's page, checked by the
// page's own Web Crypto; the same page of an order an administrator of the
// database rewrote (its data alone, or its data and every hash after it)
// says it does not verify.
func TestReceiptIsVerifiedInThePage(t *testing.T) {
	w := setupLogged(t, 100*time.Millisecond)

	phone, order := w.completedInPage(t, "alice")
	w.checkpointed(t, order)
	state, says := receiptSays(phone, t)
	require.Equal(t, "verified", state, says)
	require.Equal(t, "✓ history verified", says)
	saveScreenshot(t, phone, "receipt-verified.png")

	for _, tc := range []struct {
		name, customer string
		statements     []string
	}{
		{"data changed", "bob", []string{`UPDATE events SET data = jsonb_set(data, '{total_cents}', '1') WHERE stream_id = $1 AND version = 1`}},
		{"data changed and every hash recomputed", "carol", []string{
			`UPDATE events SET data = jsonb_set(data, '{total_cents}', '1') WHERE stream_id = $1 AND version = 1`, storetest.RecomputeChain}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			phone, order := w.completedInPage(t, tc.customer)
			w.checkpointed(t, order)
			state, says := receiptSays(phone, t)
			require.Equal(t, "verified", state, "before the tampering: %s", says)
			for _, s := range tc.statements {
				w.tamper(t, s, order)
			}
			state, says = receiptSays(phone, t)
			require.Equal(t, "broken", state, says)
			require.Equal(t, "✗ this order's history does not match the shop's signed log", says)
		})
	}
}

// TestReceiptNotYetCheckpointed: a completed order the log has not
// checkpointed yet shows no mark, only that it is not in a checkpoint yet,
// both before the first checkpoint and after one that predates the order.
func TestReceiptNotYetCheckpointed(t *testing.T) {
	t.Run("no checkpoint at all", func(t *testing.T) {
		w := setup(t)
		phone, _ := w.completedInPage(t, "dave")
		state, says := receiptSays(phone, t)
		require.Equal(t, "pending", state, says)
		require.Equal(t, "history not in a signed checkpoint yet", says)
	})
	t.Run("only an earlier checkpoint", func(t *testing.T) {
		// The first checkpoint comes with the first events; the next not
		// before an hour.
		w := setupLogged(t, time.Hour)
		w.merchant(t, "Earlier", 1)
		require.Eventually(t, func() bool {
			_, err := w.st.LatestCheckpoint(context.Background(), store.LogMain)
			return err == nil
		}, time.Minute, 50*time.Millisecond)
		phone, order := w.completedInPage(t, "erin")
		p, err := w.st.OrderProof(context.Background(), order, admin, "", 0)
		require.NoError(t, err)
		require.Empty(t, p.Events, "the order came after the only checkpoint")
		state, says := receiptSays(phone, t)
		require.Equal(t, "pending", state, says)
		require.Equal(t, "history not in a signed checkpoint yet", says)
	})
}

// TestKitchenExportsTheCheckpoint: the kitchen display's export downloads
// the latest checkpoint as the JSON that orderd audit --checkpoint takes,
// and the audit holds the history to it.
func TestKitchenExportsTheCheckpoint(t *testing.T) {
	w := setupLogged(t, 100*time.Millisecond)
	_, order := w.completedInPage(t, "frank")
	w.checkpointed(t, order)
	o, err := w.st.GetOrder(context.Background(), order, admin)
	require.NoError(t, err)

	kitchen := w.tab(t, 1280, 800)
	dir := t.TempDir()
	started := make(chan string, 1)
	finished := make(chan browser.DownloadProgressState, 1)
	chromedp.ListenTarget(kitchen, func(ev any) {
		switch ev := ev.(type) {
		case *browser.EventDownloadWillBegin:
			started <- ev.SuggestedFilename
		case *browser.EventDownloadProgress:
			if ev.State != browser.DownloadProgressStateInProgress {
				finished <- ev.State
			}
		}
	})
	require.NoError(t, chromedp.Run(kitchen, browser.SetDownloadBehavior(browser.SetDownloadBehaviorBehaviorAllow).
		WithDownloadPath(dir).WithEventsEnabled(true)))
	require.NoError(t, chromedp.Run(kitchen, chromedp.Navigate(w.kitchenLink(t, o.MerchantID)),
		chromedp.WaitVisible("#export-checkpoint", chromedp.ByQuery)))
	until(kitchen, t, `document.querySelector("#live").textContent === "live"`)
	click(kitchen, t, "#export-checkpoint")
	var name string
	select {
	case name = <-started:
	case <-kitchen.Done():
		t.Fatalf("no download began: %s", text(kitchen, t, "#error"))
	}
	require.Equal(t, browser.DownloadProgressStateCompleted, <-finished, "the download of %s", name)
	require.Empty(t, text(kitchen, t, "#error"))

	kept, err := os.ReadFile(filepath.Join(dir, name))
	require.NoError(t, err)
	var c verify.Checkpoint
	require.NoError(t, json.Unmarshal(kept, &c), string(kept))
	require.Equal(t, fmt.Sprintf("checkpoint-main-%d.json", c.Size), name)
	latest, err := w.st.LatestCheckpoint(context.Background(), store.LogMain)
	require.NoError(t, err)
	require.Equal(t, *latest, c, "the latest checkpoint")

	code, out := audit(t, w, "--checkpoint", filepath.Join(dir, name))
	require.Equal(t, 0, code, out)
	require.Contains(t, out, fmt.Sprintf("and the kept one (main, size %d)", c.Size))
	w.tamper(t, `UPDATE events SET data = jsonb_set(data, '{total_cents}', '1') WHERE stream_id = $1 AND version = 1`, order)
	code, out = audit(t, w, "--checkpoint", filepath.Join(dir, name))
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "broken stream "+order.String())
}

// audit runs orderd audit against the world's database and returns its
// exit code and output.
func audit(t *testing.T, w *world, args ...string) (int, string) {
	t.Helper()
	bin, err := orderdBinary()
	require.NoError(t, err)
	cmd := exec.Command(bin, append([]string{"audit"}, args...)...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+w.dbURL, "ORDERD_CHECKPOINT_KEY=")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	}
	require.NoError(t, err, string(out))
	return 0, string(out)
}

// binDir holds the orderd the tests build, removed after them.
var binDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// orderdBinary builds orderd once for the package's tests.
var orderdBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "orderd-e2e-")
	if err != nil {
		return "", err
	}
	binDir = dir
	bin := filepath.Join(dir, "orderd")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/orderd/orderd/cmd/orderd").CombinedOutput(); err != nil {
		return "", fmt.Errorf("build orderd: %w: %s", err, out)
	}
	return bin, nil
})
