package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/schollz/progressbar/v3"

	"github.com/orderd/orderd/auth"
)

// Scenarios lists what `orderd bench` can run, in the order `all` runs them.
var Scenarios = []string{"spread", "hot", "hot-weighted", "flash", "slots", "drop", "timers", "webhooks", "ws", "memory", "ledger"}

// Run runs one scenario against t.
func Run(ctx context.Context, name string, t *Target, o Options) (*Result, error) {
	var res *Result
	var err error
	switch name {
	case "spread":
		res, err = spread(ctx, t, o)
	case "hot":
		res, err = hot(ctx, t, o, false)
	case "hot-weighted":
		res, err = hot(ctx, t, o, true)
	case "flash":
		res, err = flash(ctx, t, o)
	case "slots":
		res, err = slotsRace(ctx, t, o)
	case "drop":
		res, err = drop(ctx, t, o)
	case "timers":
		res, err = timers(ctx, t, o)
	case "webhooks":
		res, err = webhooks(ctx, t, o)
	case "ws":
		res, err = wsWatch(ctx, t, o)
	case "memory":
		res, err = memory(ctx, t, o)
	case "ledger":
		res, err = ledger(ctx, t, o)
	default:
		return nil, fmt.Errorf("unknown scenario %q (have %v)", name, Scenarios)
	}
	if res != nil && res.RSSBytes == 0 && t.RSS != nil {
		res.RSSBytes = t.RSS()
	}
	return res, err
}

// customers is how many distinct customers a scenario's orders come from:
// enough that the per-customer rate limit, on at its default, never binds.
const customers = 20000

// customer is the i-th order's customer of a scenario.
func customer(scenario string, i int) auth.Principal {
	return auth.Principal{Subject: fmt.Sprintf("%s-c%d", scenario, i%customers), Role: auth.RoleCustomer}
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

type merchantSpec struct {
	Name                  string `json:"name"`
	Capacity              int    `json:"capacity"`
	PrepSeconds           int    `json:"prep_seconds,omitempty"`
	PaymentTimeoutSeconds int    `json:"payment_timeout_seconds,omitempty"`
	MaxQueueWaitSeconds   int    `json:"max_queue_wait_seconds,omitempty"`
	CapacityUnit          string `json:"capacity_unit,omitempty"`
}

type idOnly struct {
	ID string `json:"id"`
}

func (t *Target) admin() string {
	return t.token(auth.Principal{Subject: "bench-admin", Role: auth.RoleAdmin})
}

func (t *Target) createMerchant(ctx context.Context, m merchantSpec) (string, error) {
	var out idOnly
	_, err := t.call(ctx, "POST", "/v1/merchants", t.admin(), m, nil, &out)
	return out.ID, err
}

func (t *Target) createProduct(ctx context.Context, merchantID string, body map[string]any) (string, error) {
	var out idOnly
	_, err := t.call(ctx, "POST", "/v1/merchants/"+merchantID+"/products", t.admin(), body, nil, &out)
	return out.ID, err
}

type line struct {
	ProductID string `json:"product_id"`
	Quantity  int    `json:"quantity"`
}

type placeBody struct {
	MerchantID string `json:"merchant_id"`
	Items      []line `json:"items"`
	PaymentRef string `json:"payment_ref,omitempty"`
}

func newBar(o Options, max int, desc string) *progressbar.ProgressBar {
	if !o.Progress {
		return progressbar.DefaultSilent(int64(max), desc)
	}
	return progressbar.NewOptions(max, progressbar.OptionSetDescription(desc), progressbar.OptionSetWriter(o.Out),
		progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("req"),
		progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionClearOnFinish())
}

// drive runs n requests from clients goroutines; do returns the request's
// error, and the latency of each successful one is recorded.
func drive(ctx context.Context, clients, n int, rec *recorder, bar *progressbar.ProgressBar, do func(ctx context.Context, client, i int) error) (time.Duration, []error) {
	var next atomic.Int64
	var mu sync.Mutex
	var errs []error
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				err := do(ctx, c, i)
				if err == nil {
					rec.add(time.Since(t0))
				} else {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
				_ = bar.Add(1)
			}
		}()
	}
	wg.Wait()
	_ = bar.Finish()
	return time.Since(start), errs
}

