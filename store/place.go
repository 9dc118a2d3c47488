package store

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store/pgkit"
)

// PlaceRequest describes a placement request.
type PlaceRequest struct {
	MerchantID     uuid.UUID
	CustomerID     string
	Lines          []domain.LineRequest
	PaymentRef     string
	IdempotencyKey string
	// RequestHash identifies the request body for idempotency: the same key
	// with another body is refused.
	RequestHash []byte
	RequestID   string
	// Lane is the lane the order queues in; "" is the normal lane.
	Lane domain.Lane
	// PickupAt is the pickup slot the order is for; nil is as soon as
	// possible.
	PickupAt *time.Time
}

// PlaceResult is the answer to a placement.
type PlaceResult struct {
	Order    *OrderView
	Replayed bool
}

// placement is one request waiting for, or inside, a batch.
type placement struct {
	p       PlaceRequest
	orderID uuid.UUID
	done    chan struct{}
	// node is the Citus worker holding the merchant's rows (merchantNode);
	// "" on one PostgreSQL.
	node string
	// deadline is the caller's (zero: none). No batch runs past the last
	// deadline of its requests: nobody waits for its outcome any longer.
	deadline time.Time
	// state settles who decides when the caller's deadline and the commit
	// meet: a caller that gives up first abandons the request, which the
	// batch then leaves out; a batch about to commit claims it first, and
	// the caller waits for the outcome. A request answered 503 never commits.
	state atomic.Int32

	// Filled by the batch.
	result   *PlaceResult
	err      error
	replayOf uuid.UUID
	// twin is an earlier request of the same batch with the same key: this
	// one answers as its replay.
	twin *placement
	// retry says the batch did not decide this request, and where it goes
	// next.
	retry  retryKind
	order  domain.Order
	events []domain.Event
	jobs   []river.InsertManyParams
	// entries are the drop entries the order claims or purchases.
	entries []entryChange
	// answer is what the placement's answer is made of besides the order,
	// which is complete once the batch has numbered it.
	answer answerBasis
}

// answerBasis is the order's place in line as the placement decided it
// (domain.PlaceOnJoining) and the line's sequence then.
type answerBasis struct {
	place   *domain.LinePlace
	lineSeq int64
}

// PlaceOrder reserves stock, records the order and, with a payment reference,
// pays and admits or queues it, all in one transaction with its timers. Its
// lane's batch (placebatch.go) decides it with the requests that arrived
// meanwhile, here in this file: placeInTx for the batch, placeOne for each
// request, which asks domain's rules.
func (s *Store) PlaceOrder(ctx context.Context, p PlaceRequest) (*PlaceResult, error) {
	if err := domain.ValidateLines(p.Lines); err != nil {
		return nil, err
	}
	node, err := s.merchantNode(ctx, p.MerchantID)
	if err != nil {
		return nil, err
	}
	full, err := s.checkKnownFull(ctx, &p, node)
	if err != nil {
		return nil, err
	}
	if full != nil {
		if err := domain.RefuseKnownFull(full.known, full.seen, full.slot.at, full.now); err != nil {
			return nil, err
		}
	}
	pl := &placement{p: p, orderID: newID(), done: make(chan struct{}), node: node}
	pl.deadline, _ = ctx.Deadline()
	s.placers[laneOf(pl)].Submit(pl)
	select {
	case <-pl.done:
	case <-ctx.Done():
		if pl.state.CompareAndSwap(statePending, stateAbandoned) {
			return nil, mapErr(ctx.Err())
		}
		<-pl.done
	}
	if pl.err != nil {
		return nil, pl.err
	}
	if pl.replayOf != uuid.Nil {
		// domain.CheckReplay decided the replay (resolveReplay); the answer
		// is the key's order as it is now, which its customer may see.
		o, err := readOrder(ctx, s.pool, pl.replayOf)
		if err != nil {
			return nil, mapErr(err)
		}
		if !(domain.Party{Actor: domain.ActorCustomer, Subject: p.CustomerID}).MaySeeOrder(o.CustomerID, o.MerchantID) {
			return nil, errOrderNotFound
		}
		o.showPlace(domain.PlaceInLine(o.line))
		return &PlaceResult{Order: o, Replayed: true}, nil
	}
	return pl.result, nil
}

