package store

import (
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

// SettleDrop brings a drop up to date under its row lock: it opens and
// starts it when their times have come (publishing the seed and drawing the
// early entries' ranks), lapses invitations whose window ended, invites
// waiting entries in rank order while units allow, and sells it out when
// every unit is purchased. It is idempotent: every timer of a drop, and
// every nudge after a join, a purchase or a lapse, runs it.
//
// A sell-out writes the waiting entries sold_out SellOutChunk at a time, a
// transaction each, until none is left: a line of tens of thousands would
// otherwise be one transaction long enough to meet the statement timeout
// under load. Between them the drop is sold_out and its entries still
// recorded as waiting read as sold_out (domain.Entry.StatusIn). Each
// transaction that leaves some behind commits a timer for the rest with
// them, so that a process stopped between two goes on elsewhere, and the
// backstop (DropsToSettle) finds a sold-out drop with entries waiting.
func (s *Store) SettleDrop(ctx context.Context, merchantID, dropID uuid.UUID) error {
	for {
		var more bool
		err := s.inTx(ctx, func(tx pgx.Tx) (err error) {
			more, err = s.settleDrop(ctx, tx, merchantID, dropID)
			return err
		})
		if err != nil || !more {
			return err
		}
	}
}

// sellOutResume is when the timer a sell-out's transaction leaves for the
// waiting entries after it fires: later than the next transactions of the
// same SettleDrop, which usually leave it nothing to do, and soon enough
// that a stopped process's sell-out is finished by another within seconds.
const sellOutResume = 5 * time.Second

// settleDrop is one transaction of SettleDrop; more says that a sell-out
// left waiting entries for the next.
func (s *Store) settleDrop(ctx context.Context, tx pgx.Tx, merchantID, dropID uuid.UUID) (more bool, err error) {
	d, err := scanDrop(tx.QueryRow(ctx, `SELECT `+dropColumns+` FROM drops d WHERE d.merchant_id = $1 AND d.id = $2 FOR UPDATE`, merchantID, dropID))
	if errors.Is(err, errDropNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	// The decisions' time, read once the drop's lock is held.
	now := s.now()
	var seed, digest []byte
	if d.State.Active() && d.State != domain.DropStateSelling && !now.Before(d.StartsAt) {
		if err := tx.QueryRow(ctx, `SELECT seed FROM drop_seeds WHERE merchant_id = $1 AND drop_id = $2`, merchantID, dropID).Scan(&seed); err != nil {
			return false, fmt.Errorf("read seed: %w", err)
		}
		if d.Mode == domain.DropLottery {
			// Every join waits for the drop's lock held here, and one after
			// the start joins after starts_at (joinAt): this is the closed
			// set of the early entries.
			if digest, err = earlyEntriesDigest(ctx, tx, d); err != nil {
				return false, err
			}
		}
	}
	events, err := domain.AdvanceDrop(d, seed, digest, now)
	if err != nil {
		return false, err
	}
	after, err := d.Apply(events...)
	if err != nil {
		return false, err
	}
	var jobs []river.InsertManyParams
	switch {
	case d.State != domain.DropStateSelling && after.State == domain.DropStateSelling && after.Mode == domain.DropLottery:
		// The draw writes the ranks the start's invitations need now, and
		// leaves the rest to the settle right after, so that the first
		// invitations do not wait for every entry's row to be rewritten.
		pending, err := drawEntries(ctx, tx, after, after.Units)
		if err != nil {
			return false, err
		}
		if pending {
			jobs = append(jobs, settleJob(merchantID, dropID, now))
		}
	case d.State == domain.DropStateSelling:
		if err := finishDraw(ctx, tx, after); err != nil {
			return false, err
		}
	}
	if after.State == domain.DropStateSelling {
		if err := s.lapseDueWindows(ctx, tx, after, now); err != nil {
			return false, err
		}
		var outstanding, purchased int
		if err := tx.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'invited'), count(*) FILTER (WHERE status = 'purchased')
			FROM drop_entries WHERE merchant_id = $1 AND drop_id = $2 AND status IN ('invited', 'purchased')`, merchantID, dropID).
			Scan(&outstanding, &purchased); err != nil {
			return false, fmt.Errorf("count invitations: %w", err)
		}
		var deadline *time.Time
		if n := domain.InvitationsDue(after, outstanding, purchased); n > 0 {
			if deadline, err = inviteNext(ctx, tx, after, n, now); err != nil {
				return false, err
			}
			if deadline != nil {
				jobs = append(jobs, settleJob(merchantID, dropID, *deadline))
			}
		}
		if sold := domain.SellOut(after, purchased, now); len(sold) > 0 {
			if after, err = after.Apply(sold...); err != nil {
				return false, err
			}
			events = append(events, sold...)
		}
		if outstanding == 0 && deadline == nil && after.State == domain.DropStateSelling {
			// Nobody holds an invitation and nobody was left to invite.
			line, err := readLine(ctx, tx, after, purchased)
			if err != nil {
				return false, err
			}
			if ended := domain.End(after, line, now); len(ended) > 0 {
				if after, err = after.Apply(ended...); err != nil {
					return false, err
				}
				events = append(events, ended...)
			} else if at := domain.EndsAt(after, line); !at.IsZero() {
				jobs = append(jobs, settleJob(merchantID, dropID, at))
			}
		}
	}
	if after.State == domain.DropStateSoldOut {
		if more, err = sellOutWaiting(ctx, tx, after, max(1, s.cfg.SellOutChunk), now); err != nil {
			return false, err
		}
		if more {
			jobs = append(jobs, settleJob(merchantID, dropID, now.Add(sellOutResume)))
		}
	}
	if len(events) > 0 {
		if err := writeDrop(ctx, tx, dropChange{before: d, after: after, events: events, meta: Meta{Actor: domain.ActorSystem}}, now); err != nil {
			return false, err
		}
	}
	return more, s.insertJobs(ctx, tx, jobs)
}

// earlyEntriesDigest is the digest of the lottery drop's entries that
// joined before its start (domain.EntriesDigest).
func earlyEntriesDigest(ctx context.Context, tx pgx.Tx, d domain.Drop) ([]byte, error) {
	rows, err := tx.Query(ctx, `SELECT id FROM drop_entries WHERE merchant_id = $1 AND drop_id = $2 AND joined_at < $3`,
		d.MerchantID, d.DropID, d.StartsAt)
	if err != nil {
		return nil, fmt.Errorf("read early entries: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[[16]byte])
	if err != nil {
		return nil, fmt.Errorf("read early entries: %w", err)
	}
	return domain.EntriesDigest(ids), nil
}

// readLine reads what a selling drop's end depends on, when no invitation
// is outstanding.
func readLine(ctx context.Context, tx pgx.Tx, d domain.Drop, purchased int) (domain.DropLine, error) {
	l := domain.DropLine{Purchased: purchased, LastActivity: d.StartsAt}
	var lastJoined, lastDeadline *time.Time
	var waiting bool
	if err := tx.QueryRow(ctx, `SELECT
			EXISTS (SELECT 1 FROM drop_entries WHERE merchant_id = $1 AND drop_id = $2 AND status = 'waiting'),
			(SELECT last_joined_at FROM drop_lines WHERE merchant_id = $1 AND drop_id = $2),
			(SELECT max(purchase_deadline) FROM drop_entries WHERE merchant_id = $1 AND drop_id = $2 AND status IN ('invited', 'purchased', 'lapsed'))`,
		d.MerchantID, d.DropID).Scan(&waiting, &lastJoined, &lastDeadline); err != nil {
		return l, fmt.Errorf("read line: %w", err)
	}
	if waiting {
		l.Waiting = 1
	}
	for _, t := range []*time.Time{lastJoined, lastDeadline} {
		if t != nil && t.After(l.LastActivity) {
			l.LastActivity = *t
		}
	}
	return l, nil
}

// drawEntries ranks every entry of a lottery drop at its start: the early
// ones by the key the seed just published gives them, those that joined
// since starts_at (the start's timer running late) after them by their
// own keys. It writes the keys and ranks of the best write of them, which
// the start's invitations need, and leaves the others' to finishDraw,
// recording in the line from which rank on they are pending. The line
// counts every entry ranked, so that joins number theirs after all of them.
func drawEntries(ctx context.Context, tx pgx.Tx, d domain.Drop, write int) (pending bool, err error) {
	all, err := readUndrawn(ctx, tx, d)
	if err != nil || len(all) == 0 {
		return false, err
	}
	n := min(write, len(all))
	var from any
	if n < len(all) {
		from = n + 1
	}
	b := &pgx.Batch{}
	addRanks(b, d, all[:n], 1)
	b.Queue(`UPDATE drop_lines SET ranked = $3, last_joined_at = greatest(last_joined_at, $4), draw_pending_from = $5
		WHERE merchant_id = $1 AND drop_id = $2`, d.MerchantID, d.DropID, len(all), all[len(all)-1].joinedAt, from)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return false, fmt.Errorf("draw entries: %w", err)
	}
	return n < len(all), nil
}

// finishDraw writes the keys and ranks the draw left pending: the entries
// without a rank are the rest of the draw's order, in the same order.
func finishDraw(ctx context.Context, tx pgx.Tx, d domain.Drop) error {
	var from *int
	if err := tx.QueryRow(ctx, `SELECT draw_pending_from FROM drop_lines WHERE merchant_id = $1 AND drop_id = $2`, d.MerchantID, d.DropID).Scan(&from); err != nil {
		return fmt.Errorf("read line: %w", err)
	}
	if from == nil {
		return nil
	}
	rest, err := readUndrawn(ctx, tx, d)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	addRanks(b, d, rest, *from)
	b.Queue(`UPDATE drop_lines SET draw_pending_from = NULL WHERE merchant_id = $1 AND drop_id = $2`, d.MerchantID, d.DropID)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("finish draw: %w", err)
	}
	return nil
}

type drawn struct {
	id       [16]byte
	key      []byte
	joinedAt time.Time
}

// readUndrawn reads the drop's entries without a rank, in the order of
// their keys.
func readUndrawn(ctx context.Context, tx pgx.Tx, d domain.Drop) ([]drawn, error) {
	rows, err := tx.Query(ctx, `SELECT id, joined_at, order_key FROM drop_entries WHERE merchant_id = $1 AND drop_id = $2 AND rank IS NULL`,
		d.MerchantID, d.DropID)
	if err != nil {
		return nil, fmt.Errorf("read entries to draw: %w", err)
	}
	defer rows.Close()
	var all []drawn
	for rows.Next() {
		var id uuid.UUID
		var joined time.Time
		var key []byte
		if err := rows.Scan(&id, &joined, &key); err != nil {
			return nil, fmt.Errorf("scan entry to draw: %w", err)
		}
		if key == nil {
			key = d.OrderKey(id, joined)
		}
		all = append(all, drawn{id, key, joined})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read entries to draw: %w", err)
	}
	sort.Slice(all, func(i, j int) bool { return domain.CompareOrderKeys(all[i].key, all[j].key) < 0 })
	return all, nil
}

// addRanks adds to b the write of entries' keys and ranks, from first on.
func addRanks(b *pgx.Batch, d domain.Drop, entries []drawn, first int) {
	if len(entries) == 0 {
		return
	}
	ids, keys, ranks := make([][16]byte, len(entries)), make([][]byte, len(entries)), make([]int32, len(entries))
	for i, e := range entries {
		ids[i], keys[i], ranks[i] = e.id, e.key, int32(first+i)
	}
	b.Queue(`UPDATE drop_entries e SET order_key = t.k, rank = t.r FROM unnest($3::uuid[], $4::bytea[], $5::int[]) AS t(id, k, r)
		WHERE e.merchant_id = $1 AND e.drop_id = $2 AND e.id = t.id`, d.MerchantID, d.DropID, ids, keys, ranks)
}

// lapseDueWindows lapses the drop's invitations whose window has ended.
func (s *Store) lapseDueWindows(ctx context.Context, tx pgx.Tx, d domain.Drop, now time.Time) error {
	due, err := lockEntries(ctx, tx, `e.merchant_id = $1 AND e.drop_id = $2 AND e.status = 'invited' AND e.purchase_deadline <= $3
		ORDER BY e.id FOR UPDATE`, d.MerchantID, d.DropID, now)
	if err != nil {
		return err
	}
	var changes []entryChange
	for _, e := range due {
		if c, ok, err := newEntryChange(e, domain.LapseAtDeadline(e, now), Meta{Actor: domain.ActorSystem}); err != nil {
			return err
		} else if ok {
			changes = append(changes, c)
		}
	}
	return writeEntries(ctx, tx, changes, now)
}

// inviteNext invites up to n waiting entries, best ranked first, and
// returns their purchase deadline.
func inviteNext(ctx context.Context, tx pgx.Tx, d domain.Drop, n int, now time.Time) (*time.Time, error) {
	next, err := lockEntries(ctx, tx, `e.merchant_id = $1 AND e.drop_id = $2 AND e.status = 'waiting' AND e.rank IS NOT NULL
		ORDER BY e.rank LIMIT $3 FOR UPDATE`, d.MerchantID, d.DropID, n)
	if err != nil || len(next) == 0 {
		return nil, err
	}
	changes := make([]entryChange, 0, len(next))
	for _, e := range next {
		events, err := domain.Invite(d, e, now)
		if err != nil {
			return nil, err
		}
		c, _, err := newEntryChange(e, events, Meta{Actor: domain.ActorSystem})
		if err != nil {
			return nil, err
		}
		changes = append(changes, c)
	}
	if _, err := tx.Exec(ctx, `UPDATE drop_lines SET invited = invited + $3 WHERE merchant_id = $1 AND drop_id = $2`,
		d.MerchantID, d.DropID, len(changes)); err != nil {
		return nil, fmt.Errorf("count invitations: %w", err)
	}
	deadline := *changes[0].after.PurchaseDeadline
	return &deadline, writeEntries(ctx, tx, changes, now)
}

// sellOutWaiting turns up to limit waiting entries of a sold-out drop
// sold_out, best ranked first; more says that some may be left.
func sellOutWaiting(ctx context.Context, tx pgx.Tx, d domain.Drop, limit int, now time.Time) (more bool, err error) {
	waiting, err := lockEntries(ctx, tx, `e.merchant_id = $1 AND e.drop_id = $2 AND e.status = 'waiting'
		ORDER BY e.rank, e.id LIMIT $3 FOR UPDATE`, d.MerchantID, d.DropID, limit)
	if err != nil {
		return false, err
	}
	changes := make([]entryChange, 0, len(waiting))
	for _, e := range waiting {
		if c, ok, err := newEntryChange(e, domain.SellOutEntry(e, now), Meta{Actor: domain.ActorSystem}); err != nil {
			return false, err
		} else if ok {
			changes = append(changes, c)
		}
	}
	return len(waiting) == limit, writeEntries(ctx, tx, changes, now)
}

// DropsToSettle fires, for up to limit drops, what their timers should have
// done before cutoff: an opening, a start, a window that ended, the end of
// a drop nobody is in line for; what a lost nudge would have: units free
// while entries wait, every unit bought while the drop still sells; and the
// rest of a sell-out whose process stopped between its transactions. It
// reports how many drops it settled. The drop's line is a join and the wait
// for entries a condition, not a lateral subquery without FROM, which Citus
// refuses to correlate; the counts are of active drops only, so that the
// entries of drops long sold out are not counted at every round.
func (s *Store) DropsToSettle(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	type key struct{ Merchant, Drop uuid.UUID }
	// On Citus, read on each worker over its shards of drops, each joined
	// to its co-located shards of entries and lines (the join is by
	// merchant): through the coordinator it was a distributed join
	// planned there at every round of every process.
	return sweepOverdueJoined(ctx, s, "drops to settle", "drops", func(name func(string) string) string {
		return `
		SELECT d.merchant_id, d.id FROM (SELECT * FROM ` + name("drops") + ` WHERE state IN ('scheduled', 'open', 'selling', 'sold_out')) d
		CROSS JOIN LATERAL (
			SELECT count(*) FILTER (WHERE e.status = 'purchased') AS purchased,
				count(*) FILTER (WHERE e.status = 'invited') AS invited,
				count(*) FILTER (WHERE e.status = 'invited' AND e.purchase_deadline < $1) AS lapsing,
				max(e.purchase_deadline) AS last_deadline
			FROM ` + name("drop_entries") + ` e WHERE e.merchant_id = d.merchant_id AND e.drop_id = d.id AND e.status IN ('invited', 'purchased', 'lapsed')
				AND d.state <> 'sold_out'
		) c
		LEFT JOIN ` + name("drop_lines") + ` l ON l.merchant_id = d.merchant_id AND l.drop_id = d.id
		WHERE (d.state = 'scheduled' AND d.opens_at < $1)
		   OR (d.state IN ('scheduled', 'open') AND d.starts_at < $1)
		   OR (d.state = 'selling' AND (c.lapsing > 0 OR c.purchased >= d.units
				OR (c.invited + c.purchased < d.units AND EXISTS (SELECT 1 FROM ` + name("drop_entries") + ` w
					WHERE w.merchant_id = d.merchant_id AND w.drop_id = d.id AND w.status = 'waiting' AND w.joined_at < $1))
				OR (c.invited = 0
					AND NOT EXISTS (SELECT 1 FROM ` + name("drop_entries") + ` w WHERE w.merchant_id = d.merchant_id AND w.drop_id = d.id AND w.status = 'waiting')
					AND greatest(d.starts_at, l.last_joined_at, c.last_deadline) + make_interval(secs => d.purchase_window_seconds) < $1)))
		   OR (d.state = 'sold_out' AND EXISTS (SELECT 1 FROM ` + name("drop_entries") + ` w
				WHERE w.merchant_id = d.merchant_id AND w.drop_id = d.id AND w.status = 'waiting'))
		LIMIT $2`
	}, cutoff, limit, func(k key) error {
		return s.SettleDrop(ctx, k.Merchant, k.Drop)
	})
}