// spread: many merchants with ample capacity, paid orders of 1-3 lines.
func spread(ctx context.Context, t *Target, o Options) (*Result, error) {
	clients := orDefault(o.Clients, 64)
	d := orDefault(o.Duration, 30*time.Second)
	const merchants = 1000
	type shop struct {
		id       string
		products [3]string
	}
	shops := make([]shop, merchants)
	setupBar := newBar(o, merchants, "spread: setting up merchants")
	_, errs := drive(ctx, 16, merchants, newRecorder(), setupBar, func(ctx context.Context, _, i int) error {
		id, err := t.createMerchant(ctx, merchantSpec{Name: fmt.Sprintf("spread-%d", i), Capacity: 100000})
		if err != nil {
			return err
		}
		shops[i].id = id
		for j := range 3 {
			if shops[i].products[j], err = t.createProduct(ctx, id, map[string]any{"name": fmt.Sprintf("p%d", j), "price_cents": 300 + j}); err != nil {
				return err
			}
		}
		return nil
	})
	if len(errs) > 0 {
		return nil, fmt.Errorf("spread setup: %w", errs[0])
	}

	rec := newRecorder()
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	bar := newBar(o, -1, "spread: placing paid orders")
	var placed atomic.Int64
	toks := t.issueTokens(customers, func(i int) auth.Principal { return customer("spread", i) })
	posters := t.newPosters(clients)
	defer closePosters(posters)
	cpu := t.readCPU()
	elapsed, errs := drive(runCtx, clients, 1<<40, rec, bar, func(ctx context.Context, c, i int) error {
		rng := rand.New(rand.NewPCG(o.Seed, uint64(i)))
		s := shops[rng.IntN(merchants)]
		n := 1 + rng.IntN(3)
		var items [3]line
		for j := range n {
			items[j] = line{ProductID: s.products[j], Quantity: 1 + rng.IntN(3)}
		}
		_, err := posters[c].placeOrder(ctx, toks[i%customers], placeBody{MerchantID: s.id, Items: items[:n], PaymentRef: "pay"})
		if err == nil {
			placed.Add(1)
		}
		return err
	})
	res := &Result{Extra: map[string]any{"clients": clients, "merchants": merchants, "customers": customers, "orders": placed.Load()}}
	res.setCost(t.perUnit(res.Extra, "order", cpu, placed.Load()))
	res.PerS = float64(placed.Load()) / elapsed.Seconds()
	rec.summarize(res)
	res.Violations = append(res.Violations, unexpected(errs, runCtx)...)
	res.Goal = spreadGoal
	if !o.SkipBaselines {
		base, err := orderBaselines(ctx, t, o, merchants)
		if err != nil {
			return nil, err
		}
		setBaselines(res, base...)
		judgeAgainstOwnTables(res)
		cpu, cpuOK := orderCPU(res.Extra)
		res.GoalText = fmt.Sprintf("≥ %.1f× the best baseline on orderd's tables, p99 ≤ %.0f ms, ≤ %.0f µs CPU per order in all", spreadGoal, spreadP99Goal, spreadCPUGoal)
		res.setGoalMet(res.Extra["ratio_orderd_tables"].(float64) >= spreadGoal && res.P99ms <= spreadP99Goal && cpuOK && cpu <= spreadCPUGoal)
	}
	res.Violations = append(res.Violations, t.commonInvariants(ctx)...)
	res.InvariantsOK = len(res.Violations) == 0
	return res, nil
}

// unexpected lists request errors other than the run's own deadline.
func unexpected(errs []error, runCtx context.Context) []string {
	var out []string
	for _, err := range errs {
		if runCtx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
			continue
		}
		if len(out) < 5 {
			out = append(out, err.Error())
		}
	}
	return out
}