// placeInTx decides a batch in arrival order and returns its writes, for
// the caller to send with the commit. Locks follow the store's order:
// merchants (sorted), then either the pickup counters (sorted) and nothing
// more, or per request its claims and stock buckets and the pickup counters
// last; the orders' idempotency keys are entered with the commit's writes
// (addKeyReads). The decisions' time is read once the merchants' locks are
// held.
func (s *Store) placeInTx(ctx context.Context, tx pgx.Tx, pt *pgkit.PipelinedTx, batch []*placement, mode batchMode) (*pgx.Batch, error) {
	for _, pl := range batch {
		pl.err, pl.replayOf, pl.twin, pl.result, pl.events, pl.jobs, pl.retry, pl.entries, pl.answer = nil, uuid.Nil, nil, nil, nil, nil, decided, nil, answerBasis{}
	}
	// One round trip reads or locks everything the decisions need: the
	// keys' orders, then the merchants, then the products, in the store's
	// lock order, and, unless the batch numbers last, its pickup numbers.
	// Merchants and products are read for every request, even those the
	// keys turn out to be replays of.
	b := &pgx.Batch{}
	merchantIDs, productIDs := batchMerchantIDs(batch), batchProductIDs(batch)
	holdShards(tx, b, merchantIDs)
	keys := addKeyReads(tx, b, batch)
	locked := addBatchMerchants(tx, b, batch, mode.waitForMerchants)
	products := s.addBatchProducts(tx, b, merchantIDs, productIDs)
	sums := addStockSums(b, batch, func(id uuid.UUID) bool { _, ok := s.stockProducts.Load(id); return ok })
	var numbers *pickupReservation
	if !mode.numberLast && s.mayNumberFirst(ctx, batch) {
		numbers = reservePickupNumbers(tx, b, batch, s.now())
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("read for placement: %w", err)
	}
	if err := readMissingProducts(ctx, tx, productIDs, products); err != nil {
		return nil, err
	}
	merchants := locked.rows
	now := domain.DecisionTime(s.now(), locked.lastDecisions()...)
	s.noteStockProducts(products)
	days, err := pickupDays(merchants, now)
	if err != nil {
		return nil, err
	}
	if numbers != nil {
		if err := numbers.check(merchants, days); err != nil {
			return nil, err
		}
	}
	live, slots, err := takeSlots(ctx, tx, keys.resolve(batch), merchants, products, now)
	if err != nil {
		return nil, err
	}
	// Before the commit: what is remembered is checked before every use.
	s.full.note(slots.full, now)
	var placed []*placement
	memo := newStockMemo()
	for id, left := range sums {
		if left == 0 {
			// Sold out when the batch began: the batch answers from memory.
			memo.set(id, 0)
		}
	}
	var takers []*placement
	var lines []domain.StockLine
	if numbers == nil {
		takers, lines = batchTakers(live, merchants, products, memo, sums)
	}
	stock, err := takeBatchStock(ctx, tx, memo, takers, lines)
	if err != nil {
		return nil, err
	}
	// A merchant with a paid request deferred: its later paid requests of
	// this batch are deferred too, to be decided after it.
	behind := map[uuid.UUID]bool{}
	for _, pl := range live {
		m := merchants[pl.p.MerchantID]
		if m == nil && !mode.waitForMerchants {
			// Locked by another transaction (or missing, which the
			// merchant's waiter finds out without holding up the lane).
			pl.retry = lockedElsewhere
			continue
		}
		paid := domain.PlacementTakesMerchantLock(pl.p.PaymentRef)
		if paid && behind[pl.p.MerchantID] {
			pl.retry = stockHeldElsewhere
			stock.giveBack(pl)
			continue
		}
		var err error
		if numbers != nil && takesStock(pl, products) {
			// Holding pickup counters, the batch may wait for no stock.
			err = errStockHeldElsewhere
		} else {
			err = s.placeOne(ctx, tx, pl, m, products, stock, now)
		}
		if errors.Is(err, errStockHeldElsewhere) {
			pl.retry = stockHeldElsewhere
			behind[pl.p.MerchantID] = behind[pl.p.MerchantID] || paid
			stock.giveBack(pl)
			continue
		}
		if err != nil {
			var de *domain.Error
			if !errors.As(err, &de) {
				return nil, err
			}
			pl.err = err
			stock.giveBack(pl)
			continue
		}
		placed = append(placed, pl)
	}
	for _, pl := range batch {
		// A twin answers with its first, once that is decided.
		if pl.twin != nil && pl.twin.retry != decided {
			pl.retry = pl.twin.retry
		}
	}
	b = &pgx.Batch{}
	stock.addReturns(b)
	slots.addTaken(b, placed)
	if numbers != nil {
		if err := stampPickupCodes(placed, merchants, numbers.firsts(placed)); err != nil {
			return nil, err
		}
		numbers.addUnused(b)
	}
	if len(placed) == 0 {
		return b, nil
	}
	var jobs []river.InsertManyParams
	for _, pl := range placed {
		jobs = append(jobs, pl.jobs...)
	}
	if err := s.insertJobsWithCommit(ctx, tx, pt, jobs); err != nil {
		return nil, err
	}
	if numbers == nil {
		// Last, so that the counters' row locks are held only until the commit.
		firsts, err := takePickupNumbers(ctx, tx, placed, days)
		if err != nil {
			return nil, err
		}
		if err := stampPickupCodes(placed, merchants, firsts); err != nil {
			return nil, err
		}
	}
	for _, pl := range placed {
		view := toView(pl.order)
		view.lineSeq = pl.answer.lineSeq
		view.showPlace(pl.answer.place)
		pl.result = &PlaceResult{Order: &view}
	}
	if err := addPlacements(tx, b, placed, merchants, now); err != nil {
		return nil, err
	}
	var entries []entryChange
	for _, pl := range placed {
		entries = append(entries, pl.entries...)
	}
	if err := addEntries(tx, b, entries, now, nil); err != nil {
		return nil, err
	}
	addLoads(tx, b, merchants, now)
	return b, nil
}

