package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/orderd/orderd/domain"
)

// Stream types.
const (
	StreamOrder    = "order"
	StreamMerchant = "merchant"
	StreamProduct  = "product"
)

// ErrVersionConflict is returned when an append's expected version is stale.
var ErrVersionConflict = domain.Errorf(domain.CodeConflict, "the stream was changed concurrently; retry")

// AppendParams describes one append to one stream.
type AppendParams struct {
	StreamID        uuid.UUID
	StreamType      string
	ExpectedVersion int // version of the stream's last event; 0 for a new stream
	Events          []domain.Event
	Meta            Meta
}

// appendEvents inserts the events with consecutive versions after
// ExpectedVersion in one statement. The unique (stream_id, version) constraint
// turns a stale expected version into ErrVersionConflict: no read-then-insert.
func appendEvents(ctx context.Context, tx pgx.Tx, p AppendParams) error {
	if len(p.Events) == 0 {
		return nil
	}
	meta, err := json.Marshal(p.Meta)
	if err != nil {
		return fmt.Errorf("encode metadata: %w", err)
	}
	versions := make([]int32, len(p.Events))
	types := make([]string, len(p.Events))
	datas := make([]string, len(p.Events))
	for i, e := range p.Events {
		data, err := json.Marshal(e.Data)
		if err != nil {
			return fmt.Errorf("encode event %s: %w", e.Type, err)
		}
		versions[i] = int32(p.ExpectedVersion + i + 1)
		types[i] = e.Type
		datas[i] = string(data)
	}
	noteEvents(tx)
	_, err = tx.Exec(ctx, `
		INSERT INTO events (stream_id, stream_type, version, type, data, metadata)
		SELECT $1, $2, v, t, d::jsonb, $6
		FROM unnest($3::int[], $4::text[], $5::text[]) AS e(v, t, d)`,
		p.StreamID, p.StreamType, versions, types, datas, meta)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.ConstraintName == constraintStreamVersion {
			return fmt.Errorf("append to %s %s at version %d: %w", p.StreamType, p.StreamID, p.ExpectedVersion, ErrVersionConflict)
		}
		return fmt.Errorf("append to %s %s: %w", p.StreamType, p.StreamID, err)
	}
	return nil
}

// Append appends events to a stream in a transaction of its own.
func (s *Store) Append(ctx context.Context, p AppendParams) error {
	return s.inTx(ctx, func(tx pgx.Tx) error { return appendEvents(ctx, tx, p) })
}

// StoredEvent is one row of the log.
type StoredEvent struct {
	GlobalPosition int64
	StreamID       uuid.UUID
	StreamType     string
	Version        int
	Type           string
	Data           json.RawMessage
	Metadata       json.RawMessage
	RecordedAt     time.Time
	TxID           uint64
}

const eventColumns = `global_position, stream_id, stream_type, version, type, data, metadata, recorded_at, tx_id::text::bigint`

func scanEvents(rows pgx.Rows) ([]StoredEvent, error) {
	defer rows.Close()
	var out []StoredEvent
	for rows.Next() {
		var e StoredEvent
		var tx int64
		if err := rows.Scan(&e.GlobalPosition, &e.StreamID, &e.StreamType, &e.Version, &e.Type,
			&e.Data, &e.Metadata, &e.RecordedAt, &tx); err != nil {
			return nil, fmt.Errorf("scan event: %w", err)
		}
		e.TxID = uint64(tx)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	return out, nil
}

// ReadStream returns one stream's events, oldest first.
func (s *Store) ReadStream(ctx context.Context, streamID uuid.UUID) ([]StoredEvent, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+eventColumns+` FROM events WHERE stream_id = $1 ORDER BY version`, streamID)
	if err != nil {
		return nil, mapErr(fmt.Errorf("read stream %s: %w", streamID, err))
	}
	events, err := scanEvents(rows)
	return events, mapErr(err)
}

