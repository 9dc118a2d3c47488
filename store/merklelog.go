package store

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/ledger/verify"
)

// LogMain is the log of a single PostgreSQL (migration 27 makes it).
const LogMain = "main"

// ExtendLogParams says which log to extend and when to checkpoint it.
type ExtendLogParams struct {
	Log string
	// Key signs checkpoints; nil makes none.
	Key ed25519.PrivateKey
	// Interval: a checkpoint is made when the tree grew since the last one
	// and the last is at least this old (or there is none).
	Interval time.Duration
	// Witness queues each checkpoint in the outbox for the witness
	// (WitnessMerchant), in the checkpoint's transaction.
	Witness bool
}

// ExtendLogResult is what one extension did.
type ExtendLogResult struct {
	// Busy is true when another instance holds the log: it is the writer.
	Busy       bool
	Added      int
	Size       int64
	Checkpoint *verify.Checkpoint // made by this extension, or nil
}

// ExtendLog appends to the log every event whose transaction ended since
// the last extension, in the live feed's order (ChangedStreams explains
// it), and makes a checkpoint when one is due. The log's head row is locked
// for the transaction and skipped when locked, so one instance extends a
// log at a time, and another takes over as soon as it dies.
func (s *Store) ExtendLog(ctx context.Context, p ExtendLogParams) (ExtendLogResult, error) {
	var res ExtendLogResult
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		res = ExtendLogResult{}
		if err := s.openNodeLog(ctx, tx, p.Log); err != nil {
			return err
		}
		var since string
		err := tx.QueryRow(ctx, `SELECT size, snapshot FROM log_heads WHERE log = $1 FOR UPDATE SKIP LOCKED`, p.Log).Scan(&res.Size, &since)
		if errors.Is(err, pgx.ErrNoRows) {
			res.Busy = true
			return nil
		}
		if err != nil {
			return fmt.Errorf("lock log %s: %w", p.Log, err)
		}
		// The first extension of a log over a database already full of
		// events reads and hashes all of them at once: it may take minutes,
		// past the statement timeout meant for requests. It holds nothing
		// anyone waits for: other writers skip the head.
		if _, err := tx.Exec(ctx, logReadSettings); err != nil {
			return fmt.Errorf("set the log read's settings: %w", err)
		}
		leaves, now, err := s.eventsToLog(ctx, tx, p.Log, since)
		if err != nil {
			return err
		}
		hashes := newHashOverlay(ctx, tx, p.Log)
		var leafRows [][]any
		var fresh []tlog.Hash
		for i, l := range leaves {
			n := res.Size + int64(i)
			stored, err := tlog.StoredHashes(n, l.hash, hashes)
			if err != nil {
				return fmt.Errorf("log leaf %d: %w", n, err)
			}
			first := tlog.StoredHashIndex(0, n)
			for j, h := range stored {
				hashes.added[first+int64(j)] = h
			}
			fresh = append(fresh, stored...)
			leafRows = append(leafRows, []any{p.Log, n, l.merchant, l.stream, l.version, l.hash})
		}
		if len(leaves) > 0 {
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"log_leaves"}, []string{"log", "leaf_index", "merchant_id", "stream_id", "version", "hash"}, pgx.CopyFromRows(leafRows)); err != nil {
				return fmt.Errorf("write log leaves: %w", err)
			}
			if err := writeHashTiles(ctx, tx, p.Log, tlog.StoredHashCount(res.Size), fresh); err != nil {
				return err
			}
		}
		res.Added = len(leaves)
		res.Size += int64(len(leaves))
		if _, err := tx.Exec(ctx, `UPDATE log_heads SET size = $2, snapshot = $3, updated_at = now() WHERE log = $1`, p.Log, res.Size, now); err != nil {
			return fmt.Errorf("advance log %s: %w", p.Log, err)
		}
		if p.Key == nil {
			return nil
		}
		c, err := s.checkpointIfDue(ctx, tx, p, res.Size, hashes)
		res.Checkpoint = c
		return err
	})
	return res, mapErr(err)
}

// logLeaf is an event as the log names it.
type logLeaf struct {
	merchant, stream uuid.UUID
	version          int32
	hash             []byte
}

// Logs names this database's logs: LogMain on one PostgreSQL; on Citus one
// per worker holding shards of events, named by its node ("host:port"),
// since transaction ids and snapshots, the log's order, are a node's own.
func (s *Store) Logs(ctx context.Context) ([]string, error) {
	if !s.Distributed(ctx) {
		return []string{LogMain}, nil
	}
	return s.eventNodes(ctx)
}