// takeSlots is the placement step of opening hours and pickup slots: it
// refuses, with their errors, the requests that may not be placed at now
// (domain.CheckPlacementTime) and those whose slot has no room left for
// their load (domain.FitSlots), and returns the others. lockSlots reads the
// room under the slots' locks; the batch's placements take it with the
// commit (addTaken), which the table's CHECK backs. Requests of merchants
// the batch does not hold are left to the step that parks them.
func takeSlots(ctx context.Context, tx pgx.Tx, live []*placement, merchants map[uuid.UUID]*merchantRow,
	products map[uuid.UUID]productInfo, now time.Time,
) ([]*placement, *slotTakes, error) {
	takes := &slotTakes{took: map[*placement]slotTake{}}
	kept := live[:0:0]
	var wanting []*placement
	wants := map[*placement]slotTake{}
	capacities := map[slotKey]int{}
	for _, pl := range live {
		m := merchants[pl.p.MerchantID]
		if m == nil || (pl.p.PickupAt == nil && len(m.Hours) == 0) {
			kept = append(kept, pl)
			continue
		}
		loc, err := m.location()
		if err != nil {
			return nil, nil, err
		}
		if err := domain.CheckPlacementTime(m.settings(), loc, pl.p.PickupAt, now); err != nil {
			pl.err = err
			continue
		}
		kept = append(kept, pl)
		if pl.p.PickupAt != nil {
			want := slotTake{slot: slotKey{m.ID, pl.p.PickupAt.UTC()}, load: requestLoad(m, pl.p.Lines, products)}
			wanting, wants[pl], capacities[want.slot] = append(wanting, pl), want, m.Slots.Capacity
		}
	}
	if len(wanting) == 0 {
		return kept, takes, nil
	}
	room, err := lockSlots(ctx, tx, capacities)
	if err != nil {
		return nil, nil, err
	}
	slots, loads := make([]slotKey, len(wanting)), make([]int, len(wanting))
	for i, pl := range wanting {
		slots[i], loads[i] = wants[pl].slot, wants[pl].load
	}
	for i, fits := range domain.FitSlots(room, slots, loads) {
		pl := wanting[i]
		if fits {
			takes.took[pl] = wants[pl]
		} else {
			pl.err = domain.SlotFullError(wants[pl].slot.at)
		}
	}
	if takes.full, err = knownFull(room, merchants); err != nil {
		return nil, nil, err
	}
	placeable := kept[:0:0]
	for _, pl := range kept {
		if pl.err == nil {
			placeable = append(placeable, pl)
		}
	}
	return placeable, takes, nil
}

// requestLoad is the load the order of lines will have at m, options
// included (domain.RequestLoad, as domain.Place fixes it); an unknown
// product weighs the default, and its request is refused later.
func requestLoad(m *merchantRow, lines []domain.LineRequest, products map[uuid.UUID]productInfo) int {
	refs := make(map[uuid.UUID]domain.ProductRef, len(lines))
	for _, l := range lines {
		if p, ok := products[l.ProductID]; ok {
			refs[l.ProductID] = p.ProductRef
		}
	}
	return domain.RequestLoad(m.CapacityUnit, lines, refs)
}

func batchProductIDs(batch []*placement) []uuid.UUID {
	seen := make(map[uuid.UUID]bool, 2*len(batch))
	ids := make([]uuid.UUID, 0, 2*len(batch))
	for _, pl := range batch {
		for _, l := range pl.p.Lines {
			if !seen[l.ProductID] {
				seen[l.ProductID] = true
				ids = append(ids, l.ProductID)
			}
		}
	}
	return ids
}

