package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/riverqueue/river"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store/pgkit"
)

// change is one order's new events, the state they fold to and who caused
// them. Every write of an order is a change: placements, payments,
// admissions, completions, cancellations, closes and expiries.
type change struct {
	before domain.Order // the zero Order for a new one
	after  domain.Order
	events []domain.Event
	meta   Meta
	// key is the idempotency key a new order is placed with, recorded on
	// its row (addKeyReads); the zero key for every other change.
	key orderKey
}

// orderKey is a placement's idempotency key and its request's hash, which a
// replay is checked against (domain.CheckReplay).
type orderKey struct {
	key  string
	hash []byte
}

// outboxMessage is one webhook message, written with the change that calls
// for it.
type outboxMessage struct {
	id, merchant, order [16]byte
	version             int
	eventType           string
	payload             []byte
}

// addChanges adds to b the one write of a set of changes: their events,
// appended after each stream's version and recorded at now (the decision's
// time), in one statement; the folded state of new orders inserted and of
// the others updated, one statement each; and the outbox messages. The
// unique (stream_id, version) constraint turns a stale before into a
// conflict. b travels with the transaction's commit (a batch) or alone.
//
// Identifiers go to pgx as [16]byte, its native uuid: a uuid.UUID is a
// driver.Valuer, encoded through its text form, and a slice of them cost
// placement more CPU than any statement it sends. Nullable columns go as
// pgtype values, not pointers, for the same reason.
func addChanges(tx pgx.Tx, b *pgx.Batch, changes []change, outbox []outboxMessage, now time.Time) error {
	var ev eventRows
	var ins, upd orderColumnsOf
	events, inserts := 0, 0
	for _, c := range changes {
		events += len(c.events)
		if len(c.events) > 0 && c.before.Version == 0 {
			inserts++
		}
	}
	ev.grow(events)
	ins.grow(inserts)
	upd.grow(len(changes) - inserts)
	for _, c := range changes {
		if len(c.events) == 0 {
			continue
		}
		meta, err := jsonText(c.meta)
		if err != nil {
			return fmt.Errorf("encode metadata: %w", err)
		}
		id, merchant := c.after.ID, c.after.MerchantID
		for i, e := range c.events {
			if err := ev.add(id, merchant, c.before.Version+i+1, e, meta); err != nil {
				return err
			}
		}
		if c.before.Version == 0 {
			if err := ins.add(c.after); err != nil {
				return err
			}
			ins.addKey(c.key)
			noteTransition(tx, "new", domain.StatusAwaitingPayment)
			noteTransition(tx, domain.StatusAwaitingPayment, c.after.Status)
		} else {
			if err := upd.add(c.after); err != nil {
				return err
			}
			noteTransition(tx, c.before.Status, c.after.Status)
		}
	}
	if len(ev.stream) == 0 {
		return nil
	}
	noteEvents(tx)
	ev.insert(StreamOrder, now).addToHeldShards(tx, b, "events", 1, nil)
	ins.addTo(tx, b, "orders", true)
	upd.addTo(tx, b, "orders", false)
	if len(outbox) > 0 {
		var ids, merchants, orders [][16]byte
		var versions []int32
		var types, payloads []string
		for _, m := range outbox {
			ids, merchants, orders = append(ids, m.id), append(merchants, m.merchant), append(orders, m.order)
			versions, types, payloads = append(versions, int32(m.version)), append(types, m.eventType), append(payloads, string(m.payload))
		}
		insertRows{
			Into: `INSERT INTO outbox (id, merchant_id, order_id, order_version, event_type, payload, created_at, next_attempt_at)`,
			Row:  `$2, $3, $4, $5, $6, $7::jsonb, $1, $1`,
			Args: []any{now},
			Columns: []column{col("uuid", ids), col("uuid", merchants), col("uuid", orders), col("int", versions),
				col("text", types), col("text", payloads)},
		}.addToHeldShards(tx, b, "outbox", 1, nil)
	}
	return nil
}

