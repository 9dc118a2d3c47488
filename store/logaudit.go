package store

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/orderd/orderd/ledger/verify"
)

// HistoryAuditParams says what the history is checked against.
type HistoryAuditParams struct {
	// Key is the deployment's public key every checkpoint must be signed
	// with; nil accepts each checkpoint's own key.
	Key ed25519.PublicKey
	// Kept is a checkpoint kept outside the database, checked like the
	// stored ones; its signature must verify with Key (or its own).
	Kept *verify.Checkpoint
}

// BrokenStream is a stream whose history no longer is what was written.
type BrokenStream struct {
	StreamID uuid.UUID
	Reason   string
}

// BrokenCheckpoint is a checkpoint the history no longer matches.
type BrokenCheckpoint struct {
	Log    string
	Size   uint64
	Kept   bool // the checkpoint kept outside
	Reason string
}

// HistoryReport is what AuditHistory found: nothing broken when both lists
// are empty.
type HistoryReport struct {
	Events      int64
	Checkpoints int
	Streams     []BrokenStream
	Broken      []BrokenCheckpoint
}

// OK reports an intact history.
func (r *HistoryReport) OK() bool { return len(r.Streams) == 0 && len(r.Broken) == 0 }

// AuditHistory recomputes every chain (ChainQuery), every logged event's
// leaf from the event as it is now, and the tree over them at every
// checkpoint's size, and checks each checkpoint's signature and root, and
// the stored tree's root at that size. A stream whose chain breaks, whose
// logged events differ from or are missing in the events table, is named;
// so is a checkpoint that no longer matches. A rewrite that recomputed every
// chain and the stored tree is still caught by the roots of checkpoints
// signed before it, and by a kept checkpoint when the stored ones were
// removed too.
func (s *Store) AuditHistory(ctx context.Context, p HistoryAuditParams) (*HistoryReport, error) {
	report := &HistoryReport{}
	// The chains are recomputed while the log is: both read every event,
	// each on connections of its own.
	var links []BrokenLink
	chains := make(chan error, 1)
	go func() {
		var err error
		links, err = s.BrokenChains(ctx)
		chains <- err
	}()
	var logged []BrokenStream
	name := func(stream uuid.UUID, reason string) {
		logged = append(logged, BrokenStream{StreamID: stream, Reason: reason})
	}
	if err := s.auditLogs(ctx, p, report, name); err != nil {
		<-chains
		return nil, err
	}
	if err := <-chains; err != nil {
		return nil, err
	}
	// A stream is named once, for its chain before its log.
	seen := map[uuid.UUID]bool{}
	for _, b := range slices.Concat(chainBreaks(links), logged) {
		if !seen[b.StreamID] {
			seen[b.StreamID] = true
			report.Streams = append(report.Streams, b)
		}
	}
	return report, nil
}

func chainBreaks(links []BrokenLink) []BrokenStream {
	out := make([]BrokenStream, len(links))
	for i, l := range links {
		out[i] = BrokenStream{StreamID: l.StreamID, Reason: fmt.Sprintf("its chain breaks at version %d", l.Version)}
	}
	return out
}

// auditLogs rebuilds every log's tree and checks every checkpoint against
// it (AuditHistory), naming each stream whose logged events are gone or
// changed.
func (s *Store) auditLogs(ctx context.Context, p HistoryAuditParams, report *HistoryReport, name func(uuid.UUID, string)) error {
	checkpoints, err := s.Checkpoints(ctx)
	if err != nil {
		return err
	}
	report.Checkpoints = len(checkpoints)
	if p.Kept != nil {
		kept := *p.Kept
		checkpoints = append(checkpoints, kept)
	}
	byLog := map[string][]verify.Checkpoint{}
	for _, c := range checkpoints {
		byLog[c.Log] = append(byLog[c.Log], c)
	}
	rows, err := s.pool.Query(ctx, `SELECT log FROM log_heads ORDER BY log`)
	if err != nil {
		return mapErr(fmt.Errorf("read logs: %w", err))
	}
	logs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return mapErr(fmt.Errorf("read logs: %w", err))
	}
	for _, log := range logs {
		roots, size, err := s.recomputeLog(ctx, log, byLog[log], name)
		if err != nil {
			return err
		}
		report.Events += size
		hashes := newHashOverlay(ctx, s.pool, log)
		for i, c := range byLog[log] {
			kept := p.Kept != nil && i == len(byLog[log])-1 && log == p.Kept.Log
			broken := func(reason string) {
				report.Broken = append(report.Broken, BrokenCheckpoint{Log: log, Size: c.Size, Kept: kept, Reason: reason})
			}
			if err := c.Verify(p.Key); err != nil {
				broken(err.Error())
				continue
			}
			root, ok := roots[c.Size]
			if !ok {
				broken(fmt.Sprintf("the log holds %d events, fewer than the checkpoint's", size))
				continue
			}
			if !bytes.Equal(root, c.Root) {
				broken("the events no longer hash to its root")
				continue
			}
			stored, err := tlog.TreeHash(int64(c.Size), hashes)
			if err != nil || !bytes.Equal(stored[:], c.Root) {
				broken("the stored tree no longer hashes to its root")
			}
		}
		delete(byLog, log)
	}
	for log, cs := range byLog {
		for _, c := range cs {
			report.Broken = append(report.Broken, BrokenCheckpoint{Log: log, Size: c.Size, Kept: p.Kept != nil && c.Log == p.Kept.Log && c.Size == p.Kept.Size,
				Reason: "its log is gone"})
		}
	}
	return nil
}