// batchMerchantIDs are the batch's merchants as pgx's native uuid, which it
// encodes without calling uuid.UUID's driver.Valuer per element.
func batchMerchantIDs(batch []*placement) [][16]byte {
	seen := make(map[uuid.UUID]bool, len(batch))
	ids := make([][16]byte, 0, len(batch))
	for _, pl := range batch {
		if !seen[pl.p.MerchantID] {
			seen[pl.p.MerchantID] = true
			ids = append(ids, pl.p.MerchantID)
		}
	}
	return ids
}

// customerKey is an idempotency key's scope: a customer's key at a merchant.
type customerKey struct {
	merchant      uuid.UUID
	customer, key string
}

// keyedOrder is the order a key was recorded with, and its request's hash.
type keyedOrder struct {
	id   uuid.UUID
	hash []byte
}

// keyReads is the read of a batch's idempotency keys, queued in a batch.
type keyReads struct {
	first map[customerKey]*placement
	found map[customerKey]keyedOrder
}

// keyReadSQL reads the orders recorded with keys, one probe of
// orders_idempotency_key_idx a key. Each probe is a subquery of its own
// (LATERAL … LIMIT 1, which the planner does not flatten into a join):
// as a join, the plan cached for the statement on a fresh database, whose
// orders fill faster than autovacuum analyzes them, hashed the keys against
// a scan of every order. Through a table Citus distributes, a join with the
// merchants' list lets Citus route it to their shards instead.
func keyReadSQL(table string, route bool) string {
	if route {
		return `SELECT k.m, k.c, k.key, o.id, o.request_hash
			FROM unnest($1::uuid[], $2::text[], $3::text[]) AS k(m, c, key)
			JOIN ` + table + ` o ON o.merchant_id = k.m AND o.customer_id = k.c AND o.idempotency_key = k.key
			WHERE o.merchant_id = ANY($1::uuid[])`
	}
	return `SELECT k.m, k.c, k.key, o.id, o.request_hash
		FROM unnest($1::uuid[], $2::text[], $3::text[]) AS k(m, c, key)
		CROSS JOIN LATERAL (SELECT o.id, o.request_hash FROM ` + table + ` o
			WHERE o.merchant_id = k.m AND o.customer_id = k.c AND o.idempotency_key = k.key LIMIT 1) o`
}

// addKeyReads adds to b the read of the orders recorded with the batch's
// keys: a key is kept on its order's row (orders_idempotency_key_idx), so a
// request's key is recorded with its order and only then, and a refused
// request leaves nothing behind and may be sent again with its key. The
// read takes no lock: a request whose key another transaction is placing
// meanwhile is decided as new, and its order's insert, with the commit,
// waits for that transaction; if that one commits, the unique index refuses
// the insert and the whole batch runs again (isRetryable), reading the key
// as a replay.
func addKeyReads(tx pgx.Tx, b *pgx.Batch, batch []*placement) *keyReads {
	c := &keyReads{first: make(map[customerKey]*placement, len(batch)), found: map[customerKey]keyedOrder{}}
	merchants, customers, keys := make([][16]byte, 0, len(batch)), make([]string, 0, len(batch)), make([]string, 0, len(batch))
	for _, pl := range batch {
		key := keyOf(pl)
		if _, dup := c.first[key]; dup {
			continue
		}
		c.first[key] = pl
		merchants, customers, keys = append(merchants, pl.p.MerchantID), append(customers, pl.p.CustomerID), append(keys, pl.p.IdempotencyKey)
	}
	groups, tables := heldShardRows(tx, "orders", merchants)
	for g, rows := range groups {
		ms, cs, ks := merchants, customers, keys
		if len(groups) > 1 {
			ms, cs, ks = make([][16]byte, len(rows)), make([]string, len(rows)), make([]string, len(rows))
			for i, r := range rows {
				ms[i], cs[i], ks[i] = merchants[r], customers[r], keys[r]
			}
		}
		route := onCitusTx(tx) && tables[g] == pgx.Identifier{"orders"}.Sanitize()
		b.Queue(keyReadSQL(tables[g], route), ms, cs, ks).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var k customerKey
				var o keyedOrder
				if err := rows.Scan(&k.merchant, &k.customer, &k.key, &o.id, &o.hash); err != nil {
					return fmt.Errorf("read idempotency keys: %w", err)
				}
				c.found[k] = o
			}
			if err := rows.Err(); err != nil {
				return fmt.Errorf("read idempotency keys: %w", err)
			}
			return nil
		})
	}
	return c
}