// Checkpoint is a reader's place in the global log. Positions are assigned at
// insert, not at commit, so the place is (transaction id, position): every
// event of a transaction below it has been seen.
type Checkpoint struct {
	TxID     uint64 `json:"tx_id"`
	Position int64  `json:"position"`
}

// ReadLogParams asks for the next events after a checkpoint.
type ReadLogParams struct {
	After Checkpoint
	Limit int
	// StreamTypes, when set, restricts the answer (the checkpoint still moves
	// past the skipped events).
	StreamTypes []string
}

// ReadLog returns committed events after the checkpoint in commit-safe order
// and the checkpoint to resume from. It only returns events of transactions
// older than every transaction still in progress (tx_id below the snapshot's
// xmin), so an event committed late can never be skipped: once a transaction
// is below xmin it has committed or aborted, and every later reader sees the
// same set. Ordering is (tx_id, global_position).
func (s *Store) ReadLog(ctx context.Context, p ReadLogParams) ([]StoredEvent, Checkpoint, error) {
	limit := p.Limit
	if limit <= 0 || limit > 10_000 {
		limit = 1000
	}
	var types []string
	if len(p.StreamTypes) > 0 {
		types = p.StreamTypes
	}
	rows, err := s.pool.Query(ctx, `
		SELECT `+eventColumns+`
		FROM events
		WHERE (tx_id, global_position) > ($1::text::xid8, $2)
		  AND tx_id < pg_snapshot_xmin(pg_current_snapshot())
		ORDER BY tx_id, global_position
		LIMIT $3`,
		fmt.Sprint(p.After.TxID), p.After.Position, limit)
	if err != nil {
		return nil, p.After, mapErr(fmt.Errorf("read log: %w", err))
	}
	events, err := scanEvents(rows)
	if err != nil {
		return nil, p.After, mapErr(err)
	}
	next := p.After
	if n := len(events); n > 0 {
		next = Checkpoint{TxID: events[n-1].TxID, Position: events[n-1].GlobalPosition}
	}
	if types != nil {
		kept := events[:0]
		for _, e := range events {
			for _, t := range types {
				if e.StreamType == t {
					kept = append(kept, e)
					break
				}
			}
		}
		events = kept
	}
	return events, next, nil
}

// LogHeldBack reports whether committed events wait behind a transaction
// still in progress: ReadLog will return them once it ends, which may send
// no hint (it need not append events itself), so a reader should look again
// soon rather than wait for one.
func (s *Store) LogHeldBack(ctx context.Context) (bool, error) {
	var held bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM events WHERE tx_id >= pg_snapshot_xmin(pg_current_snapshot()))`).Scan(&held)
	if err != nil {
		return false, mapErr(fmt.Errorf("log held back: %w", err))
	}
	return held, nil
}

// LogHead returns the checkpoint at the current end of the committed log, for
// readers that only want what happens from now on.
func (s *Store) LogHead(ctx context.Context) (Checkpoint, error) {
	var cp Checkpoint
	var tx int64
	err := s.pool.QueryRow(ctx, `
		SELECT coalesce(max(tx_id)::text::bigint, 0), coalesce(max(global_position), 0)
		FROM events WHERE tx_id < pg_snapshot_xmin(pg_current_snapshot())`).Scan(&tx, &cp.Position)
	if err != nil {
		return cp, mapErr(fmt.Errorf("log head: %w", err))
	}
	cp.TxID = uint64(tx)
	return cp, nil
}

// decodeStream turns stored events into domain events.
func decodeStream(stored []StoredEvent) ([]domain.Event, error) {
	out := make([]domain.Event, 0, len(stored))
	for _, se := range stored {
		e, err := domain.DecodeEvent(se.Type, se.Data)
		if err != nil {
			return nil, fmt.Errorf("stream %s version %d: %w", se.StreamID, se.Version, err)
		}
		out = append(out, e)
	}
	return out, nil
}
