package domain_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
)

var dropNow = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

func testSeed() []byte { return bytes.Repeat([]byte{7}, domain.SeedBytes) }

func intPtr(v int) *int { return &v }

var (
	testDropID, testProductID, testMerchantID = uuid.New(), uuid.New(), uuid.New()
	testEntryID, testOrder1, testOrder2       = uuid.New(), uuid.New(), uuid.New()
)

func validDrop() domain.NewDropParams {
	return domain.NewDropParams{
		DropID: testDropID, ProductID: testProductID, MerchantID: testMerchantID,
		OpensAt: dropNow.Add(time.Minute), StartsAt: dropNow.Add(time.Hour), Mode: domain.DropLottery,
		StockRemaining: intPtr(100), Seed: testSeed(),
	}
}

func TestCreateDropValidation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		change func(p *domain.NewDropParams)
		ok     bool
	}{
		{"defaults", func(p *domain.NewDropParams) {}, true},
		{"fifo", func(p *domain.NewDropParams) { p.Mode = domain.DropFIFO }, true},
		{"unknown mode", func(p *domain.NewDropParams) { p.Mode = "raffle" }, false},
		{"opens in the past", func(p *domain.NewDropParams) { p.OpensAt = dropNow.Add(-time.Second) }, false},
		{"opens now", func(p *domain.NewDropParams) { p.OpensAt = dropNow }, false},
		{"starts before it opens", func(p *domain.NewDropParams) { p.StartsAt = p.OpensAt.Add(-time.Second) }, false},
		{"starts as it opens", func(p *domain.NewDropParams) { p.StartsAt = p.OpensAt }, false},
		{"window 29", func(p *domain.NewDropParams) { p.PurchaseWindowSeconds = intPtr(29) }, false},
		{"window 30", func(p *domain.NewDropParams) { p.PurchaseWindowSeconds = intPtr(30) }, true},
		{"window 3600", func(p *domain.NewDropParams) { p.PurchaseWindowSeconds = intPtr(3600) }, true},
		{"window 3601", func(p *domain.NewDropParams) { p.PurchaseWindowSeconds = intPtr(3601) }, false},
		{"units over the stock", func(p *domain.NewDropParams) { p.Units = intPtr(101) }, false},
		{"units all the stock", func(p *domain.NewDropParams) { p.Units = intPtr(100) }, true},
		{"units 0", func(p *domain.NewDropParams) { p.Units = intPtr(0) }, false},
		{"unlimited product", func(p *domain.NewDropParams) { p.StockRemaining = nil }, false},
		{"no stock left", func(p *domain.NewDropParams) { p.StockRemaining = intPtr(0) }, false},
		{"a drop already running", func(p *domain.NewDropParams) { p.ProductHasActiveDrop = true }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := validDrop()
			tc.change(&p)
			events, err := domain.CreateDrop(p, dropNow)
			if !tc.ok {
				require.Equal(t, domain.CodeValidation, domain.ErrorCode(err), "%v", err)
				require.Empty(t, events)
				return
			}
			require.NoError(t, err)
			d, err := domain.Drop{}.Apply(events...)
			require.NoError(t, err)
			require.Equal(t, domain.DropStateScheduled, d.State)
			require.Nil(t, d.Seed, "the seed is not published at creation")
			require.Equal(t, domain.SeedCommitment(testSeed()), d.SeedCommitment)
		})
	}
	p := validDrop()
	events, err := domain.CreateDrop(p, dropNow)
	require.NoError(t, err)
	created := events[0].Data.(domain.DropCreated)
	require.Equal(t, 100, created.Units, "units default to the remaining stock")
	require.Equal(t, domain.DefaultPurchaseWindowSeconds, created.PurchaseWindowSeconds)
}

func newTestDrop(t *testing.T, mutate func(p *domain.NewDropParams)) domain.Drop {
	t.Helper()
	p := validDrop()
	if mutate != nil {
		mutate(&p)
	}
	events, err := domain.CreateDrop(p, dropNow)
	require.NoError(t, err)
	d, err := domain.Drop{}.Apply(events...)
	require.NoError(t, err)
	return d
}