func keyOf(pl *placement) customerKey {
	return customerKey{pl.p.MerchantID, pl.p.CustomerID, pl.p.IdempotencyKey}
}

// resolve returns the requests whose keys are new and answers the others
// (domain.CheckReplay): a key recorded with an order replays that order or
// refuses another body, and so does a key an earlier request of the batch
// has, whose answer the later one shares (its twin).
func (c *keyReads) resolve(batch []*placement) []*placement {
	var live []*placement
	for _, pl := range batch {
		key := keyOf(pl)
		if o, ok := c.found[key]; ok {
			if err := domain.CheckReplay(o.hash, pl.p.RequestHash); err != nil {
				pl.err = err
			} else {
				pl.replayOf = o.id
			}
			continue
		}
		if first := c.first[key]; first != pl {
			if err := domain.CheckReplay(first.p.RequestHash, pl.p.RequestHash); err != nil {
				pl.err = err
			} else {
				pl.twin = first
			}
			continue
		}
		live = append(live, pl)
	}
	return live
}

// addBatchMerchants adds the read of the batch's merchants to b, locking
// in id order those that will make admission decisions and sharing the key
// lock of the others. A merchant read is one that exists: merchants are
// never deleted (migration 23), so new orders need no foreign key to check
// it again. Unless told to wait, a merchant whose row another transaction
// holds is left out of the rows. On a Citus worker each shard's merchants
// are locked by a statement of their own, on the shard by its name once
// the batch holds it (lockShardGroups).
func addBatchMerchants(tx pgx.Tx, b *pgx.Batch, batch []*placement, wait bool) *merchantLocks {
	var lock, share [][16]byte
	seen := map[uuid.UUID]bool{}
	for _, pl := range batch {
		if domain.PlacementTakesMerchantLock(pl.p.PaymentRef) && !seen[pl.p.MerchantID] {
			seen[pl.p.MerchantID] = true
			lock = append(lock, pl.p.MerchantID)
		}
	}
	for _, pl := range batch {
		if !seen[pl.p.MerchantID] {
			seen[pl.p.MerchantID] = true
			share = append(share, pl.p.MerchantID)
		}
	}
	skip := ` SKIP LOCKED`
	if wait {
		skip = ``
	}
	var locks merchantLocks
	for _, q := range []struct {
		ids [][16]byte
		sql string
	}{
		{lock, ` WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE` + skip},
		{share, ` WHERE id = ANY($1) ORDER BY id FOR KEY SHARE` + skip},
	} {
		if len(q.ids) == 0 {
			continue
		}
		groups, tables := lockShardGroups(tx, q.ids)
		for i, ids := range groups {
			locks.addTo(b, `SELECT `+merchantColumns+` FROM `+tables[i]+q.sql, ids)
		}
	}
	return &locks
}

// pickupDays is each merchant's local day at now, the day whose pickup
// numbers its placements take (domain.LocalDay), so that codes never repeat
// within a day and each day starts its own numbering.
func pickupDays(merchants map[uuid.UUID]*merchantRow, now time.Time) (map[uuid.UUID]string, error) {
	days := make(map[uuid.UUID]string, len(merchants))
	for id, m := range merchants {
		loc, err := m.location()
		if err != nil {
			return nil, err
		}
		days[id] = domain.LocalDay(now, loc)
	}
	return days, nil
}

// stampPickupCodes gives the placements, in arrival order, their merchants'
// pickup codes (domain.PickupCode), each merchant's numbered on from its
// first number in firsts.
func stampPickupCodes(placed []*placement, merchants map[uuid.UUID]*merchantRow, firsts map[uuid.UUID]int) error {
	next := make(map[uuid.UUID]int, len(firsts))
	for _, pl := range placed {
		id := pl.p.MerchantID
		first, ok := firsts[id]
		if !ok {
			return fmt.Errorf("pickup numbers: none taken for merchant %s", id)
		}
		pl.events = domain.StampPickupCode(pl.events, domain.PickupCode(merchants[id].PickupPrefix, first+next[id]))
		next[id]++
		var err error
		if pl.order, err = (domain.Order{}).Apply(pl.events...); err != nil {
			return err
		}
	}
	return nil
}

