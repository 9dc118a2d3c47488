package store

import (
	"context"
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
	var rows dropColumnsOf
	rows.add(c.after)
	return writeStream(ctx, tx, AppendParams{
		StreamID: c.after.DropID, StreamType: StreamDrop, MerchantID: c.after.MerchantID, ExpectedVersion: c.before.Version, Events: c.events, Meta: c.meta, RecordedAt: now,
	}, &rows, "drops", c.before.Version == 0)
}

// dropFoldColumns are the drop columns its stream folds to.
const dropFoldColumns = `merchant_id, id, product_id, opens_at, starts_at, mode, purchase_window_seconds, units,
	state, seed_commitment, seed, created_at, version, entries_digest`

// dropColumnsOf holds folded drops column by column, as unnest takes them.
type dropColumnsOf struct {
	merchant, id, product          [][16]byte
	opensAt, startsAt, createdAt   []time.Time
	mode, state, commitment        []string
	purchaseWindow, units, version []int32
	seed, digest                   [][]byte
}

func (c *dropColumnsOf) add(d domain.Drop) {
	c.merchant, c.id, c.product = append(c.merchant, d.MerchantID), append(c.id, d.DropID), append(c.product, d.ProductID)
	c.opensAt, c.startsAt, c.createdAt = append(c.opensAt, d.OpensAt), append(c.startsAt, d.StartsAt), append(c.createdAt, d.CreatedAt)
	c.mode, c.state, c.commitment = append(c.mode, string(d.Mode)), append(c.state, string(d.State)), append(c.commitment, d.SeedCommitment)
	c.purchaseWindow, c.units = append(c.purchaseWindow, int32(d.PurchaseWindowSeconds)), append(c.units, int32(d.Units))
	c.version, c.seed, c.digest = append(c.version, int32(d.Version)), append(c.seed, d.Seed), append(c.digest, d.EntriesDigest)
}

// addTo adds to b the statement that writes the rows into table (drops, or
// a table like it): inserted when new, else every column the fold knows
// updated.
func (c *dropColumnsOf) addTo(tx pgx.Tx, b *pgx.Batch, table string, insert bool) {
	if len(c.id) == 0 {
		return
	}
	t := pgx.Identifier{table}.Sanitize()
	columns := []column{col("uuid", c.merchant), col("uuid", c.id), col("uuid", c.product), col("timestamptz", c.opensAt),
		col("timestamptz", c.startsAt), col("text", c.mode), col("int", c.purchaseWindow), col("int", c.units),
		col("text", c.state), col("text", c.commitment), col("bytea", c.seed), col("timestamptz", c.createdAt), col("int", c.version),
		col("bytea", c.digest)}
	if insert {
		insertRows{
			Into:    `INSERT INTO ` + t + ` (` + dropFoldColumns + `)`,
			Columns: columns,
		}.addTo(tx, b, nil)
		return
	}
	rows, args := unnestOf(0, columns)
	b.Queue(`UPDATE `+t+` d SET product_id = r.product_id, opens_at = r.opens_at, starts_at = r.starts_at, mode = r.mode,
			purchase_window_seconds = r.purchase_window_seconds, units = r.units, state = r.state,
			seed_commitment = r.seed_commitment, seed = r.seed, created_at = r.created_at, version = r.version,
			entries_digest = r.entries_digest
		FROM `+rows+` AS r(`+dropFoldColumns+`)
		WHERE d.merchant_id = r.merchant_id AND d.id = r.id AND d.merchant_id = ANY($1::uuid[])`, args...)
}

