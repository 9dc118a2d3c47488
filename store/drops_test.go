package store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// fakeClock is a store clock tests move by hand.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock(st ...*store.Store) *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Now().UnixNano())
	for _, s := range st {
		setClock(s, c.Now)
	}
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Set(t time.Time)         { c.ns.Store(t.UnixNano()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

type dropFixture struct {
	st       *store.Store
	clock    *fakeClock
	merchant *store.MerchantView
	product  *store.ProductView
	drop     *store.DropView
}

func newDropFixture(t *testing.T, st *store.Store, mode domain.DropMode, units, stock int) dropFixture {
	t.Helper()
	clock := newFakeClock(st)
	m := createMerchant(t, st, &merchantOpts{Capacity: 100})
	p := createProduct(t, st, m.ID, &productOpts{Stock: intp(stock)})
	d, err := st.CreateDrop(context.Background(), store.CreateDropParams{
		ProductID: p.ID, OpensAt: clock.Now().Add(time.Minute), StartsAt: clock.Now().Add(time.Hour),
		Mode: mode, PurchaseWindowSeconds: intp(60), Units: intp(units), Access: admin,
	})
	require.NoError(t, err)
	return dropFixture{st: st, clock: clock, merchant: m, product: p, drop: d}
}

// startedDrop is a lottery drop of units units that has started with three
// early entries, the best ranked of them invited.
func startedDrop(t *testing.T, st *store.Store, units int) dropFixture {
	t.Helper()
	f := newDropFixture(t, st, domain.DropLottery, units, units)
	f.clock.Set(f.drop.OpensAt)
	for _, c := range []string{"x", "y", "z"} {
		f.join(t, c)
	}
	f.clock.Set(f.drop.StartsAt)
	f.settle(t)
	f.settle(t) // the settle after the start, which writes the rest of the draw
	return f
}

func (f dropFixture) settle(t *testing.T) *store.DropView {
	t.Helper()
	require.NoError(t, f.st.SettleDrop(context.Background(), f.merchant.ID, f.drop.ID))
	d, err := f.st.GetDrop(context.Background(), f.drop.ID)
	require.NoError(t, err)
	return d
}

func (f dropFixture) join(t *testing.T, customerID string) *store.EntryView {
	t.Helper()
	res, err := f.st.JoinDrop(context.Background(), f.drop.ID, customerID, "")
	require.NoError(t, err)
	return res.Entry
}

func (f dropFixture) entry(t *testing.T, customerID string) *store.EntryView {
	t.Helper()
	e, err := f.st.MyEntry(context.Background(), f.drop.ID, customerID)
	require.NoError(t, err)
	return e
}

// recomputeDraw ranks the draw's entries from what /draw publishes, as
// anyone holding it can: the digest of the entries that joined before the
// start (SHA-256 of their ids in ascending order), which must be the one
// published, then SHA-256(seed ‖ digest ‖ id) for those entries, then
// joined_at.
func recomputeDraw(t *testing.T, d *store.DropView, draw *store.Draw) []uuid.UUID {
	t.Helper()
	require.NotNil(t, draw.Seed)
	seed, err := hex.DecodeString(*draw.Seed)
	require.NoError(t, err)
	commitment := sha256.Sum256(seed)
	require.Equal(t, draw.SeedCommitment, hex.EncodeToString(commitment[:]), "the seed is the one committed to")
	entries := append([]store.DrawEntry(nil), draw.Entries...)
	var early []uuid.UUID
	for _, e := range entries {
		if e.JoinedAt.Before(d.StartsAt) {
			early = append(early, e.EntryID)
		}
	}
	slices.SortFunc(early, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	set := sha256.New()
	for _, id := range early {
		set.Write(id[:])
	}
	digest := set.Sum(nil)
	if d.Mode == domain.DropLottery {
		require.NotNil(t, draw.EntriesDigest)
		require.Equal(t, hex.EncodeToString(digest), *draw.EntriesDigest, "the digest is that of the early entries published")
	} else {
		require.Nil(t, draw.EntriesDigest)
	}
	key := func(e store.DrawEntry) []byte {
		if d.Mode == domain.DropLottery && e.JoinedAt.Before(d.StartsAt) {
			sum := sha256.Sum256(append(append(append([]byte{}, seed...), digest...), e.EntryID[:]...))
			return append([]byte{0}, sum[:]...)
		}
		return append([]byte{1}, []byte(fmt.Sprintf("%020d%s", e.JoinedAt.UnixMicro(), e.EntryID))...)
	}
	sort.SliceStable(entries, func(i, j int) bool { return bytes.Compare(key(entries[i]), key(entries[j])) < 0 })
	out := make([]uuid.UUID, len(entries))
	for i, e := range entries {
		out[i] = e.EntryID
	}
	return out
}

// TestLateEntryCannotJoinTheDraw: once a lottery's start has fixed the
// draw's inputs (the seed and the digest of the early entries), no entry
// joins the draw. A join through a process whose clock runs behind ranks
// after the drawn entries and leaves the digest as it was; an entry written
// behind the store's back with an early joined_at, keyed as the recorded
// digest would key it and with every rank renumbered to match, is found by
// the audit, which recomputes the digest from the entries.
func TestLateEntryCannotJoinTheDraw(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, b := setup(t)
	f := startedDrop(t, st, 1)
	before, err := st.GetDraw(ctx, f.drop.ID)
	require.NoError(t, err)
	require.NotNil(t, before.EntriesDigest)
	require.Empty(t, violations(t, st))

	slow := newStore(store.Config{Pool: b.pool, Jobs: st.Config().Jobs})
	setClock(slow, func() time.Time { return f.drop.StartsAt.Add(-time.Minute) })
	res, err := slow.JoinDrop(ctx, f.drop.ID, "behind", "")
	require.NoError(t, err)
	require.False(t, res.Entry.JoinedAt.Before(f.drop.StartsAt), "a join after the draw joins after the start")
	require.Equal(t, 4, *res.Entry.Rank)
	after, err := st.GetDraw(ctx, f.drop.ID)
	require.NoError(t, err)
	require.Equal(t, *before.EntriesDigest, *after.EntriesDigest)
	require.Empty(t, violations(t, st))

	var seed, digest []byte
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT seed, entries_digest FROM drops WHERE id = $1`, f.drop.ID).Scan(&seed, &digest))
	joined := f.drop.StartsAt.Add(-time.Second)
	id := domain.EntryID(f.drop.ID, "planted")
	key := domain.OrderKey(domain.DropLottery, f.drop.StartsAt, seed, digest, id, joined)
	_, err = b.pool.Exec(ctx, `INSERT INTO drop_entries (merchant_id, drop_id, id, customer_id, joined_at, status, order_key, version)
		VALUES ($1, $2, $3, 'planted', $4, 'waiting', $5, 1)`, f.merchant.ID, f.drop.ID, id, joined, key)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `UPDATE drop_entries e SET rank = r.n
		FROM (SELECT id, row_number() OVER (ORDER BY order_key) AS n FROM drop_entries WHERE drop_id = $1) r
		WHERE e.drop_id = $1 AND e.id = r.id`, f.drop.ID)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `UPDATE drop_lines SET ranked = ranked + 1 WHERE drop_id = $1`, f.drop.ID)
	require.NoError(t, err)
	var rankMismatches int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM audit.drop_rank_mismatch`).Scan(&rankMismatches))
	require.Zero(t, rankMismatches, "the ranks follow the keys: only the draw's inputs can tell")
	rows, err := b.pool.Query(ctx, `SELECT coalesce(entry_id::text, ''), coalesce(stored_key, ''), expected_key FROM audit.drop_draw_mismatch WHERE drop_id = $1`, f.drop.ID)
	require.NoError(t, err)
	type mismatch struct{ entry, stored, expected string }
	found, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (mismatch, error) {
		var m mismatch
		return m, r.Scan(&m.entry, &m.stored, &m.expected)
	})
	require.NoError(t, err)
	require.Contains(t, found, mismatch{"", hex.EncodeToString(digest), hex.EncodeToString(domain.EntriesDigest(append(earlyIDs(t, b, f), id)))},
		"the recorded digest is not that of the early entries")
	require.Len(t, found, 1+4, "the digest, and the key of every entry that joined before the start")
}