// writeSet is what one round trip of a transaction writes: order changes
// with their webhook messages, and the loads of the merchants they changed
// (locked by the transaction).
type writeSet struct {
	changes []change
	outbox  []outboxMessage
	loads   []*merchantRow
	// readBack, when set, adds reads that see the writes to the same round
	// trip: what the request answers with.
	readBack func(b *pgx.Batch)
	// head is the queue's head as the merchant's lock found it, when it was
	// read with the lock; drain admits from it.
	head *queueHead
	// slotReturns is the room the changes give back to their pickup slots
	// (domain.SlotReturn), asked by the command that ends an order.
	slotReturns []slotTake
	// entries are what the changes do to their orders' drop entries
	// (domain.EntryAfterOrder), asked by the store file deciding the orders;
	// settles nudge each drop touched, which invites the next or sells out.
	entries []entryChange
	settles []river.InsertManyParams
}

// add adds one order's change and the webhook messages m's endpoint is owed
// for it.
func (w *writeSet) add(m *merchantRow, c change, now time.Time) error {
	messages, err := outboxFor(m, c, now)
	if err != nil {
		return err
	}
	w.changes, w.outbox = append(w.changes, c), append(w.outbox, messages...)
	return nil
}

// addEntry adds an order's drop entry's change: events, as
// domain.EntryAfterOrder decided them for the order's change.
func (w *writeSet) addEntry(oe orderEntry, events []domain.Event, now time.Time) error {
	ec, ok, err := newEntryChange(oe.entry, events, oe.order.meta)
	if err != nil || !ok {
		return err
	}
	w.entries = append(w.entries, ec)
	w.settles = append(w.settles, settleJob(oe.entry.MerchantID, oe.entry.DropID, now))
	return nil
}

// commit writes w in the transaction tx in one round trip (and one more for
// the drops' settlement jobs, when it has any).
func (s *Store) commit(ctx context.Context, tx pgx.Tx, w writeSet, now time.Time) error {
	b, err := s.writeBatch(ctx, tx, w, now)
	if err != nil || b.Len() == 0 {
		return err
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("write order changes: %w", err)
	}
	return nil
}

// commitAndEnd is commit for a transaction's last write: w travels with the
// COMMIT of pt, tx's pipelined transaction, so that the locks are let go a
// round trip sooner.
func (s *Store) commitAndEnd(ctx context.Context, tx *txn, pt *pgkit.PipelinedTx, w writeSet, now time.Time) error {
	b, err := s.writeBatch(ctx, tx, w, now)
	if err != nil {
		return err
	}
	if err := pt.CommitWith(ctx, b); err != nil {
		return fmt.Errorf("write order changes: %w", err)
	}
	return nil
}

// writeBatch returns the batch that writes w, once the drops' settlement
// jobs it nudges are inserted.
func (s *Store) writeBatch(ctx context.Context, tx pgx.Tx, w writeSet, now time.Time) (*pgx.Batch, error) {
	if err := s.insertJobs(ctx, tx, w.settles); err != nil {
		return nil, err
	}
	b := &pgx.Batch{}
	if err := addEntries(tx, b, w.entries, now, nil); err != nil {
		return nil, err
	}
	addSlotLoads(b, w.slotReturns, -1)
	if err := addChanges(tx, b, w.changes, w.outbox, now); err != nil {
		return nil, err
	}
	for _, m := range w.loads {
		addSaveLoad(b, m, now)
	}
	if w.readBack != nil {
		w.readBack(b)
	}
	return b, nil
}

// orderColumnsOf holds order rows column by column, as unnest takes them.
type orderColumnsOf struct {
	id, merchant                    [][16]byte
	customer, items, status         []string
	total                           []int64
	version                         []int32
	placedAt, deadline              []time.Time
	paymentRef, reason              []pgtype.Text
	paidAt, acceptedAt, completedAt []pgtype.Timestamptz
	endedAt, queuedAt, expiresAt    []pgtype.Timestamptz
	seq                             []pgtype.Int8
	load                            []int32
	lane                            []string
	pickupCode                      []pgtype.Text
	pickupAt, releaseAt             []pgtype.Timestamptz
	pickedUpAt                      []pgtype.Timestamptz
	// key and requestHash are written by an insert only (addKey): an
	// update leaves an order's idempotency key as it was.
	key         []pgtype.Text
	requestHash [][]byte
}

