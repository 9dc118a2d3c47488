package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/orderd/orderd/domain"
)

// Pickup slots, opening hours and the capacity of their periods.
//
// A slot's room is a row of pickup_slots, created by the first order that
// takes it with the capacity the merchant's settings give slots then. A
// placement batch reads its slots' room under their locks, decides who fits
// (domain.FitSlots) and adds the placed orders' loads with its commit; the
// table's CHECK refuses any write that would not fit. Scheduled
// orders hold nothing of the live line until their release, a timer at the
// slot's start minus prep_seconds; a cancelled or closed order for a slot
// gives its load back in the write that ends it (writeSet.slotReturns).

// Slot is one published pickup slot with what its orders hold of it.
type Slot struct {
	StartsAt  time.Time `json:"starts_at"`
	EndsAt    time.Time `json:"ends_at"`
	Capacity  int       `json:"capacity"`
	Taken     int       `json:"taken"`
	Available int       `json:"available"`
}

// ListSlots returns the merchant's published slots of a local date
// ("YYYY-MM-DD"; "" is today in its time zone) with their room.
func (s *Store) ListSlots(ctx context.Context, merchantID uuid.UUID, date string) ([]Slot, error) {
	m, err := scanMerchant(s.pool.QueryRow(ctx, `SELECT `+merchantColumns+` FROM merchants WHERE id = $1`, merchantID))
	if err != nil {
		return nil, mapErr(err)
	}
	loc, err := domain.LoadTimezone(m.Timezone)
	if err != nil {
		return nil, err
	}
	now := s.now()
	if date == "" {
		date = domain.LocalDay(now, loc)
	}
	starts, err := domain.PublishedSlots(m.settings(), loc, date, now)
	if err != nil {
		return nil, err
	}
	out := make([]Slot, 0, len(starts))
	if len(starts) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT starts_at, capacity, taken FROM pickup_slots
		WHERE merchant_id = $1 AND starts_at = ANY($2)`, merchantID, starts)
	if err != nil {
		return nil, mapErr(fmt.Errorf("read slots: %w", err))
	}
	type room struct {
		StartsAt        time.Time
		Capacity, Taken int
	}
	rooms, err := pgx.CollectRows(rows, pgx.RowToStructByPos[room])
	if err != nil {
		return nil, mapErr(fmt.Errorf("read slots: %w", err))
	}
	byStart := make(map[time.Time]room, len(rooms))
	for _, r := range rooms {
		byStart[r.StartsAt.UTC()] = r
	}
	length := time.Duration(m.Slots.Minutes) * time.Minute
	for _, st := range starts {
		r, ok := byStart[st]
		if !ok {
			r = room{Capacity: m.Slots.Capacity}
		}
		out = append(out, Slot{StartsAt: st, EndsAt: st.Add(length), Capacity: r.Capacity, Taken: r.Taken,
			Available: max(r.Capacity-r.Taken, 0)})
	}
	return out, nil
}

// slotKey names a slot.
type slotKey struct {
	merchant uuid.UUID
	at       time.Time
}

// slotTake is the room a request took of its slot.
type slotTake struct {
	slot slotKey
	load int
}

// returnSlot gives load back to the merchant's slot at at in the write, as
// domain.SlotReturn decides for the command that ends an order.
func (w *writeSet) returnSlot(merchant uuid.UUID, at time.Time, load int) {
	w.slotReturns = append(w.slotReturns, slotTake{slotKey{merchant, at.UTC()}, load})
}

// slotTakes is the room in their slots decided for a batch's requests,
// taken in the commit's writes by those the batch places.
type slotTakes struct {
	took map[*placement]slotTake
	// full are the slots the batch leaves with no room, as its process
	// remembers them (fullSlots).
	full map[slotKey]domain.KnownFullSlot
}

// lockSlots creates the batch's slots if new, with the capacity the
// merchant's settings give them now, and locks them in key order, so that
// two batches never wait for each other's slots crosswise, and returns
// their room: one round trip. The placement step (takeSlots) decides who
// takes it.
func lockSlots(ctx context.Context, tx pgx.Tx, capacities map[slotKey]int) (map[slotKey]int, error) {
	keys := make([]slotKey, 0, len(capacities))
	for k := range capacities {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if c := bytes.Compare(keys[i].merchant[:], keys[j].merchant[:]); c != 0 {
			return c < 0
		}
		return keys[i].at.Before(keys[j].at)
	})
	ids, ats, caps := make([][16]byte, len(keys)), make([]time.Time, len(keys)), make([]int32, len(keys))
	for i, k := range keys {
		ids[i], ats[i], caps[i] = k.merchant, k.at, int32(capacities[k])
	}
	room := make(map[slotKey]int, len(keys))
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO pickup_slots (merchant_id, starts_at, capacity)
		SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::int[]) ORDER BY 1, 2
		ON CONFLICT DO NOTHING`, ids, ats, caps)
	b.Queue(`SELECT s.merchant_id, s.starts_at, s.capacity - s.taken
		FROM pickup_slots s JOIN unnest($1::uuid[], $2::timestamptz[]) AS k(m, at)
			ON s.merchant_id = k.m AND s.starts_at = k.at
		WHERE s.merchant_id = ANY($1::uuid[])
		ORDER BY s.merchant_id, s.starts_at FOR NO KEY UPDATE OF s`, ids, ats).Query(func(rows pgx.Rows) error {
		var k slotKey
		var left int
		_, err := pgx.ForEachRow(rows, []any{&k.merchant, &k.at, &left}, func() error {
			room[slotKey{k.merchant, k.at.UTC()}] = left
			return nil
		})
		return err
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("take pickup slots: %w", err)
	}
	return room, nil
}

