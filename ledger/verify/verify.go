// Package verify checks orderd's tamper-evident history on the auditor's
// side: an event's link in its stream's chain, a signed checkpoint of the
// log, an event's inclusion in a checkpoint (RFC 6962 / RFC 9162 audit path)
// and the consistency of two checkpoints (one log only grew between them).
// It uses the standard library only, so an auditor may import it or copy it.
//
// Keep the first checkpoint you verify (or one a witness kept) and check
// every later one against it with VerifyConsistency: a log rewritten after a
// checkpoint you hold can no longer prove consistency with it.
package verify

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ZeroHash is the hash before a stream's first event.
var ZeroHash = make([]byte, sha256.Size)

// EventContent is the text an event's hash covers, as PostgreSQL builds it
// from the event's row. data and metadata are the columns' jsonb text
// (data::text), which is how PostgreSQL prints them, not the bytes a
// client sent; an empty metadata stands for NULL.
func EventContent(streamID string, version int, typ, data, metadata string, recordedAt time.Time) []byte {
	var b bytes.Buffer
	for _, s := range []string{streamID, strconv.Itoa(version), typ, data, metadata} {
		b.WriteString(s)
		b.WriteByte('\n')
	}
	b.WriteString(strconv.FormatInt(recordedAt.UnixMicro(), 10))
	return b.Bytes()
}

// ChainHash is the hash of an event whose stream's previous event hashed to
// prev (ZeroHash for the first) and whose content is content.
func ChainHash(prev, content []byte) []byte {
	h := sha256.New()
	h.Write(prev)
	h.Write(content)
	return h.Sum(nil)
}

// LeafHash is an event's leaf in the log: sha256(0x00 || event hash).
func LeafHash(eventHash []byte) []byte {
	h := sha256.New()
	h.Write([]byte{0})
	h.Write(eventHash)
	return h.Sum(nil)
}

// NodeHash is an interior node of the tree: sha256(0x01 || left || right).
func NodeHash(left, right []byte) []byte {
	h := sha256.New()
	h.Write([]byte{1})
	h.Write(left)
	h.Write(right)
	return h.Sum(nil)
}

// Checkpoint is a signed tree head of one log, as GET
// /v1/audit/checkpoints/latest serves it (byte fields in base64).
type Checkpoint struct {
	Log       string `json:"log"`
	Size      uint64 `json:"size"`
	Root      []byte `json:"root"`
	At        string `json:"at"`
	Signature []byte `json:"signature"`
	PublicKey []byte `json:"public_key"`
}

// SignedText is the text a checkpoint's Ed25519 signature covers.
func (c Checkpoint) SignedText() []byte {
	return []byte("orderd checkpoint v1\n" + c.Log + "\n" + strconv.FormatUint(c.Size, 10) + "\n" +
		base64.StdEncoding.EncodeToString(c.Root) + "\n" + c.At + "\n")
}

// ErrSignature is returned for a checkpoint whose signature does not verify.
var ErrSignature = errors.New("verify: checkpoint signature does not verify")

// Verify checks the checkpoint's signature with key, the orderd
// deployment's public key the auditor holds; a nil key means the key the
// checkpoint names, which proves only that whoever holds that key signed it.
func (c Checkpoint) Verify(key ed25519.PublicKey) error {
	if key == nil {
		key = c.PublicKey
	} else if !bytes.Equal(key, c.PublicKey) {
		return fmt.Errorf("%w: signed by another key", ErrSignature)
	}
	if len(key) != ed25519.PublicKeySize || len(c.Root) != sha256.Size {
		return fmt.Errorf("%w: malformed key or root", ErrSignature)
	}
	if _, err := time.Parse(time.RFC3339Nano, c.At); err != nil {
		return fmt.Errorf("%w: at: %w", ErrSignature, err)
	}
	if !ed25519.Verify(key, c.SignedText(), c.Signature) {
		return ErrSignature
	}
	return nil
}

// ErrProof is returned for a proof that does not lead to the root.
var ErrProof = errors.New("verify: proof does not match the root")

// ErrNoCheckpoint is returned for a receipt served before the log's first
// checkpoint: it proves nothing yet.
var ErrNoCheckpoint = errors.New("verify: the receipt has no checkpoint yet")