// hot: a burst of paid orders to one merchant of capacity 50 while a
// simulated merchant completes orders. Weighted, the merchant counts cups:
// orders of 1-6 cups (3.5 on average) at a capacity of 175 cups, the same 50
// orders' worth, so that the two runs differ by the weighing alone.
func hot(ctx context.Context, t *Target, o Options, weighted bool) (*Result, error) {
	clients := orDefault(o.Clients, 128)
	count := orDefault(o.Count, 20000)
	capacity := 50
	spec := merchantSpec{Name: "hot", Capacity: capacity, PrepSeconds: 1, MaxQueueWaitSeconds: 3600}
	if weighted {
		capacity = 175
		spec.Name, spec.Capacity, spec.CapacityUnit = "hot-weighted", capacity, "items"
	}
	mID, err := t.createMerchant(ctx, spec)
	if err != nil {
		return nil, err
	}
	pID, err := t.createProduct(ctx, mID, map[string]any{"name": "first cup of autumn", "price_cents": 1800})
	if err != nil {
		return nil, err
	}
	merchantTok := t.token(auth.Principal{Subject: "hot-merchant", Role: auth.RoleMerchant, MerchantID: uuid.MustParse(mID)})
	rec := newRecorder()
	stop := make(chan struct{})
	var bg sync.WaitGroup
	var completed atomic.Int64
	for range 4 {
		bg.Add(1)
		go func() {
			defer bg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				var list struct {
					Orders []idOnly `json:"orders"`
				}
				if _, err := t.call(ctx, "GET", "/v1/merchants/"+mID+"/orders?status=accepted&limit=20", merchantTok, nil, nil, &list); err != nil || len(list.Orders) == 0 {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				for _, ord := range list.Orders {
					if _, err := t.call(ctx, "POST", "/v1/orders/"+ord.ID+"/complete", merchantTok, nil, nil, nil); err == nil {
						completed.Add(1)
					}
				}
			}
		}()
	}
	bg.Add(1)
	go func() {
		defer bg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				var m struct {
					Load struct {
						Queued int `json:"queued"`
					} `json:"load"`
				}
				if _, err := t.call(ctx, "GET", "/v1/merchants/"+mID, merchantTok, nil, nil, &m); err == nil {
					rec.setQueue(m.Load.Queued)
				}
			}
		}
	}()
	bar := newBar(o, count, "hot: paying orders to one merchant")
	payer := func(i int) auth.Principal {
		return auth.Principal{Subject: fmt.Sprintf("hot-c%d", i), Role: auth.RoleCustomer}
	}
	toks := t.issueTokens(count, payer)
	posters := t.newPosters(clients)
	defer closePosters(posters)
	cpu := t.readCPU()
	elapsed, errs := drive(ctx, clients, count, rec, bar, func(ctx context.Context, c, i int) error {
		quantity := 1
		if weighted {
			quantity = 1 + i%6
		}
		_, err := posters[c].placeOrder(ctx, toks[i], placeBody{MerchantID: mID, Items: []line{{ProductID: pID, Quantity: quantity}}, PaymentRef: "pay"})
		return err
	})
	close(stop)
	bg.Wait()
	res := &Result{Extra: map[string]any{"clients": clients, "orders": count, "capacity": capacity, "completed_during_run": completed.Load()}}
	res.setCost(t.perUnit(res.Extra, "order", cpu, int64(count-len(errs))))
	res.PerS = float64(count-len(errs)) / elapsed.Seconds()
	rec.summarize(res)
	res.Violations = append(res.Violations, unexpected(errs, ctx)...)
	res.Goal = hotGoal
	if weighted {
		// Its measure is the unweighted run beside it, not the baselines:
		// JudgeAcross weighs the two once both have run.
		res.Extra["capacity_unit"] = "items"
		res.GoalText = "≤ 10 % slower than hot in the same run"
	} else if !o.SkipBaselines {
		base, err := orderBaselines(ctx, t, o, 1)
		if err != nil {
			return nil, err
		}
		setBaselines(res, base...)
		judgeAgainstOwnTables(res)
		res.GoalText = fmt.Sprintf("≥ %.1f× the best baseline on orderd's tables", hotGoal)
		res.setGoalMet(res.Extra["ratio_orderd_tables"].(float64) >= hotGoal)
	}
	res.Violations = append(res.Violations, t.fifoInvariants(ctx, mID)...)
	res.Violations = append(res.Violations, t.commonInvariants(ctx)...)
	res.InvariantsOK = len(res.Violations) == 0
	return res, nil
}

