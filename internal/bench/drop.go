package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/orderd/orderd/auth"
)

// dropWindowSeconds is the drop's purchase window: the shortest API.md allows.
const dropWindowSeconds = 30

// drop: a scheduled release. Entries join in the pre-queue from many
// clients; at the start the lottery ranks them and invitations go out in
// rank order; 90 % of the invited pay at once, 10 % never do, so their
// windows lapse and the next in line is invited. The bench learns of
// invitations the way a notification service would, from the database, and
// buys for the customer at once.
func drop(ctx context.Context, t *Target, o Options) (*Result, error) {
	clients := orDefault(o.Clients, 256)
	entries := orDefault(o.Count, 50000)
	// One unit for every fifty entries, as in the 1,000 for 50,000 of the default.
	units := min(1000, max(1, entries/50))
	mID, err := t.createMerchant(ctx, merchantSpec{Name: "drop", Capacity: 100000, PaymentTimeoutSeconds: 600})
	if err != nil {
		return nil, err
	}
	pID, err := t.createProduct(ctx, mID, map[string]any{"name": "autumn osmanthus cup", "price_cents": 1800, "stock": units})
	if err != nil {
		return nil, err
	}
	// The pre-queue lasts long enough for the joins at the goal's rate, and
	// at least five seconds.
	opens := time.Now().Add(2 * time.Second)
	starts := opens.Add(max(5*time.Second, time.Duration(entries/2500)*time.Second))
	var created struct {
		ID string `json:"id"`
	}
	if _, err := t.call(ctx, "POST", "/v1/products/"+pID+"/drops", t.admin(), map[string]any{
		"opens_at": opens.UTC().Format(time.RFC3339Nano), "starts_at": starts.UTC().Format(time.RFC3339Nano),
		"mode": "lottery", "units": units, "purchase_window_seconds": dropWindowSeconds,
	}, nil, &created); err != nil {
		return nil, fmt.Errorf("create drop: %w", err)
	}
	dropID := created.ID
	joiner := func(i int) auth.Principal {
		return auth.Principal{Subject: fmt.Sprintf("drop-c%d", i), Role: auth.RoleCustomer}
	}
	time.Sleep(time.Until(opens))

	// When a customer's app, polling from the start, first sees an
	// invitation committed, whether or not the joins are still running.
	var firstSeen time.Time
	seenDone := make(chan struct{})
	go func() {
		defer close(seenDone)
		time.Sleep(time.Until(starts))
		for ctx.Err() == nil && time.Since(starts) < time.Minute {
			var invited bool
			if err := t.Pool.QueryRow(ctx, `SELECT invited > 0 FROM drop_lines WHERE merchant_id = $1 AND drop_id = $2`, mID, dropID).Scan(&invited); err == nil && invited {
				firstSeen = time.Now()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()

	rec := newRecorder()
	bar := newBar(o, entries, "drop: joining the pre-queue")
	cpu := t.readCPU()
	joinTime, errs := drive(ctx, clients, entries, rec, bar, func(ctx context.Context, _, i int) error {
		_, err := t.call(ctx, "POST", "/v1/drops/"+dropID+"/entries", t.token(joiner(i)), nil, nil, nil)
		return err
	})
	joined := int64(entries - len(errs))
	res := &Result{Extra: map[string]any{"clients": clients, "entries": entries, "units": units, "window_seconds": dropWindowSeconds,
		"joined": joined, "joins_before_start": time.Now().Before(starts)}}
	res.setCost(t.perUnit(res.Extra, "join", cpu, joined))
	res.PerS = float64(joined) / joinTime.Seconds()
	rec.summarize(res)
	res.Violations = append(res.Violations, unexpected(errs, ctx)...)

	// Buy for every invited customer at once, except one in ten who never
	// pays; stop at the sell-out.
	deadline := starts.Add(time.Duration(dropWindowSeconds)*time.Second*time.Duration(2+units/100) + time.Minute)
	runCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	time.Sleep(time.Until(starts))
	seen := map[string]bool{}
	buys := make(chan string, units*2)
	var bought, refused atomic.Int64
	var wg sync.WaitGroup
	for range min(clients, 64) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range buys {
				_, err := t.call(runCtx, "POST", "/v1/orders", t.token(auth.Principal{Subject: c, Role: auth.RoleCustomer}),
					placeBody{MerchantID: mID, Items: []line{{ProductID: pID, Quantity: 1}}, PaymentRef: "pay"},
					map[string]string{"Idempotency-Key": uuid.NewString()}, nil)
				if err != nil {
					refused.Add(1)
					continue
				}
				bought.Add(1)
			}
		}()
	}
	rng := rand.New(rand.NewPCG(o.Seed, 19))
	var state string
	for runCtx.Err() == nil {
		if err := t.Pool.QueryRow(runCtx, `SELECT state FROM drops WHERE id = $1`, dropID).Scan(&state); err != nil {
			break
		}
		if state == "sold_out" {
			break
		}
		rows, err := t.Pool.Query(runCtx, `SELECT customer_id FROM drop_entries WHERE merchant_id = $1 AND drop_id = $2 AND status = 'invited' AND order_id IS NULL`, mID, dropID)
		if err != nil {
			break
		}
		for rows.Next() {
			var c string
			if rows.Scan(&c) != nil || seen[c] {
				continue
			}
			seen[c] = true
			if rng.IntN(10) == 0 {
				continue // never pays
			}
			buys <- c
		}
		rows.Close()
		time.Sleep(20 * time.Millisecond)
	}
	close(buys)
	wg.Wait()
	<-seenDone
	if state != "sold_out" {
		res.Violations = append(res.Violations, fmt.Sprintf("the drop did not sell out by %s (state %s)", deadline.Format(time.RFC3339), state))
	}
	// The sell-out writes the waiting entries sold_out a bounded number per
	// transaction after the drop's own sold_out (they read sold_out from
	// it on): wait for the last of them before counting.
	for settleBy := time.Now().Add(time.Minute); state == "sold_out" && time.Now().Before(settleBy); time.Sleep(50 * time.Millisecond) {
		var waiting bool
		if err := t.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM drop_entries WHERE merchant_id = $1 AND drop_id = $2 AND status = 'waiting')`,
			mID, dropID).Scan(&waiting); err != nil {
			return nil, err
		}
		if !waiting {
			break
		}
	}

	var firstInvite, lastInvite, soldOutAt, lastPaid, lastEntrySoldOut *time.Time
	var lagP50, lagMax *float64
	var purchased, total, customersCount, unsettled int
	if err := t.Pool.QueryRow(ctx, `
		SELECT (SELECT min(invited_at) FROM drop_entries WHERE drop_id = $1),
			(SELECT max(invited_at) FROM drop_entries WHERE drop_id = $1 AND status = 'purchased'),
			(SELECT recorded_at FROM events WHERE stream_id = $1 AND type = 'drop.sold_out'),
			(SELECT max(o.paid_at) FROM drop_entries e JOIN orders o ON o.id = e.order_id WHERE e.drop_id = $1 AND e.status = 'purchased'),
			(SELECT max(v.recorded_at) FROM drop_entries e JOIN events v ON v.stream_id = e.id AND v.merchant_id = e.merchant_id
				WHERE e.drop_id = $1 AND v.type = 'drop_entry.sold_out'),
			count(*) FILTER (WHERE status = 'purchased'), count(*), count(DISTINCT customer_id),
			count(*) FILTER (WHERE status NOT IN ('purchased', 'lapsed', 'sold_out'))
		FROM drop_entries WHERE drop_id = $1`, dropID).Scan(&firstInvite, &lastInvite, &soldOutAt, &lastPaid, &lastEntrySoldOut,
		&purchased, &total, &customersCount, &unsettled); err != nil {
		return nil, err
	}
	// Invitation lag after a lapse: from a window's end to the first
	// invitation at or after it.
	if err := t.Pool.QueryRow(ctx, `
		SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY lag), max(lag) FROM (
			SELECT extract(epoch FROM (SELECT min(n.invited_at) FROM drop_entries n
				WHERE n.drop_id = l.drop_id AND n.invited_at >= l.purchase_deadline) - l.purchase_deadline) * 1000 AS lag
			FROM drop_entries l WHERE l.drop_id = $1 AND l.status = 'lapsed') x WHERE lag IS NOT NULL`, dropID).Scan(&lagP50, &lagMax); err != nil {
		return nil, err
	}
	if firstInvite != nil {
		res.Extra["start_to_first_invitation_ms"] = firstInvite.Sub(starts).Milliseconds()
	}
	if !firstSeen.IsZero() {
		res.Extra["start_to_first_invitation_seen_ms"] = firstSeen.Sub(starts).Milliseconds()
	}
	// Sold out as fast as the buyers pay: the sell-out follows the last
	// payment at once, and what comes before it is the buyers' doing, the
	// windows the never-payers let lapse (each followed by the next
	// invitation within the lag below) and the last buyer's payment.
	soldOutLag := time.Duration(-1)
	if soldOutAt != nil {
		res.Extra["start_to_sold_out_ms"] = soldOutAt.Sub(starts).Milliseconds()
		if lastPaid != nil {
			soldOutLag = soldOutAt.Sub(*lastPaid)
			res.Extra["last_payment_to_sold_out_ms"] = soldOutLag.Milliseconds()
		}
		if lastEntrySoldOut != nil {
			res.Extra["sold_out_to_last_entry_written_ms"] = lastEntrySoldOut.Sub(*soldOutAt).Milliseconds()
		}
	}
	if lastInvite != nil && lastPaid != nil {
		res.Extra["start_to_last_invitation_ms"] = lastInvite.Sub(starts).Milliseconds()
		res.Extra["windows_lapsed_before_last_invitation"] = int(lastInvite.Sub(starts) / (dropWindowSeconds * time.Second))
		res.Extra["last_invitation_to_payment_ms"] = lastPaid.Sub(*lastInvite).Milliseconds()
	}
	if lagP50 != nil {
		res.Extra["invitation_lag_after_lapse_p50_ms"], res.Extra["invitation_lag_after_lapse_max_ms"] = *lagP50, *lagMax
	}
	res.Extra["bought"], res.Extra["refused_buys"], res.Extra["purchased"] = bought.Load(), refused.Load(), purchased
	if purchased != units {
		res.Violations = append(res.Violations, fmt.Sprintf("%d purchases, want exactly %d units", purchased, units))
	}
	if customersCount != total {
		res.Violations = append(res.Violations, fmt.Sprintf("%d entries for %d customers", total, customersCount))
	}
	if unsettled != 0 {
		res.Violations = append(res.Violations, fmt.Sprintf("%d entries neither purchased, lapsed nor sold_out", unsettled))
	}
	for _, view := range []string{"drop_draw_mismatch", "drop_rank_mismatch", "drop_invitation_order", "drop_oversold"} {
		var n int
		if err := t.Pool.QueryRow(ctx, `SELECT count(*) FROM audit.`+view).Scan(&n); err != nil {
			return nil, err
		}
		if n != 0 {
			res.Violations = append(res.Violations, fmt.Sprintf("audit.%s: %d rows", view, n))
		}
	}
	firstOnTime := firstInvite != nil && firstInvite.Sub(starts) <= time.Second && !firstSeen.IsZero() && firstSeen.Sub(starts) <= time.Second
	asFastAsPaid := soldOutLag >= 0 && soldOutLag <= time.Second && (lagMax == nil || *lagMax <= 1000)
	res.GoalText = "joins ≥ 5,000/s, first invitations within 1 s of the start, sold out as fast as the buyers pay"
	res.setGoalMet(res.PerS >= 5000 && firstOnTime && asFastAsPaid)
	res.Violations = append(res.Violations, t.commonInvariants(ctx)...)
	res.InvariantsOK = len(res.Violations) == 0
	return res, nil
}