// eventsToLog reads the events of every transaction that ended between the
// snapshot since and now, in the order they enter the log, and the snapshot
// now they were read up to.
func (s *Store) eventsToLog(ctx context.Context, tx pgx.Tx, log, since string) ([]logLeaf, string, error) {
	if s.Distributed(ctx) {
		return s.nodeEventsToLog(ctx, tx, log, since)
	}
	var now string
	if err := tx.QueryRow(ctx, `SELECT pg_current_snapshot()::text`).Scan(&now); err != nil {
		return nil, "", fmt.Errorf("log snapshot: %w", err)
	}
	rows, err := tx.Query(ctx, `SELECT merchant_id, stream_id, version, hash FROM (`+loggedSince("events", "$2::pg_snapshot", "$3")+`) e
		ORDER BY tx_id, global_position`, since, now, inProgress(since))
	if err != nil {
		return nil, "", fmt.Errorf("read events to log: %w", err)
	}
	leaves, err := collectLeaves(rows)
	return leaves, now, err
}

// loggedSince reads from table (events or a shard of it) the rows to log
// of the transactions that ended between the snapshot $1 and now, an SQL
// expression of a snapshot, with their tx_id and global_position, the
// log's order; xip is the parameter holding inProgress($1). Those are the
// transactions past $1's xmax and those $1 saw in progress: two bounded
// ranges of the tx_id index, where one condition with an OR read every row
// from $1's xmin on, logged or not (a transaction held open for seconds
// holds that xmin back). The transactions in progress come as values, not
// as pg_snapshot_xip($1), so that the plan (custom: logReadSettings) sees
// them: few transactions may each hold many rows.
func loggedSince(table, now, xip string) string {
	return `SELECT merchant_id, stream_id, version, hash, tx_id, global_position FROM ` + table + `
		WHERE tx_id >= pg_snapshot_xmax($1::pg_snapshot) AND tx_id < pg_snapshot_xmax(` + now + `)
		  AND pg_visible_in_snapshot(tx_id, ` + now + `)
		UNION ALL
		SELECT merchant_id, stream_id, version, hash, tx_id, global_position FROM ` + table + `
		WHERE tx_id = ANY (` + xip + `::text[]::xid8[])
		  AND pg_visible_in_snapshot(tx_id, ` + now + `)`
}

// logReadSettings are the settings of a transaction that reads events to
// log: no statement timeout (the first extension over a full database reads
// every event), and a plan for each read's own snapshot: a generic plan,
// which PostgreSQL settles on after five runs, estimates the ranges blind
// and may read every event.
const logReadSettings = `SELECT set_config('statement_timeout', '0', true), set_config('plan_cache_mode', 'force_custom_plan', true)`

// inProgress lists the transactions a snapshot ("xmin:xmax:xip,...") saw
// in progress.
func inProgress(snapshot string) []string {
	parts := strings.Split(snapshot, ":")
	if len(parts) != 3 || parts[2] == "" {
		return []string{}
	}
	return strings.Split(parts[2], ",")
}

func collectLeaves(rows pgx.Rows) ([]logLeaf, error) {
	leaves, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (logLeaf, error) {
		var l logLeaf
		err := row.Scan(&l.merchant, &l.stream, &l.version, &l.hash)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("read events to log: %w", err)
	}
	return leaves, nil
}

// checkpointIfDue signs and stores a checkpoint of the log at size when
// the tree grew since the last one and that one is at least p.Interval old.
func (s *Store) checkpointIfDue(ctx context.Context, tx pgx.Tx, p ExtendLogParams, size int64, hashes tlog.HashReader) (*verify.Checkpoint, error) {
	var lastSize int64
	var lastAt string
	err := tx.QueryRow(ctx, `SELECT size, at FROM checkpoints WHERE log = $1 ORDER BY size DESC LIMIT 1`, p.Log).Scan(&lastSize, &lastAt)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("last checkpoint: %w", err)
	}
	now := s.now()
	if size == 0 || size <= lastSize {
		return nil, nil
	}
	if at, err := time.Parse(time.RFC3339Nano, lastAt); err == nil && now.Sub(at) < p.Interval {
		return nil, nil
	}
	root, err := tlog.TreeHash(size, hashes)
	if err != nil {
		return nil, fmt.Errorf("root of log %s at %d: %w", p.Log, size, err)
	}
	c := verify.Checkpoint{
		Log: p.Log, Size: uint64(size), Root: root[:], At: now.Truncate(time.Millisecond).Format(time.RFC3339Nano),
		PublicKey: p.Key.Public().(ed25519.PublicKey),
	}
	c.Signature = ed25519.Sign(p.Key, c.SignedText())
	if _, err := tx.Exec(ctx, `INSERT INTO checkpoints (log, size, root, at, signature, public_key) VALUES ($1, $2, $3, $4, $5, $6)`,
		c.Log, size, c.Root, c.At, c.Signature, c.PublicKey); err != nil {
		return nil, fmt.Errorf("store checkpoint: %w", err)
	}
	if p.Witness {
		if err := writeWitnessMessage(ctx, tx, &c); err != nil {
			return nil, err
		}
	}
	return &c, nil
}

