package store

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store/pgkit"
)

// Joins are group-committed: concurrent joins share a transaction of two
// round trips (the drops' key-share locks and the customers' entries with
// BEGIN; the entries, their events and COMMIT), which a pre-queue of tens of
// thousands of customers needs. Nothing in a join waits for anything but a
// drop's transition (settleDrop holds the drop exclusively) or a concurrent
// insert of the same customer's entry, and entries are inserted in
// (drop, customer) order, so two batches cannot wait for each other.
const (
	joinLanes    = 2
	maxJoinBatch = 256
)

// joinRequest is one join waiting for, or inside, a batch.
type joinRequest struct {
	dropID     uuid.UUID
	customerID string
	requestID  string
	done       chan struct{}

	// Filled by the batch: the new entry's view when it needs no read
	// (fresh), whether this join made the entry, or the error.
	fresh   *Entry
	created bool
	err     error
}

// JoinResult is a join's answer: the entry, and whether this call made it.
type JoinResult struct {
	Entry   *Entry
	Created bool
}

// JoinDrop records the customer's entry, or answers the one it has. The
// drop's key-share lock, which the entry's foreign key takes anyway, makes a
// join wait for a transition in progress: no entry joins a drop that has
// sold out, and none that joined before the start is missing from the draw.
// A caller that gives up may still have joined; joining again answers that
// entry.
func (s *Store) JoinDrop(ctx context.Context, dropID uuid.UUID, customerID, requestID string) (*JoinResult, error) {
	req := &joinRequest{dropID: dropID, customerID: customerID, requestID: requestID, done: make(chan struct{})}
	s.joiner.Submit(req)
	select {
	case <-req.done:
	case <-ctx.Done():
		return nil, mapErr(ctx.Err())
	}
	if req.err != nil {
		return nil, req.err
	}
	if req.fresh != nil {
		return &JoinResult{Entry: req.fresh, Created: true}, nil
	}
	e, err := s.MyEntry(ctx, dropID, customerID)
	if err != nil {
		return nil, err
	}
	return &JoinResult{Entry: e, Created: req.created}, nil
}

func (s *Store) joinBatch(batch []*joinRequest) {
	ctx, cancel := context.WithTimeout(context.Background(), placeBatchTimeout)
	defer cancel()
	err := s.inPipelinedTx(ctx, func(tx *txn, pt *pgkit.PipelinedTx) error { return s.joinInTx(ctx, tx, pt, batch) })
	if err != nil && len(batch) > 1 && domain.ErrorCode(err) != domain.CodeUnavailable {
		// One request's unexpected failure must not fail the others.
		for _, req := range batch {
			s.joinBatch([]*joinRequest{req})
		}
		return
	}
	for _, req := range batch {
		if err != nil {
			req.err, req.fresh, req.created = err, nil, false
		}
		close(req.done)
	}
}

type dropCustomer struct {
	drop     uuid.UUID
	customer string
}

// dropLine is where a drop's line stands when a batch holds its lock: the
// last ranked entry, and the best rank still waiting.
type dropLine struct {
	lastRank     *int
	lastJoinedAt *time.Time
	firstWaiting *int
}

