package verify_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/orderd/orderd/ledger/verify"
)

// A tree of five leaves built by hand from RFC 6962's definition: every
// leaf's audit path verifies, and a path for another leaf, size or root
// does not.
func TestVerifyInclusionAgainstATreeBuiltByHand(t *testing.T) {
	t.Parallel()
	h := rfc6962.DefaultHasher
	var leaves [][]byte
	for i := range 5 {
		leaves = append(leaves, verify.LeafHash([]byte{byte(i)}))
	}
	require.Equal(t, h.HashLeaf([]byte{3}), leaves[3])
	n := verify.NodeHash
	ab, cd := n(leaves[0], leaves[1]), n(leaves[2], leaves[3])
	root := n(n(ab, cd), leaves[4])
	paths := [][][]byte{
		{leaves[1], cd, leaves[4]}, {leaves[0], cd, leaves[4]},
		{leaves[3], ab, leaves[4]}, {leaves[2], ab, leaves[4]},
		{n(ab, cd)},
	}
	for i, p := range paths {
		require.NoError(t, verify.VerifyInclusion(uint64(i), 5, leaves[i], p, root), "leaf %d", i)
		require.ErrorIs(t, verify.VerifyInclusion(uint64((i+1)%5), 5, leaves[i], p, root), verify.ErrProof)
		require.ErrorIs(t, verify.VerifyInclusion(uint64(i), 5, leaves[i], p, ab), verify.ErrProof)
	}
	require.ErrorIs(t, verify.VerifyInclusion(5, 5, leaves[4], nil, root), verify.ErrProof)
	// The tree of four is a prefix of the tree of five.
	require.NoError(t, verify.VerifyConsistency(4, 5, n(ab, cd), root, [][]byte{leaves[4]}))
	require.ErrorIs(t, verify.VerifyConsistency(4, 5, n(cd, ab), root, [][]byte{leaves[4]}), verify.ErrProof)
}

func TestCheckpointSignature(t *testing.T) {
	t.Parallel()
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	root := sha256.Sum256([]byte("root"))
	c := verify.Checkpoint{Log: "main", Size: 12, Root: root[:], At: "2026-11-27T04:00:00.123Z", PublicKey: key.Public().(ed25519.PublicKey)}
	require.Equal(t, "orderd checkpoint v1\nmain\n12\n"+base64.StdEncoding.EncodeToString(root[:])+"\n2026-11-27T04:00:00.123Z\n", string(c.SignedText()))
	c.Signature = ed25519.Sign(key, c.SignedText())
	require.NoError(t, c.Verify(nil))
	require.NoError(t, c.Verify(key.Public().(ed25519.PublicKey)))

	other := ed25519.NewKeyFromSeed(append(make([]byte, ed25519.SeedSize-1), 1))
	require.ErrorIs(t, c.Verify(other.Public().(ed25519.PublicKey)), verify.ErrSignature)
	grown := c
	grown.Size++
	require.ErrorIs(t, grown.Verify(nil), verify.ErrSignature)
	resigned := grown
	resigned.PublicKey = other.Public().(ed25519.PublicKey)
	resigned.Signature = ed25519.Sign(other, resigned.SignedText())
	require.NoError(t, resigned.Verify(nil), "its own key proves only who signed it")
	require.ErrorIs(t, resigned.Verify(key.Public().(ed25519.PublicKey)), verify.ErrSignature, "a pinned key does not accept it")
}

func TestChainHash(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 27, 4, 0, 0, 123456000, time.UTC)
	content := verify.EventContent("0195f6a2-0000-7000-8000-000000000001", 1, "order.placed", `{"a": 1}`, `{}`, at)
	require.Equal(t, "0195f6a2-0000-7000-8000-000000000001\n1\norder.placed\n{\"a\": 1}\n{}\n1795752000123456", string(content))
	sum := sha256.Sum256(append(make([]byte, 32), content...))
	require.Equal(t, sum[:], verify.ChainHash(verify.ZeroHash, content))
}