// ErrNoCheckpoint is answered for a checkpoint that was never made.
var ErrNoCheckpoint = domain.Errorf(domain.CodeNotFound, "no such checkpoint")

const checkpointColumns = `log, size, root, at, signature, public_key`

func scanCheckpoint(row pgx.Row) (*verify.Checkpoint, error) {
	var c verify.Checkpoint
	var size int64
	if err := row.Scan(&c.Log, &size, &c.Root, &c.At, &c.Signature, &c.PublicKey); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, ErrNoCheckpoint
		}
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	c.Size = uint64(size)
	return &c, nil
}

// NamedLog is the log a request names, or, when it names none, the
// database's one log. On Citus, with a log per node, a request names its
// log; one that does not is told the logs there are.
func (s *Store) NamedLog(ctx context.Context, log string) (string, error) {
	if log != "" {
		return log, nil
	}
	if !s.Distributed(ctx) {
		return LogMain, nil
	}
	logs, err := s.eventNodes(ctx)
	if err != nil {
		return "", err
	}
	return "", domain.Errorf(domain.CodeValidation, "log: each node keeps its own log here: name one of %s", strings.Join(logs, ", "))
}

// LatestCheckpoint returns the last checkpoint of the log NamedLog names.
func (s *Store) LatestCheckpoint(ctx context.Context, log string) (*verify.Checkpoint, error) {
	log, err := s.NamedLog(ctx, log)
	if err != nil {
		return nil, err
	}
	c, err := scanCheckpoint(s.pool.QueryRow(ctx, `SELECT `+checkpointColumns+` FROM checkpoints WHERE log = $1 ORDER BY size DESC LIMIT 1`, log))
	return c, mapErr(err)
}

// CheckpointAt returns the log's checkpoint of that size.
func (s *Store) CheckpointAt(ctx context.Context, log string, size int64) (*verify.Checkpoint, error) {
	c, err := scanCheckpoint(s.pool.QueryRow(ctx, `SELECT `+checkpointColumns+` FROM checkpoints WHERE log = $1 AND size = $2`, log, size))
	return c, mapErr(err)
}

