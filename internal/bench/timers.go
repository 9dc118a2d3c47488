package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
)

// timerPhase is one set of unpaid orders left to their payment deadlines.
type timerPhase struct {
	name      string
	merchants []string
	products  []string
}

// timerMerchants creates one merchant (and its product) per payment window.
func (t *Target) timerMerchants(ctx context.Context, name string, windows []int) (*timerPhase, error) {
	p := &timerPhase{name: name}
	for _, w := range windows {
		id, err := t.createMerchant(ctx, merchantSpec{Name: fmt.Sprintf("timers-%s-%d", name, w), Capacity: 100000, PaymentTimeoutSeconds: w})
		if err != nil {
			return nil, err
		}
		pid, err := t.createProduct(ctx, id, map[string]any{"name": "tea", "price_cents": 100})
		if err != nil {
			return nil, err
		}
		p.merchants, p.products = append(p.merchants, id), append(p.products, pid)
	}
	return p, nil
}

func windows(from, to int) []int {
	var w []int
	for s := from; s <= to; s++ {
		w = append(w, s)
	}
	return w
}

// timers: unpaid orders left to their payment deadlines, in three phases
// that overlap, so that each falls due while others do:
//   - long: count orders (100,000) whose deadlines fall 10–70 s after
//     placement;
//   - short: 10,000 orders with deadlines 1–10 s after placement, placed as
//     soon as the long phase's placements end;
//   - crash: a separate `orderd serve` process is started, 10,000 orders with
//     deadlines 2–8 s after placement are placed, and that process is killed
//     with SIGKILL and started again while they fall due.
//
// Lateness runs from each deadline to the commit of the order's close
// (PostgreSQL's commit timestamp when the server tracks them, else the close
// transaction's start). Placement throughput with a timer per order is
// compared with the same placements to an orderd process started to drop
// payment timers, each through a fresh process of its own, in alternate
// rounds, where the bench can start them (else with paid placement to the
// target, which schedules no timer).
func timers(ctx context.Context, t *Target, o Options) (*Result, error) {
	clients := orDefault(o.Clients, 64)
	count := orDefault(o.Count, 100000)
	side := min(count, 10000)
	long, err := t.timerMerchants(ctx, "long", windows(10, 70))
	if err != nil {
		return nil, err
	}
	short, err := t.timerMerchants(ctx, "short", windows(1, 10))
	if err != nil {
		return nil, err
	}
	crash, err := t.timerMerchants(ctx, "crash", windows(2, 8))
	if err != nil {
		return nil, err
	}
	// The baseline's orders wait a day, so that they do not fall due during
	// the run.
	untimed, err := t.timerMerchants(ctx, "untimed", []int{86400})
	if err != nil {
		return nil, err
	}
	place := func(via *Target, label string, p *timerPhase, n int, paid bool, rec *recorder) (int, time.Duration, []error) {
		bar := newBar(o, n, label)
		elapsed, errs := drive(ctx, clients, n, rec, bar, func(ctx context.Context, c, i int) error {
			k := int(rand.New(rand.NewPCG(o.Seed, uint64(i))).IntN(len(p.merchants)))
			body := placeBody{MerchantID: p.merchants[k], Items: []line{{ProductID: p.products[k], Quantity: 1}}}
			if paid {
				body.PaymentRef = "pay"
			}
			_, err := via.call(ctx, "POST", "/v1/orders", via.token(customer("timers-"+p.name, i)),
				body, map[string]string{"Idempotency-Key": uuid.NewString()}, nil)
			return err
		})
		return n - len(errs), elapsed, errs
	}

	res := &Result{Extra: map[string]any{"clients": clients, "orders": count, "short_orders": side}}
	// Placement with and without timers, in alternate rounds to the same
	// merchants (a day's window, so that nothing falls due during the run),
	// so that a change in the machine's other load weighs on both alike.
	timed, untimedVia, paid := t, t, true
	stopWithout := func() {}
	res.Extra["baseline"] = "paid placement (this target cannot start an orderd that drops timers)"
	if t.SpawnUntimed != nil && t.Spawn != nil {
		without, err := t.SpawnUntimed(ctx)
		if err != nil {
			return nil, fmt.Errorf("timers baseline: %w", err)
		}
		stopWithout = without.Stop
		with, err := t.Spawn(ctx)
		if err != nil {
			without.Stop()
			return nil, fmt.Errorf("timers: %w", err)
		}
		defer with.Stop()
		timed, untimedVia, paid = t.via(with), t.via(without), false
		res.Extra["baseline"] = "the same unpaid placements to a fresh orderd process that drops payment timers' River jobs, in alternate rounds with a fresh ordinary one; placement writes no such job (an unpaid order's own row and deadline index are its timer, in both processes, on one PostgreSQL and on Citus), so both do the same work and the ratio can only show a timer job written at placement again"
	}
	const rounds = 4
	perRound := max(min(count, 20000)/rounds, 1)
	rec := newRecorder()
	var withN, withoutN int
	var withTime, withoutTime time.Duration
	var placed *Cost
	for r := range rounds {
		n, d, errs := place(untimedVia, fmt.Sprintf("timers: placement without timers (%d/%d)", r+1, rounds), untimed, perRound, paid, newRecorder())
		res.Violations = append(res.Violations, unexpected(errs, ctx)...)
		withoutN, withoutTime = withoutN+n, withoutTime+d
		cpu := timed.readCPU()
		n, d, errs = place(timed, fmt.Sprintf("timers: placement with timers (%d/%d)", r+1, rounds), untimed, perRound, false, rec)
		res.Violations = append(res.Violations, unexpected(errs, ctx)...)
		withN, withTime = withN+n, withTime+d
		placed = addCost(placed, timed.perUnit(map[string]any{}, "order", cpu, int64(n)))
	}
	// An unpaid order with its timer is the unit, over the rounds with
	// timers only.
	res.setCost(placed)
	stopWithout()
	withPerS, withoutPerS := float64(withN)/withTime.Seconds(), float64(withoutN)/withoutTime.Seconds()
	res.PerS, res.BaselinePerS, res.Ratio, res.Goal = withPerS, withoutPerS, ratio(withPerS, withoutPerS), timersPlacementGoal
	rec.summarize(res)

	n, d, errs := place(timed, "timers: long windows", long, count, false, newRecorder())
	res.Violations = append(res.Violations, unexpected(errs, ctx)...)
	res.Extra["long_placement_per_s"] = float64(n) / d.Seconds()
	_, _, errs = place(t, "timers: short windows", short, side, false, newRecorder())
	res.Violations = append(res.Violations, unexpected(errs, ctx)...)
	phases := []*timerPhase{long, short}
	if t.Spawn != nil {
		restarted, err := t.timerCrash(ctx, res, func() []error {
			_, _, errs := place(t, "timers: crash phase", crash, side, false, newRecorder())
			return errs
		})
		if err != nil {
			return nil, err
		}
		defer restarted.Stop()
		// Jobs the killed process had fetched stay running until River's
		// rescuer looks, a minute later: the backstop closes their orders.
		// Count them once every crash deadline is 2 s past, before then.
		var last time.Time
		if err := t.Pool.QueryRow(ctx, `SELECT max(payment_deadline) FROM orders WHERE merchant_id = ANY($1::uuid[])`, crash.merchants).Scan(&last); err != nil {
			return nil, err
		}
		time.Sleep(time.Until(last.Add(2 * time.Second)))
		// River's table and the orders are read apart: on Citus the one
		// is the coordinator's own and the others are distributed, which
		// Citus does not join.
		var running []string
		if err := t.Pool.QueryRow(ctx, `SELECT coalesce(array_agg(args->>'order_id'), '{}') FROM river_job
			WHERE kind = 'close_unpaid_order' AND state = 'running'`).Scan(&running); err != nil {
			return nil, err
		}
		var held int
		if err := t.Pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE merchant_id = ANY($1::uuid[]) AND id = ANY($2::uuid[])`,
			crash.merchants, running).Scan(&held); err != nil {
			return nil, err
		}
		res.Extra["crash_timers_held_by_killed_process"] = held
		phases = append(phases, crash)
	} else {
		res.Extra["crash"] = "skipped: this target cannot start orderd processes"
	}

	if err := t.waitTimers(ctx, o, res, phases, count+2*side); err != nil {
		return nil, err
	}
	to, err := t.closeTime(ctx)
	if err != nil {
		return nil, err
	}
	res.Extra["lateness_to"] = to
	met := true
	for _, p := range phases {
		f := timerPhaseFigures{name: p.name}
		// The placed orders are counted by a statement of their own: Citus
		// does not push a subquery in the target list down to the shards.
		if err := t.Pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE merchant_id = ANY($1::uuid[])`, p.merchants).Scan(&f.placed); err != nil {
			return nil, err
		}
		if err := t.Pool.QueryRow(ctx, `
			SELECT count(late), count(*) FILTER (WHERE late < 0),
			       percentile_cont(0.5) WITHIN GROUP (ORDER BY late), percentile_cont(0.99) WITHIN GROUP (ORDER BY late), max(late)
			FROM (SELECT extract(epoch FROM (`+closeTimeSQL[to]+` - o.payment_deadline)) * 1000 AS late
			      FROM orders o JOIN events e ON e.stream_id = o.id AND e.merchant_id = o.merchant_id AND e.type = 'order.closed'
			      WHERE o.merchant_id = ANY($1::uuid[])) x`, p.merchants).Scan(&f.closed, &f.early, &f.p50, &f.p99, &f.maxLateMs); err != nil {
			return nil, err
		}
		res.Extra["lateness_"+p.name+"_placed"], res.Extra["lateness_"+p.name+"_closed"] = f.placed, f.closed
		res.Extra["lateness_"+p.name+"_closed_early"] = f.early
		for k, v := range map[string]*float64{"p50": f.p50, "p99": f.p99, "max": f.maxLateMs} {
			if v != nil {
				res.Extra["lateness_"+p.name+"_"+k+"_ms"] = *v
			}
		}
		phaseMet, violations := judgeTimerPhase(f)
		res.Violations = append(res.Violations, violations...)
		met = met && phaseMet
	}
	res.Extra["lateness_goal_met"] = met
	res.GoalText = fmt.Sprintf("placement ≥ %.1f× without timers; in every phase every order closed, none early, lateness to commit p99 ≤ 1 s, max ≤ 2 s", timersPlacementGoal)
	res.setGoalMet(met && res.Ratio >= res.Goal)
	res.Violations = append(res.Violations, t.commonInvariants(ctx)...)
	res.InvariantsOK = len(res.Violations) == 0
	return res, nil
}

