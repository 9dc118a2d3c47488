package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/orderd/orderd/domain"
)

// dropChange is one drop's new events and the state they fold to.
type dropChange struct {
	before domain.Drop // the zero Drop for a new one
	after  domain.Drop
	events []domain.Event
	meta   Meta
}

// writeDrop is the one write of a drop: its events, appended after the
// stream's version, and its folded state, inserted or updated.
func writeDrop(ctx context.Context, tx pgx.Tx, c dropChange, now time.Time) error {
	if len(c.events) == 0 {
		return nil
	}
	id, err := parseID(c.after.DropID)
	if err != nil {
		return err
	}
	if err := appendEvents(ctx, tx, AppendParams{
		StreamID: id, StreamType: StreamDrop, ExpectedVersion: c.before.Version, Events: c.events, Meta: c.meta, RecordedAt: now,
	}); err != nil {
		return err
	}
	d := c.after
	if c.before.Version == 0 {
		_, err = tx.Exec(ctx, `INSERT INTO drops (merchant_id, id, product_id, opens_at, starts_at, mode, purchase_window_seconds, units,
				state, seed_commitment, seed, created_at, version)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
			d.MerchantID, id, d.ProductID, d.OpensAt, d.StartsAt, d.Mode, d.PurchaseWindowSeconds, d.Units,
			d.State, d.SeedCommitment, d.Seed, d.CreatedAt, d.Version)
	} else {
		_, err = tx.Exec(ctx, `UPDATE drops SET state = $3, seed = $4, version = $5 WHERE merchant_id = $1 AND id = $2`,
			d.MerchantID, id, d.State, d.Seed, d.Version)
	}
	if err != nil {
		return fmt.Errorf("write drop %s: %w", id, err)
	}
	return nil
}

// entryChange is one entry's new events and the state they fold to.
type entryChange struct {
	before domain.Entry // the zero Entry for a new one
	after  domain.Entry
	// key is a new entry's order key (nil until the draw for an early
	// lottery entry); the draw sets the others' (drawEarlyEntries).
	key    []byte
	events []domain.Event
	meta   Meta
}

// newEntryChange folds events into e; ok is false when there are none.
func newEntryChange(e domain.Entry, events []domain.Event, meta Meta) (entryChange, bool, error) {
	if len(events) == 0 {
		return entryChange{}, false, nil
	}
	after, err := e.Apply(events...)
	if err != nil {
		return entryChange{}, false, err
	}
	return entryChange{before: e, after: after, events: events, meta: meta}, true, nil
}

// writeEntries writes changes of existing entries in one round trip.
func writeEntries(ctx context.Context, tx pgx.Tx, changes []entryChange, now time.Time) error {
	b := &pgx.Batch{}
	if err := queueEntries(b, changes, now, nil); err != nil {
		return err
	}
	if b.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("write entries: %w", err)
	}
	noteEvents(tx)
	return nil
}

// queueEntries adds to b the one write of entry changes: new entries
// inserted unless their customer has one already, with their events only
// when inserted (their ids recorded in inserted, when not nil); existing
// ones updated, with their events, one statement each.
func queueEntries(b *pgx.Batch, changes []entryChange, now time.Time, inserted map[uuid.UUID]bool) error {
	var ins, upd entryColumnsOf
	var ev struct {
		stream          [][16]byte
		version         []int32
		typ, data, meta []string
	}
	var newEv struct {
		stream          [][16]byte
		typ, data, meta []string
	}
	for _, c := range changes {
		if len(c.events) == 0 {
			continue
		}
		meta, err := json.Marshal(c.meta)
		if err != nil {
			return fmt.Errorf("encode metadata: %w", err)
		}
		id, err := parseID(c.after.ID)
		if err != nil {
			return err
		}
		for i, e := range c.events {
			data, err := json.Marshal(e.Data)
			if err != nil {
				return fmt.Errorf("encode event %s: %w", e.Type, err)
			}
			if c.before.Version == 0 {
				if i > 0 {
					return fmt.Errorf("a new entry starts with one event, not %d", len(c.events))
				}
				newEv.stream, newEv.typ, newEv.data, newEv.meta = append(newEv.stream, id), append(newEv.typ, e.Type), append(newEv.data, string(data)), append(newEv.meta, string(meta))
				continue
			}
			ev.stream, ev.version = append(ev.stream, id), append(ev.version, int32(c.before.Version+i+1))
			ev.typ, ev.data, ev.meta = append(ev.typ, e.Type), append(ev.data, string(data)), append(ev.meta, string(meta))
		}
		cols := &upd
		if c.before.Version == 0 {
			cols = &ins
		}
		if err := cols.add(id, c.after, c.key); err != nil {
			return err
		}
	}
	if len(ins.id) > 0 {
		q := b.Queue(`WITH ins AS (
				INSERT INTO drop_entries (merchant_id, drop_id, id, customer_id, joined_at, status, order_key, version)
				SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::timestamptz[], $6::text[], $7::bytea[], $8::int[])
				ON CONFLICT ON CONSTRAINT drop_entries_one_per_customer DO NOTHING
				RETURNING id
			)
			INSERT INTO events (stream_id, stream_type, version, type, data, metadata, recorded_at)
			SELECT e.s, $9, 1, e.t, e.d::jsonb, e.m::jsonb, $13
			FROM unnest($10::uuid[], $11::text[], $12::text[], $14::text[]) AS e(s, t, d, m) JOIN ins ON ins.id = e.s
			RETURNING stream_id`,
			ins.merchant, ins.drop, ins.id, ins.customer, ins.joinedAt, ins.status, ins.key, ins.version,
			StreamDropEntry, newEv.stream, newEv.typ, newEv.data, now, newEv.meta)
		q.Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var id uuid.UUID
				if err := rows.Scan(&id); err != nil {
					return fmt.Errorf("write entries: %w", err)
				}
				if inserted != nil {
					inserted[id] = true
				}
			}
			return rows.Err()
		})
	}
	if len(ev.stream) > 0 {
		b.Queue(`INSERT INTO events (stream_id, stream_type, version, type, data, metadata, recorded_at)
			SELECT s, $2, v, t, d::jsonb, m::jsonb, $7 FROM unnest($1::uuid[], $3::int[], $4::text[], $5::text[], $6::text[]) AS e(s, v, t, d, m)`,
			ev.stream, StreamDropEntry, ev.version, ev.typ, ev.data, ev.meta, now)
	}
	if len(upd.id) > 0 {
		b.Queue(`UPDATE drop_entries e SET status = t.status, invited_at = t.invited_at, purchase_deadline = t.deadline,
				order_id = t.order_id, version = t.version
			FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::timestamptz[], $6::timestamptz[], $7::uuid[], $8::int[])
				AS t(merchant_id, drop_id, id, status, invited_at, deadline, order_id, version)
			WHERE e.merchant_id = t.merchant_id AND e.drop_id = t.drop_id AND e.id = t.id`,
			upd.merchant, upd.drop, upd.id, upd.status, upd.invitedAt, upd.deadline, upd.order, upd.version)
	}
	return nil
}

// entryColumnsOf holds entry rows column by column, as unnest takes them.
type entryColumnsOf struct {
	merchant, drop, id  [][16]byte
	customer, status    []string
	joinedAt            []time.Time
	key                 [][]byte
	invitedAt, deadline []pgtype.Timestamptz
	order               []pgtype.UUID
	version             []int32
}

func (c *entryColumnsOf) add(id [16]byte, e domain.Entry, key []byte) error {
	merchant, err := parseID(e.MerchantID)
	if err != nil {
		return err
	}
	drop, err := parseID(e.DropID)
	if err != nil {
		return err
	}
	var order pgtype.UUID
	if e.OrderID != "" {
		o, err := parseID(e.OrderID)
		if err != nil {
			return err
		}
		order = pgtype.UUID{Bytes: o, Valid: true}
	}
	c.merchant, c.drop, c.id = append(c.merchant, merchant), append(c.drop, drop), append(c.id, id)
	c.customer, c.status, c.joinedAt = append(c.customer, e.CustomerID), append(c.status, string(e.Status)), append(c.joinedAt, e.JoinedAt)
	c.key = append(c.key, key)
	c.invitedAt, c.deadline = append(c.invitedAt, timestamptz(e.InvitedAt)), append(c.deadline, timestamptz(e.PurchaseDeadline))
	c.order, c.version = append(c.order, order), append(c.version, int32(e.Version))
	return nil
}
