package main

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
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/jobs"
	"github.com/orderd/orderd/ledger/verify"
	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/store/storetest"
)

// history is a database with orders whose events are all in a signed
// checkpoint, and the files an auditor keeps: that checkpoint and the key
// seed.
type history struct {
	url, keyFile, keptFile string
	pool                   *pgxpool.Pool
	order                  uuid.UUID // a completed order: placed, paid, accepted, completed
	kept                   verify.Checkpoint
}

func newHistory(t *testing.T) *history {
	t.Helper()
	ctx := context.Background()
	h := &history{url: storetest.URL(t)}
	pool, err := pgxpool.New(ctx, h.url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	h.pool = pool
	ins, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	st := store.New(store.Config{Pool: pool, Jobs: ins})
	meta := store.Meta{Actor: domain.ActorAdmin, Subject: "root"}
	m, err := st.CreateMerchant(ctx, domain.MerchantSettings{Name: "Tea", Capacity: 10, PrepSeconds: 60, MaxQueueWaitSeconds: 600, PaymentTimeoutSeconds: 600}, meta)
	require.NoError(t, err)
	p, err := st.CreateProduct(ctx, store.CreateProductParams{MerchantID: m.ID, Name: "Milk tea", PriceCents: 500})
	require.NoError(t, err)
	for i := range 4 {
		// The first is paid after its placement, so that its stream has
		// events in the middle to tamper with.
		ref := fmt.Sprintf("pay-%d", i)
		if i == 0 {
			ref = ""
		}
		res, err := st.PlaceOrder(ctx, store.PlaceRequest{MerchantID: m.ID, CustomerID: fmt.Sprintf("c%d", i),
			Lines: []domain.LineRequest{{ProductID: p.ID, Quantity: 1}}, PaymentRef: ref,
			IdempotencyKey: uuid.NewString(), RequestHash: []byte{byte(i)}})
		require.NoError(t, err)
		if i == 0 {
			h.order = res.Order.ID
			_, err = st.PayOrder(ctx, h.order, "pay-0", domain.Party{Actor: domain.ActorCustomer, Subject: "c0"}, "")
			require.NoError(t, err)
			_, err = st.CompleteOrder(ctx, h.order, domain.Party{Actor: domain.ActorAdmin, Subject: "root"}, "")
			require.NoError(t, err)
		}
	}
	seed := make([]byte, ed25519.SeedSize)
	seed[0] = 7
	dir := t.TempDir()
	h.keyFile, h.keptFile = filepath.Join(dir, "checkpoint.key"), filepath.Join(dir, "kept.json")
	require.NoError(t, os.WriteFile(h.keyFile, []byte(base64.StdEncoding.EncodeToString(seed)), 0o600))
	res, err := st.ExtendLog(ctx, store.ExtendLogParams{Log: store.LogMain, Key: ed25519.NewKeyFromSeed(seed)})
	require.NoError(t, err)
	require.NotNil(t, res.Checkpoint)
	h.kept = *res.Checkpoint
	b, err := json.Marshal(h.kept)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(h.keptFile, b, 0o600))
	return h
}

// tamper runs statements as a superuser would, with the log's triggers off.
func (h *history) tamper(t *testing.T, statements ...string) {
	t.Helper()
	ctx := context.Background()
	_, err := h.pool.Exec(ctx, `ALTER TABLE events DISABLE TRIGGER USER`)
	require.NoError(t, err)
	for _, s := range statements {
		_, err := h.pool.Exec(ctx, s, h.order)
		require.NoError(t, err, s)
	}
	_, err = h.pool.Exec(ctx, `ALTER TABLE events ENABLE TRIGGER USER`)
	require.NoError(t, err)
}

// audit runs orderd audit and returns its exit code and output.
func (h *history) audit(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(mustBinary(t), append([]string{"audit"}, args...)...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+h.url, "ORDERD_CHECKPOINT_KEY=")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	}
	require.NoError(t, err, string(out))
	return 0, string(out)
}

