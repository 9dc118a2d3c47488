package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/orderd/orderd/auth"
)

// slotsScenario: customers race for a merchant's pickup slots, paying as
// they place; each slot takes slotCapacity orders, every other answer must
// be slot_full. The first slot's release into the live line is set to come
// after the race, and how late it comes is measured from the log.
const (
	benchSlots        = 50
	slotCapacity      = 20
	slotMinutes       = 5
	slotsP99Goal      = 100 * time.Millisecond
	releaseLatenessOK = time.Second
)

type slotPlaceBody struct {
	placeBody
	PickupAt time.Time `json:"pickup_at"`
}

func slotsRace(ctx context.Context, t *Target, o Options) (*Result, error) {
	clients := orDefault(o.Clients, 256)
	racers := orDefault(o.Count, 20000)
	mID, err := t.createMerchant(ctx, merchantSpec{Name: "slots", Capacity: 100000, MaxQueueWaitSeconds: 3600})
	if err != nil {
		return nil, err
	}
	pID, err := t.createProduct(ctx, mID, map[string]any{"name": "lunch box", "price_cents": 1200})
	if err != nil {
		return nil, err
	}
	racer := func(i int) auth.Principal {
		return auth.Principal{Subject: fmt.Sprintf("slots-c%d", i), Role: auth.RoleCustomer}
	}
	t.issueTokens(racers, racer)
	// The first slot is released (its start minus prep_seconds) once the
	// race has had time to end: a second per two hundred placements, and at
	// least half a minute.
	raceAllowance := max(30*time.Second, time.Duration(racers/200)*time.Second)
	now := time.Now().UTC()
	first := now.Add(raceAllowance).Truncate(slotMinutes * time.Minute).Add(slotMinutes * time.Minute)
	release := now.Add(raceAllowance).Truncate(time.Second)
	prep := int(first.Sub(release) / time.Second)
	release = first.Add(-time.Duration(prep) * time.Second)
	if _, err := t.call(ctx, "PATCH", "/v1/merchants/"+mID, t.admin(), map[string]any{
		"prep_seconds": prep,
		"slots":        map[string]any{"minutes": slotMinutes, "capacity": slotCapacity, "lead_minutes": 0, "horizon_days": 1},
	}, nil, nil); err != nil {
		return nil, err
	}
	starts := make([]time.Time, benchSlots)
	for i := range starts {
		starts[i] = first.Add(time.Duration(i*slotMinutes) * time.Minute)
	}

	rec := newRecorder()
	var placed, full, other atomic.Int64
	bar := newBar(o, racers, "slots: customers racing for slots")
	cpu := t.readCPU()
	elapsed, errs := drive(ctx, clients, racers, rec, bar, func(ctx context.Context, _, i int) error {
		_, err := t.call(ctx, "POST", "/v1/orders", t.token(racer(i)),
			slotPlaceBody{placeBody: placeBody{MerchantID: mID, Items: []line{{ProductID: pID, Quantity: 1}}, PaymentRef: "pay"},
				PickupAt: starts[i%benchSlots]},
			map[string]string{"Idempotency-Key": uuid.NewString()}, nil)
		var he *httpError
		switch {
		case err == nil:
			placed.Add(1)
		case errors.As(err, &he) && he.Status == 409 && he.Code == "slot_full":
			full.Add(1)
			// A refusal is an answer: its latency counts too.
			return nil
		default:
			other.Add(1)
		}
		return err
	})
	want := int64(min(benchSlots*slotCapacity, racers))
	res := &Result{Extra: map[string]any{
		"clients": clients, "customers": racers, "slots": benchSlots, "slot_capacity": slotCapacity,
		"placed": placed.Load(), "slot_full_answers": full.Load(), "other_answers": other.Load(),
		"race_ms": elapsed.Milliseconds(),
	}}
	t.perUnit(res.Extra, "request", cpu, int64(racers))
	res.PerS = float64(racers) / elapsed.Seconds()
	rec.summarize(res)
	res.Violations = append(res.Violations, unexpected(errs, ctx)...)
	if placed.Load() != want {
		res.Violations = append(res.Violations, fmt.Sprintf("%d placements succeeded, want exactly %d", placed.Load(), want))
	}
	if other.Load() != 0 {
		res.Violations = append(res.Violations, fmt.Sprintf("%d answers were neither success nor slot_full", other.Load()))
	}
	var taken int64
	if err := t.Pool.QueryRow(ctx, `SELECT coalesce(sum(taken), 0) FROM pickup_slots WHERE merchant_id = $1`, mID).Scan(&taken); err != nil {
		return nil, err
	}
	if taken != want {
		res.Violations = append(res.Violations, fmt.Sprintf("the slots hold %d orders, want %d", taken, want))
	}

	lateness, late, err := t.releaseLateness(ctx, mID, first, release)
	if err != nil {
		return nil, err
	}
	res.Extra["release_at"] = release.Format(time.RFC3339)
	res.Extra["released"] = len(lateness)
	if len(lateness) > 0 {
		res.Extra["release_lateness_max_ms"] = lateness[len(lateness)-1].Milliseconds()
	}
	res.Violations = append(res.Violations, late...)
	res.Violations = append(res.Violations, t.slotAudits(ctx)...)
	res.Violations = append(res.Violations, t.commonInvariants(ctx)...)
	res.InvariantsOK = len(res.Violations) == 0
	res.GoalText = fmt.Sprintf("exactly %d placed, the rest slot_full, p99 ≤ %d ms, release ≤ %s late", want, slotsP99Goal.Milliseconds(), releaseLatenessOK)
	res.setGoalMet(res.InvariantsOK && res.P99ms <= float64(slotsP99Goal.Milliseconds()))
	return res, nil
}