// VerifyInclusion checks that leaf (LeafHash of an event's hash) is leaf
// number index of the tree of size whose root is root, by its audit path
// (RFC 9162 section 2.1.3.2).
func VerifyInclusion(index, size uint64, leaf []byte, path [][]byte, root []byte) error {
	if index >= size {
		return fmt.Errorf("%w: leaf %d is not in a tree of size %d", ErrProof, index, size)
	}
	fn, sn, r := index, size-1, leaf
	for _, p := range path {
		if sn == 0 {
			return fmt.Errorf("%w: audit path too long", ErrProof)
		}
		if fn&1 == 1 || fn == sn {
			r = NodeHash(p, r)
			if fn&1 == 0 {
				for fn&1 == 0 && fn != 0 {
					fn, sn = fn>>1, sn>>1
				}
			}
		} else {
			r = NodeHash(r, p)
		}
		fn, sn = fn>>1, sn>>1
	}
	if sn != 0 || !bytes.Equal(r, root) {
		return ErrProof
	}
	return nil
}

// VerifyConsistency checks that the tree of size1 with root1 is a prefix of
// the tree of size2 with root2, by a consistency proof (RFC 9162 section
// 2.1.4.2): nothing in the first was changed, removed or reordered.
func VerifyConsistency(size1, size2 uint64, root1, root2 []byte, proof [][]byte) error {
	switch {
	case size1 > size2:
		return fmt.Errorf("%w: size %d is past size %d", ErrProof, size1, size2)
	case size1 == size2:
		if len(proof) != 0 || !bytes.Equal(root1, root2) {
			return ErrProof
		}
		return nil
	case size1 == 0:
		if len(proof) != 0 {
			return ErrProof
		}
		return nil
	case len(proof) == 0:
		return fmt.Errorf("%w: empty consistency proof", ErrProof)
	}
	if size1&(size1-1) == 0 {
		proof = append([][]byte{root1}, proof...)
	}
	fn, sn := size1-1, size2-1
	for fn&1 == 1 {
		fn, sn = fn>>1, sn>>1
	}
	fr, sr := proof[0], proof[0]
	for _, c := range proof[1:] {
		if sn == 0 {
			return fmt.Errorf("%w: consistency proof too long", ErrProof)
		}
		if fn&1 == 1 || fn == sn {
			fr, sr = NodeHash(c, fr), NodeHash(c, sr)
			if fn&1 == 0 {
				for fn&1 == 0 && fn != 0 {
					fn, sn = fn>>1, sn>>1
				}
			}
		} else {
			sr = NodeHash(sr, c)
		}
		fn, sn = fn>>1, sn>>1
	}
	if sn != 0 || !bytes.Equal(fr, root1) || !bytes.Equal(sr, root2) {
		return ErrProof
	}
	return nil
}

// Proof is an order's receipt as GET /v1/orders/{id}/proof serves it.
// Before the log's first checkpoint there is no checkpoint to prove
// against: Checkpoint is nil and Events empty.
type Proof struct {
	Checkpoint *Checkpoint  `json:"checkpoint"`
	Events     []ProofEvent `json:"events"`
}

// ProofEvent is one event of a receipt and its audit path.
type ProofEvent struct {
	Version   int      `json:"version"`
	Type      string   `json:"type"`
	Hash      []byte   `json:"hash"`
	LeafIndex uint64   `json:"leaf_index"`
	Inclusion [][]byte `json:"inclusion"`
}

// Verify checks the receipt: the checkpoint's signature with key (see
// Checkpoint.Verify) and every event's inclusion in it.
func (p Proof) Verify(key ed25519.PublicKey) error {
	if p.Checkpoint == nil {
		return ErrNoCheckpoint
	}
	if err := p.Checkpoint.Verify(key); err != nil {
		return err
	}
	for _, e := range p.Events {
		if err := VerifyInclusion(e.LeafIndex, p.Checkpoint.Size, LeafHash(e.Hash), e.Inclusion, p.Checkpoint.Root); err != nil {
			return fmt.Errorf("event %d (%s): %w", e.Version, e.Type, err)
		}
	}
	return nil
}
