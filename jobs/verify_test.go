package jobs_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/webhook/verify"
)

// verifyingReceiver is the receiver docs/webhooks.md shows: it
// verifies X-Orderd-Signature-V2 with package verify at its own clock and
// answers 401 to anything that does not verify.
type verifyingReceiver struct {
	secret   string
	clock    atomic.Int64 // seconds added to time.Now
	mu       sync.Mutex
	captured []capturedRequest
	refused  []error
}

type capturedRequest struct {
	header http.Header
	body   []byte
}

func (v *verifyingReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now().Add(time.Duration(v.clock.Load()) * time.Second)
	body, err := verify.Request(r, v.secret, now)
	v.mu.Lock()
	defer v.mu.Unlock()
	if err != nil {
		v.refused = append(v.refused, err)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	v.captured = append(v.captured, capturedRequest{header: r.Header.Clone(), body: body})
	w.WriteHeader(http.StatusNoContent)
}

// TestRelayDeliveryVerifiesAndOldReplayIsRefused sends a real delivery
// through the relay to a receiver using package verify, then replays that
// exact request (headers and body) to the same receiver code: at once it
// still verifies (receivers dedupe by X-Orderd-Delivery), six minutes later
// it is refused as too old.
func TestRelayDeliveryVerifiesAndOldReplayIsRefused(t *testing.T) {
	t.Parallel()
	b := newRelayBundle(t)
	recv := &verifyingReceiver{}
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	m, err := b.store.CreateMerchant(ctx, domain.MerchantSettings{Name: "verifying", Capacity: 5, PrepSeconds: 60,
		MaxQueueWaitSeconds: 1800, PaymentTimeoutSeconds: 900, WebhookURL: srv.URL}, store.Meta{})
	require.NoError(t, err)
	recv.secret = m.WebhookSecret
	p, err := b.store.CreateProduct(ctx, store.CreateProductParams{MerchantID: m.ID, Name: "tea", PriceCents: 100})
	require.NoError(t, err)
	placeUnpaid(t, b.store, m.ID, p.ID, "alice", "pay")
	b.runRelay(t, time.Second)
	waitFor(t, 10*time.Second, func() bool {
		recv.mu.Lock()
		defer recv.mu.Unlock()
		return len(recv.captured) == 1
	}, "the order.accepted delivery verified")
	recv.mu.Lock()
	orig := recv.captured[0]
	require.Empty(t, recv.refused)
	recv.mu.Unlock()
	require.NotEmpty(t, orig.header.Get(verify.HeaderTimestamp))
	require.NotEmpty(t, orig.header.Get("X-Orderd-Signature"), "the deprecated header is still sent")

	replay := func() int {
		req, err := http.NewRequest("POST", srv.URL, bytes.NewReader(orig.body))
		require.NoError(t, err)
		req.Header = orig.header.Clone()
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusNoContent, replay(), "within the window a replay verifies; the delivery id dedupes it")

	recv.clock.Store(int64((verify.MaxAge + time.Minute) / time.Second))
	require.Equal(t, http.StatusUnauthorized, replay(), "six minutes later the same request is refused")
	recv.mu.Lock()
	defer recv.mu.Unlock()
	require.Len(t, recv.refused, 1)
	require.ErrorIs(t, recv.refused[0], verify.ErrTooOld)
}
