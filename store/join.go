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
	"github.com/orderd/orderd/store/pgkit"
)

// Joins are group-committed: concurrent joins share a transaction of two
// round trips (the drops' locks and the customers' entries with BEGIN; the
// entries, their events and COMMIT), which a pre-queue of tens of
// thousands of customers needs. A join waits only for a drop's transition
// (settleDrop holds the drop exclusively) or the batch before it on the
// same drop, and batches lock drops in id order, so two batches cannot wait
// for each other.
const (
	joinLanes    = 2
	maxJoinBatch = 256
)

// joinRequest is one join waiting for, or inside, a batch.
type joinRequest struct {
	merchantID uuid.UUID // the drop's
	dropID     uuid.UUID
	customerID string
	requestID  string
	done       chan struct{}

	// Filled by the batch: the new entry's view when it needs no read
	// (fresh), whether this join made the entry, or the error.
	fresh   *EntryView
	created bool
	err     error
}

// JoinResult is a join's answer: the entry, and whether this call made it.
type JoinResult struct {
	Entry   *EntryView
	Created bool
}

// JoinDrop records the customer's entry, or answers the one it has. The
// drop's row lock makes a join wait for a transition in progress: no entry joins a drop that has
// sold out, and none that joined before the start is missing from the draw.
// A caller that gives up may still have joined; joining again answers that
// entry.
func (s *Store) JoinDrop(ctx context.Context, dropID uuid.UUID, customerID, requestID string) (*JoinResult, error) {
	merchantID, err := s.dropMerchant(ctx, dropID)
	if err != nil {
		return nil, err
	}
	req := &joinRequest{merchantID: merchantID, dropID: dropID, customerID: customerID, requestID: requestID, done: make(chan struct{})}
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
	e, err := s.readEntry(ctx, s.pool, `e.merchant_id = $1 AND e.id = $2 AND e.drop_id = $3 AND e.customer_id = $4`,
		merchantID, domain.EntryID(dropID, customerID), dropID, customerID)
	if err != nil {
		return nil, err
	}
	return &JoinResult{Entry: e, Created: req.created}, nil
}

// maxKnownDrops bounds the drops whose merchant a store remembers.
const maxKnownDrops = 4096

// dropMerchant returns the drop's merchant, read without a lock the first
// time (a drop never changes merchant), so that the join's locks and
// writes name it.
func (s *Store) dropMerchant(ctx context.Context, dropID uuid.UUID) (uuid.UUID, error) {
	s.dropMu.Lock()
	m, ok := s.dropMerchants[dropID]
	s.dropMu.Unlock()
	if ok {
		return m, nil
	}
	err := s.pool.QueryRow(ctx, `SELECT merchant_id FROM drops WHERE id = $1`, dropID).Scan(&m)
	if errors.Is(err, pgx.ErrNoRows) {
		return uuid.Nil, errDropNotFound
	}
	if err != nil {
		return uuid.Nil, mapErr(fmt.Errorf("find drop's merchant: %w", err))
	}
	s.dropMu.Lock()
	if len(s.dropMerchants) >= maxKnownDrops {
		clear(s.dropMerchants)
	}
	s.dropMerchants[dropID] = m
	s.dropMu.Unlock()
	return m, nil
}

// joinBatch decides a batch of joins in one transaction: a batch of
// several merchants' on one PostgreSQL, of one merchant's on Citus
// (splitByMerchant).
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

// joinedEntriesSQL reads which of the entries (ids, one a customer, of
// merchants) exist already. On one PostgreSQL it probes drop_entries_id_idx
// once an entry (an entry's id is its drop's and customer's, so it names
// both): a drop's pre-queue fills faster than the table is analyzed, and a
// filter on the merchants, true of every entry of the drop, let the planner
// read all of the drop's entries instead, a read that grew with every batch
// of the line. The subquery's OFFSET keeps each probe a probe: a subquery
// PostgreSQL cannot flatten runs once an entry. On Citus the filter on the
// merchants routes it to their shard.
func joinedEntriesSQL(citus bool, ids, merchants []uuid.UUID) (string, []any) {
	if citus {
		return `SELECT id FROM drop_entries WHERE merchant_id = ANY($2) AND id = ANY($1)`, []any{ids, merchants}
	}
	return `SELECT e.id FROM unnest($1::uuid[]) AS t(id), LATERAL (SELECT id FROM drop_entries e WHERE e.id = t.id OFFSET 0) e`, []any{ids}
}

