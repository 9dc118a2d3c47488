package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

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
	MerchantID      uuid.UUID // the merchant the stream belongs to (a merchant's own id)
	ExpectedVersion int       // version of the stream's last event; 0 for a new stream
	Events          []domain.Event
	Meta            Meta
	// RecordedAt is the decision's time, read once its locks are held: every
	// timestamp of a decision comes from that one clock reading.
	RecordedAt time.Time
}

// appendEvents inserts the events with consecutive versions after
// ExpectedVersion in one statement. The unique (stream_id, version) constraint
// turns a stale expected version into ErrVersionConflict: no read-then-insert.
func appendEvents(ctx context.Context, tx pgx.Tx, p AppendParams) error {
	if len(p.Events) == 0 {
		return nil
	}
	if p.RecordedAt.IsZero() {
		return fmt.Errorf("append to %s %s: no decision time", p.StreamType, p.StreamID)
	}
	meta, err := jsonText(p.Meta)
	if err != nil {
		return fmt.Errorf("encode metadata: %w", err)
	}
	var rows eventRows
	for i, e := range p.Events {
		if err := rows.add(p.StreamID, p.MerchantID, p.ExpectedVersion+i+1, e, meta); err != nil {
			return err
		}
	}
	noteEvents(tx)
	if err := rows.insert(p.StreamType, p.RecordedAt).exec(ctx, tx); err != nil {
		return fmt.Errorf("append to %s %s at version %d: %w", p.StreamType, p.StreamID, p.ExpectedVersion, err)
	}
	return nil
}

// eventRows holds events of any streams column by column, for their one
// insert.
type eventRows struct {
	stream, merchant [][16]byte
	version          []int32
	typ, data, meta  []string
}

// grow makes room for n more events in every column.
func (r *eventRows) grow(n int) {
	r.stream, r.merchant, r.version = slices.Grow(r.stream, n), slices.Grow(r.merchant, n), slices.Grow(r.version, n)
	r.typ, r.data, r.meta = slices.Grow(r.typ, n), slices.Grow(r.data, n), slices.Grow(r.meta, n)
}

// add adds the event e at version of stream, with the metadata meta.
func (r *eventRows) add(stream, merchant [16]byte, version int, e domain.Event, meta string) error {
	data, err := jsonText(e.Data)
	if err != nil {
		return fmt.Errorf("encode event %s: %w", e.Type, err)
	}
	r.stream, r.merchant, r.version = append(r.stream, stream), append(r.merchant, merchant), append(r.version, int32(version))
	r.typ, r.data, r.meta = append(r.typ, e.Type), append(r.data, data), append(r.meta, meta)
	return nil
}

// insert is the insert of the events, of streams of streamType, recorded
// at now. A stream's first event is chained here, to the 32 zero bytes
// before it, with migration 25's expression (ChainQuery's): computed in the
// statement it costs no trigger call. Every later event comes without a
// hash, for the trigger, whose query also sees the link before it when
// that is a row of this same statement.
func (r *eventRows) insert(streamType string, now time.Time) insertRows {
	return insertRows{
		Into: `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data, metadata, recorded_at, hash)`,
		Row: `$3, $4, $1, $5, $6, $7, $8, $2,
			CASE WHEN $5 = 1 THEN sha256('\x0000000000000000000000000000000000000000000000000000000000000000'::bytea ||
				convert_to($3::text || E'\n' || $5::text || E'\n' || $6 || E'\n' || $7::text || E'\n' || coalesce($8::text, '') || E'\n' ||
					(extract(epoch from $2::timestamptz) * 1000000)::bigint::text, 'UTF8')) END`,
		Args: []any{streamType, now},
		Columns: []column{col("uuid", r.stream), col("uuid", r.merchant), col("int", r.version),
			col("text", r.typ), col("jsonb", r.data), col("jsonb", r.meta)},
	}
}

// Append appends events to a stream in a transaction of its own.
func (s *Store) Append(ctx context.Context, p AppendParams) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if p.RecordedAt.IsZero() {
			p.RecordedAt = s.now()
		}
		return appendEvents(ctx, tx, p)
	})
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
	// Hash chains the event to the one before it in its stream (migration
	// 25's trigger writes it).
	Hash []byte
}