// claimInvitations attaches the order being placed to the customer's
// invitation in the drop of every product that has one, or refuses it: a
// drop's product is sold only to its invited customers, one unit, one order
// per invitation, before the window ends (domain.ClaimInvitation). It
// returns the entries' changes and their purchase windows' ends, which
// bound the order's payment deadline (domain.PaymentDeadline).
func claimInvitations(ctx context.Context, tx pgx.Tx, merchantID uuid.UUID, products map[uuid.UUID]productInfo,
	lines []domain.LineRequest, customerID string, orderID uuid.UUID, now time.Time,
) ([]entryChange, []time.Time, error) {
	var changes []entryChange
	var windowEnds []time.Time
	for _, l := range lines {
		dropID := products[l.ProductID].dropID
		if dropID == uuid.Nil {
			continue
		}
		entries, err := lockEntries(ctx, tx, `e.merchant_id = $1 AND e.drop_id = $2 AND e.customer_id = $3 FOR UPDATE`,
			merchantID, dropID, customerID)
		if err != nil {
			return nil, nil, err
		}
		events, err := domain.ClaimInvitation(l, entries, customerID, orderID, now)
		if err != nil {
			return nil, nil, err
		}
		c, _, err := newEntryChange(entries[0], events, Meta{Actor: domain.ActorCustomer, Subject: customerID})
		if err != nil {
			return nil, nil, err
		}
		changes = append(changes, c)
		windowEnds = append(windowEnds, *c.after.PurchaseDeadline)
	}
	return changes, windowEnds, nil
}

// placeOne decides one request and reserves its stock; a refused request
// leaves nothing behind in the shared transaction.
func (s *Store) placeOne(ctx context.Context, tx pgx.Tx, pl *placement, m *merchantRow, products map[uuid.UUID]productInfo, stock *batchStock, now time.Time) error {
	if m == nil {
		return domain.Errorf(domain.CodeNotFound, "merchant not found")
	}
	if m.pause.Refuses() {
		return domain.MerchantPausedError(m.pause, now)
	}
	refs := make(map[uuid.UUID]domain.ProductRef, len(pl.p.Lines))
	guarded := false
	for _, l := range pl.p.Lines {
		if pi, ok := products[l.ProductID]; ok {
			refs[l.ProductID] = pi.ProductRef
			guarded = guarded || pi.limited || pi.perUserLimit != nil
		}
	}
	entries, windowEnds, err := claimInvitations(ctx, tx, pl.p.MerchantID, products, pl.p.Lines, pl.p.CustomerID, pl.orderID, now)
	if err != nil {
		return err
	}
	deadline := domain.PaymentDeadline(now, m.PaymentTimeoutSeconds, windowEnds...)
	events, err := domain.Place(domain.PlaceParams{
		OrderID: pl.orderID, MerchantID: pl.p.MerchantID, CustomerID: pl.p.CustomerID,
		Lines: pl.p.Lines, Products: refs, PaymentDeadline: deadline,
		Unit: m.CapacityUnit, Lane: pl.p.Lane, PickupAt: pl.p.PickupAt, PrepSeconds: m.PrepSeconds,
	}, now)
	if err != nil {
		return err
	}
	o, err := domain.Order{}.Apply(events...)
	if err != nil {
		return err
	}
	var paid []domain.Event
	load := m.load()
	if pl.p.PaymentRef != "" {
		if paid, load, err = domain.PayAtPlacement(events[0], pl.p.PaymentRef, load, m.maxQueueWait(), now); err != nil {
			return err
		}
	}
	if guarded {
		if err := stock.take(ctx, pl, o, products); err != nil {
			return err
		}
	}
	// An unpaid order needs no timer job: its deadline in
	// orders_unpaid_deadline_idx is its timer (CloseDueUnpaid), committed
	// with it, on Citus on its worker.
	if paid != nil {
		if o, err = (domain.Order{}).Apply(paid...); err != nil {
			return err
		}
		events = paid
		m.setLoad(load)
		m.dirty = true
		switch o.Status {
		case domain.StatusQueued:
			pl.jobs = append(pl.jobs, s.expiryJobs(o)...)
		case domain.StatusScheduled:
			pl.jobs = append(pl.jobs, releaseJob(o))
		}
	}
	for i, ec := range entries {
		if o.PaidAt == nil {
			continue
		}
		bought, err := domain.PurchaseEntry(ec.after, pl.orderID, now)
		if err != nil {
			return err
		}
		if entries[i], _, err = newEntryChange(ec.before, append(ec.events, bought...), ec.meta); err != nil {
			return err
		}
		// The last unit bought sells the drop out.
		pl.jobs = append(pl.jobs, settleJob(ec.after.MerchantID, ec.after.DropID, now))
	}
	pl.order, pl.events, pl.entries = o, events, entries
	pl.answer = answerBasis{place: domain.PlaceOnJoining(o, m.load(), m.waitBasis()), lineSeq: m.nextSeq}
	return nil
}