// dropLine is a ranked drop's line when a batch holds its lock: the
// entries ranked so far and the last one's joined_at, and the invitations.
type dropLine struct {
	ranked       int
	lastJoinedAt *time.Time
	invited      int
}

func (s *Store) joinInTx(ctx context.Context, tx *txn, pt *pgkit.PipelinedTx, batch []*joinRequest) error {
	seen, seenMerchant := map[uuid.UUID]bool{}, map[uuid.UUID]bool{}
	var dropIDs, merchantIDs []uuid.UUID
	ids := make([]uuid.UUID, 0, len(batch))
	for _, req := range batch {
		req.err, req.fresh, req.created = nil, nil, false
		if !seen[req.dropID] {
			seen[req.dropID] = true
			dropIDs = append(dropIDs, req.dropID)
		}
		if !seenMerchant[req.merchantID] {
			seenMerchant[req.merchantID] = true
			merchantIDs = append(merchantIDs, req.merchantID)
		}
		ids = append(ids, domain.EntryID(req.dropID, req.customerID))
	}
	sort.Slice(dropIDs, func(i, j int) bool { return bytes.Compare(dropIDs[i][:], dropIDs[j][:]) < 0 })

	// The first round trip, with BEGIN. Joins take their drops' rows in
	// no-key-update mode: they wait for a transition, which holds a drop
	// exclusively, and take turns with each other, so that a settle waiting
	// for the drop queues behind the batch in progress only (key-share
	// locks, which do not conflict with each other, let a stream of batches
	// starve it). The joins of a drop that ranks at join (fifo, or lottery
	// once drawn) also take its line's row, so that each batch numbers its
	// entries after the one before, whose entries the read of the
	// customers' entries then sees.
	// That read is by entry id (domain.EntryID), one probe an entry
	// (joinedEntriesSQL). Every statement names the batch's
	// merchants, so that on Citus, where a batch is one merchant's, each
	// goes to that merchant's shard.
	drops := map[uuid.UUID]domain.Drop{}
	lines := map[uuid.UUID]*dropLine{}
	existing := map[uuid.UUID]bool{}
	b := &pgx.Batch{}
	b.Queue(`SELECT `+dropColumns+` FROM drops d WHERE d.merchant_id = ANY($2) AND d.id = ANY($1) ORDER BY d.id FOR NO KEY UPDATE OF d`,
		dropIDs, merchantIDs).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			d, err := scanDrop(rows)
			if err != nil {
				return err
			}
			drops[d.DropID] = d
		}
		return rows.Err()
	})
	b.Queue(`SELECT l.drop_id, l.ranked, l.last_joined_at, l.invited FROM drops d
		JOIN drop_lines l ON l.merchant_id = d.merchant_id AND l.drop_id = d.id
		WHERE d.merchant_id = ANY($2) AND l.merchant_id = ANY($2) AND d.id = ANY($1) AND (d.mode = 'fifo' OR d.seed IS NOT NULL) ORDER BY l.drop_id FOR UPDATE OF l`,
		dropIDs, merchantIDs).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id uuid.UUID
			var l dropLine
			if err := rows.Scan(&id, &l.ranked, &l.lastJoinedAt, &l.invited); err != nil {
				return err
			}
			lines[id] = &l
		}
		return rows.Err()
	})
	joinedSQL, joinedArgs := joinedEntriesSQL(onCitusTx(tx), ids, merchantIDs)
	b.Queue(joinedSQL, joinedArgs...).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id uuid.UUID
			if err := rows.Scan(&id); err != nil {
				return err
			}
			existing[id] = true
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
		id := domain.EntryID(req.dropID, req.customerID)
		if existing[id] {
			continue // answered with the entry it has
		}
		if d.Ranked() && lines[req.dropID] == nil {
			return fmt.Errorf("drop %s has no line", req.dropID)
		}
		at, ok := joinedAt[req.dropID]
		if !ok {
			at = joinAt(d, lines[req.dropID], now)
			joinedAt[req.dropID] = at
		}
		events, err := domain.Join(d, id, req.customerID, at)
		if err != nil {
			req.err = err
			continue
		}
		existing[id] = true // a twin later in the batch answers this one's entry
		e, err := domain.Entry{}.Apply(events...)
		if err != nil {
			return err
		}
		m := meta
		m.Subject, m.RequestID = req.customerID, req.requestID
		made[req] = len(changes)
		changes = append(changes, entryChange{after: e, key: d.OrderKey(id, at), events: events, meta: m})
	}
	nudges, lineArgs := rankJoins(drops, lines, changes)
	for dropID := range nudges {
		// No entry was waiting: a unit may be free for the new ones at once.
		jobs = append(jobs, settleJob(drops[dropID].MerchantID, dropID, now))
	}
	if err := s.insertJobs(ctx, tx, jobs); err != nil {
		return err
	}
	// Inserts in one order, so that batches meeting on the same customers'
	// unique keys wait in line rather than for each other.
	ordered := append([]entryChange(nil), changes...)
	sort.Slice(ordered, func(i, j int) bool {
		a, b := ordered[i].after, ordered[j].after
		if c := bytes.Compare(a.DropID[:], b.DropID[:]); c != 0 {
			return c < 0
		}
		return a.CustomerID < b.CustomerID
	})
	inserted := map[uuid.UUID]bool{}
	b = &pgx.Batch{}
	if err := addEntries(tx, b, ordered, now, inserted); err != nil {
		return err
	}
	if len(lineArgs.drop) > 0 {
		b.Queue(`UPDATE drop_lines l SET ranked = t.ranked, last_joined_at = t.last
			FROM unnest($1::uuid[], $2::int[], $3::timestamptz[], $4::uuid[]) AS t(drop_id, ranked, last, merchant_id)
			WHERE l.merchant_id = t.merchant_id AND l.drop_id = t.drop_id AND l.merchant_id = ANY($4::uuid[])`,
			lineArgs.drop, lineArgs.ranked, lineArgs.last, lineArgs.merchant)
	}
	if len(changes) > 0 {
		noteEvents(tx)
	}
	if err := pt.CommitWith(ctx, b); err != nil {
		return fmt.Errorf("write entries: %w", err)
	}
	for req, i := range made {
		c := changes[i]
		if !inserted[c.after.ID] {
			continue // a concurrent join of the customer made the entry
		}
		req.created = true
		var pos *int
		if c.rank != nil {
			p := *c.rank - lines[req.dropID].invited
			pos = &p
		}
		v := entryView(c.after, c.rank, pos, drops[req.dropID].State)
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
	if l != nil && l.lastJoinedAt != nil && !at.After(*l.lastJoinedAt) {
		at = l.lastJoinedAt.Add(time.Microsecond)
	}
	return at
}

