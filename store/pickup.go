package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orderd/orderd/domain"
)

// zones caches time zones by name: loading one reads the zone database.
var zones sync.Map

func (m *merchantRow) location() (*time.Location, error) {
	if loc, ok := zones.Load(m.Timezone); ok {
		return loc.(*time.Location), nil
	}
	loc, err := domain.LoadTimezone(m.Timezone)
	if err != nil {
		return nil, fmt.Errorf("merchant %s time zone: %w", m.ID, err)
	}
	stored, _ := zones.LoadOrStore(m.Timezone, loc)
	return stored.(*time.Location), nil
}

// takePickupNumbers takes the pickup numbers of a batch's placements and
// returns, per merchant, the first of them (stampPickupCodes gives them out
// in arrival order): the next numbers of its merchant's day in days, its
// local day at the time the orders are placed at (pickupDays). A merchant's day is a row of
// pickup_counters that one statement advances by the batch's count of that
// merchant's placements and returns, once the batch knows which placements
// it makes; so a refused placement takes no number, a batch rolled back
// gives its numbers back, and batches of one merchant (in other lanes or
// processes, paid or not) wait for each other only from this statement to
// their commit. The rows are advanced in key order, so no two batches wait
// for each other. Each local day has its own row, so orders placed either
// side of midnight never share a numbering, whichever commits first.
func takePickupNumbers(ctx context.Context, tx pgx.Tx, placed []*placement, days map[uuid.UUID]string) (map[uuid.UUID]int, error) {
	byMerchant := map[uuid.UUID][]*placement{}
	var ids [][16]byte
	for _, pl := range placed {
		id := pl.p.MerchantID
		if _, ok := byMerchant[id]; !ok {
			ids = append(ids, id)
		}
		byMerchant[id] = append(byMerchant[id], pl)
	}
	sort.Slice(ids, func(i, j int) bool { return bytes.Compare(ids[i][:], ids[j][:]) < 0 })
	idDays, counts := make([]string, len(ids)), make([]int32, len(ids))
	for i, id := range ids {
		idDays[i], counts[i] = days[id], int32(len(byMerchant[id]))
	}
	counters, err := advancePickupCounters(ctx, tx, ids, idDays, counts)
	if err != nil {
		return nil, err
	}
	firsts := make(map[uuid.UUID]int, len(byMerchant))
	for id, pls := range byMerchant {
		issued, err := counters.lastOf(id)
		if err != nil {
			return nil, err
		}
		firsts[id] = issued - len(pls) + 1
	}
	return firsts, nil
}

// pickupCounters is what a statement advancing pickup counters answers:
// per merchant, the local day it counted and the last number taken (the
// day as a date: Citus refuses the cast to text, which is not immutable, in
// a RETURNING clause). Every
// such statement is pickupCountersInto (of the table, or on a worker of the
// merchants' shard of it: heldTable), its rows (merchant_id, day, issued)
// and pickupCountersTail, and is read by scan, so that a day's counter
// advances one way whichever path numbers.
type pickupCounters struct {
	day  map[uuid.UUID]string
	last map[uuid.UUID]int
}

func pickupCountersInto(table string) string {
	return `INSERT INTO ` + table + ` AS c (merchant_id, day, issued)`
}

const (
	pickupCountersTail = `ON CONFLICT (merchant_id, day) DO UPDATE SET issued = c.issued + excluded.issued
		RETURNING merchant_id, day, issued`
)

func newPickupCounters() pickupCounters {
	return pickupCounters{day: map[uuid.UUID]string{}, last: map[uuid.UUID]int{}}
}

func (c pickupCounters) scan(rows pgx.Rows) error {
	for rows.Next() {
		var id uuid.UUID
		var day time.Time
		var issued int
		if err := rows.Scan(&id, &day, &issued); err != nil {
			return fmt.Errorf("pickup counters: %w", err)
		}
		c.day[id], c.last[id] = day.Format(time.DateOnly), issued
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pickup counters: %w", err)
	}
	return nil
}