// takeStock takes the order's units out of limited products and records
// the customer's claims (domain.ClaimsOf: the per-customer limit across
// orders), in the lock order the whole store follows: claims before
// buckets, products in id order. A line's units come from one bucket that
// has them all: one the transaction holds, as domain.TakeFromHeld picks,
// else one no other transaction holds; only when none has them does it
// look further: an unlocked sum says sold out at once (domain.SoldOut),
// else it waits for every bucket in order, held ones included, and takes
// the units from several (domain.TakeFromBuckets): sold out is answered
// only when the units are not there.
//
// Waiting keeps one global lock order, (product id, bucket): a transaction
// that holds a bucket of this product or of a greater one must not wait, or
// two batches could wait for each other. It answers errStockHeldElsewhere
// instead, and the request is decided first in a transaction of its own.
// Claims come before buckets in that order too: an order with claims still
// to make in a transaction that holds a bucket (another order's take) is
// answered sold out when an unlocked sum says so, else errStockHeldElsewhere,
// as a release holding the customer's claim may be waiting for that bucket.
//
// It never fails the transaction: a refusal, or stock the transaction may
// not wait for, puts back what the order had taken. What domain.RefuseStock
// refuses on stockLines is refused before. claimed says the batch's round
// trip made the order's claims already (takeBatchStock), which the batch
// puts back if the order is refused.
func takeStock(ctx context.Context, tx pgx.Tx, o domain.Order, products map[uuid.UUID]productInfo, memo *stockMemo, claimed bool) (err error) {
	t := &stockTake{tx: tx, order: o, memo: memo}
	defer func() {
		var de *domain.Error
		if !errors.As(err, &de) && !errors.Is(err, errStockHeldElsewhere) {
			return
		}
		if undoErr := t.undo(ctx); undoErr != nil {
			err = undoErr
		}
	}()
	wanted := limitedLines(o, products)
	var first domain.BucketTake
	var firstHeld bool
	if len(wanted) > 0 {
		first, firstHeld = domain.TakeFromHeld(memo.heldBuckets(wanted[0].ProductID), wanted[0].Quantity)
	}
	var claims []domain.Claim
	if !claimed {
		claims = domain.ClaimsOf(stockLines(o, products, memo))
	}
	if len(claims) > 0 && memo.holdsBuckets() {
		return t.soldOutOrHeldElsewhere(ctx, wanted)
	}
	wanted, err = t.claim(ctx, claims, wanted, first, firstHeld)
	if err != nil {
		return err
	}
	for _, it := range wanted {
		if !it.freeTried {
			from, held := domain.TakeFromHeld(memo.heldBuckets(it.ProductID), it.Quantity)
			took, err := t.takeOne(ctx, it.Item, from, held)
			if err != nil {
				return err
			}
			if took {
				continue
			}
		}
		available, err := t.available(ctx, it.ProductID)
		if err != nil {
			return err
		}
		if err := domain.SoldOut(it.ProductID, available, it.Quantity); err != nil {
			// Units may come back (a cancellation, a restock) but not within
			// the few milliseconds this batch has left: the rest of it
			// answers from memory.
			memo.set(it.ProductID, available)
			return err
		}
		if !memo.mayWaitFor(it.ProductID) {
			return errStockHeldElsewhere
		}
		buckets, err := t.lockBuckets(ctx, it.ProductID)
		if err != nil {
			return err
		}
		takes, err := domain.TakeFromBuckets(it.ProductID, buckets, it.Quantity)
		if err != nil {
			return err
		}
		if err := t.take(ctx, it.Item, takes); err != nil {
			return err
		}
	}
	return nil
}