// lineUpdates are the lines a batch advances, column by column.
type lineUpdates struct {
	merchant, drop []uuid.UUID
	ranked         []int32
	last           []time.Time
}

// rankJoins numbers the new entries of each drop that ranks at join after
// its line's last ranked entry, in the order of their keys (one joined_at
// per drop and batch, so by id). It returns the drops in which no entry
// was waiting, and the lines' new counts.
func rankJoins(drops map[uuid.UUID]domain.Drop, lines map[uuid.UUID]*dropLine, changes []entryChange) (map[uuid.UUID]bool, lineUpdates) {
	byDrop := map[uuid.UUID][]int{}
	for i, c := range changes {
		if id := c.after.DropID; drops[id].Ranked() {
			byDrop[id] = append(byDrop[id], i)
		}
	}
	nudges := map[uuid.UUID]bool{}
	var up lineUpdates
	for dropID, idx := range byDrop {
		sort.Slice(idx, func(i, j int) bool {
			return domain.CompareOrderKeys(changes[idx[i]].key, changes[idx[j]].key) < 0
		})
		l := lines[dropID]
		if l.invited == l.ranked && drops[dropID].State == domain.DropStateSelling {
			// Nobody waits: a unit may be free for the new entries at once.
			nudges[dropID] = true
		}
		for _, i := range idx {
			l.ranked++
			r := l.ranked
			changes[i].rank = &r
		}
		up.merchant, up.drop = append(up.merchant, drops[dropID].MerchantID), append(up.drop, dropID)
		up.ranked = append(up.ranked, int32(l.ranked))
		up.last = append(up.last, changes[idx[len(idx)-1]].after.JoinedAt)
	}
	return nudges, up
}