const eventColumns = `global_position, stream_id, stream_type, version, type, data, metadata, recorded_at, tx_id::text::bigint, hash`

func scanEvents(rows pgx.Rows) ([]StoredEvent, error) {
	defer rows.Close()
	var out []StoredEvent
	for rows.Next() {
		var e StoredEvent
		var tx int64
		if err := rows.Scan(&e.GlobalPosition, &e.StreamID, &e.StreamType, &e.Version, &e.Type,
			&e.Data, &e.Metadata, &e.RecordedAt, &tx, &e.Hash); err != nil {
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

// ReadStream returns one stream of a merchant's events, oldest first.
func (s *Store) ReadStream(ctx context.Context, merchantID, streamID uuid.UUID) ([]StoredEvent, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+eventColumns+` FROM events WHERE merchant_id = $1 AND stream_id = $2 ORDER BY version`, merchantID, streamID)
	if err != nil {
		return nil, mapErr(fmt.Errorf("read stream %s: %w", streamID, err))
	}
	events, err := scanEvents(rows)
	return events, mapErr(err)
}

// LogSnapshot is a reader's place in the global log: the database snapshot
// of its last read, in pg_snapshot's text form. The zero value is "from now".
type LogSnapshot string

// StreamRef names a stream and the merchant it belongs to.
type StreamRef struct {
	Type       string
	ID         uuid.UUID
	MerchantID uuid.UUID
}

// ChangedStreams returns the streams of the given merchants (every
// merchant's when merchants is nil) that received events committed since
// the read that returned since, and the place to read from next. A reader
// that names the merchants it serves reads only their part of the log's
// tail, and on Citus only their shards.
//
// Positions are assigned at insert, not at commit, so "after the last
// position seen" skips events whose transaction commits late. DESIGN.md's
// scheme reads only below the snapshot's xmin, which is exact but waits for
// every transaction that holds an xid, events or not: an autovacuum ANALYZE
// holding one for five seconds held every live update for five seconds. This
// reads the difference between two snapshots instead: an event is new when
// its transaction was in progress at the last read (its tx_id at or past
// that snapshot's xmax, or in its xip list) and is no longer at this one.
// Each transaction is therefore reported exactly once, as soon as it ends,
// whatever else is still running, and the read is an index range over the
// log's tail plus a few lookups.
//
// The snapshot is taken by a statement of its own, before the statement
// that reads the rows. On Citus the log is read the same way on each worker,
// its place a snapshot per worker (changedStreamsByNode).
func (s *Store) ChangedStreams(ctx context.Context, since LogSnapshot, merchants []uuid.UUID) ([]StreamRef, LogSnapshot, error) {
	if s.Distributed(ctx) {
		return s.changedStreamsByNode(ctx, since, merchants)
	}
	var now string
	if err := s.pool.QueryRow(ctx, `SELECT pg_current_snapshot()::text`).Scan(&now); err != nil {
		return nil, since, mapErr(fmt.Errorf("log snapshot: %w", err))
	}
	if since == "" || (merchants != nil && len(merchants) == 0) {
		return nil, LogSnapshot(now), nil
	}
	// pg_visible_in_snapshot tells whether a transaction had ended by the
	// snapshot, committed or not.
	rows, err := s.pool.Query(ctx, `
		SELECT DISTINCT stream_id, stream_type, merchant_id FROM events
		WHERE (tx_id >= pg_snapshot_xmax($1::pg_snapshot) OR tx_id = ANY (ARRAY(SELECT pg_snapshot_xip($1::pg_snapshot))))
		  AND pg_visible_in_snapshot(tx_id, $2::pg_snapshot)
		  AND ($3::uuid[] IS NULL OR merchant_id = ANY ($3))`,
		string(since), now, merchants)
	if err != nil {
		return nil, since, mapErr(fmt.Errorf("read log: %w", err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (StreamRef, error) {
		var r StreamRef
		err := row.Scan(&r.ID, &r.Type, &r.MerchantID)
		return r, err
	})
	if err != nil {
		return nil, since, mapErr(fmt.Errorf("read log: %w", err))
	}
	return out, LogSnapshot(now), nil
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