// recomputeLog rebuilds the log's tree from the events it names, as they
// are now, and returns its root at each of the checkpoints' sizes and the
// log's size; it names each stream whose logged event is missing or
// changed.
func (s *Store) recomputeLog(ctx context.Context, log string, checkpoints []verify.Checkpoint, name func(uuid.UUID, string)) (map[uint64][]byte, int64, error) {
	var sizes []uint64
	for _, c := range checkpoints {
		sizes = append(sizes, c.Size)
	}
	slices.Sort(sizes)
	roots := map[uint64][]byte{}
	var f frontier
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		// The leaves are sorted into the log's order here (their key is
		// their event): in memory, as the chains' parts are.
		if _, err := tx.Exec(ctx, `SELECT set_config('statement_timeout', '0', true), set_config('jit', 'off', true),
			set_config('work_mem', '256MB', true)`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `
			SELECT l.leaf_index, l.stream_id, l.version, l.hash, e.hash FROM log_leaves l
			LEFT JOIN events e ON e.stream_id = l.stream_id AND e.version = l.version AND e.merchant_id = l.merchant_id
			WHERE l.log = $1 ORDER BY l.leaf_index`, log)
		if err != nil {
			return err
		}
		var index int64
		var stream uuid.UUID
		var version int
		var logged, now []byte
		_, err = pgx.ForEachRow(rows, []any{&index, &stream, &version, &logged, &now}, func() error {
			if index != int64(f.size) {
				return fmt.Errorf("%w: log %s has no leaf %d", errLogGap, log, f.size)
			}
			switch {
			case now == nil:
				name(stream, fmt.Sprintf("its event %d, logged, is gone", version))
				now = verify.ZeroHash
			case !bytes.Equal(now, logged):
				name(stream, fmt.Sprintf("its event %d differs from the one logged", version))
			}
			f.push(verify.LeafHash(now))
			for len(sizes) > 0 && sizes[0] == f.size {
				roots[sizes[0]] = f.root()
				sizes = sizes[1:]
			}
			return nil
		})
		return err
	})
	if errors.Is(err, errLogGap) {
		// A removed leaf shifts every later one: the roots past it cannot
		// match, and the checkpoints say which.
		return roots, int64(f.size), nil
	}
	if err != nil {
		return nil, 0, mapErr(fmt.Errorf("read log %s: %w", log, err))
	}
	return roots, int64(f.size), nil
}

var errLogGap = errors.New("a leaf is missing")

// frontier is an RFC 6962 tree being built leaf by leaf: the roots of its
// complete subtrees, largest first.
type frontier struct {
	hashes [][]byte
	size   uint64
}

func (f *frontier) push(leaf []byte) {
	h := leaf
	for s := f.size; s&1 == 1; s >>= 1 {
		h = verify.NodeHash(f.hashes[len(f.hashes)-1], h)
		f.hashes = f.hashes[:len(f.hashes)-1]
	}
	f.hashes = append(f.hashes, h)
	f.size++
}

// root is the tree's root: its complete subtrees folded from the right.
func (f *frontier) root() []byte {
	r := f.hashes[len(f.hashes)-1]
	for i := len(f.hashes) - 2; i >= 0; i-- {
		r = verify.NodeHash(f.hashes[i], r)
	}
	return r
}