func (s *Store) joinInTx(ctx context.Context, tx *txn, pt *pgkit.PipelinedTx, batch []*joinRequest) error {
	seen := map[uuid.UUID]bool{}
	var dropIDs []uuid.UUID
	pairDrops, pairCustomers := make([]uuid.UUID, 0, len(batch)), make([]string, 0, len(batch))
	for _, req := range batch {
		req.err, req.fresh, req.created = nil, nil, false
		if !seen[req.dropID] {
			seen[req.dropID] = true
			dropIDs = append(dropIDs, req.dropID)
		}
		pairDrops, pairCustomers = append(pairDrops, req.dropID), append(pairCustomers, req.customerID)
	}
	sort.Slice(dropIDs, func(i, j int) bool { return dropIDs[i].String() < dropIDs[j].String() })

	// The first round trip, with BEGIN. Joins of one drop take its row in
	// no-key-update mode: they wait for each other, so that each numbers its
	// entries after the last batch's, and for a transition, which holds the
	// row exclusively; they do not wait for the key-share locks of the
	// entries' and orders' foreign keys. The statements after the lock read
	// what the batch before committed.
	drops := map[uuid.UUID]domain.Drop{}
	lines := map[uuid.UUID]*dropLine{}
	existing := map[dropCustomer]bool{}
	b := &pgx.Batch{}
	b.Queue(`SELECT `+dropColumns+` FROM drops d WHERE d.id = ANY($1) ORDER BY d.id FOR NO KEY UPDATE OF d`, dropIDs).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			d, err := scanDrop(rows)
			if err != nil {
				return err
			}
			drops[uuid.MustParse(d.DropID)] = d
		}
		return rows.Err()
	})
	b.Queue(`SELECT d.id, l.rank, l.joined_at, w.rank FROM drops d
		LEFT JOIN LATERAL (SELECT e.rank, e.joined_at FROM drop_entries e
			WHERE e.merchant_id = d.merchant_id AND e.drop_id = d.id AND e.rank IS NOT NULL ORDER BY e.rank DESC LIMIT 1) l ON true
		LEFT JOIN LATERAL (SELECT e.rank FROM drop_entries e
			WHERE e.merchant_id = d.merchant_id AND e.drop_id = d.id AND e.status = 'waiting' AND e.rank IS NOT NULL ORDER BY e.rank LIMIT 1) w ON true
		WHERE d.id = ANY($1)`, dropIDs).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id uuid.UUID
			var l dropLine
			if err := rows.Scan(&id, &l.lastRank, &l.lastJoinedAt, &l.firstWaiting); err != nil {
				return err
			}
			lines[id] = &l
		}
		return rows.Err()
	})
	b.Queue(`SELECT e.drop_id, e.customer_id FROM unnest($1::uuid[], $2::text[]) AS t(d, c)
		JOIN drops d ON d.id = t.d
		JOIN drop_entries e ON e.merchant_id = d.merchant_id AND e.drop_id = d.id AND e.customer_id = t.c`, pairDrops, pairCustomers).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var k dropCustomer
			if err := rows.Scan(&k.drop, &k.customer); err != nil {
				return err
			}
			existing[k] = true
		}
		return rows.Err()
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("read drops: %w", err)
	}
	// The decisions' time, read once the drops' locks are held.
	now := s.now()
	meta := Meta{Actor: domain.ActorCustomer}
	var changes []entryChange
	made := map[*joinRequest]int{}
	var jobs []river.InsertManyParams
	joinedAt := map[uuid.UUID]time.Time{}
	for _, req := range batch {
		d, ok := drops[req.dropID]
		if !ok {
			req.err = errDropNotFound
			continue
		}
		k := dropCustomer{req.dropID, req.customerID}
		if existing[k] {
			continue // answered with the entry it has
		}
		at, ok := joinedAt[req.dropID]
		if !ok {
			at = joinAt(d, lines[req.dropID], now)
			joinedAt[req.dropID] = at
		}
		id := newID()
		events, err := domain.Join(d, id.String(), req.customerID, at)
		if err != nil {
			req.err = err
			continue
		}
		existing[k] = true // a twin later in the batch answers this one's entry
		e, err := domain.Entry{}.Apply(events...)
		if err != nil {
			return err
		}
		m := meta
		m.Subject, m.RequestID = req.customerID, req.requestID
		made[req] = len(changes)
		changes = append(changes, entryChange{after: e, key: domain.OrderKey(d.Mode, d.StartsAt, d.Seed, id, at), events: events, meta: m})
	}
	nudges := rankJoins(drops, lines, changes)
	for dropID := range nudges {
		// No entry was waiting: a unit may be free for the new ones at once.
		jobs = append(jobs, settleJob(uuid.MustParse(drops[dropID].MerchantID), dropID, now))
	}
	if err := s.insertJobs(ctx, tx, jobs); err != nil {
		return err
	}
	// Inserts in one order, so that batches meeting on the same customers'
	// unique keys wait in line rather than for each other.
	ordered := append([]entryChange(nil), changes...)
	sort.Slice(ordered, func(i, j int) bool {
		a, b := ordered[i].after, ordered[j].after
		return a.DropID < b.DropID || (a.DropID == b.DropID && a.CustomerID < b.CustomerID)
	})
	inserted := map[uuid.UUID]bool{}
	b = &pgx.Batch{}
	if err := queueEntries(b, ordered, now, inserted); err != nil {
		return err
	}
	if len(changes) > 0 {
		noteEvents(tx)
	}
	if err := pt.CommitWith(ctx, b); err != nil {
		return fmt.Errorf("write entries: %w", err)
	}
	for req, i := range made {
		c := changes[i]
		if !inserted[uuid.MustParse(c.after.ID)] {
			continue // a concurrent join of the customer made the entry
		}
		req.created = true
		var pos *int
		if c.rank != nil {
			first := *lines[req.dropID].firstWaiting
			p := *c.rank - first + 1
			pos = &p
		}
		v := entryView(c.after, c.rank, pos)
		req.fresh = &v
	}
	return nil
}

// joinAt is the joined_at of a batch's new entries of drop d. An entry the
// join ranks (a fifo drop's, or any once the draw is done) joins after the
// last ranked one, so that ranks follow joined_at even when another
// process's clock ran ahead; and one joining a drop that another process
// already started ranks after the draw, not in it.
func joinAt(d domain.Drop, l *dropLine, now time.Time) time.Time {
	at := now
	if d.State == domain.DropStateSelling && at.Before(d.StartsAt) {
		at = d.StartsAt
	}
	if d.Ranked() && l != nil && l.lastJoinedAt != nil && !at.After(*l.lastJoinedAt) {
		at = l.lastJoinedAt.Add(time.Microsecond)
	}
	return at
}

// rankJoins numbers the new entries of each drop that ranks at join after
// its last ranked entry, in the order of their keys (one joined_at per
// drop and batch, so by id), and sets each line's best waiting rank when
// none was waiting. It returns the drops that had no entry waiting.
func rankJoins(drops map[uuid.UUID]domain.Drop, lines map[uuid.UUID]*dropLine, changes []entryChange) map[uuid.UUID]bool {
	byDrop := map[uuid.UUID][]int{}
	for i, c := range changes {
		id := uuid.MustParse(c.after.DropID)
		if drops[id].Ranked() {
			byDrop[id] = append(byDrop[id], i)
		}
	}
	nudges := map[uuid.UUID]bool{}
	for dropID, idx := range byDrop {
		sort.Slice(idx, func(i, j int) bool {
			return domain.CompareOrderKeys(changes[idx[i]].key, changes[idx[j]].key) < 0
		})
		l := lines[dropID]
		next := 1
		if l.lastRank != nil {
			next = *l.lastRank + 1
		}
		if l.firstWaiting == nil {
			first := next
			l.firstWaiting = &first
			if drops[dropID].State == domain.DropStateSelling {
				nudges[dropID] = true
			}
		}
		for _, i := range idx {
			r := next
			changes[i].rank = &r
			next++
		}
	}
	return nudges
}