// knownFull are the slots of room with none left, as the process
// remembers them (fullSlots).
func knownFull(room map[slotKey]int, merchants map[uuid.UUID]*merchantRow) (map[slotKey]domain.KnownFullSlot, error) {
	var full map[slotKey]domain.KnownFullSlot
	for k, left := range room {
		if left > 0 {
			continue
		}
		m := merchants[k.merchant]
		loc, err := m.location()
		if err != nil {
			return nil, err
		}
		if full == nil {
			full = map[slotKey]domain.KnownFullSlot{}
		}
		full[k] = domain.KnownFullSlot{Settings: m.settings(), Location: loc, MerchantVersion: m.Version}
	}
	return full, nil
}

// addTaken adds to b the taking of their slots' room by the requests
// the batch places, as takeSlots decided it.
func (t *slotTakes) addTaken(b *pgx.Batch, placed []*placement) {
	var taken []slotTake
	for _, pl := range placed {
		if take, ok := t.took[pl]; ok {
			taken = append(taken, take)
		}
	}
	addSlotLoads(b, taken, 1)
}

// addSlotLoads adds to b one statement that moves each slot's taken by
// sign times the loads of its takes.
func addSlotLoads(b *pgx.Batch, takes []slotTake, sign int) {
	if len(takes) == 0 {
		return
	}
	ids, ats, loads := make([][16]byte, len(takes)), make([]time.Time, len(takes)), make([]int32, len(takes))
	for i, t := range takes {
		ids[i], ats[i], loads[i] = t.slot.merchant, t.slot.at, int32(sign*t.load)
	}
	b.Queue(`UPDATE pickup_slots s SET taken = s.taken + t.load
		FROM (SELECT m, at, sum(load)::int AS load FROM unnest($1::uuid[], $2::timestamptz[], $3::int[]) AS u(m, at, load) GROUP BY m, at) t
		WHERE s.merchant_id = t.m AND s.starts_at = t.at AND s.merchant_id = ANY($1::uuid[])`, ids, ats, loads)
}

// resizeSlots gives the merchant's future slots already taken the slot
// capacity of its new settings, never below what they hold.
func resizeSlots(ctx context.Context, tx pgx.Tx, m *merchantRow, before domain.MerchantSettings, now time.Time) error {
	if m.Slots == nil || (before.Slots != nil && before.Slots.Capacity == m.Slots.Capacity) {
		return nil
	}
	if _, err := tx.Exec(ctx, `UPDATE pickup_slots SET capacity = greatest($2, taken) WHERE merchant_id = $1 AND starts_at > $3`,
		m.ID, m.Slots.Capacity, now); err != nil {
		return fmt.Errorf("resize slots: %w", err)
	}
	return nil
}

func releaseJob(o domain.Order) river.InsertManyParams {
	return river.InsertManyParams{
		Args:       ReleaseScheduledArgs{MerchantID: o.MerchantID, ReleaseAt: *o.ReleaseAt},
		InsertOpts: &river.InsertOpts{ScheduledAt: *o.ReleaseAt},
	}
}

// maxRelease bounds how many scheduled orders one transaction releases.
const maxRelease = 500

