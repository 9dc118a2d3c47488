package api_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/ledger/verify"
	"github.com/orderd/orderd/store"
)

var checkpointKey = ed25519.NewKeyFromSeed([]byte("orderd api tests checkpoint seed"))

// checkpoint extends the log over every event so far and checkpoints it,
// returning the checkpoint's size.
func (b *testBundle) checkpoint(t *testing.T) uint64 {
	t.Helper()
	res, err := b.store.ExtendLog(context.Background(), store.ExtendLogParams{Log: store.LogMain, Key: checkpointKey})
	require.NoError(t, err)
	require.NotNil(t, res.Checkpoint)
	return res.Checkpoint.Size
}

// A customer's receipt verifies with ledger/verify against the checkpoint
// an auditor reads; an order not yet in a checkpoint has an empty receipt,
// and a consistency proof links the auditor's first checkpoint to the next.
func TestOrderProofAndCheckpoints(t *testing.T) {
	t.Parallel()
	b := setup(t)
	merchant := b.createMerchant(t, 10)
	product := b.createProduct(t, merchant, map[string]any{"name": "Milk tea", "price_cents": 500})
	alice := b.customer(t, "alice")
	inspector := b.token(t, auth.Principal{Subject: "inspector", Role: auth.RoleAuditor})

	r := b.do(t, req{method: "GET", path: "/v1/audit/checkpoints/latest", token: inspector})
	requireProblem(t, r, http.StatusNotFound, "not_found")

	order := b.placeOrder(t, alice, merchant, product, "pay-1").body["id"].(string)
	// Before the first checkpoint there is none to prove against: no
	// checkpoint, no event, and nothing that verifies.
	r = b.do(t, req{method: "GET", path: "/v1/orders/" + order + "/proof", token: alice})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.JSONEq(t, `{"checkpoint": null, "events": []}`, string(r.raw))
	var early verify.Proof
	require.NoError(t, json.Unmarshal(r.raw, &early))
	require.ErrorIs(t, early.Verify(checkpointKey.Public().(ed25519.PublicKey)), verify.ErrNoCheckpoint)
	r = b.do(t, req{method: "GET", path: "/v1/orders/" + order + "/proof?log=elsewhere", token: alice})
	requireProblem(t, r, http.StatusNotFound, "not_found")
	r = b.do(t, req{method: "GET", path: "/v1/orders/" + order + "/proof?size=1", token: alice})
	requireProblem(t, r, http.StatusNotFound, "not_found")
	first := b.checkpoint(t)
	r = b.do(t, req{method: "GET", path: "/v1/orders/" + order + "/proof", token: alice})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	var receipt verify.Proof
	require.NoError(t, json.Unmarshal(r.raw, &receipt))
	require.Len(t, receipt.Events, 1) // accepted, carrying its placement
	require.NoError(t, receipt.Verify(checkpointKey.Public().(ed25519.PublicKey)))
	// The order's events carry their hashes, the ones the receipt proves.
	r = b.do(t, req{method: "GET", path: "/v1/orders/" + order + "/events", token: alice})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	var events struct {
		Events []struct {
			Version int    `json:"version"`
			Hash    []byte `json:"hash"`
		} `json:"events"`
	}
	require.NoError(t, json.Unmarshal(r.raw, &events))
	require.Len(t, events.Events, 1)
	require.Equal(t, receipt.Events[0].Version, events.Events[0].Version)
	require.Equal(t, receipt.Events[0].Hash, events.Events[0].Hash)

	r = b.do(t, req{method: "GET", path: "/v1/audit/checkpoints/latest", token: inspector})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	var held verify.Checkpoint
	require.NoError(t, json.Unmarshal(r.raw, &held))
	require.Equal(t, &held, receipt.Checkpoint)

	later := b.placeOrder(t, alice, merchant, product, "pay-2").body["id"].(string)
	r = b.do(t, req{method: "GET", path: "/v1/orders/" + later + "/proof", token: alice})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Empty(t, r.body["events"])
	second := b.checkpoint(t)
	// Completed after the checkpoint: its receipt holds the events that
	// are in it, and still verifies.
	r = b.do(t, req{method: "POST", path: "/v1/orders/" + later + "/complete", token: b.admin})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	r = b.do(t, req{method: "GET", path: "/v1/orders/" + later + "/proof", token: alice})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	var partial verify.Proof
	require.NoError(t, json.Unmarshal(r.raw, &partial))
	require.Len(t, partial.Events, 1, "accepted, not yet completed")
	require.Equal(t, "order.accepted", partial.Events[0].Type)
	require.NoError(t, partial.Verify(checkpointKey.Public().(ed25519.PublicKey)))

	r = b.do(t, req{method: "GET", path: fmt.Sprintf("/v1/audit/checkpoints/consistency?from=%d&to=%d", first, second), token: inspector})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	var cons struct{ Proof [][]byte }
	require.NoError(t, json.Unmarshal(r.raw, &cons))
	r = b.do(t, req{method: "GET", path: "/v1/audit/checkpoints/latest", token: inspector})
	var newer verify.Checkpoint
	require.NoError(t, json.Unmarshal(r.raw, &newer))
	require.NoError(t, verify.VerifyConsistency(first, second, held.Root, newer.Root, cons.Proof))

	// Bad input.
	for path, problem := range map[string]int{
		fmt.Sprintf("/v1/audit/checkpoints/consistency?from=%d&to=%d", first, second+1): http.StatusNotFound,
		"/v1/audit/checkpoints/consistency?from=x&to=2":                                 http.StatusUnprocessableEntity,
		"/v1/audit/checkpoints/consistency?from=1":                                      http.StatusUnprocessableEntity,
		"/v1/audit/checkpoints/consistency?from=0&to=2":                                 http.StatusUnprocessableEntity,
		"/v1/orders/" + order + "/proof?size=-3":                                        http.StatusUnprocessableEntity,
		"/v1/orders/" + order + "/proof?size=" + fmt.Sprint(second+1):                   http.StatusNotFound,
	} {
		r := b.do(t, req{method: "GET", path: path, token: b.admin})
		requireProblem(t, r, problem, map[int]string{404: "not_found", 422: "validation_failed"}[problem])
	}
}