// addTo adds to b the statement that writes the rows into table (orders,
// or a table like it) in tx: inserted when new, else every column the fold
// knows updated.
func (c *orderColumnsOf) addTo(tx pgx.Tx, b *pgx.Batch, table string, insert bool) {
	if len(c.id) == 0 {
		return
	}
	t := pgx.Identifier{table}.Sanitize()
	columns := []column{col("uuid", c.id), col("uuid", c.merchant), col("text", c.customer), col("jsonb", c.items),
		col("bigint", c.total), col("timestamptz", c.placedAt), col("timestamptz", c.deadline), col("text", c.status),
		col("int", c.version), col("text", c.paymentRef), col("timestamptz", c.paidAt), col("timestamptz", c.acceptedAt),
		col("timestamptz", c.completedAt), col("timestamptz", c.endedAt), col("text", c.reason), col("bigint", c.seq),
		col("timestamptz", c.queuedAt), col("timestamptz", c.expiresAt), col("int", c.load), col("text", c.lane),
		col("text", c.pickupCode), col("timestamptz", c.pickupAt), col("timestamptz", c.releaseAt), col("timestamptz", c.pickedUpAt)}
	if insert {
		for len(c.key) < len(c.id) {
			// Rows added without their keys (a rebuild's) have none.
			c.addKey(orderKey{})
		}
		insertRows{
			Into: `INSERT INTO ` + t + ` (id, merchant_id, customer_id, items, total_cents, placed_at, payment_deadline,
				status, version, payment_ref, paid_at, accepted_at, completed_at, ended_at, status_reason,
				queue_seq, queued_at, queue_expires_at, load, lane, pickup_code, pickup_at, release_at, picked_up_at,
				idempotency_key, request_hash)`,
			Columns: append(columns, col("text", c.key), col("bytea", c.requestHash)),
		}.addToHeldShards(tx, b, table, 1, nil)
		return
	}
	groups, tables := heldShardRows(tx, table, c.merchant)
	for g, rows := range groups {
		part := columns
		if len(groups) > 1 {
			part = columnsAt(columns, rows)
		}
		c.addUpdate(b, tables[g], part, tables[g] != t)
	}
}

// addUpdate adds to b the update of table's rows to columns (orderColumnsOf's
// order). Through a table Citus distributes, the merchants' list beside the
// key lets Citus route the statement to their shards. A shard named
// (onShard) is a plain table, and there the list would only offer the
// planner the merchants' index: a merchant new since the shard's last
// ANALYZE (a few of its rows by the statistics, thousands in the shard)
// then had all its orders read by that index and joined to the batch's
// rows in a nested loop that unnests the batch again for every one of
// them, a cost growing with the merchant's orders times the batch's,
// instead of one lookup by the primary key a row.
func (c *orderColumnsOf) addUpdate(b *pgx.Batch, t string, columns []column, onShard bool) {
	rows, args := unnestOf(0, columns)
	route := ` AND o.merchant_id = ANY($2::uuid[])`
	if onShard {
		route = ""
	}
	b.Queue(`UPDATE `+t+` o SET customer_id = r.customer_id, items = r.items,
			total_cents = r.total_cents, placed_at = r.placed_at, payment_deadline = r.payment_deadline,
			status = r.status, version = r.version, payment_ref = r.payment_ref, paid_at = r.paid_at,
			accepted_at = r.accepted_at, completed_at = r.completed_at, ended_at = r.ended_at, status_reason = r.status_reason,
			queue_seq = r.queue_seq, queued_at = r.queued_at, queue_expires_at = r.queue_expires_at,
			load = r.load, lane = r.lane, pickup_code = r.pickup_code, pickup_at = r.pickup_at, release_at = r.release_at, picked_up_at = r.picked_up_at
		FROM `+rows+` AS r(id, merchant_id, customer_id, items, total_cents, placed_at, payment_deadline,
			status, version, payment_ref, paid_at, accepted_at, completed_at, ended_at, status_reason,
			queue_seq, queued_at, queue_expires_at, load, lane, pickup_code, pickup_at, release_at, picked_up_at)
		WHERE o.id = r.id AND o.merchant_id = r.merchant_id`+route, args...)
}