// Checkpoints returns every checkpoint of every log, oldest first.
func (s *Store) Checkpoints(ctx context.Context) ([]verify.Checkpoint, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+checkpointColumns+` FROM checkpoints ORDER BY log, size`)
	if err != nil {
		return nil, mapErr(fmt.Errorf("read checkpoints: %w", err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (verify.Checkpoint, error) {
		c, err := scanCheckpoint(row)
		if err != nil {
			return verify.Checkpoint{}, err
		}
		return *c, nil
	})
	return out, mapErr(err)
}

// ConsistencyProof proves that the log's checkpoint of size from is a
// prefix of its checkpoint of size to (RFC 6962 section 2.1.2); both must
// be checkpoints.
func (s *Store) ConsistencyProof(ctx context.Context, log string, from, to int64) ([][]byte, error) {
	for _, size := range []int64{from, to} {
		if _, err := s.CheckpointAt(ctx, log, size); err != nil {
			return nil, err
		}
	}
	if from > to {
		return nil, domain.Errorf(domain.CodeValidation, "from is past to")
	}
	proof, err := tlog.ProveTree(to, from, newHashOverlay(ctx, s.pool, log))
	if err != nil {
		return nil, mapErr(fmt.Errorf("prove consistency of %s from %d to %d: %w", log, from, to, err))
	}
	return hashesBytes(proof), nil
}

// OrderProof is the receipt of an order's events: each event already in
// the checkpoint (the log's latest, or the one of size when size > 0) with
// its audit path to the checkpoint's root. With no log named, the log is
// the one that holds the order's latest logged event (on Citus, its node's
// at the time), else its merchant's node's now. Before the log's first
// checkpoint the receipt has no checkpoint and no event.
func (s *Store) OrderProof(ctx context.Context, orderID uuid.UUID, access domain.Party, log string, size int64) (*verify.Proof, error) {
	o, err := s.GetOrder(ctx, orderID, access)
	if err != nil {
		return nil, err
	}
	switch {
	case log != "":
		if err := s.requireLog(ctx, log); err != nil {
			return nil, err
		}
	case s.Distributed(ctx):
		if log, err = s.streamLog(ctx, o.MerchantID, orderID); err != nil {
			return nil, err
		}
	default:
		log = LogMain
	}
	return s.streamProof(ctx, o.MerchantID, orderID, log, size)
}

// requireLog answers not found for a log that does not exist, which
// would otherwise read as a log with no checkpoint yet.
func (s *Store) requireLog(ctx context.Context, log string) error {
	var known bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM log_heads WHERE log = $1)`, log).Scan(&known); err != nil {
		return mapErr(fmt.Errorf("read log %s: %w", log, err))
	}
	if !known {
		return domain.Errorf(domain.CodeNotFound, "no log named %s", log)
	}
	return nil
}

// streamProof is the receipt of one stream's events, as OrderProof.
func (s *Store) streamProof(ctx context.Context, merchantID, streamID uuid.UUID, log string, size int64) (*verify.Proof, error) {
	var c *verify.Checkpoint
	var err error
	if size > 0 {
		c, err = s.CheckpointAt(ctx, log, size)
	} else {
		c, err = s.LatestCheckpoint(ctx, log)
		if errors.Is(err, domain.ErrNotFound) {
			// Nothing to prove against yet.
			return &verify.Proof{Events: []verify.ProofEvent{}}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	events, err := s.loggedEvents(ctx, merchantID, streamID, log, int64(c.Size))
	if err != nil {
		return nil, err
	}
	hashes := newHashOverlay(ctx, s.pool, log)
	if err := hashes.prefetch(func(r tlog.HashReader) error {
		for _, e := range events {
			if _, err := tlog.ProveRecord(int64(c.Size), int64(e.LeafIndex), r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return nil, mapErr(fmt.Errorf("read stream %s's proofs: %w", streamID, err))
	}
	for i := range events {
		path, err := tlog.ProveRecord(int64(c.Size), int64(events[i].LeafIndex), hashes)
		if err != nil {
			return nil, mapErr(fmt.Errorf("prove event %d of stream %s: %w", events[i].Version, streamID, err))
		}
		events[i].Inclusion = hashesBytes(path)
	}
	return &verify.Proof{Checkpoint: c, Events: events}, nil
}

// loggedEvents are a stream's events in the tree of size, each with the
// hash its stream's events as they are now chain to, recomputed from
// version 1, not the hash stored with it: an event changed, inserted or
// removed since it was logged, even with the stored hashes left alone,
// makes a receipt that no longer proves (its leaf differs from the
// logged one). The events are read apart from the leaves: on Citus they
// are on a worker and the leaves on the coordinator.
func (s *Store) loggedEvents(ctx context.Context, merchantID, streamID uuid.UUID, log string, size int64) ([]verify.ProofEvent, error) {
	rows, err := s.pool.Query(ctx, `SELECT leaf_index, version FROM log_leaves
		WHERE stream_id = $1 AND log = $2 AND leaf_index < $3 AND merchant_id = $4`, streamID, log, size, merchantID)
	if err != nil {
		return nil, mapErr(fmt.Errorf("read stream %s's leaves: %w", streamID, err))
	}
	leaves := map[int32]int64{}
	var idx int64
	var version int32
	if _, err := pgx.ForEachRow(rows, []any{&idx, &version}, func() error { leaves[version] = idx; return nil }); err != nil {
		return nil, mapErr(fmt.Errorf("read stream %s's leaves: %w", streamID, err))
	}
	if len(leaves) == 0 {
		return []verify.ProofEvent{}, nil
	}
	rows, err = s.pool.Query(ctx, `SELECT version, type, `+eventContent+` FROM events
		WHERE stream_id = $1 AND merchant_id = $2 ORDER BY version`, streamID, merchantID)
	if err != nil {
		return nil, mapErr(fmt.Errorf("read stream %s's events: %w", streamID, err))
	}
	events := []verify.ProofEvent{}
	hash := verify.ZeroHash
	var typ string
	var content []byte
	if _, err := pgx.ForEachRow(rows, []any{&version, &typ, &content}, func() error {
		hash = verify.ChainHash(hash, content)
		if idx, ok := leaves[version]; ok {
			events = append(events, verify.ProofEvent{Version: int(version), Type: typ, Hash: hash, LeafIndex: uint64(idx)})
		}
		return nil
	}); err != nil {
		return nil, mapErr(fmt.Errorf("read stream %s's events: %w", streamID, err))
	}
	return events, nil
}

func hashesBytes(hs []tlog.Hash) [][]byte {
	out := make([][]byte, len(hs))
	for i := range hs {
		out[i] = hs[i][:]
	}
	return out
}