// releaseLateness waits for the release of the slot starting at first
// (due at release) and reads, from the log, how late after it each of the
// slot's orders joined the line, in increasing order; it lists as
// violations an order released over releaseLatenessOK late, one released
// early, and one still waiting.
func (t *Target) releaseLateness(ctx context.Context, merchantID string, first, release time.Time) ([]time.Duration, []string, error) {
	deadline := release.Add(releaseLatenessOK + 5*time.Second)
	var waiting int
	for {
		if err := t.Pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE merchant_id = $1 AND pickup_at = $2 AND status = 'scheduled'`,
			merchantID, first).Scan(&waiting); err != nil {
			return nil, nil, err
		}
		if (waiting == 0 && time.Now().After(release)) || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	rows, err := t.Pool.Query(ctx, `SELECT extract(epoch FROM e.recorded_at - o.release_at)::float8 FROM orders o
		JOIN events e ON e.merchant_id = o.merchant_id AND e.stream_id = o.id AND e.type = 'order.queued' AND (e.data->>'released')::boolean
		WHERE o.merchant_id = $1 AND o.pickup_at = $2 ORDER BY 1`, merchantID, first)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var out []time.Duration
	for rows.Next() {
		var secs float64
		if err := rows.Scan(&secs); err != nil {
			return nil, nil, err
		}
		out = append(out, time.Duration(secs*float64(time.Second)))
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	var violations []string
	if len(out)+waiting < slotCapacity {
		violations = append(violations, fmt.Sprintf("%d of the first slot's orders were released: the race outlasted its allowance", len(out)))
	}
	if waiting > 0 {
		violations = append(violations, fmt.Sprintf("%d orders of the first slot still scheduled %s after their release", waiting, time.Since(release).Round(time.Millisecond)))
	}
	if len(out) > 0 && out[0] < 0 {
		violations = append(violations, fmt.Sprintf("an order released %s before its release", -out[0]))
	}
	if len(out) > 0 && out[len(out)-1] > releaseLatenessOK {
		violations = append(violations, fmt.Sprintf("an order released %s after its release", out[len(out)-1]))
	}
	return out, violations, nil
}

// slotAudits runs the audit views of slots and hours.
func (t *Target) slotAudits(ctx context.Context) []string {
	var out []string
	for _, view := range []string{"slots_over_capacity", "scheduled_released_early", "orders_placed_while_closed"} {
		var n int
		if err := t.Pool.QueryRow(ctx, `SELECT count(*) FROM audit.`+view).Scan(&n); err != nil {
			return append(out, err.Error())
		}
		if n > 0 {
			out = append(out, fmt.Sprintf("audit.%s: %d violations", view, n))
		}
	}
	return out
}