func TestDropLifecycle(t *testing.T) {
	t.Parallel()
	d := newTestDrop(t, func(p *domain.NewDropParams) { p.Units = intPtr(2) })
	advance := func(at time.Time) {
		events, err := domain.AdvanceDrop(d, testSeed(), noEntries, at)
		require.NoError(t, err)
		d, err = d.Apply(events...)
		require.NoError(t, err)
	}
	advance(d.OpensAt.Add(-time.Millisecond))
	require.Equal(t, domain.DropStateScheduled, d.State, "not before opens_at")
	advance(d.OpensAt)
	require.Equal(t, domain.DropStateOpen, d.State)
	require.Equal(t, 0, domain.InvitationsDue(d, 0, 0), "nobody is invited before the start")
	advance(d.StartsAt)
	require.Equal(t, domain.DropStateSelling, d.State)
	require.Equal(t, testSeed(), d.Seed, "the seed is published at the start")
	require.Equal(t, 3, d.Version)

	_, err := domain.AdvanceDrop(newTestDrop(t, nil), bytes.Repeat([]byte{8}, 32), noEntries, dropNow.Add(2*time.Hour))
	require.Error(t, err, "a seed that does not match the commitment is never published")

	// A late timer takes both steps at once.
	late := newTestDrop(t, nil)
	events, err := domain.AdvanceDrop(late, testSeed(), noEntries, late.StartsAt.Add(time.Second))
	require.NoError(t, err)
	require.Len(t, events, 2)

	for _, tc := range []struct{ outstanding, purchased, due int }{
		{0, 0, 2}, {1, 0, 1}, {1, 1, 0}, {0, 2, 0}, {2, 1, 0},
	} {
		require.Equal(t, tc.due, domain.InvitationsDue(d, tc.outstanding, tc.purchased), "%+v", tc)
	}
	require.Empty(t, domain.SellOut(d, 1, dropNow))
	sold := domain.SellOut(d, 2, dropNow)
	require.Len(t, sold, 1)
	d, err = d.Apply(sold...)
	require.NoError(t, err)
	require.Equal(t, domain.DropStateSoldOut, d.State)
	require.False(t, d.State.Active())
	require.Equal(t, 0, domain.InvitationsDue(d, 0, 0))
}

func TestDropEndsAWindowAfterItsLineEmptied(t *testing.T) {
	t.Parallel()
	d := newTestDrop(t, func(p *domain.NewDropParams) { p.Units = intPtr(2) })
	events, err := domain.AdvanceDrop(d, testSeed(), noEntries, d.StartsAt)
	require.NoError(t, err)
	d, err = d.Apply(events...)
	require.NoError(t, err)
	window := time.Duration(d.PurchaseWindowSeconds) * time.Second
	last := d.StartsAt.Add(time.Minute)
	for _, tc := range []struct {
		name string
		line domain.DropLine
		ends bool
	}{
		{"an entry waits", domain.DropLine{Waiting: 1, LastActivity: last}, false},
		{"an invitation is open", domain.DropLine{Outstanding: 1, LastActivity: last}, false},
		{"every unit bought: it sells out instead", domain.DropLine{Purchased: 2, LastActivity: last}, false},
		{"nobody in line, a unit left", domain.DropLine{Purchased: 1, LastActivity: last}, true},
		{"nobody ever joined", domain.DropLine{LastActivity: d.StartsAt}, true},
	} {
		at := domain.EndsAt(d, tc.line)
		require.Equal(t, tc.ends, !at.IsZero(), tc.name)
		if !tc.ends {
			require.Empty(t, domain.End(d, tc.line, last.Add(24*time.Hour)), tc.name)
			continue
		}
		require.Equal(t, tc.line.LastActivity.Add(window), at, tc.name)
		require.Empty(t, domain.End(d, tc.line, at.Add(-time.Microsecond)), "%s: not before a window has passed", tc.name)
		ended, err := d.Apply(domain.End(d, tc.line, at)...)
		require.NoError(t, err)
		require.Equal(t, domain.DropStateEnded, ended.State, tc.name)
		require.False(t, ended.State.Active(), "an ended drop no longer governs its product")
		_, err = domain.Join(ended, testEntryID, "c", at)
		require.Equal(t, domain.CodeDropEnded, domain.ErrorCode(err))
		require.Zero(t, domain.InvitationsDue(ended, 0, 0))
		require.Empty(t, domain.End(ended, tc.line, at.Add(time.Hour)), "once")
	}
	open, err := domain.AdvanceDrop(newTestDrop(t, nil), testSeed(), noEntries, d.OpensAt)
	require.NoError(t, err)
	o, err := newTestDrop(t, nil).Apply(open...)
	require.NoError(t, err)
	require.True(t, domain.EndsAt(o, domain.DropLine{LastActivity: d.OpensAt}).IsZero(), "only a selling drop ends")
}