// ReleaseDue lets the merchant's scheduled orders whose release has come
// into its live line, at the places they took when paid, and admits the
// line's head while it fits, all under the merchant's lock. It reports how
// many it released; the timer of a slot released already finds none.
func (s *Store) ReleaseDue(ctx context.Context, merchantID uuid.UUID) (int, error) {
	// Every order of a slot sets a timer for its release: all but the
	// first find nothing left, and need not wait for the merchant's lock to
	// see it.
	var due bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM orders WHERE merchant_id = $1 AND status = 'scheduled' AND release_at <= $2)`,
		merchantID, s.now()).Scan(&due); err != nil {
		return 0, mapErr(fmt.Errorf("find scheduled orders: %w", err))
	}
	if !due {
		return 0, nil
	}
	released := 0
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		released = 0
		m, err := s.lockMerchant(ctx, tx, merchantLock{id: merchantID})
		if errors.Is(err, domain.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		now := domain.DecisionTime(s.now(), m.lastDecision())
		rows, err := tx.Query(ctx, `SELECT `+orderColumns+` FROM orders o
			WHERE o.merchant_id = $1 AND o.status = 'scheduled' AND o.release_at <= $2
			ORDER BY o.queue_seq LIMIT $3 FOR UPDATE`, merchantID, now, maxRelease)
		if err != nil {
			return fmt.Errorf("read scheduled orders: %w", err)
		}
		due, err := scanOrders(rows)
		if err != nil {
			return fmt.Errorf("read scheduled orders: %w", err)
		}
		if len(due) == 0 {
			return nil
		}
		w := writeSet{loads: []*merchantRow{m}}
		load := m.load()
		var jobs []river.InsertManyParams
		for _, o := range due {
			var events []domain.Event
			events, load = domain.Release(o, load, m.maxQueueWait(), now)
			if len(events) == 0 {
				continue
			}
			after, err := o.Apply(events...)
			if err != nil {
				return err
			}
			if err := w.add(m, change{before: o, after: after, events: events, meta: Meta{Actor: domain.ActorSystem}}, now); err != nil {
				return err
			}
			jobs = append(jobs, s.expiryJobs(after)...)
			released++
		}
		m.setLoad(load)
		m.dirty = true
		if err := s.insertJobs(ctx, tx, jobs); err != nil {
			return err
		}
		// The released orders may go straight in: the line's head is read
		// with their writes.
		head, err := s.readLineHead(ctx, tx, m, s.cfg.InlineDrainLimit, w, now)
		if err != nil {
			return err
		}
		return head.commit(domain.DrainLine(head.orders, m.load(), head.limit, now))
	})
	if err != nil {
		return 0, mapErr(err)
	}
	if released == maxRelease {
		n, err := s.ReleaseDue(ctx, merchantID)
		return released + n, err
	}
	return released, nil
}

// ReleasesOverdue releases the scheduled orders of up to limit merchants
// whose release was due before cutoff and reports how many merchants it
// found: the backstop behind the release timers.
func (s *Store) ReleasesOverdue(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	type due struct{ MerchantID uuid.UUID }
	return sweepOverdue(ctx, s, "overdue releases", "orders", func(from string) string {
		return `SELECT DISTINCT merchant_id FROM ` + from + `
		WHERE status = 'scheduled' AND release_at < $1 LIMIT $2`
	}, cutoff, limit, func(d due) error {
		_, err := s.ReleaseDue(ctx, d.MerchantID)
		return err
	})
}

// ApplyPeriodEdge records the capacity in force at a period's edge, as a
// PATCH of capacity would change it: raising it admits the line at once,
// lowering it evicts nobody. It reports whether anything changed; a timer
// that fires late, early or twice records only what is true at the moment.
func (s *Store) ApplyPeriodEdge(ctx context.Context, merchantID uuid.UUID) (bool, error) {
	changed := false
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		m, err := s.lockMerchant(ctx, tx, merchantLock{id: merchantID})
		if errors.Is(err, domain.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		now := domain.DecisionTime(s.now(), m.lastDecision())
		before := m.folded()
		events, err := domain.PeriodChange(before, now)
		if err != nil || len(events) == 0 {
			return err
		}
		changed = true
		if err := writeMerchant(ctx, tx, m, events, Meta{Actor: domain.ActorSystem}, now); err != nil {
			return err
		}
		if err := s.afterPeriodChange(ctx, tx, m, events); err != nil {
			return err
		}
		if !domain.AdmitsLine(before, m.folded()) {
			return nil
		}
		head, err := s.readLineHead(ctx, tx, m, s.cfg.InlineDrainLimit, writeSet{loads: []*merchantRow{m}}, now)
		if err != nil {
			return err
		}
		return head.commit(domain.DrainLine(head.orders, m.load(), head.limit, now))
	})
	return changed, mapErr(err)
}

// afterPeriodChange sets the timer of the next edge a period change
// recorded; timers of one edge are one job.
func (s *Store) afterPeriodChange(ctx context.Context, tx pgx.Tx, m *merchantRow, events []domain.Event) error {
	if len(events) == 0 || m.nextEdge == nil {
		return nil
	}
	return s.insertJobs(ctx, tx, []river.InsertManyParams{{
		Args:       PeriodEdgeArgs{MerchantID: m.ID, At: *m.nextEdge},
		InsertOpts: &river.InsertOpts{ScheduledAt: *m.nextEdge},
	}})
}

// PeriodEdgesOverdue applies the period edges of up to limit merchants
// that passed before cutoff and reports how many it found: the backstop
// behind the period timers.
func (s *Store) PeriodEdgesOverdue(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	type edge struct {
		ID uuid.UUID
		At time.Time
	}
	return sweepOverdue(ctx, s, "overdue period edges", "merchants", func(from string) string {
		return `SELECT id, next_period_at FROM ` + from + `
		WHERE next_period_at < $1 ORDER BY next_period_at LIMIT $2`
	}, cutoff, limit, func(e edge) error {
		_, err := s.ApplyPeriodEdge(ctx, e.ID)
		return err
	})
}