// entryChange is one entry's new events and the state they fold to.
type entryChange struct {
	before domain.Entry // the zero Entry for a new one
	after  domain.Entry
	// key and rank are a new entry's order key and rank (nil until the
	// draw for an entry of a lottery drop that has not started); the draw
	// sets the others' (drawEntries).
	key    []byte
	rank   *int
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
	if err := addEntries(tx, b, changes, now, nil); err != nil {
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

// addEntries adds to b the one write of entry changes: new entries
// inserted unless their customer has one already, with their events only
// when inserted (their ids recorded in inserted, when not nil); existing
// ones updated, with their events, one statement each.
func addEntries(tx pgx.Tx, b *pgx.Batch, changes []entryChange, now time.Time, inserted map[uuid.UUID]bool) error {
	var ins, upd entryColumnsOf
	// ev holds existing entries' events; first, new entries' first ones.
	var ev, first eventRows
	for _, c := range changes {
		if len(c.events) == 0 {
			continue
		}
		meta, err := jsonText(c.meta)
		if err != nil {
			return fmt.Errorf("encode metadata: %w", err)
		}
		id, merchant := c.after.ID, c.after.MerchantID
		events := &ev
		if c.before.Version == 0 {
			if len(c.events) > 1 {
				return fmt.Errorf("a new entry starts with one event, not %d", len(c.events))
			}
			events = &first
		}
		for i, e := range c.events {
			if err := events.add(id, merchant, c.before.Version+i+1, e, meta); err != nil {
				return err
			}
		}
		cols := &upd
		if c.before.Version == 0 {
			cols = &ins
		}
		// A new entry's key and rank are known (nil until the draw for an
		// entry of a lottery drop not started); a change leaves the ones
		// the draw wrote.
		cols.add(c.after, c.key, c.rank, c.before.Version == 0)
	}
	if len(ins.id) > 0 {
		// Two statements, not one inserting the events of the entries a
		// data-modifying CTE returns: Citus plans that INSERT … SELECT
		// through the coordinator and commits it in two phases. An entry
		// not inserted is its customer's in that drop, whose id is the
		// same (domain.EntryID) and whose first event is in the log.
		inserts := ins.insert("drop_entries")
		inserts.Tail = `ON CONFLICT ON CONSTRAINT drop_entries_one_per_customer DO NOTHING RETURNING id`
		inserts.addTo(tx, b, func(rows pgx.Rows) error {
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
		firsts := first.insert(StreamDropEntry, now)
		firsts.Tail = `ON CONFLICT (stream_id, version, merchant_id) DO NOTHING`
		firsts.addTo(tx, b, nil)
	}
	if len(ev.stream) > 0 {
		ev.insert(StreamDropEntry, now).addTo(tx, b, nil)
	}
	upd.addTo(tx, b, "drop_entries", false)
	return nil
}

// entryFoldColumns are the entry columns its stream folds to, with the
// order key and rank its drop's draw gives it.
const entryFoldColumns = `merchant_id, drop_id, id, customer_id, joined_at, status, order_key, invited_at, purchase_deadline,
	order_id, version, rank`

const entryRows = `unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::timestamptz[], $6::text[], $7::bytea[],
	$8::timestamptz[], $9::timestamptz[], $10::uuid[], $11::int[], $12::int[]`

// insert is the insert of the rows into table (drop_entries, or a table
// like it).
func (c *entryColumnsOf) insert(table string) insertRows {
	return insertRows{
		Into: `INSERT INTO ` + pgx.Identifier{table}.Sanitize() + ` (` + entryFoldColumns + `)`,
		Columns: []column{col("uuid", c.merchant), col("uuid", c.drop), col("uuid", c.id), col("text", c.customer),
			col("timestamptz", c.joinedAt), col("text", c.status), col("bytea", c.key), col("timestamptz", c.invitedAt),
			col("timestamptz", c.deadline), col("uuid", c.order), col("int", c.version), col("int", c.rank)},
	}
}

// entryColumnsOf holds entry rows column by column, as unnest takes them.
type entryColumnsOf struct {
	merchant, drop, id  [][16]byte
	customer, status    []string
	joinedAt            []time.Time
	key                 [][]byte
	keyed               []bool
	invitedAt, deadline []pgtype.Timestamptz
	order               []pgtype.UUID
	version             []int32
	rank                []pgtype.Int4
}

// add adds the entry e with the order key key and rank; keyed says whether
// they are the entry's (else an update leaves the ones the row has).
func (c *entryColumnsOf) add(e domain.Entry, key []byte, rank *int, keyed bool) {
	order := pgtype.UUID{Bytes: e.OrderID, Valid: e.OrderID != uuid.Nil}
	c.merchant, c.drop, c.id = append(c.merchant, e.MerchantID), append(c.drop, e.DropID), append(c.id, e.ID)
	c.customer, c.status, c.joinedAt = append(c.customer, e.CustomerID), append(c.status, string(e.Status)), append(c.joinedAt, e.JoinedAt)
	c.key, c.keyed = append(c.key, key), append(c.keyed, keyed)
	c.invitedAt, c.deadline = append(c.invitedAt, timestamptz(e.InvitedAt)), append(c.deadline, timestamptz(e.PurchaseDeadline))
	c.order, c.version = append(c.order, order), append(c.version, int32(e.Version))
	r := pgtype.Int4{}
	if rank != nil {
		r = pgtype.Int4{Int32: int32(*rank), Valid: true}
	}
	c.rank = append(c.rank, r)
}

func (c *entryColumnsOf) args() []any {
	return []any{c.merchant, c.drop, c.id, c.customer, c.joinedAt, c.status, c.key, c.invitedAt, c.deadline, c.order, c.version, c.rank}
}

// addTo adds to b the statement that writes the rows into table
// (drop_entries, or a table like it): inserted when new, else every column
// the fold knows updated, and the order key and rank where they are known.
func (c *entryColumnsOf) addTo(tx pgx.Tx, b *pgx.Batch, table string, insert bool) {
	if len(c.id) == 0 {
		return
	}
	if insert {
		c.insert(table).addTo(tx, b, nil)
		return
	}
	b.Queue(`UPDATE `+pgx.Identifier{table}.Sanitize()+` e SET customer_id = r.customer_id, joined_at = r.joined_at,
			status = r.status, order_key = CASE WHEN r.keyed THEN r.order_key ELSE e.order_key END, invited_at = r.invited_at,
			purchase_deadline = r.purchase_deadline, order_id = r.order_id, version = r.version,
			rank = CASE WHEN r.keyed THEN r.rank ELSE e.rank END
		FROM `+entryRows+`, $13::bool[]) AS r(`+entryFoldColumns+`, keyed)
		WHERE e.merchant_id = r.merchant_id AND e.drop_id = r.drop_id AND e.id = r.id AND e.merchant_id = ANY($1::uuid[])`,
		append(c.args(), c.keyed)...)
}