func TestJoinRules(t *testing.T) {
	t.Parallel()
	d := newTestDrop(t, nil)
	cases := []struct {
		name  string
		state domain.DropState
		at    time.Time
		code  domain.Code
	}{
		{"before opens_at", domain.DropStateScheduled, d.OpensAt.Add(-time.Millisecond), domain.CodeDropNotOpen},
		{"at opens_at, timer not yet run", domain.DropStateScheduled, d.OpensAt, ""},
		{"open", domain.DropStateOpen, d.OpensAt.Add(time.Second), ""},
		{"selling", domain.DropStateSelling, d.StartsAt.Add(time.Second), ""},
		{"sold out", domain.DropStateSoldOut, d.StartsAt.Add(time.Second), domain.CodeSoldOut},
		{"ended", domain.DropStateEnded, d.StartsAt.Add(time.Second), domain.CodeDropEnded},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dd := d
			dd.State = tc.state
			events, err := domain.Join(dd, testEntryID, "alice", tc.at)
			if tc.code != "" {
				require.Equal(t, tc.code, domain.ErrorCode(err))
				return
			}
			require.NoError(t, err)
			e, err := domain.Entry{}.Apply(events...)
			require.NoError(t, err)
			require.Equal(t, domain.EntryStatusWaiting, e.Status)
			require.Equal(t, tc.at, e.JoinedAt)
		})
	}
}

// noEntries is the digest of a lottery that nobody joined early.
var noEntries = domain.EntriesDigest(nil)

// TestOrderKeyEncoding pins the byte encoding docs/drops.md gives: early
// lottery entries 0x00 ‖ SHA-256(seed ‖ digest ‖ id bytes) (without the
// digest in draws made before it), others 0x01 ‖ joined_at µs (big-endian
// int64) ‖ id bytes.
func TestOrderKeyEncoding(t *testing.T) {
	t.Parallel()
	seed := testSeed()
	id := uuid.MustParse("0190a0b1-c2d3-7e4f-8a9b-0c1d2e3f4a5b")
	other := uuid.MustParse("0190a0b1-c2d3-7e4f-8a9b-0c1d2e3f4a5a")
	starts := dropNow
	digest := sha256.Sum256(append(append([]byte{}, other[:]...), id[:]...))
	require.Equal(t, digest[:], domain.EntriesDigest([][16]byte{id, other}), "the ids in ascending byte order")
	h := sha256.Sum256(append(append(append([]byte{}, seed...), digest[:]...), id[:]...))
	require.Equal(t, h, domain.DrawHash(seed, digest[:], id))
	early := domain.OrderKey(domain.DropLottery, starts, seed, digest[:], id, starts.Add(-time.Microsecond))
	require.Equal(t, append([]byte{0}, h[:]...), early)
	require.Nil(t, domain.OrderKey(domain.DropLottery, starts, nil, nil, id, starts.Add(-time.Microsecond)), "not drawn before the seed")
	before := sha256.Sum256(append(append([]byte{}, seed...), id[:]...))
	require.Equal(t, append([]byte{0}, before[:]...), domain.OrderKey(domain.DropLottery, starts, seed, nil, id, starts.Add(-time.Microsecond)),
		"a draw made before digests keeps its keys")

	joined := starts.Add(1500 * time.Microsecond)
	late := domain.OrderKey(domain.DropLottery, starts, nil, nil, id, joined)
	want := []byte{1}
	want = binary.BigEndian.AppendUint64(want, uint64(joined.UnixMicro()))
	want = append(want, id[:]...)
	require.Equal(t, want, late, "a late entry's key needs no seed")
	require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(domain.OrderKey(domain.DropFIFO, starts, seed, nil, id, starts.Add(-time.Hour).Add(time.Hour+1500*time.Microsecond))))
	fifoEarly := domain.OrderKey(domain.DropFIFO, starts, nil, nil, id, starts.Add(-time.Hour))
	require.Equal(t, byte(1), fifoEarly[0], "fifo ranks everyone by joined_at")

	// Every early entry ranks before every late one; late ones by joined_at.
	type entry struct {
		id     uuid.UUID
		joined time.Time
	}
	var entries []entry
	for i := range 50 {
		entries = append(entries, entry{uuid.New(), starts.Add(time.Duration(i-25) * time.Millisecond)})
	}
	keys := make([][]byte, len(entries))
	for i, e := range entries {
		keys[i] = domain.OrderKey(domain.DropLottery, starts, seed, noEntries, e.id, e.joined)
	}
	idx := make([]int, len(entries))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return domain.CompareOrderKeys(keys[idx[a]], keys[idx[b]]) < 0 })
	for rank, i := range idx {
		if rank < 25 {
			require.True(t, entries[i].joined.Before(starts))
		} else {
			require.Equal(t, starts.Add(time.Duration(rank-25)*time.Millisecond), entries[i].joined)
		}
	}
	require.Equal(t, 1, domain.CompareOrderKeys(nil, late))
	require.Equal(t, -1, domain.CompareOrderKeys(late, nil))
}

