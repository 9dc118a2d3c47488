package jobs_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/ledger/verify"
	"github.com/orderd/orderd/store"
	webhookverify "github.com/orderd/orderd/webhook/verify"
)

// witness keeps the checkpoints it is sent, refusing the first refuse
// requests, and checks each request's webhook signature.
type witness struct {
	mu       sync.Mutex
	refuse   int
	requests int
	kept     []verify.Checkpoint
	badSig   int
	srv      *httptest.Server
}

func newWitness(t *testing.T, secret string, refuse int) *witness {
	w := &witness{refuse: refuse}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		w.mu.Lock()
		defer w.mu.Unlock()
		w.requests++
		if webhookverify.Verify(secret, req.Header.Get(webhookverify.HeaderSignature), body, time.Now()) != nil {
			w.badSig++
			rw.WriteHeader(http.StatusUnauthorized)
			return
		}
		if w.requests <= w.refuse {
			rw.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var c verify.Checkpoint
		if err := json.Unmarshal(body, &c); err != nil {
			rw.WriteHeader(http.StatusBadRequest)
			return
		}
		w.kept = append(w.kept, c)
		rw.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(w.srv.Close)
	return w
}

func (w *witness) keptSizes() []uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var sizes []uint64
	for _, c := range w.kept {
		sizes = append(sizes, c.Size)
	}
	return sizes
}

// TestWitnessReceivesEveryCheckpoint: a witness that refuses its first
// requests, behind a relay restarted between checkpoints, ends up with
// every checkpoint, in the order they were made, each signed like a
// webhook and by the checkpoint key; a relay that does not know the
// witness leaves its messages alone.
func TestWitnessReceivesEveryCheckpoint(t *testing.T) {
	t.Parallel()
	b := newRelayBundle(t)
	ctx := context.Background()
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	m, err := b.store.CreateMerchant(ctx, domain.MerchantSettings{Name: "tea", Capacity: 100, PrepSeconds: 60,
		MaxQueueWaitSeconds: 1800, PaymentTimeoutSeconds: 900}, store.Meta{})
	require.NoError(t, err)
	p, err := b.store.CreateProduct(ctx, store.CreateProductParams{MerchantID: m.ID, Name: "tea", PriceCents: 100})
	require.NoError(t, err)
	checkpoint := func() *verify.Checkpoint {
		t.Helper()
		placeUnpaid(t, b.store, m.ID, p.ID, "alice", "pay")
		res, err := b.store.ExtendLog(ctx, store.ExtendLogParams{Log: store.LogMain, Key: key, Witness: true})
		require.NoError(t, err)
		require.NotNil(t, res.Checkpoint)
		return res.Checkpoint
	}
	var made []uint64
	made = append(made, checkpoint().Size)

	// A relay without the witness's address never claims its messages.
	stop := b.runRelay(t, 5*time.Second)
	time.Sleep(10 * b.relayCfg.Poll)
	stop()
	var attempts int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT attempts FROM outbox WHERE merchant_id = $1`, store.WitnessMerchant).Scan(&attempts))
	require.Zero(t, attempts, "left to the instances that know the witness")

	const secret = "w1tness-s3cret-0f-thirty-two-bytes-at-least"
	wit := newWitness(t, secret, 4)
	b.relayCfg.WitnessURL, b.relayCfg.WitnessSecret = wit.srv.URL, secret
	b.relayCfg.Policy.MaxAttempts = 100
	stop = b.runRelay(t, 5*time.Second)
	waitFor(t, 10*time.Second, func() bool { wit.mu.Lock(); defer wit.mu.Unlock(); return wit.requests >= 2 }, "the witness refused a first attempt")
	stop()
	made = append(made, checkpoint().Size, checkpoint().Size)

	b.runRelay(t, 5*time.Second)
	made = append(made, checkpoint().Size)
	waitFor(t, 20*time.Second, func() bool { return len(wit.keptSizes()) >= len(made) }, "the witness keeps every checkpoint")
	require.Equal(t, made, wit.keptSizes(), "every checkpoint, once each, in the order made")
	stored, err := b.store.Checkpoints(ctx)
	require.NoError(t, err)
	wit.mu.Lock()
	defer wit.mu.Unlock()
	require.Zero(t, wit.badSig)
	require.Equal(t, stored, wit.kept, "what the witness keeps is what orderd stored")
	for _, c := range wit.kept {
		require.NoError(t, c.Verify(key.Public().(ed25519.PublicKey)))
	}
}
