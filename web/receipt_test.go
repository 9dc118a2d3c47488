package web_test

import (
	"crypto/ed25519"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/orderd/orderd/ledger/verify"
)

// The customer page's receipt check (static/assets/receipt.js, Web Crypto)
// accepts a receipt built as the server builds one, and refuses it with an
// event's hash, the root or the signature changed. It runs in Node, whose
// Web Crypto is the browsers'.
func TestReceiptCheckInJavaScript(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	require.NoError(t, err, "the receipt check runs in Node (20 or later): install nodejs")

	stored := map[int64]tlog.Hash{}
	reader := tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(indexes))
		for i, idx := range indexes {
			out[i] = stored[idx]
		}
		return out, nil
	})
	var events [][]byte
	for n := range int64(7) {
		h := verify.ChainHash(verify.ZeroHash, []byte{byte(n)})
		events = append(events, h)
		hashes, err := tlog.StoredHashes(n, h, reader)
		require.NoError(t, err)
		for j, sh := range hashes {
			stored[tlog.StoredHashIndex(0, n)+int64(j)] = sh
		}
	}
	root, err := tlog.TreeHash(7, reader)
	require.NoError(t, err)
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	c := verify.Checkpoint{Log: "main", Size: 7, Root: root[:], At: "2026-11-27T05:00:00.5Z", PublicKey: key.Public().(ed25519.PublicKey)}
	c.Signature = ed25519.Sign(key, c.SignedText())
	receipt := verify.Proof{Checkpoint: &c}
	for i, n := range []int64{2, 5, 6} {
		p, err := tlog.ProveRecord(7, n, reader)
		require.NoError(t, err)
		e := verify.ProofEvent{Version: i + 1, Type: "order.placed", Hash: events[n], LeafIndex: uint64(n)}
		for _, h := range p {
			e.Inclusion = append(e.Inclusion, h[:])
		}
		receipt.Events = append(receipt.Events, e)
	}
	require.NoError(t, receipt.Verify(nil), "the Go check accepts it")

	changedEvent := receipt
	changedEvent.Events = append([]verify.ProofEvent(nil), receipt.Events...)
	changedEvent.Events[1].Hash = events[4]
	otherRoot, otherTime := c, c
	otherRoot.Root = events[0]
	otherTime.At = "2026-11-27T05:00:01.5Z"
	changedRoot := receipt
	changedRoot.Checkpoint = &otherRoot
	changedSignature := receipt
	changedSignature.Checkpoint = &otherTime
	empty := receipt
	empty.Events = []verify.ProofEvent{}
	// Served before the log's first checkpoint.
	noCheckpoint := verify.Proof{Events: []verify.ProofEvent{}}
	cases, err := json.Marshal([]verify.Proof{receipt, changedEvent, changedRoot, changedSignature, empty, noCheckpoint})
	require.NoError(t, err)

	dir := t.TempDir()
	module, err := filepath.Abs(filepath.Join("static", "assets", "receipt.js"))
	require.NoError(t, err)
	script := filepath.Join(dir, "check.mjs")
	require.NoError(t, os.WriteFile(script, []byte(`import { verifyReceipt } from "file://`+module+`";
const cases = JSON.parse(process.argv[2]);
const out = [];
for (const c of cases) out.push(await verifyReceipt(c));
console.log(JSON.stringify(out));
`), 0o600))
	out, err := exec.Command(node, script, string(cases)).CombinedOutput()
	require.NoError(t, err, string(out))
	require.JSONEq(t, `[true, false, false, false, false, false]`, string(out))
}