// lastOf is the last number the merchant took.
func (c pickupCounters) lastOf(id uuid.UUID) (int, error) {
	issued, ok := c.last[id]
	if !ok {
		return 0, fmt.Errorf("pickup counters: no counter returned for merchant %s", id)
	}
	return issued, nil
}

// errNumberLast sends a batch that reserved its pickup numbers for a local
// day that is no longer the merchant's at the decisions' time back, to run
// again numbering last.
var errNumberLast = errors.New("pickup numbers reserved for another local day")

// mayNumberFirst reports whether a batch may reserve its pickup numbers with
// its first read, holding the counters from then to its commit: only if it
// will wait for no other lock after them, so none of its requests may take
// stock or a pickup slot (those numbering last take the counters after
// their stock and slots). Whether
// a product takes stock is known once it is read; products seen to take
// some send the batches that name them straight to numbering last, and a
// product that starts to take stock is deferred by the batch that finds
// out. On Citus, which takes row locks only in single-shard statements, a
// batch numbers last.
func (s *Store) mayNumberFirst(ctx context.Context, batch []*placement) bool {
	if citus, err := s.onCitus(ctx); err != nil || citus {
		return false
	}
	for _, pl := range batch {
		if pl.p.PickupAt != nil {
			// Its slot's row is locked after the counters would be.
			return false
		}
		for _, l := range pl.p.Lines {
			if _, ok := s.stockProducts.Load(l.ProductID); ok {
				return false
			}
		}
	}
	return true
}

// noteStockProducts remembers which of the products read take stock, for
// mayNumberFirst.
func (s *Store) noteStockProducts(products map[uuid.UUID]productInfo) {
	for id, p := range products {
		// Loads first: the products of nearly every batch are known
		// already, and a read of a sync.Map takes no lock.
		_, known := s.stockProducts.Load(id)
		switch {
		case p.takesStock() && !known:
			s.stockProducts.Store(id, struct{}{})
		case !p.takesStock() && known:
			s.stockProducts.Delete(id)
		}
	}
}

// takesStock reports whether placing pl takes stock, a per-customer claim or
// a drop's entry: a lock another transaction may hold.
func takesStock(pl *placement, products map[uuid.UUID]productInfo) bool {
	for _, l := range pl.p.Lines {
		if products[l.ProductID].takesStock() {
			return true
		}
	}
	return false
}

// pickupReservation is the pickup numbers a batch took with its first read:
// as many per merchant as it has requests of that merchant, for the
// merchant's local day at the time read before the locks. The batch
// numbers the placements it makes from them and gives back the rest before
// it commits, so that no number is skipped.
type pickupReservation struct {
	reserved map[uuid.UUID]int
	// counters are per merchant the local day reserved and the last number
	// reserved, as the counter answered.
	counters pickupCounters
	unused   map[uuid.UUID]int
}

// reservePickupNumbers adds to b the reservation of a batch's pickup
// numbers. The merchants are read with a key share lock that skips those
// another transaction holds wholly (FOR UPDATE), so that the counter of a
// merchant locked elsewhere makes no batch wait for its foreign key; a
// merchant held for update by another batch is not skipped, since its
// counter is held only from that batch's first read to its commit, which
// waits for nothing else.
func reservePickupNumbers(tx pgx.Tx, b *pgx.Batch, batch []*placement, clock time.Time) *pickupReservation {
	r := &pickupReservation{reserved: map[uuid.UUID]int{}, counters: newPickupCounters(), unused: map[uuid.UUID]int{}}
	var ids [][16]byte
	for _, pl := range batch {
		id := pl.p.MerchantID
		if _, ok := r.reserved[id]; !ok {
			ids = append(ids, id)
		}
		r.reserved[id]++
	}
	sort.Slice(ids, func(i, j int) bool { return bytes.Compare(ids[i][:], ids[j][:]) < 0 })
	// One statement per shard on a Citus worker, which locks rows only in
	// a statement of one shard (lockGroups).
	groups, merchants := lockShardGroups(tx, ids)
	for g, ids := range groups {
		counts := make([]int32, len(ids))
		for i, id := range ids {
			counts[i] = int32(r.reserved[id])
		}
		b.Queue(pickupCountersInto(heldTable(tx, "pickup_counters", ids[0]))+`
		SELECT m.id, ($2::timestamptz AT TIME ZONE m.timezone)::date, ($3::int[])[array_position($1::uuid[], m.id)]
		FROM `+merchants[g]+` m WHERE m.id = ANY($1::uuid[])
		ORDER BY m.id
		FOR KEY SHARE OF m SKIP LOCKED
		`+pickupCountersTail, ids, clock, counts).Query(r.counters.scan)
	}
	return r
}