// batchTakers are the requests of a batch whose stock one round trip claims
// and takes for all of them (takeBatchStock), with their lines, in arrival
// order: each of one line of a product with limited stock and no drop, of a
// merchant the batch holds, the first of its customer's for the product
// (a second would be refused its claim for the first's, which the batch may
// still refuse), and no more units of a product than its buckets held when
// the batch began (sums, when known). The first request of a product that
// is not one of them takes its stock in its turn (takeStock), and so do all
// after it: none may take units before an earlier request had its turn.
// A request domain.RefuseStock refuses takes nothing and holds up no one.
func batchTakers(live []*placement, merchants map[uuid.UUID]*merchantRow, products map[uuid.UUID]productInfo,
	memo *stockMemo, sums map[uuid.UUID]int,
) ([]*placement, []domain.StockLine) {
	var takers []*placement
	var lines []domain.StockLine
	closed := map[uuid.UUID]bool{}
	promised := map[uuid.UUID]int{}
	claimed := map[returnedClaim]bool{}
	for _, pl := range live {
		m := merchants[pl.p.MerchantID]
		if m == nil {
			// Not decided by this batch.
			continue
		}
		var stocked []uuid.UUID
		for _, l := range pl.p.Lines {
			if p, ok := products[l.ProductID]; ok && p.takesStock() {
				stocked = append(stocked, l.ProductID)
			}
		}
		if len(stocked) == 0 {
			continue
		}
		l := pl.p.Lines[0]
		p := products[l.ProductID]
		line := domain.StockLine{ProductID: l.ProductID, Quantity: l.Quantity, Limit: p.perUserLimit}
		if left, known := memo.known(l.ProductID); known {
			line.Left = &left
		}
		key := returnedClaim{pl.p.MerchantID, l.ProductID, pl.p.CustomerID}
		fits := len(pl.p.Lines) == 1 && p.limited && p.dropID == uuid.Nil && p.MerchantID == pl.p.MerchantID &&
			!p.Unavailable && !p.Hidden && !m.pause.Refuses() && !closed[l.ProductID] && !claimed[key]
		if fits && domain.RefuseStock([]domain.StockLine{line}) != nil {
			continue
		}
		if sum, known := sums[l.ProductID]; fits && known {
			fits = promised[l.ProductID]+l.Quantity <= sum
		}
		if !fits {
			for _, id := range stocked {
				closed[id] = true
			}
			continue
		}
		promised[l.ProductID] += l.Quantity
		claimed[key] = true
		takers, lines = append(takers, pl), append(lines, line)
	}
	return takers, lines
}

// addPlacements adds to b the write of every placed order: one change
// each, with the webhook messages of those accepted at once.
func addPlacements(tx pgx.Tx, b *pgx.Batch, placed []*placement, merchants map[uuid.UUID]*merchantRow, now time.Time) error {
	changes := make([]change, len(placed))
	var outbox []outboxMessage
	for i, pl := range placed {
		c := change{after: pl.order, events: pl.events, meta: Meta{Actor: domain.ActorCustomer, Subject: pl.p.CustomerID, RequestID: pl.p.RequestID},
			key: orderKey{pl.p.IdempotencyKey, pl.p.RequestHash}}
		changes[i] = c
		msgs, err := outboxFor(merchants[pl.p.MerchantID], c, now)
		if err != nil {
			return err
		}
		outbox = append(outbox, msgs...)
	}
	return addChanges(tx, b, changes, outbox, now)
}

// addLoads adds to b the write of the load of every merchant the batch
// changed, in one statement (on a Citus worker, one per shard of them:
// heldShardGroups), with the batch's decision time.
func addLoads(tx pgx.Tx, b *pgx.Batch, merchants map[uuid.UUID]*merchantRow, now time.Time) {
	var dirty []*merchantRow
	for _, m := range merchants {
		if m.dirty {
			dirty = append(dirty, m)
		}
	}
	if len(dirty) == 0 {
		return
	}
	groups, tables := heldShardGroups(tx, dirty, func(m *merchantRow) uuid.UUID { return m.ID })
	for i, rows := range groups {
		n := len(rows)
		ids := make([][16]byte, 0, n)
		active, activeOrders, queued := make([]int32, 0, n), make([]int32, 0, n), make([]int32, 0, n)
		queuedPriority, queuedUnits, next := make([]int32, 0, n), make([]int32, 0, n), make([]int64, 0, n)
		for _, m := range rows {
			ids, active, queued, next = append(ids, [16]byte(m.ID)), append(active, int32(m.Load.Active)), append(queued, int32(m.Load.Queued)), append(next, m.nextSeq)
			activeOrders, queuedPriority, queuedUnits = append(activeOrders, int32(m.Load.ActiveOrders)), append(queuedPriority, int32(m.queuedPriority)), append(queuedUnits, int32(m.Load.QueuedUnits))
		}
		b.Queue(`UPDATE `+tables[i]+` m SET active = t.a, queued = t.q, next_seq = t.n,
			active_orders = t.ao, queued_priority = t.qp, queued_units = t.qu, decided_at = $8, updated_at = now()
		FROM unnest($1::uuid[], $2::int[], $3::int[], $4::bigint[], $5::int[], $6::int[], $7::int[]) AS t(id, a, q, n, ao, qp, qu)
		WHERE m.id = t.id AND m.id = ANY($1::uuid[])`,
			ids, active, queued, next, activeOrders, queuedPriority, queuedUnits, now)
	}
}