// orderd audit finds every kind of tampering with the history, naming the
// stream or the checkpoint, and exits 1; an intact history exits 0.
func TestAuditFindsEachTampering(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		statements []string
		// names: what the report must name (the order's stream, or the
		// checkpoint); kept: checked against the kept checkpoint.
		want string
		kept bool
	}{
		{"data changed", []string{`UPDATE events SET data = jsonb_set(data, '{reason}', '"x"') WHERE stream_id = $1 AND version = 1`}, "stream", false},
		{"type changed", []string{`UPDATE events SET type = 'order.cancelled' WHERE stream_id = $1 AND version = 3`}, "stream", false},
		{"time changed", []string{`UPDATE events SET recorded_at = recorded_at - interval '1 millisecond' WHERE stream_id = $1 AND version = 2`}, "stream", false},
		{"event deleted mid-stream", []string{`DELETE FROM events WHERE stream_id = $1 AND version = 2`}, "stream", false},
		{"event inserted mid-stream", []string{
			`UPDATE events SET version = version + 100 WHERE stream_id = $1 AND version >= 2`,
			`UPDATE events SET version = version - 99 WHERE stream_id = $1 AND version > 100`,
			`INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data, hash)
				SELECT stream_id, merchant_id, stream_type, 2, 'order.prioritized', '{}', hash FROM events WHERE stream_id = $1 AND version = 1`,
		}, "stream", false},
		{"tail removed", []string{`DELETE FROM events WHERE stream_id = $1 AND version = 4`}, "stream", false},
		{"rewrite with every hash recomputed", []string{
			`UPDATE events SET data = jsonb_set(data, '{total_cents}', '1') WHERE stream_id = $1 AND version = 1`, storetest.RecomputeChain,
		}, "checkpoint", false},
		{"rewrite with every hash and the log recomputed, stored checkpoints removed", []string{
			`UPDATE events SET data = jsonb_set(data, '{total_cents}', '1') WHERE stream_id = $1 AND version = 1`, storetest.RecomputeChain,
			`UPDATE log_leaves l SET hash = e.hash FROM events e WHERE e.stream_id = l.stream_id AND e.version = l.version AND l.stream_id = $1`,
			`DELETE FROM checkpoints WHERE $1::uuid IS NOT NULL`,
		}, "checkpoint", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHistory(t)
			code, out := h.audit(t, "--checkpoint", h.keptFile)
			require.Equal(t, 0, code, out)
			h.tamper(t, tc.statements...)
			var args []string
			if tc.kept {
				code, out := h.audit(t)
				require.Equal(t, 0, code, "without the kept checkpoint nothing is left to catch it:\n%s", out)
				args = []string{"--checkpoint", h.keptFile}
			}
			code, out = h.audit(t, args...)
			require.Equal(t, 1, code, out)
			switch tc.want {
			case "stream":
				require.Contains(t, out, "broken stream "+h.order.String(), out)
			case "checkpoint":
				require.Contains(t, out, fmt.Sprintf("broken checkpoint main@%d", h.kept.Size), out)
			}
		})
	}
}

// A kept checkpoint that is not one, or whose signature fails, makes orderd
// audit exit 2 with one line, whatever the history.
func TestAuditRefusesABadCheckpointFile(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	forged := h.kept
	forged.Size++
	b, err := json.Marshal(forged)
	require.NoError(t, err)
	dir := t.TempDir()
	for name, content := range map[string][]byte{"forged.json": b, "not.json": []byte("size 12, root abc")} {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, content, 0o600))
		code, out := h.audit(t, "--checkpoint", path)
		require.Equal(t, 2, code, out)
		require.Regexp(t, `^orderd: bad checkpoint file: [^\n]+\n$`, out)
	}
	// Signed by another key than the deployment's.
	code, out := h.audit(t, "--checkpoint", h.keptFile, "--checkpoint-key", writeSeed(t, dir, 9))
	require.Equal(t, 2, code, out)
}

func writeSeed(t *testing.T, dir string, b byte) string {
	t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	seed[0] = b
	path := filepath.Join(dir, fmt.Sprintf("seed-%d", b))
	require.NoError(t, os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(seed)), 0o600))
	return path
}

// orderd audit names every stream whose chain breaks, not only the first.
func TestAuditNamesEveryBrokenStream(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	rows, err := h.pool.Query(context.Background(), `SELECT DISTINCT stream_id FROM events WHERE stream_type = 'order'`)
	require.NoError(t, err)
	orders, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)
	require.Len(t, orders, 4)
	h.tamper(t, `UPDATE events SET data = jsonb_set(data, '{reason}', '"x"') WHERE stream_type = 'order' AND version = 1 AND $1::uuid IS NOT NULL`)
	code, out := h.audit(t)
	require.Equal(t, 1, code, out)
	for _, o := range orders {
		require.Contains(t, out, "broken stream "+o.String(), out)
	}
}