// earlyIDs are the ids of the drop's entries that joined before its start,
// as the store wrote them.
func earlyIDs(t *testing.T, b *testBundle, f dropFixture) [][16]byte {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT id FROM drop_entries WHERE drop_id = $1 AND joined_at < $2 AND customer_id <> 'planted'`, f.drop.ID, f.drop.StartsAt)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[[16]byte])
	require.NoError(t, err)
	require.Len(t, ids, 3)
	return ids
}

func TestDropEndToEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, b := setup(t)
	f := newDropFixture(t, st, domain.DropLottery, 3, 10)
	require.Equal(t, domain.DropStateScheduled, f.drop.State)
	require.Nil(t, f.drop.Seed)
	require.Len(t, f.drop.SeedCommitment, 64)

	_, err := st.JoinDrop(ctx, f.drop.ID, "early-bird", "")
	require.Equal(t, domain.CodeDropNotOpen, domain.ErrorCode(err))
	_, err = place(ctx, st, f.merchant.ID, f.product.ID, placeOpts{Customer: "outsider", PaymentRef: "r"})
	require.Equal(t, domain.CodeNotInvited, domain.ErrorCode(err), "the drop holds its product from creation")

	f.clock.Set(f.drop.OpensAt)
	require.Equal(t, domain.DropStateOpen, f.settle(t).State)
	customers := []string{"c0", "c1", "c2", "c3", "c4", "c5", "c6"}
	for _, c := range customers[:6] {
		e := f.join(t, c)
		require.Equal(t, domain.EntryStatusWaiting, e.Status)
		require.Nil(t, e.Rank, "no rank before the draw")
		f.clock.Advance(time.Millisecond)
	}
	again, err := st.JoinDrop(ctx, f.drop.ID, "c0", "")
	require.NoError(t, err)
	require.False(t, again.Created, "joining twice answers the same entry")
	require.Equal(t, f.entry(t, "c0").ID, again.Entry.ID)

	draw, err := st.GetDraw(ctx, f.drop.ID)
	require.NoError(t, err)
	require.Nil(t, draw.Seed, "the seed stays secret until the start")

	f.clock.Set(f.drop.StartsAt)
	d := f.settle(t)
	require.Equal(t, domain.DropStateSelling, d.State)
	require.NotNil(t, d.Seed)
	require.Equal(t, 3, d.Invited)
	f.clock.Advance(time.Second)
	late := f.join(t, "c6")
	require.Equal(t, 7, *late.Rank, "a late entry ranks after the draw")
	require.Equal(t, 4, *late.Position)
	unranked := 0
	for _, c := range customers[:6] {
		if f.entry(t, c).Rank == nil {
			unranked++
		}
	}
	require.Equal(t, 3, unranked, "the start writes the ranks its invitations need")
	f.settle(t) // the settle after the start writes the rest of the draw

	draw, err = st.GetDraw(ctx, f.drop.ID)
	require.NoError(t, err)
	order := recomputeDraw(t, d, draw)
	for i, e := range draw.Entries {
		require.Equal(t, order[i], e.EntryID, "rank %d", i+1)
		require.Equal(t, i+1, *e.Rank)
	}
	byID := map[uuid.UUID]string{}
	for _, c := range customers {
		byID[f.entry(t, c).ID] = c
	}
	ranked := make([]string, len(order))
	for i, id := range order {
		ranked[i] = byID[id]
	}
	for i, c := range ranked {
		e := f.entry(t, c)
		require.Equal(t, i+1, *e.Rank)
		if i < 3 {
			require.Equal(t, domain.EntryStatusInvited, e.Status, "the best three are invited")
		} else {
			require.Equal(t, domain.EntryStatusWaiting, e.Status)
			require.Equal(t, i-2, *e.Position)
		}
	}

	// Live updates rank a drop once for all its watched entries, and agree
	// with the single reads.
	var ids []uuid.UUID
	single := map[uuid.UUID]*store.EntryView{}
	for _, c := range customers {
		e := f.entry(t, c)
		ids, single[e.ID] = append(ids, e.ID), e
	}
	batch, err := st.EntriesByID(ctx, ids)
	require.NoError(t, err)
	require.Len(t, batch, len(ids))
	for _, e := range batch {
		require.Equal(t, *single[e.ID], e)
	}

	// Only the invited buy; one order, one unit, each.
	_, err = place(ctx, st, f.merchant.ID, f.product.ID, placeOpts{Customer: ranked[3], PaymentRef: "r"})
	require.Equal(t, domain.CodeNotInvited, domain.ErrorCode(err))
	_, err = place(ctx, st, f.merchant.ID, f.product.ID, placeOpts{Customer: ranked[0], PaymentRef: "r", Quantity: 2})
	require.Equal(t, domain.CodeValidation, domain.ErrorCode(err))
	bought := mustPlace(t, st, f.merchant.ID, f.product.ID, placeOpts{Customer: ranked[0], PaymentRef: "r"})
	require.Equal(t, domain.StatusAccepted, bought.Status, "a drop order goes through admission")
	require.Equal(t, domain.EntryStatusPurchased, f.entry(t, ranked[0]).Status)
	_, err = place(ctx, st, f.merchant.ID, f.product.ID, placeOpts{Customer: ranked[0], PaymentRef: "r"})
	require.Equal(t, domain.CodeNotInvited, domain.ErrorCode(err), "one unit per invitation")

	unpaid := mustPlace(t, st, f.merchant.ID, f.product.ID, placeOpts{Customer: ranked[1]})
	require.Equal(t, *f.entry(t, ranked[1]).PurchaseDeadline, unpaid.PaymentDeadline, "paid within the window or not at all")

	// The windows end: ranked[1] (unpaid) and ranked[2] (no order) lapse,
	// and the next two are invited.
	f.clock.Set(*f.entry(t, ranked[2]).PurchaseDeadline)
	d = f.settle(t)
	require.Equal(t, 2, d.Lapsed)
	require.Equal(t, domain.EntryStatusLapsed, f.entry(t, ranked[1]).Status)
	require.Equal(t, domain.EntryStatusLapsed, f.entry(t, ranked[2]).Status)
	require.Equal(t, domain.EntryStatusInvited, f.entry(t, ranked[3]).Status)
	require.Equal(t, domain.EntryStatusInvited, f.entry(t, ranked[4]).Status)
	_, err = st.PayOrder(ctx, unpaid.ID, "late", customer(ranked[1]), "")
	require.Equal(t, domain.CodeInvalidTransition, domain.ErrorCode(err))
	closed, err := st.CloseUnpaid(ctx, f.merchant.ID, unpaid.ID)
	require.NoError(t, err)
	require.True(t, closed)

	// A purchase cancelled gives its unit to the next in line.
	second := mustPlace(t, st, f.merchant.ID, f.product.ID, placeOpts{Customer: ranked[3], PaymentRef: "r"})
	_, err = st.CancelOrder(ctx, second.ID, "changed my mind", admin, "")
	require.NoError(t, err)
	require.Equal(t, domain.EntryStatusLapsed, f.entry(t, ranked[3]).Status)
	f.settle(t)
	require.Equal(t, domain.EntryStatusInvited, f.entry(t, ranked[5]).Status)

	// Pay-later purchases sell it out; the rest turn sold_out at once.
	o4 := mustPlace(t, st, f.merchant.ID, f.product.ID, placeOpts{Customer: ranked[4]})
	_, err = st.PayOrder(ctx, o4.ID, "r", customer(ranked[4]), "")
	require.NoError(t, err)
	mustPlace(t, st, f.merchant.ID, f.product.ID, placeOpts{Customer: ranked[5], PaymentRef: "r"})
	d = f.settle(t)
	require.Equal(t, domain.DropStateSoldOut, d.State)
	require.Equal(t, 3, d.Purchased)
	require.Equal(t, domain.EntryStatusSoldOut, f.entry(t, ranked[6]).Status)
	_, err = st.JoinDrop(ctx, f.drop.ID, "too-late", "")
	require.Equal(t, domain.CodeSoldOut, domain.ErrorCode(err))

	require.Empty(t, violations(t, st))
	report, err := st.Rebuild(ctx, false)
	require.NoError(t, err)
	require.Zero(t, report.DifferenceCount, "%+v", report.Differences)
	// A row that drifted from its stream is found and put back by the replay.
	_, err = b.pool.Exec(ctx, `UPDATE drop_entries SET status = 'waiting', order_key = NULL WHERE drop_id = $1 AND customer_id = $2`, f.drop.ID, ranked[1])
	require.NoError(t, err)
	report, err = st.Rebuild(ctx, true)
	require.NoError(t, err)
	require.Equal(t, 2, report.DifferenceCount, "%+v", report.Differences)
	require.Equal(t, domain.EntryStatusLapsed, f.entry(t, ranked[1]).Status)
	report, err = st.Rebuild(ctx, false)
	require.NoError(t, err)
	require.Zero(t, report.DifferenceCount, "%+v", report.Differences)
	var events int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE stream_id = $1`, f.drop.ID).Scan(&events))
	require.Equal(t, 4, events, "created, opened, started, sold out")
}