// timerCrash starts a separate orderd process, and while place runs
// (through the bench's own target) kills that process with SIGKILL and starts
// it again, 4 s into the placements, when the first deadlines (2 s after
// placement) have been falling due for 2 s. It returns the restarted
// process.
func (t *Target) timerCrash(ctx context.Context, res *Result, place func() []error) (*Instance, error) {
	inst, err := t.Spawn(ctx)
	if err != nil {
		return nil, fmt.Errorf("timers crash phase: %w", err)
	}
	start := time.Now()
	placed := make(chan []error, 1)
	go func() { placed <- place() }()
	time.Sleep(4 * time.Second)
	killed := time.Now()
	inst.Kill()
	again, err := t.Spawn(ctx)
	res.Violations = append(res.Violations, unexpected(<-placed, ctx)...)
	if err != nil {
		return nil, fmt.Errorf("timers crash phase: restart: %w", err)
	}
	res.Extra["crash_killed_after_ms"] = killed.Sub(start).Milliseconds()
	res.Extra["crash_ready_after_ms"] = again.Ready.Sub(killed).Milliseconds()
	return again, nil
}

// waitTimers waits until every order of phases has left awaiting_payment, or
// 30 s past the last deadline.
func (t *Target) waitTimers(ctx context.Context, o Options, res *Result, phases []*timerPhase, total int) error {
	var ids []string
	for _, p := range phases {
		ids = append(ids, p.merchants...)
	}
	var last time.Time
	if err := t.Pool.QueryRow(ctx, `SELECT coalesce(max(payment_deadline), now()) FROM orders WHERE merchant_id = ANY($1::uuid[])`, ids).Scan(&last); err != nil {
		return err
	}
	bar := newBar(o, total, "timers: waiting for deadlines")
	defer func() { _ = bar.Finish() }()
	for {
		var closed, open int
		if err := t.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'closed'), count(*) FILTER (WHERE status = 'awaiting_payment')
			FROM orders WHERE merchant_id = ANY($1::uuid[])`, ids).Scan(&closed, &open); err != nil {
			return err
		}
		_ = bar.Set(closed)
		if open == 0 {
			return nil
		}
		if time.Now().After(last.Add(30 * time.Second)) {
			res.Violations = append(res.Violations, fmt.Sprintf("%d unpaid orders still open 30 s after the last deadline", open))
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

var closeTimeSQL = map[string]string{
	"commit":            `pg_xact_commit_timestamp(e.tx_id::xid)`,
	"transaction start": `e.recorded_at`,
}

// closeTime says what a close's time can be read from: its commit when the
// server tracks commit timestamps.
func (t *Target) closeTime(ctx context.Context) (string, error) {
	if t.Citus {
		// An event's tx_id is the coordinator's transaction, and its row
		// is read on a worker, whose commit timestamps know nothing of it.
		return "transaction start", nil
	}
	var tracked bool
	if err := t.Pool.QueryRow(ctx, `SELECT current_setting('track_commit_timestamp')::bool`).Scan(&tracked); err != nil {
		return "", fmt.Errorf("read track_commit_timestamp: %w", err)
	}
	if tracked {
		return "commit", nil
	}
	return "transaction start", nil
}