func TestEntryLifecycle(t *testing.T) {
	t.Parallel()
	d := newTestDrop(t, func(p *domain.NewDropParams) { p.PurchaseWindowSeconds = intPtr(60) })
	joinedAt := d.OpensAt.Add(time.Second)
	joined, err := domain.Join(d, testEntryID, "alice", joinedAt)
	require.NoError(t, err)
	e, err := domain.Entry{}.Apply(joined...)
	require.NoError(t, err)

	_, err = domain.OrderForEntry(e, "alice", testOrder1, d.StartsAt)
	require.ErrorIs(t, err, domain.ErrNotInvited, "waiting is not invited")
	require.Empty(t, domain.LapseAtDeadline(e, d.StartsAt.Add(time.Hour)), "a waiting entry has no window")

	invited, err := domain.Invite(d, e, d.StartsAt)
	require.NoError(t, err)
	e, err = e.Apply(invited...)
	require.NoError(t, err)
	require.Equal(t, d.StartsAt.Add(time.Minute), *e.PurchaseDeadline)
	_, err = domain.Invite(d, e, d.StartsAt)
	require.Error(t, err, "invited once")

	_, err = domain.OrderForEntry(e, "bob", testOrder1, d.StartsAt)
	require.ErrorIs(t, err, domain.ErrNotInvited, "someone else's invitation")
	_, err = domain.OrderForEntry(e, "alice", testOrder1, *e.PurchaseDeadline)
	require.ErrorIs(t, err, domain.ErrNotInvited, "window ended")
	ordered, err := domain.OrderForEntry(e, "alice", testOrder1, d.StartsAt.Add(time.Second))
	require.NoError(t, err)
	e, err = e.Apply(ordered...)
	require.NoError(t, err)
	_, err = domain.OrderForEntry(e, "alice", testOrder2, d.StartsAt.Add(2*time.Second))
	require.ErrorIs(t, err, domain.ErrNotInvited, "one order per invitation")

	_, err = domain.PurchaseEntry(e, testOrder2, d.StartsAt)
	require.Error(t, err, "another order does not purchase")
	require.Empty(t, domain.LapseAtDeadline(e, e.PurchaseDeadline.Add(-time.Microsecond)))
	lapsed, err := e.Apply(domain.LapseAtDeadline(e, *e.PurchaseDeadline)...)
	require.NoError(t, err)
	require.Equal(t, domain.EntryStatusLapsed, lapsed.Status)
	_, err = domain.PurchaseEntry(lapsed, testOrder1, d.StartsAt)
	require.Equal(t, domain.CodeInvalidTransition, domain.ErrorCode(err), "a lapsed entry refuses the payment")

	bought, err := domain.PurchaseEntry(e, testOrder1, d.StartsAt.Add(time.Second))
	require.NoError(t, err)
	e, err = e.Apply(bought...)
	require.NoError(t, err)
	require.Equal(t, domain.EntryStatusPurchased, e.Status)
	again, err := domain.PurchaseEntry(e, testOrder1, d.StartsAt.Add(2*time.Second))
	require.NoError(t, err)
	require.Empty(t, again, "paying again is a no-op")
	require.Empty(t, domain.LapseAtDeadline(e, e.PurchaseDeadline.Add(time.Hour)), "a purchase does not lapse")

	for _, tc := range []struct {
		status domain.OrderStatus
		reason string
	}{
		{domain.StatusClosed, domain.LapseOrderClosed},
		{domain.StatusCancelled, domain.LapseOrderCancelled},
		{domain.StatusExpired, domain.LapseOrderExpired},
		{domain.StatusAccepted, ""},
		{domain.StatusCompleted, ""},
	} {
		events := domain.LapseForOrder(e, domain.Order{Status: tc.status}, dropNow)
		if tc.reason == "" {
			require.Empty(t, events, tc.status)
			continue
		}
		require.Equal(t, tc.reason, events[0].Data.(domain.EntryLapsed).Reason)
	}

	waiting, err := domain.Entry{}.Apply(joined...)
	require.NoError(t, err)
	sold, err := waiting.Apply(domain.SellOutEntry(waiting, dropNow)...)
	require.NoError(t, err)
	require.Equal(t, domain.EntryStatusSoldOut, sold.Status)
	require.Empty(t, domain.SellOutEntry(e, dropNow), "only waiting entries sell out")
}

