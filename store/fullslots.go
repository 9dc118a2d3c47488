package store

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store/pgkit"
)

// Refusing requests for full slots without their merchant's batch.
//
// When a race for a shop's slots has filled them, nearly every request is
// one for a full slot, and deciding it in the merchant's batch costs it a
// place in the merchant's serial lane and the batch's locks and statements
// for nothing. A process remembers the slots its batches left with no room
// (fullSlots), and a request for one of them is instead checked by one read
// shared by every such request that arrived meanwhile (checkKnownFull): no
// lock, no transaction. What the process remembers is only a guess, never
// trusted for a refusal: the read, taken after the request arrived, decides
// (domain.RefuseKnownFull), so that room given back by any process (a
// cancelled or closed order, a larger capacity) is seen by the next read,
// and a request the read does not refuse goes to its batch as before.

// maxKnownFull bounds the slots a process remembers; past it, it forgets
// those already started, and everything if that is not enough.
const maxKnownFull = 4096

// fullSlots are the slots this process last saw with no room left.
type fullSlots struct {
	mu    sync.Mutex
	known map[slotKey]domain.KnownFullSlot
}

func (f *fullSlots) get(k slotKey) (domain.KnownFullSlot, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	known, ok := f.known[k]
	return known, ok
}

func (f *fullSlots) note(full map[slotKey]domain.KnownFullSlot, now time.Time) {
	if len(full) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.known == nil || len(f.known)+len(full) > maxKnownFull {
		kept := map[slotKey]domain.KnownFullSlot{}
		for k, v := range f.known {
			if k.at.After(now) && len(kept) < maxKnownFull/2 {
				kept[k] = v
			}
		}
		f.known = kept
	}
	for k, v := range full {
		f.known[k] = v
	}
}

func (f *fullSlots) forget(k slotKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.known, k)
}

// fullCheck is a request for a slot known full, waiting for the read.
type fullCheck struct {
	p     *PlaceRequest
	slot  slotKey
	known domain.KnownFullSlot
	// seen is what the read found of the slot at now; read is false when
	// it found nothing.
	seen domain.SlotSeen
	now  time.Time
	read bool
	done chan struct{}
}

// maxFullCheckBatch bounds the requests one read checks.
const maxFullCheckBatch = 256

func newFullChecker(s *Store) *pgkit.Batcher[*fullCheck, struct{}] {
	return pgkit.NewBatcher[*fullCheck, struct{}](2, maxFullCheckBatch, s.checkFullBatch)
}

// checkKnownFull reads again the slot of a request for a slot this process
// saw full, for the placement to ask domain.RefuseKnownFull; nil, the
// request goes to its batch: its slot was not seen full, or the read
// failed. On Citus (node set) every request goes to its batch.
func (s *Store) checkKnownFull(ctx context.Context, p *PlaceRequest, node string) (*fullCheck, error) {
	if p.PickupAt == nil || node != "" {
		return nil, nil
	}
	slot := slotKey{p.MerchantID, p.PickupAt.UTC()}
	known, ok := s.full.get(slot)
	if !ok {
		return nil, nil
	}
	c := &fullCheck{p: p, slot: slot, known: known, done: make(chan struct{})}
	s.fullChecker.Submit(c)
	select {
	case <-c.done:
	case <-ctx.Done():
		return nil, mapErr(ctx.Err())
	}
	if !c.read {
		return nil, nil
	}
	return c, nil
}

// checkFullBatch reads, in one statement and so one snapshot taken after
// every request of the batch arrived, each request's slot room, its
// merchant's version and whether its key was recorded. A failed read
// reads nothing, and a slot seen with room is forgotten.
func (s *Store) checkFullBatch(batch []*fullCheck) {
	defer func() {
		for _, c := range batch {
			close(c.done)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), placeBatchTimeout)
	defer cancel()
	merchants, ats := make([][16]byte, len(batch)), make([]time.Time, len(batch))
	customers, keys := make([]string, len(batch)), make([]string, len(batch))
	for i, c := range batch {
		merchants[i], ats[i], customers[i], keys[i] = c.slot.merchant, c.slot.at, c.p.CustomerID, c.p.IdempotencyKey
	}
	rows, err := s.pool.Query(ctx, `SELECT r.i::int, s.capacity - s.taken, m.version,
			EXISTS (SELECT 1 FROM orders k WHERE k.merchant_id = r.m AND k.customer_id = r.c AND k.idempotency_key = r.key)
		FROM unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::text[]) WITH ORDINALITY AS r(m, at, c, key, i)
		JOIN merchants m ON m.id = r.m
		LEFT JOIN pickup_slots s ON s.merchant_id = r.m AND s.starts_at = r.at`, merchants, ats, customers, keys)
	if err != nil {
		// Their batches decide them, and meet the same trouble if it lasts.
		return
	}
	var i int
	var room *int
	var seen domain.SlotSeen
	seenOf := map[int]domain.SlotSeen{}
	_, err = pgx.ForEachRow(rows, []any{&i, &room, &seen.MerchantVersion, &seen.KeyRecorded}, func() error {
		// A slot without a row has all its room.
		seen.Room = 1
		if room != nil {
			seen.Room = *room
		}
		seenOf[i-1] = seen
		return nil
	})
	if err != nil {
		return
	}
	now := s.now()
	for i, c := range batch {
		seen, ok := seenOf[i]
		if !ok {
			continue
		}
		c.seen, c.now, c.read = seen, now, true
		if seen.Room > 0 || seen.MerchantVersion != c.known.MerchantVersion {
			s.full.forget(c.slot)
		}
	}
}