// openConnections opens n connections to the server, for n clients to
// find open, as a baseline's pool opens its connections before its clock
// starts: n requests at once, none of which gives its connection back
// before all of them have their answers' headers, so that each has a
// connection of its own.
func (t *Target) openConnections(ctx context.Context, n int) error {
	var answered sync.WaitGroup
	answered.Add(n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := http.NewRequestWithContext(ctx, "GET", t.BaseURL+"/healthz", nil)
			var resp *http.Response
			if err == nil {
				resp, err = t.http.Do(req)
			}
			answered.Done()
			answered.Wait()
			if err != nil {
				errs[i] = err
				return
			}
			_, errs[i] = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("open connections: %w", err)
	}
	return nil
}

// flash: 1,000 units, one per customer, 20,000 distinct buyers at once.
func flash(ctx context.Context, t *Target, o Options) (*Result, error) {
	clients := orDefault(o.Clients, 256)
	buyers := orDefault(o.Count, 20000)
	// One unit for every twenty buyers, as in the 1,000 for 20,000 of the default.
	units := min(1000, max(1, buyers/20))
	mID, err := t.createMerchant(ctx, merchantSpec{Name: "flash", Capacity: 100000})
	if err != nil {
		return nil, err
	}
	pID, err := t.createProduct(ctx, mID, map[string]any{"name": "limited mooncake tea", "price_cents": 2500, "stock": units, "per_user_limit": 1})
	if err != nil {
		return nil, err
	}
	buyer := func(i int) auth.Principal {
		return auth.Principal{Subject: fmt.Sprintf("flash-b%d", i), Role: auth.RoleCustomer}
	}
	t.issueTokens(buyers, buyer)
	// The baselines time their sales on connections already open
	// (baselinePool): so do the buyers.
	if err := t.openConnections(ctx, clients); err != nil {
		return nil, err
	}
	rec := newRecorder()
	var sold, soldOut, other atomic.Int64
	var lastSale, tenthSale, halfSale atomic.Int64
	start := time.Now()
	bar := newBar(o, buyers, "flash: buyers")
	cpu := t.readCPU()
	_, errs := drive(ctx, clients, buyers, rec, bar, func(ctx context.Context, c, i int) error {
		status, err := t.call(ctx, "POST", "/v1/orders", t.token(buyer(i)),
			placeBody{MerchantID: mID, Items: []line{{ProductID: pID, Quantity: 1}}},
			map[string]string{"Idempotency-Key": uuid.NewString()}, nil)
		var he *httpError
		switch {
		case err == nil:
			n := sold.Add(1)
			at := int64(time.Since(start))
			storeMax(&lastSale, at)
			if n == int64(units/10) {
				tenthSale.Store(at)
			}
			if n == int64(units/2) {
				halfSale.Store(at)
			}
		case errors.As(err, &he) && he.Status == 409 && he.Code == "sold_out":
			soldOut.Add(1)
			return nil
		default:
			other.Add(1)
			_ = status
		}
		return err
	})
	sellOut := time.Duration(lastSale.Load())
	res := &Result{Extra: map[string]any{
		"clients": clients, "buyers": buyers, "units": units, "sold": sold.Load(), "sold_out_answers": soldOut.Load(),
		"other_answers": other.Load(), "sell_out_ms": sellOut.Milliseconds(),
		"tenth_sold_ms": time.Duration(tenthSale.Load()).Milliseconds(), "half_sold_ms": time.Duration(halfSale.Load()).Milliseconds(),
	}}
	// Every buyer is answered, sold or sold out: a buyer is the unit.
	res.setCost(t.perUnit(res.Extra, "buyer", cpu, int64(buyers)))
	res.PerS = float64(sold.Load()) / sellOut.Seconds()
	rec.summarize(res)
	res.Violations = append(res.Violations, unexpected(errs, ctx)...)
	if sold.Load() != int64(units) {
		res.Violations = append(res.Violations, fmt.Sprintf("sold %d units, want exactly %d", sold.Load(), units))
	}
	if other.Load() != 0 {
		res.Violations = append(res.Violations, fmt.Sprintf("%d answers were neither success nor sold_out", other.Load()))
	}
	var remaining, overLimit int
	if err := t.Pool.QueryRow(ctx, `SELECT coalesce(sum(remaining), 0) FROM stock_buckets WHERE product_id = $1`, pID).Scan(&remaining); err != nil {
		return nil, err
	}
	if remaining != 0 {
		res.Violations = append(res.Violations, fmt.Sprintf("%d units left after the sell-out", remaining))
	}
	if err := t.Pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT customer_id FROM orders WHERE merchant_id = $1 GROUP BY customer_id HAVING count(*) > 1) x`, mID).Scan(&overLimit); err != nil {
		return nil, err
	}
	if overLimit != 0 {
		res.Violations = append(res.Violations, fmt.Sprintf("%d customers bought more than their limit", overLimit))
	}
	res.Goal = flashGoal
	base, err := stockBaselines(ctx, t, o, units)
	if err != nil {
		return nil, err
	}
	setBaselines(res, base...)
	// The strongest single-row sale of the run, on either table.
	best := base[0].Sweep[0]
	for _, b := range base {
		for _, p := range b.Sweep {
			if p.PerS > best.PerS {
				best = p
			}
		}
	}
	res.BaselinePerS, res.BaselineConns = best.PerS, best.Conns
	res.Ratio = ratio(res.PerS, best.PerS)
	res.Extra["baseline_sell_out_ms"] = int64(best.Seconds * 1000)
	allAnswered := sold.Load()+soldOut.Load() == int64(buyers)
	res.Extra["all_buyers_answered"] = allAnswered
	res.GoalText = "sold out no later than the best single-row baseline, every buyer answered"
	res.setGoalMet(res.Ratio >= flashGoal && allAnswered)
	res.Violations = append(res.Violations, t.commonInvariants(ctx)...)
	res.InvariantsOK = len(res.Violations) == 0
	return res, nil
}

// fifoInvariants checks one merchant's recorded decisions: no acceptance over
// capacity and acceptance of queued orders in queue order.
func (t *Target) fifoInvariants(ctx context.Context, merchantID string) []string {
	var out []string
	var over int
	if err := t.Pool.QueryRow(ctx, `SELECT count(*) FROM events e JOIN orders o ON o.id = e.stream_id AND o.merchant_id = e.merchant_id
		WHERE o.merchant_id = $1 AND e.type = 'order.accepted' AND (e.data->>'active_after')::int > (e.data->>'capacity')::int
			AND (e.data->>'active_after')::int <> coalesce((e.data->>'load')::int, 1)`, merchantID).Scan(&over); err != nil {
		return []string{err.Error()}
	}
	if over > 0 {
		out = append(out, fmt.Sprintf("%d acceptances over capacity", over))
	}
	var outOfOrder int
	if err := t.Pool.QueryRow(ctx, `
		SELECT count(*) FROM (
			SELECT (q.data->>'seq')::bigint AS seq, lag((q.data->>'seq')::bigint) OVER (ORDER BY a.global_position) AS prev
			FROM events a JOIN events q ON q.stream_id = a.stream_id AND q.merchant_id = a.merchant_id AND q.type = 'order.queued'
			JOIN orders o ON o.id = a.stream_id AND o.merchant_id = a.merchant_id
			WHERE o.merchant_id = $1 AND a.type = 'order.accepted') x
		WHERE prev IS NOT NULL AND seq < prev`, merchantID).Scan(&outOfOrder); err != nil {
		return []string{err.Error()}
	}
	if outOfOrder > 0 {
		out = append(out, fmt.Sprintf("%d queued orders admitted out of queue order", outOfOrder))
	}
	return out
}

// commonInvariants runs the checks every scenario must leave clean: load
// counters match the orders, and no decision went over capacity.
func (t *Target) commonInvariants(ctx context.Context) []string {
	var drift int
	if err := t.Pool.QueryRow(ctx, `
		SELECT count(*) FROM merchants m
		LEFT JOIN (SELECT merchant_id, coalesce(sum(load) FILTER (WHERE status = 'accepted'), 0) AS a, count(*) FILTER (WHERE status = 'queued') AS q
		           FROM orders GROUP BY merchant_id) c ON c.merchant_id = m.id
		WHERE m.active <> coalesce(c.a, 0) OR m.queued <> coalesce(c.q, 0)`).Scan(&drift); err != nil {
		return []string{err.Error()}
	}
	if drift > 0 {
		return []string{fmt.Sprintf("%d merchants' load counters differ from their orders", drift)}
	}
	return nil
}

// raiseFileLimit lifts the soft limit on open files to the hard one: every
// websocket client and its server side hold a descriptor each.
func raiseFileLimit() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}