func TestEntryStatusInItsDrop(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		entry domain.EntryStatus
		drop  domain.DropState
		want  domain.EntryStatus
	}{
		{domain.EntryStatusWaiting, domain.DropStateSelling, domain.EntryStatusWaiting},
		{domain.EntryStatusWaiting, domain.DropStateOpen, domain.EntryStatusWaiting},
		// Not written yet by the sell-out's chunks, sold out all the same.
		{domain.EntryStatusWaiting, domain.DropStateSoldOut, domain.EntryStatusSoldOut},
		{domain.EntryStatusSoldOut, domain.DropStateSoldOut, domain.EntryStatusSoldOut},
		{domain.EntryStatusPurchased, domain.DropStateSoldOut, domain.EntryStatusPurchased},
		{domain.EntryStatusLapsed, domain.DropStateSoldOut, domain.EntryStatusLapsed},
		{domain.EntryStatusInvited, domain.DropStateSelling, domain.EntryStatusInvited},
	} {
		require.Equal(t, tc.want, domain.Entry{Status: tc.entry}.StatusIn(tc.drop), "%s in a %s drop", tc.entry, tc.drop)
	}
}

func TestDropEventsRoundTrip(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{
		domain.EventDropCreated, domain.EventDropOpened, domain.EventDropStarted, domain.EventDropSoldOut,
		domain.EventDropEnded, domain.EventEntryJoined, domain.EventEntryInvited, domain.EventEntryOrdered, domain.EventEntryPurchased,
		domain.EventEntryLapsed, domain.EventEntrySoldOut,
	} {
		e, err := domain.DecodeEvent(typ, []byte(`{}`))
		require.NoError(t, err, typ)
		require.Equal(t, typ, e.Type)
	}
}

func TestWhoMaySeeAnEntry(t *testing.T) {
	t.Parallel()
	m, n := uuid.New(), uuid.New()
	require.True(t, domain.Party{Actor: domain.ActorCustomer, Subject: "alice"}.MaySeeEntry("alice", m))
	require.False(t, domain.Party{Actor: domain.ActorCustomer, Subject: "bob"}.MaySeeEntry("alice", m))
	require.True(t, domain.Party{Actor: domain.ActorMerchant, MerchantID: m}.MaySeeEntry("alice", m))
	require.False(t, domain.Party{Actor: domain.ActorMerchant, MerchantID: n}.MaySeeEntry("alice", m))
	require.True(t, domain.Party{Actor: domain.ActorAdmin}.MaySeeEntry("alice", m))
}

