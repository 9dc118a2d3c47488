package store

import (
	"bytes"
	"context"
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

// numberPlacements gives every placement of a batch its pickup code, in
// arrival order: the next numbers of its merchant's local day at now, the
// time the orders are placed at. A merchant's day is a row of
// pickup_counters that one statement advances by the batch's count of that
// merchant's placements and returns, once the batch knows which placements
// it makes; so a refused placement takes no number, a batch rolled back
// gives its numbers back, and batches of one merchant (in other lanes or
// processes, paid or not) wait for each other only from this statement to
// their commit. The rows are advanced in key order, so no two batches wait
// for each other. Each local day has its own row, so orders placed either
// side of midnight never share a numbering, whichever commits first.
func numberPlacements(ctx context.Context, tx pgx.Tx, placed []*placement, merchants map[uuid.UUID]*merchantRow, now time.Time) error {
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
	days, counts := make([]string, len(ids)), make([]int32, len(ids))
	for i, id := range ids {
		loc, err := merchants[id].location()
		if err != nil {
			return err
		}
		days[i], counts[i] = domain.LocalDay(now, loc), int32(len(byMerchant[id]))
	}
	last, err := advancePickupCounters(ctx, tx, ids, days, counts)
	if err != nil {
		return err
	}
	for id, pls := range byMerchant {
		issued, ok := last[id]
		if !ok {
			return fmt.Errorf("reserve pickup codes: no counter returned for merchant %s", id)
		}
		prefix := merchants[id].PickupPrefix
		for i, pl := range pls {
			pl.events = domain.StampPickupCode(pl.events, domain.PickupCode(prefix, issued-len(pls)+1+i))
			if pl.order, err = (domain.Order{}).Apply(pl.events...); err != nil {
				return err
			}
		}
	}
	return nil
}

// advancePickupCounters takes counts[i] numbers of merchant ids[i]'s local
// day days[i], in key order, and returns the last number each merchant
// took.
func advancePickupCounters(ctx context.Context, tx pgx.Tx, ids [][16]byte, days []string, counts []int32) (map[uuid.UUID]int, error) {
	rows, err := tx.Query(ctx, `
		INSERT INTO pickup_counters AS c (merchant_id, day, issued)
		SELECT m, d::date, n FROM unnest($1::uuid[], $2::text[], $3::int[]) WITH ORDINALITY AS t(m, d, n, i)
		ORDER BY i
		ON CONFLICT (merchant_id, day) DO UPDATE SET issued = c.issued + excluded.issued
		RETURNING merchant_id, issued`, ids, days, counts)
	if err != nil {
		return nil, fmt.Errorf("reserve pickup codes: %w", err)
	}
	last := make(map[uuid.UUID]int, len(ids))
	for rows.Next() {
		var id uuid.UUID
		var issued int
		if err := rows.Scan(&id, &issued); err != nil {
			return nil, fmt.Errorf("reserve pickup codes: %w", err)
		}
		last[id] = issued
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reserve pickup codes: %w", err)
	}
	return last, nil
}

// numberAtPayment gives an order paid without a pickup code (placed before
// codes were numbered at placement) the next number of its merchant's local
// day of placement, the day the audit checks its code against, in the
// order.paid event.
func numberAtPayment(ctx context.Context, tx pgx.Tx, o domain.Order, m *merchantRow, events []domain.Event) ([]domain.Event, error) {
	if !o.NeedsPickupCodeAtPayment() {
		return events, nil
	}
	loc, err := m.location()
	if err != nil {
		return nil, err
	}
	last, err := advancePickupCounters(ctx, tx, [][16]byte{m.ID}, []string{domain.LocalDay(o.PlacedAt, loc)}, []int32{1})
	if err != nil {
		return nil, err
	}
	issued, ok := last[m.ID]
	if !ok {
		return nil, fmt.Errorf("reserve pickup codes: no counter returned for merchant %s", m.ID)
	}
	return domain.StampPickupCode(events, domain.PickupCode(m.PickupPrefix, issued)), nil
}