func TestDropFIFORanksByArrival(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	f := newDropFixture(t, st, domain.DropFIFO, 1, 1)
	f.clock.Set(f.drop.OpensAt)
	var ids []uuid.UUID
	for i := range 4 {
		e := f.join(t, fmt.Sprintf("c%d", i))
		require.Equal(t, i+1, *e.Rank, "fifo ranks are known at once")
		ids = append(ids, e.ID)
		f.clock.Advance(time.Millisecond)
	}
	f.clock.Set(f.drop.StartsAt)
	f.settle(t)
	require.Equal(t, domain.EntryStatusInvited, f.entry(t, "c0").Status)
	draw, err := st.GetDraw(context.Background(), f.drop.ID)
	require.NoError(t, err)
	for i, e := range draw.Entries {
		require.Equal(t, ids[i], e.EntryID)
	}
}

func TestCreateDropRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, b := setup(t)
	m := createMerchant(t, st, nil)
	limited := createProduct(t, st, m.ID, &productOpts{Stock: intp(5)})
	unlimited := createProduct(t, st, m.ID, nil)
	now := time.Now()
	valid := store.CreateDropParams{
		ProductID: limited.ID, OpensAt: now.Add(time.Hour), StartsAt: now.Add(2 * time.Hour), Mode: domain.DropLottery, Access: admin,
	}
	cases := []struct {
		name   string
		change func(p *store.CreateDropParams)
		code   domain.Code
	}{
		{"opens in the past", func(p *store.CreateDropParams) { p.OpensAt = now.Add(-time.Minute) }, domain.CodeValidation},
		{"out of order", func(p *store.CreateDropParams) { p.StartsAt = p.OpensAt.Add(-time.Second) }, domain.CodeValidation},
		{"units over stock", func(p *store.CreateDropParams) { p.Units = intp(6) }, domain.CodeValidation},
		{"unlimited product", func(p *store.CreateDropParams) { p.ProductID = unlimited.ID }, domain.CodeValidation},
		{"short window", func(p *store.CreateDropParams) { p.PurchaseWindowSeconds = intp(29) }, domain.CodeValidation},
		{"long window", func(p *store.CreateDropParams) { p.PurchaseWindowSeconds = intp(3601) }, domain.CodeValidation},
		{"unknown product", func(p *store.CreateDropParams) { p.ProductID = uuid.New() }, domain.CodeNotFound},
		{"another merchant", func(p *store.CreateDropParams) {
			p.Access = domain.Party{Actor: domain.ActorMerchant, Subject: "m", MerchantID: uuid.New()}
		}, domain.CodeForbidden},
	}
	for _, tc := range cases {
		p := valid
		tc.change(&p)
		_, err := st.CreateDrop(ctx, p)
		require.Equal(t, tc.code, domain.ErrorCode(err), tc.name)
	}
	var n int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM drops`).Scan(&n))
	require.Zero(t, n, "nothing written")
	_, err := st.CreateDrop(ctx, valid)
	require.NoError(t, err)
	_, err = st.CreateDrop(ctx, valid)
	require.Equal(t, domain.CodeValidation, domain.ErrorCode(err), "one drop of a product at a time")
}

// TestDropSeedSecretUntilStart reads as the auditor role: no table or view
// it may read holds the seed before starts_at, and the log does not either.
func TestDropSeedSecretUntilStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, b := setup(t)
	f := newDropFixture(t, st, domain.DropLottery, 1, 1)
	var seed []byte
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT seed FROM drop_seeds WHERE drop_id = $1`, f.drop.ID).Scan(&seed))
	seedHex := hex.EncodeToString(seed)

	asAuditor := func(sql string) error {
		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx) //nolint:errcheck // read only
		_, err = tx.Exec(ctx, `SET LOCAL ROLE orderd_auditor`)
		require.NoError(t, err)
		var found bool
		return tx.QueryRow(ctx, sql, seedHex).Scan(&found)
	}
	require.ErrorContains(t, asAuditor(`SELECT EXISTS (SELECT 1 FROM drop_seeds WHERE $1 <> '')`), "permission denied")
	for _, sql := range []string{
		`SELECT EXISTS (SELECT 1 FROM drops WHERE encode(seed, 'hex') = $1)`,
		`SELECT EXISTS (SELECT 1 FROM events WHERE data::text LIKE '%' || $1 || '%')`,
		`SELECT EXISTS (SELECT 1 FROM audit.drop_draw_mismatch WHERE row_to_json(drop_draw_mismatch)::text LIKE '%' || $1 || '%')`,
	} {
		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `SET LOCAL ROLE orderd_auditor`)
		require.NoError(t, err)
		var found bool
		require.NoError(t, tx.QueryRow(ctx, sql, seedHex).Scan(&found), sql)
		require.False(t, found, sql)
		require.NoError(t, tx.Rollback(ctx))
	}
	d, err := st.GetDrop(ctx, f.drop.ID)
	require.NoError(t, err)
	require.Nil(t, d.Seed)

	f.clock.Set(f.drop.StartsAt)
	d = f.settle(t)
	require.Equal(t, seedHex, *d.Seed, "published at the start")
}