// TestEveryEarlyEntryMovesEveryRank: the digest is of the set, whatever
// the order it is read in, and one entry more or less in it changes every
// early entry's draw; the start of a lottery records it, a fifo's has none.
func TestEveryEarlyEntryMovesEveryRank(t *testing.T) {
	t.Parallel()
	seed := testSeed()
	starts := dropNow
	var ids [][16]byte
	for range 20 {
		ids = append(ids, uuid.New())
	}
	reversed := slices.Clone(ids)
	slices.Reverse(reversed)
	digest := domain.EntriesDigest(ids)
	require.Equal(t, digest, domain.EntriesDigest(reversed))
	grown := domain.EntriesDigest(append(slices.Clone(ids), uuid.New()))
	require.NotEqual(t, digest, grown)
	for _, id := range ids {
		require.NotEqual(t, domain.OrderKey(domain.DropLottery, starts, seed, digest, id, starts.Add(-time.Second)),
			domain.OrderKey(domain.DropLottery, starts, seed, grown, id, starts.Add(-time.Second)))
	}

	d := newTestDrop(t, nil)
	require.Equal(t, domain.DropLottery, d.Mode)
	events, err := domain.AdvanceDrop(d, testSeed(), digest, d.StartsAt)
	require.NoError(t, err)
	d, err = d.Apply(events...)
	require.NoError(t, err)
	require.Equal(t, digest, d.EntriesDigest)
	require.Equal(t, domain.OrderKey(domain.DropLottery, starts, seed, digest, ids[0], starts.Add(-time.Second)), d.OrderKey(ids[0], starts.Add(-time.Second)))
	_, err = domain.AdvanceDrop(newTestDrop(t, nil), testSeed(), nil, d.StartsAt)
	require.Error(t, err, "a lottery does not start without the digest of its entries")

	fifo := newTestDrop(t, func(p *domain.NewDropParams) { p.Mode = domain.DropFIFO })
	events, err = domain.AdvanceDrop(fifo, testSeed(), nil, fifo.StartsAt)
	require.NoError(t, err)
	fifo, err = fifo.Apply(events...)
	require.NoError(t, err)
	require.Nil(t, fifo.EntriesDigest)
}

func TestEntryAfterOrder(t *testing.T) {
	t.Parallel()
	paidAt := dropNow.Add(-time.Minute)
	unpaid := domain.Order{ID: testOrder1, Version: 1, Status: domain.StatusAwaitingPayment}
	paid := domain.Order{ID: testOrder1, Version: 2, Status: domain.StatusAccepted, PaidAt: &paidAt}
	with := func(o domain.Order, status domain.OrderStatus) domain.Order {
		o.Version++
		o.Status = status
		return o
	}
	invited := domain.Entry{Status: domain.EntryStatusInvited, OrderID: testOrder1}
	purchased := domain.Entry{Status: domain.EntryStatusPurchased, OrderID: testOrder1}
	lapsed := domain.Entry{Status: domain.EntryStatusLapsed, OrderID: testOrder1}
	for _, tc := range []struct {
		name          string
		entry         domain.Entry
		before, after domain.Order
		changes       bool
		want          []string // the events' types
		refused       bool
	}{
		{name: "a payment purchases the invitation", entry: invited, before: unpaid, after: paid, changes: true, want: []string{domain.EventEntryPurchased}},
		{name: "a payment of a lapsed entry is refused", entry: lapsed, before: unpaid, after: paid, changes: true, refused: true},
		{name: "a payment again of a purchased entry changes nothing", entry: purchased, before: unpaid, after: paid, changes: true},
		{name: "a placement paid at once is not a payment of an order", entry: invited, before: domain.Order{}, after: paid, changes: false},
		{name: "a close lapses the invitation", entry: invited, before: unpaid, after: with(unpaid, domain.StatusClosed), changes: true, want: []string{domain.EventEntryLapsed}},
		{name: "a cancellation after payment lapses the purchase", entry: purchased, before: paid, after: with(paid, domain.StatusCancelled), changes: true, want: []string{domain.EventEntryLapsed}},
		{name: "an expiry lapses the purchase", entry: purchased, before: paid, after: with(paid, domain.StatusExpired), changes: true, want: []string{domain.EventEntryLapsed}},
		{name: "a completion keeps the purchase", entry: purchased, before: paid, after: with(paid, domain.StatusCompleted), changes: false},
		{name: "an end of a lapsed entry's order changes nothing", entry: lapsed, before: unpaid, after: with(unpaid, domain.StatusClosed), changes: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.changes, domain.ChangesEntry(tc.before, tc.after))
			if !tc.changes {
				return
			}
			events, err := domain.EntryAfterOrder(tc.entry, tc.before, tc.after, dropNow)
			if tc.refused {
				require.Equal(t, domain.CodeInvalidTransition, domain.ErrorCode(err))
				return
			}
			require.NoError(t, err)
			var types []string
			for _, e := range events {
				types = append(types, e.Type)
			}
			require.Equal(t, tc.want, types)
		})
	}
}