// check makes sure every merchant the batch decides for has numbers of its
// day in days, its local day at the decisions' time (pickupDays): the
// reservation read the day before the decisions' time was known.
func (r *pickupReservation) check(merchants map[uuid.UUID]*merchantRow, days map[uuid.UUID]string) error {
	for id := range merchants {
		if _, err := r.counters.lastOf(id); err != nil {
			return err
		}
		if days[id] != r.counters.day[id] {
			return errNumberLast
		}
	}
	return nil
}

// firsts returns, per merchant, the first number reserved for the
// placements made (stampPickupCodes gives them out), and counts what is
// left of each merchant's reservation.
func (r *pickupReservation) firsts(placed []*placement) map[uuid.UUID]int {
	made := map[uuid.UUID]int{}
	for _, pl := range placed {
		made[pl.p.MerchantID]++
	}
	firsts := make(map[uuid.UUID]int, len(r.counters.last))
	for id, last := range r.counters.last {
		firsts[id] = last - r.reserved[id] + 1
		if left := r.reserved[id] - made[id]; left > 0 {
			r.unused[id] = left
		}
	}
	return firsts
}

// addUnused adds to b the return of the numbers the batch did not use,
// which it still holds: a day's counter that has issued none is no row
// (deleted first, so that the decrement cannot be mistaken for it).
func (r *pickupReservation) addUnused(b *pgx.Batch) {
	for id, n := range r.unused {
		day := r.counters.day[id]
		b.Queue(`DELETE FROM pickup_counters WHERE merchant_id = $1 AND day = $2::date AND issued = $3`, id, day, n)
		b.Queue(`UPDATE pickup_counters SET issued = issued - $3 WHERE merchant_id = $1 AND day = $2::date AND issued > $3`, id, day, n)
	}
}

// advancePickupCounters takes counts[i] numbers of merchant ids[i]'s local
// day days[i], in key order, in a round trip of its own.
func advancePickupCounters(ctx context.Context, tx pgx.Tx, ids [][16]byte, days []string, counts []int32) (pickupCounters, error) {
	counters := newPickupCounters()
	b := &pgx.Batch{}
	insertRows{
		Into:    pickupCountersInto("pickup_counters"),
		Row:     `$1, $2::date, $3`,
		Columns: []column{col("uuid", ids), col("text", days), col("int", counts)},
		Ordered: true,
		Tail:    pickupCountersTail,
	}.addToHeldShards(tx, b, "pickup_counters", 0, counters.scan)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return counters, fmt.Errorf("advance pickup counters: %w", err)
	}
	return counters, nil
}

// numberAtPayment takes, for an order paid without a pickup code (placed
// before codes were numbered at placement), the next number of its
// merchant's day, the local day of its placement (domain.LocalDay), the day
// the audit checks its code against; the payment stamps the code
// (domain.PickupCode).
func numberAtPayment(ctx context.Context, tx pgx.Tx, merchantID uuid.UUID, day string) (int, error) {
	counters, err := advancePickupCounters(ctx, tx, [][16]byte{merchantID}, []string{day}, []int32{1})
	if err != nil {
		return 0, err
	}
	return counters.lastOf(merchantID)
}