// TestDropConcurrentJoinsAndPurchases: many goroutines on two stores (two
// pools, as two processes have) join, some twice, and buy as soon as they
// are invited while windows lapse: one entry per customer, never more
// purchases than units, never an invitation out of rank order.
func TestDropConcurrentJoinsAndPurchases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stores, b := instances(t, 2)
	clock := newFakeClock(stores...)
	st := stores[0]
	m := createMerchant(t, st, &merchantOpts{Capacity: 1000})
	p := createProduct(t, st, m.ID, &productOpts{Stock: intp(40)})
	d, err := st.CreateDrop(ctx, store.CreateDropParams{
		ProductID: p.ID, OpensAt: clock.Now().Add(time.Second), StartsAt: clock.Now().Add(time.Hour),
		Mode: domain.DropLottery, PurchaseWindowSeconds: intp(30), Units: intp(10), Access: admin,
	})
	require.NoError(t, err)
	clock.Set(d.OpensAt)
	const customers = 60
	// Every customer joins twice at the same moment, once through each store.
	var wg sync.WaitGroup
	entries := make([][2]uuid.UUID, customers)
	created := make([][2]bool, customers)
	for i := range customers {
		for k := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := stores[k].JoinDrop(ctx, d.ID, fmt.Sprintf("c%d", i), "")
				require.NoError(t, err)
				entries[i][k], created[i][k] = res.Entry.ID, res.Created
			}()
		}
	}
	wg.Wait()
	for i := range customers {
		require.Equal(t, entries[i][0], entries[i][1], "customer %d: one entry", i)
		require.True(t, created[i][0] != created[i][1], "customer %d: one join made it (201), the other answered it (200)", i)
	}
	clock.Set(d.StartsAt)
	// Buyers race settles (from both stores) and each other; a third of them
	// never pay. Once the drop is sold out its product sells as any other.
	var bought atomic.Int64
	for round := 0; round < 30; round++ {
		var wg sync.WaitGroup
		for g := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := stores[g%2]
				require.NoError(t, s.SettleDrop(ctx, m.ID, d.ID))
				for i := g; i < customers; i += 12 {
					c := fmt.Sprintf("c%d", i)
					if i%3 == 0 {
						continue
					}
					res, err := place(ctx, s, m.ID, p.ID, placeOpts{Customer: c, PaymentRef: "r"})
					if err == nil {
						var inDrop bool
						require.NoError(t, b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM drop_entries WHERE order_id = $1)`, res.Order.ID).Scan(&inDrop))
						if inDrop {
							bought.Add(1)
						}
					} else {
						require.Contains(t, []domain.Code{domain.CodeNotInvited, domain.CodeSoldOut}, domain.ErrorCode(err), "%v", err)
					}
				}
			}()
		}
		wg.Wait()
		got, err := st.GetDrop(ctx, d.ID)
		require.NoError(t, err)
		if got.State == domain.DropStateSoldOut {
			break
		}
		clock.Advance(31 * time.Second)
	}
	got, err := st.GetDrop(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, domain.DropStateSoldOut, got.State)
	require.Equal(t, 10, got.Purchased)
	require.EqualValues(t, 10, bought.Load(), "never more purchases than units")
	require.Equal(t, customers, got.Entries, "one entry per customer")
	require.Empty(t, violations(t, st))
}

// TestDropOrderExpiredIsNotRequeued: a drop's purchase that expires in its
// merchant's queue lapses its entry and invites the next; retrying its dead
// letter is refused, since serving it would sell more than the units.
func TestDropOrderExpiredIsNotRequeued(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, _ := setup(t)
	clock := newFakeClock(st)
	m := createMerchant(t, st, &merchantOpts{Capacity: 0, MaxQueueWait: 60})
	p := createProduct(t, st, m.ID, &productOpts{Stock: intp(5)})
	d, err := st.CreateDrop(ctx, store.CreateDropParams{
		ProductID: p.ID, OpensAt: clock.Now().Add(time.Second), StartsAt: clock.Now().Add(time.Minute),
		Mode: domain.DropFIFO, Units: intp(1), Access: admin,
	})
	require.NoError(t, err)
	f := dropFixture{st: st, clock: clock, merchant: m, product: p, drop: d}
	clock.Set(d.OpensAt)
	f.join(t, "first")
	f.join(t, "second")
	clock.Set(d.StartsAt)
	f.settle(t)
	o := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "first", PaymentRef: "r"})
	require.Equal(t, domain.StatusQueued, o.Status, "a drop order waits for capacity like any other")
	require.Equal(t, domain.EntryStatusPurchased, f.entry(t, "first").Status)

	clock.Advance(61 * time.Second)
	n, err := st.ExpireQueuedOverdue(ctx, clock.Now(), 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, domain.EntryStatusLapsed, f.entry(t, "first").Status)
	f.settle(t)
	require.Equal(t, domain.EntryStatusInvited, f.entry(t, "second").Status)

	letters, _, err := st.ListDeadLetters(ctx, store.ListDeadLettersParams{Kind: store.DeadLetterOrder, Limit: 10})
	require.NoError(t, err)
	require.Len(t, letters, 1)
	_, err = st.RetryDeadLetter(ctx, letters[0].ID, admin, "")
	require.ErrorIs(t, err, domain.ErrDropOrderNotRequeued)
	require.Empty(t, violations(t, st))
}

// TestDropJoinsAfterStartRankInArrivalOrder: customers join a started
// lottery drop through two stores at once, one of them with a clock behind
// the other, while both invite and sell. Every entry gets its own rank,
// the ranks are the order of the keys (the audit recomputes both), the
// late ones rank after every early one, and each waiting entry's position
// is one more than the waiting entries ranked before it.
func TestDropJoinsAfterStartRankInArrivalOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stores, b := instances(t, 2)
	clock := newFakeClock(stores...)
	setClock(stores[1], func() time.Time { return clock.Now().Add(-20 * time.Millisecond) })
	st := stores[0]
	m := createMerchant(t, st, &merchantOpts{Capacity: 1000})
	// More units than the buyers below can buy: the drop never sells out
	// under the joins.
	p := createProduct(t, st, m.ID, &productOpts{Stock: intp(40)})
	d, err := st.CreateDrop(ctx, store.CreateDropParams{
		ProductID: p.ID, OpensAt: clock.Now().Add(time.Second), StartsAt: clock.Now().Add(time.Hour),
		Mode: domain.DropLottery, PurchaseWindowSeconds: intp(30), Units: intp(40), Access: admin,
	})
	require.NoError(t, err)
	clock.Set(d.OpensAt.Add(time.Second))
	const early, late = 20, 120
	for i := range early {
		_, err := stores[i%2].JoinDrop(ctx, d.ID, fmt.Sprintf("e%d", i), "")
		require.NoError(t, err)
	}
	clock.Set(d.StartsAt)
	require.NoError(t, st.SettleDrop(ctx, m.ID, d.ID))

	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		// Time passes in small steps while the joins run, so that batches
		// of both stores share instants and overtake each other's clocks.
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				clock.Advance(7 * time.Millisecond)
				time.Sleep(time.Millisecond)
			}
		}
	}()
	var joiners sync.WaitGroup
	for g := range 16 {
		joiners.Add(1)
		go func() {
			defer joiners.Done()
			s := stores[g%2]
			for i := g; i < late; i += 16 {
				c := fmt.Sprintf("l%d", i)
				res, err := s.JoinDrop(ctx, d.ID, c, "")
				require.NoError(t, err)
				require.NotNil(t, res.Entry.Rank, "a join after the draw is ranked at once")
				require.Greater(t, *res.Entry.Rank, early, "after every early entry")
				if i%5 == 0 {
					require.NoError(t, s.SettleDrop(ctx, m.ID, d.ID))
				}
				if i%7 == 0 {
					// Invited customers buy, which frees nothing, and others are
					// refused. Purchases are decided by the store whose clock is
					// right: admissions read one clock (API.md), and a store
					// behind it would record acceptances out of time order.
					for _, buyer := range []string{fmt.Sprintf("e%d", i%early), c} {
						_, err := place(ctx, st, m.ID, p.ID, placeOpts{Customer: buyer, PaymentRef: "r"})
						if err != nil {
							require.Equal(t, domain.CodeNotInvited, domain.ErrorCode(err), "%v", err)
						}
					}
				}
			}
		}()
	}
	joiners.Wait()
	close(stop)
	wg.Wait()

	rows, err := b.pool.Query(ctx, `SELECT customer_id, rank, status FROM drop_entries WHERE drop_id = $1 ORDER BY order_key`, d.ID)
	require.NoError(t, err)
	type line struct {
		customer string
		rank     int
		status   domain.EntryStatus
	}
	var all []line
	for rows.Next() {
		var l line
		require.NoError(t, rows.Scan(&l.customer, &l.rank, &l.status))
		all = append(all, l)
	}
	require.NoError(t, rows.Err())
	require.Len(t, all, early+late)
	waitingBefore := 0
	for i, l := range all {
		require.Equal(t, i+1, l.rank, "ranks follow the keys, without gaps")
		e, err := st.MyEntry(ctx, d.ID, l.customer)
		require.NoError(t, err)
		require.Equal(t, l.rank, *e.Rank)
		if l.status == domain.EntryStatusWaiting {
			waitingBefore++
			require.NotNil(t, e.Position)
			require.Equal(t, waitingBefore, *e.Position, "entry %s", l.customer)
		} else {
			require.Nil(t, e.Position)
			require.Zero(t, waitingBefore, "an entry left the line while a better one waited")
		}
	}
	require.Empty(t, violations(t, st))
}

// TestDropEndsWhenNobodyIsInLine: a selling drop with units left and nobody
// waiting or invited ends one purchase window after its last activity (its
// start, a join, a purchase deadline), through its timer or the backstop;
// a customer joining in that window is still served through the line.
// Then it takes no entries and its product sells as any other.
func TestDropEndsWhenNobodyIsInLine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, _ := setup(t)
	f := newDropFixture(t, st, domain.DropLottery, 3, 10)
	window := time.Duration(f.drop.PurchaseWindowSeconds) * time.Second
	f.clock.Set(f.drop.OpensAt)
	f.join(t, "payer")
	f.join(t, "idler")
	f.clock.Set(f.drop.StartsAt)
	require.Equal(t, domain.DropStateSelling, f.settle(t).State)
	_, err := place(ctx, st, f.merchant.ID, f.product.ID, placeOpts{Customer: "payer", PaymentRef: "r"})
	require.NoError(t, err)

	// The idler's window lapses; the line is empty, but not for a window yet.
	deadline := *f.entry(t, "idler").PurchaseDeadline
	f.clock.Set(deadline)
	require.Equal(t, domain.DropStateSelling, f.settle(t).State)
	require.Equal(t, domain.EntryStatusLapsed, f.entry(t, "idler").Status)
	f.clock.Set(deadline.Add(window / 2))
	require.Equal(t, domain.DropStateSelling, f.settle(t).State)
	late := f.join(t, "late")
	require.Equal(t, domain.EntryStatusWaiting, late.Status)
	f.settle(t) // the join's nudge
	require.Equal(t, domain.EntryStatusInvited, f.entry(t, "late").Status, "a customer in the window is served through the line")

	// The late customer never pays either; a window after that, the drop ends.
	lateDeadline := *f.entry(t, "late").PurchaseDeadline
	f.clock.Set(lateDeadline)
	require.Equal(t, domain.DropStateSelling, f.settle(t).State)
	f.clock.Set(lateDeadline.Add(window - time.Microsecond))
	n, err := st.DropsToSettle(ctx, f.clock.Now(), 10)
	require.NoError(t, err)
	require.Zero(t, n, "not before a window has passed")
	f.clock.Set(lateDeadline.Add(window + time.Second))
	n, err = st.DropsToSettle(ctx, lateDeadline.Add(window+time.Millisecond), 10)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the backstop ends it when its timer did not")
	d, err := st.GetDrop(ctx, f.drop.ID)
	require.NoError(t, err)
	require.Equal(t, domain.DropStateEnded, d.State)
	require.Equal(t, 1, d.Purchased)

	_, err = st.JoinDrop(ctx, f.drop.ID, "too-late", "")
	require.Equal(t, domain.CodeDropEnded, domain.ErrorCode(err))
	_, err = place(ctx, st, f.merchant.ID, f.product.ID, placeOpts{Customer: "walk-in", PaymentRef: "r"})
	require.NoError(t, err, "an ended drop's product sells as any other")
	require.Equal(t, domain.DropStateEnded, f.settle(t).State, "ended stays ended")
	require.Empty(t, violations(t, st))
}

// TestDropSellOutInChunks sells out a drop with a long line in transactions
// of a few entries each, stopped after the first as a process that dies
// would be: between the two, the drop is sold_out, every waiting entry
// reads sold_out and nobody joins; a timer for the rest was committed with
// the first chunk, and the backstop finishes the sell-out, every entry
// sold out once, no transaction writing more than the chunk.
func TestDropSellOutInChunks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const chunk, line = 7, 40
	st, b := setup(t, func(c *store.Config) { c.SellOutChunk = chunk })
	f := newDropFixture(t, st, domain.DropFIFO, 2, 2)
	f.clock.Set(f.drop.OpensAt)
	var customers []string
	for i := range line {
		customers = append(customers, fmt.Sprintf("c%02d", i))
		f.join(t, customers[i])
		f.clock.Advance(time.Millisecond)
	}
	f.clock.Set(f.drop.StartsAt)
	require.Equal(t, 2, f.settle(t).Invited)
	for _, c := range customers[:2] {
		mustPlace(t, st, f.merchant.ID, f.product.ID, placeOpts{Customer: c, PaymentRef: "r"})
	}
	waiting := customers[2:]
	timers := func() int {
		var n int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'settle_drop' AND args->>'drop_id' = $1`,
			f.drop.ID.String()).Scan(&n))
		return n
	}
	before := timers()

	more, err := st.SettleDropOnce(ctx, f.merchant.ID, f.drop.ID)
	require.NoError(t, err)
	require.True(t, more)
	d, err := st.GetDrop(ctx, f.drop.ID)
	require.NoError(t, err)
	require.Equal(t, domain.DropStateSoldOut, d.State)
	require.Equal(t, 2, d.Purchased)
	rowsByStatus := func() map[string]int {
		rows, err := b.pool.Query(ctx, `SELECT status, count(*)::int FROM drop_entries WHERE drop_id = $1 GROUP BY status`, f.drop.ID)
		require.NoError(t, err)
		out := map[string]int{}
		for rows.Next() {
			var s string
			var n int
			require.NoError(t, rows.Scan(&s, &n))
			out[s] = n
		}
		require.NoError(t, rows.Err())
		return out
	}
	require.Equal(t, map[string]int{"purchased": 2, "sold_out": chunk, "waiting": len(waiting) - chunk}, rowsByStatus())
	var ids []uuid.UUID
	for _, c := range waiting {
		e := f.entry(t, c)
		require.Equal(t, domain.EntryStatusSoldOut, e.Status, "%s reads sold_out whether its row is written yet or not", c)
		require.Nil(t, e.Position)
		ids = append(ids, e.ID)
	}
	live, err := st.EntriesByID(ctx, ids)
	require.NoError(t, err)
	for _, e := range live {
		require.Equal(t, domain.EntryStatusSoldOut, e.Status)
	}
	_, err = st.JoinDrop(ctx, f.drop.ID, "too-late", "")
	require.Equal(t, domain.CodeSoldOut, domain.ErrorCode(err))
	again, err := st.JoinDrop(ctx, f.drop.ID, waiting[len(waiting)-1], "")
	require.NoError(t, err)
	require.False(t, again.Created)
	require.Equal(t, domain.EntryStatusSoldOut, again.Entry.Status, "joining again answers the entry as it reads")
	require.Equal(t, before+1, timers(), "the first chunk commits a timer for the rest")

	// The process is gone; the backstop finds the rest and finishes it.
	n, err := st.DropsToSettle(ctx, f.clock.Now(), 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, map[string]int{"purchased": 2, "sold_out": len(waiting)}, rowsByStatus())
	n, err = st.DropsToSettle(ctx, f.clock.Now(), 10)
	require.NoError(t, err)
	require.Zero(t, n, "nothing is left to sell out")

	var perEntry, txs, biggest int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT max(n), (SELECT count(DISTINCT tx_id) FROM events WHERE type = 'drop_entry.sold_out'),
			(SELECT max(c) FROM (SELECT count(*) AS c FROM events WHERE type = 'drop_entry.sold_out' GROUP BY tx_id) x)
		FROM (SELECT count(*) AS n FROM events WHERE type = 'drop_entry.sold_out' GROUP BY stream_id) y`).Scan(&perEntry, &txs, &biggest))
	require.Equal(t, 1, perEntry, "every entry sold out once")
	require.Equal(t, (len(waiting)+chunk-1)/chunk, txs)
	require.Equal(t, chunk, biggest, "no transaction writes more than a chunk")
	var sold int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE type = 'drop_entry.sold_out'`).Scan(&sold))
	require.Equal(t, len(waiting), sold)
	require.Empty(t, violations(t, st))
	report, err := st.Rebuild(ctx, false)
	require.NoError(t, err)
	require.Zero(t, report.DifferenceCount, "%+v", report.Differences)
}

// A drop's pre-queue fills faster than PostgreSQL analyzes drop_entries,
// so the planner knows nothing of the drop while tens of thousands join.
// A join batch's read of the entries it would make must probe each one,
// not read the drop's line, which grows with every batch.
func TestJoinReadsOnlyItsOwnEntriesAsTheLineGrows(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := context.Background()
	f := newDropFixture(t, st, domain.DropLottery, 1, 1)
	f.clock.Set(f.drop.OpensAt)
	const line = 3000
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= line; i = next.Add(1) {
				_, err := st.JoinDrop(ctx, f.drop.ID, fmt.Sprintf("c%d", i), "")
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	var batch []string
	for i := range 50 {
		batch = append(batch, fmt.Sprintf("c%d", line-i), fmt.Sprintf("new%d", i))
	}
	read, err := st.JoinedEntriesRead(ctx, f.merchant.ID, f.drop.ID, batch)
	require.NoError(t, err)
	require.LessOrEqual(t, read, len(batch), "rows of drop_entries read for a batch of %d joins in a line of %d", len(batch), line)
}