// grow makes room for n more rows in every column, so that a batch's rows
// are appended without each column regrowing as it fills.
func (c *orderColumnsOf) grow(n int) {
	c.id, c.merchant = slices.Grow(c.id, n), slices.Grow(c.merchant, n)
	c.customer, c.items, c.status = slices.Grow(c.customer, n), slices.Grow(c.items, n), slices.Grow(c.status, n)
	c.total, c.version = slices.Grow(c.total, n), slices.Grow(c.version, n)
	c.placedAt, c.deadline = slices.Grow(c.placedAt, n), slices.Grow(c.deadline, n)
	c.paymentRef, c.reason = slices.Grow(c.paymentRef, n), slices.Grow(c.reason, n)
	c.paidAt, c.acceptedAt, c.completedAt = slices.Grow(c.paidAt, n), slices.Grow(c.acceptedAt, n), slices.Grow(c.completedAt, n)
	c.endedAt, c.queuedAt, c.expiresAt = slices.Grow(c.endedAt, n), slices.Grow(c.queuedAt, n), slices.Grow(c.expiresAt, n)
	c.seq, c.load, c.lane = slices.Grow(c.seq, n), slices.Grow(c.load, n), slices.Grow(c.lane, n)
	c.pickupCode, c.pickupAt, c.releaseAt = slices.Grow(c.pickupCode, n), slices.Grow(c.pickupAt, n), slices.Grow(c.releaseAt, n)
	c.pickedUpAt = slices.Grow(c.pickedUpAt, n)
	c.key, c.requestHash = slices.Grow(c.key, n), slices.Grow(c.requestHash, n)
}

// addKey gives the row added last its idempotency key, if any.
func (c *orderColumnsOf) addKey(k orderKey) {
	c.key = append(c.key, pgtype.Text{String: k.key, Valid: k.key != ""})
	c.requestHash = append(c.requestHash, k.hash)
}

func (c *orderColumnsOf) add(o domain.Order) error {
	items, err := jsonText(o.Items)
	if err != nil {
		return fmt.Errorf("encode items: %w", err)
	}
	c.id, c.merchant = append(c.id, o.ID), append(c.merchant, o.MerchantID)
	c.customer, c.items, c.status = append(c.customer, o.CustomerID), append(c.items, items), append(c.status, string(o.Status))
	c.total, c.version = append(c.total, o.TotalCents), append(c.version, int32(o.Version))
	c.placedAt, c.deadline = append(c.placedAt, o.PlacedAt), append(c.deadline, o.PaymentDeadline)
	c.paymentRef = append(c.paymentRef, pgtype.Text{String: o.PaymentRef, Valid: o.PaymentRef != ""})
	c.reason = append(c.reason, pgtype.Text{String: o.StatusReason, Valid: o.StatusReason != ""})
	c.paidAt, c.acceptedAt, c.completedAt = append(c.paidAt, timestamptz(o.PaidAt)), append(c.acceptedAt, timestamptz(o.AcceptedAt)), append(c.completedAt, timestamptz(o.CompletedAt))
	c.endedAt, c.queuedAt, c.expiresAt = append(c.endedAt, timestamptz(o.EndedAt)), append(c.queuedAt, timestamptz(o.QueuedAt)), append(c.expiresAt, timestamptz(o.QueueExpiresAt))
	c.seq = append(c.seq, pgtype.Int8{Int64: o.QueueSeq, Valid: o.QueueSeq != 0})
	lane := o.Lane
	if lane == "" {
		lane = domain.LaneNormal
	}
	c.load, c.lane = append(c.load, int32(max(o.Load, 1))), append(c.lane, string(lane))
	c.pickupCode = append(c.pickupCode, pgtype.Text{String: o.PickupCode, Valid: o.PickupCode != ""})
	c.pickupAt, c.releaseAt = append(c.pickupAt, timestamptz(o.PickupAt)), append(c.releaseAt, timestamptz(o.ReleaseAt))
	c.pickedUpAt = append(c.pickedUpAt, timestamptz(o.PickedUpAt))
	return nil
}

// timestamptz is t as pgx encodes it without reflection, which a slice of
// pointers would cost per element.
func timestamptz(t *time.Time) pgtype.Timestamptz {
	if t == nil {
		return pgtype.Timestamptz{}
	}
	return pgtype.Timestamptz{Time: *t, Valid: true}
}

// foldedRows adds to a batch the statement that writes an aggregate's folded rows
// into table (its own, or rebuild's copy of it).
type foldedRows interface {
	addTo(tx pgx.Tx, b *pgx.Batch, table string, insert bool)
}

// writeStream is the one write of a merchant, product or drop: its events,
// appended after the stream's version, and its folded row, inserted when
// the stream is new or else updated, in the transaction tx.
func writeStream(ctx context.Context, tx pgx.Tx, events AppendParams, rows foldedRows, table string, insert bool) error {
	if err := appendEvents(ctx, tx, events); err != nil {
		return err
	}
	b := &pgx.Batch{}
	rows.addTo(tx, b, table, insert)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("write %s %s: %w", table, events.StreamID, err)
	}
	return nil
}
