package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/orderd/orderd/auth"
)

// wsWatch: websocket clients each watching one queued order of a merchant of
// capacity 50, while the merchant completes orders until the queue is
// empty; the lag from the acceptance's commit to the client hearing of it.
// The clients are split over two server processes when the bench can start
// them, else all on the target.
func wsWatch(ctx context.Context, t *Target, o Options) (*Result, error) {
	clients := orDefault(o.Count, 20000)
	instances := 1
	if t.Spawn != nil {
		instances = 2
	}
	res, err := wsRound(ctx, t, o, clients, instances)
	if err != nil {
		return nil, err
	}
	met := judgeWS(res)
	res.Extra["lag_goal_met"], res.Extra["idle_conn_goal_met"], res.Extra["no_watcher_dropped"] = met.lag, met.memory, met.noneDropped
	res.GoalText = fmt.Sprintf("lag p99 ≤ %d ms, max ≤ %d ms; ≤ %.0f KiB per idle connection; no watcher dropped",
		wsLagP99Goal.Milliseconds(), wsLagMaxGoal.Milliseconds(), wsIdleConnGoal)
	res.setGoalMet(met.all())
	// Compared by messages delivered per second with a server that reads
	// no database, sending as many messages of an order update's size to
	// as many clients as fast as it can.
	sent, _ := res.Extra["messages_sent"].(int64)
	seconds, _ := res.Extra["seconds"].(float64)
	if sent > 0 && seconds > 0 && !o.SkipBaselines {
		res.Extra["accepted_heard_per_s"] = round1(res.PerS)
		res.PerS = float64(sent) / seconds
		body, err := t.wsMessage(ctx)
		if err != nil {
			return nil, err
		}
		// The baseline's server and clients share this process: two
		// sockets a client.
		n := min(clients, watchersPerProcess()/2)
		perClient := max(1, int(sent)/clients)
		base, err := wsBaseline(ctx, n, perClient, body)
		if err != nil {
			return nil, err
		}
		res.BaselinePerS, res.Ratio = base, ratio(res.PerS, base)
		res.Extra["baseline_clients"] = n
		res.Extra["baseline_messages_per_client"] = perClient
		res.Extra["baseline_message_bytes"] = len(body)
	}
	res.InvariantsOK = len(res.Violations) == 0
	return res, nil
}

// wsRound runs the scenario once with the clients spread over instances
// server processes (started with Spawn), or over the target itself when the
// bench cannot start servers. Each server's CPU and memory are reported
// beside the totals.
func wsRound(ctx context.Context, t *Target, o Options, clients, instances int) (*Result, error) {
	const capacity = 50
	urls, opsURLs := []string{t.BaseURL}, []string{t.OpsURL}
	if t.Spawn != nil {
		urls, opsURLs = nil, nil
		for range instances {
			inst, err := t.Spawn(ctx)
			if err != nil {
				return nil, err
			}
			defer inst.Stop()
			urls = append(urls, inst.BaseURL)
			opsURLs = append(opsURLs, inst.OpsURL)
		}
	}
	label := fmt.Sprintf("ws ×%d", len(urls))
	mID, err := t.createMerchant(ctx, merchantSpec{Name: "watched", Capacity: capacity, PrepSeconds: 30, MaxQueueWaitSeconds: 3600})
	if err != nil {
		return nil, err
	}
	pID, err := t.createProduct(ctx, mID, map[string]any{"name": "tea", "price_cents": 100})
	if err != nil {
		return nil, err
	}
	type placed struct {
		ID       string `json:"id"`
		Customer string `json:"customer_id"`
		Status   string `json:"status"`
	}
	orders := make([]placed, capacity+clients)
	setup := newBar(o, len(orders), label+": queueing orders")
	_, errs := drive(ctx, 32, len(orders), newRecorder(), setup, func(ctx context.Context, c, i int) error {
		_, err := t.call(ctx, "POST", "/v1/orders", t.token(auth.Principal{Subject: fmt.Sprintf("ws-%s-c%d", mID[:8], i), Role: auth.RoleCustomer}),
			placeBody{MerchantID: mID, Items: []line{{ProductID: pID, Quantity: 1}}, PaymentRef: "pay"},
			map[string]string{"Idempotency-Key": uuid.NewString()}, &orders[i])
		return err
	})
	if len(errs) > 0 {
		return nil, fmt.Errorf("ws setup: %w", errs[0])
	}

	idle, err := collectedScrape(ctx, opsURLs)
	if err != nil {
		return nil, err
	}
	var watchers []watcher
	for _, ord := range orders {
		if ord.Status != "queued" {
			continue
		}
		watchers = append(watchers, watcher{
			URL:   "ws" + strings.TrimPrefix(urls[len(watchers)%len(urls)], "http") + "/v1/ws",
			Token: t.token(auth.Principal{Subject: ord.Customer, Role: auth.RoleCustomer}), Order: ord.ID,
		})
	}
	n := len(watchers)
	var procs []*watcherProc
	defer func() {
		for _, p := range procs {
			_, _ = p.finish()
		}
	}()
	for per := watchersPerProcess(); len(watchers) > 0; {
		chunk := watchers[:min(per, len(watchers))]
		watchers = watchers[len(chunk):]
		p, err := t.startWatchers(ctx, chunk)
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
	}
	for _, p := range procs {
		if err := p.subscribed(ctx); err != nil {
			return nil, err
		}
	}
	accepted := func() int64 {
		var sum int64
		for _, p := range procs {
			sum += p.accepted.Load()
		}
		return sum
	}
	// Let the subscriptions' refresh reads pass before weighing the servers.
	time.Sleep(time.Second)
	loaded, err := collectedScrape(ctx, opsURLs)
	if err != nil {
		return nil, err
	}

	// The merchant completes orders as fast as it can until the queue is empty.
	runCtx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	merchantTok := t.token(auth.Principal{Subject: "watched-merchant", Role: auth.RoleMerchant, MerchantID: uuid.MustParse(mID)})
	bar := newBar(o, n, label+": completing orders")
	start := time.Now()
	var completer sync.WaitGroup
	var completed atomic.Int64
	for range 8 {
		completer.Add(1)
		go func() {
			defer completer.Done()
			// Every order ends completed; clients that stopped listening
			// must not keep the merchant working forever.
			for accepted() < int64(n) && completed.Load() < int64(len(orders)) && runCtx.Err() == nil {
				var list struct {
					Orders []idOnly `json:"orders"`
				}
				if _, err := t.call(runCtx, "GET", "/v1/merchants/"+mID+"/orders?status=accepted&limit=10", merchantTok, nil, nil, &list); err != nil || len(list.Orders) == 0 {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				for _, ord := range list.Orders {
					if _, err := t.call(runCtx, "POST", "/v1/orders/"+ord.ID+"/complete", merchantTok, nil, nil, nil); err == nil {
						completed.Add(1)
					}
				}
				_ = bar.Set(int(accepted()))
			}
		}()
	}
	completer.Wait()
	elapsed := time.Since(start)
	// Give the last updates time to arrive: a late one counts in the lag,
	// one that never comes is a violation.
	for wait := time.Now().Add(10 * time.Second); accepted() < int64(n) && time.Now().Before(wait); {
		time.Sleep(10 * time.Millisecond)
	}
	after, err := scrapeAll(ctx, opsURLs)
	if err != nil {
		return nil, err
	}
	var heardAll []heardAt
	var violations, lost int64
	lastHeard := map[string]int{}
	for _, p := range procs {
		r, err := p.finish()
		if err != nil {
			return nil, err
		}
		heardAll = append(heardAll, r.Heard...)
		violations += r.Violations
		lost += r.Lost
		for k, v := range r.LastSeen {
			lastHeard[k] += v
		}
	}
	processes := len(procs)
	procs = nil
	_ = bar.Finish()

	lags, source, err := commitLags(ctx, t, heardAll)
	if err != nil {
		return nil, err
	}
	res := &Result{Extra: map[string]any{
		"clients": n, "instances": len(urls), "watcher_processes": processes, "capacity": capacity,
		"accepted_heard": int64(len(heardAll)), "seconds": round1(elapsed.Seconds()), "lag_from": source,
	}}
	lags.summarize(res)
	res.Series = nil
	res.PerS = float64(len(heardAll)) / elapsed.Seconds()
	res.Extra["lag_p50_ms"], res.Extra["lag_p99_ms"], res.Extra["lag_max_ms"] = res.P50ms, res.P99ms, lags.max()
	sent := after.sum("orderd_ws_messages_sent_total") - loaded.sum("orderd_ws_messages_sent_total")
	res.Extra["messages_sent"] = int64(sent)
	res.Extra["clients_dropped"] = int64(after.sum("orderd_ws_dropped_total") - loaded.sum("orderd_ws_dropped_total"))
	res.Extra["clients_unanswered"] = int64(after.sum("orderd_ws_unanswered_total") - loaded.sum("orderd_ws_unanswered_total"))
	res.Extra["messages_per_client"] = round1(sent / float64(n))
	res.Extra["server_cpu_seconds"] = round1(after.sum("process_cpu_seconds_total") - loaded.sum("process_cpu_seconds_total"))
	res.Extra["server_cpu_cores"] = round1((after.sum("process_cpu_seconds_total") - loaded.sum("process_cpu_seconds_total")) / elapsed.Seconds())
	res.Extra["server_rss_mib"] = round1(after.sum("process_resident_memory_bytes") / (1 << 20))
	// Memory per idle connection: what the servers' live heap and stacks
	// grew by from before the clients connected to once they were all
	// subscribed and the servers had collected their garbage; the worst
	// instance is the one judged.
	var worst float64
	for i := range opsURLs {
		one := func(m metrics) metrics { return metrics{m[i]} }
		conns := one(loaded).sum("orderd_ws_connections")
		perConn := func(metric ...string) float64 {
			var grown float64
			for _, name := range metric {
				grown += one(loaded).sum(name) - one(idle).sum(name)
			}
			return round1(grown / max(conns, 1) / 1024)
		}
		cpu := one(after).sum("process_cpu_seconds_total") - one(loaded).sum("process_cpu_seconds_total")
		kib := perConn("go_gc_heap_live_bytes", "go_memstats_stack_inuse_bytes")
		worst = max(worst, kib)
		prefix := fmt.Sprintf("instance%d_", i+1)
		res.Extra[prefix+"connections"] = conns
		res.Extra[prefix+"cpu_seconds"] = round1(cpu)
		res.Extra[prefix+"cpu_cores"] = round1(cpu / elapsed.Seconds())
		res.Extra[prefix+"idle_conn_kib"] = kib
		res.Extra[prefix+"idle_conn_rss_kib"] = perConn("process_resident_memory_bytes")
		res.Extra[prefix+"rss_mib"] = round1(one(after).sum("process_resident_memory_bytes") / (1 << 20))
		res.Extra[prefix+"messages_sent"] = int64(one(after).sum("orderd_ws_messages_sent_total") - one(loaded).sum("orderd_ws_messages_sent_total"))
	}
	res.Extra["idle_conn_kib"] = worst
	if int64(len(heardAll)) < int64(n) {
		summary := fmt.Sprint(lastHeard)
		if len(summary) > 400 {
			summary = summary[:400] + "…"
		}
		res.Violations = append(res.Violations, fmt.Sprintf("%s: only %d of %d clients heard their order accepted (%d connections lost; last heard by those that did not: %s)",
			label, len(heardAll), n, lost, summary))
	}
	if violations > 0 {
		res.Violations = append(res.Violations, fmt.Sprintf("%s: %d updates went backwards", label, violations))
	}
	res.Violations = append(res.Violations, t.fifoInvariants(ctx, mID)...)
	res.InvariantsOK = len(res.Violations) == 0
	return res, nil
}

// max is the longest latency recorded, in milliseconds.
func (r *recorder) max() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var longest time.Duration
	for _, d := range r.lat {
		longest = max(longest, d)
	}
	return float64(longest.Microseconds()) / 1000
}

func round1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }

// commitLags times each acceptance from its commit when the database keeps
// commit timestamps (the bench's own cluster does), else from the order's
// accepted_at, which is earlier: the start of the accepting transaction.
func commitLags(ctx context.Context, t *Target, all []heardAt) (*recorder, string, error) {
	var tracked bool
	if err := t.Pool.QueryRow(ctx, `SELECT current_setting('track_commit_timestamp')::bool`).Scan(&tracked); err != nil {
		return nil, "", fmt.Errorf("read track_commit_timestamp: %w", err)
	}
	ids := make([]string, len(all))
	for i, h := range all {
		ids[i] = h.Order
	}
	query, source := `SELECT o.id::text, o.accepted_at FROM orders o WHERE o.id = ANY($1::uuid[])`, "accepted_at"
	if tracked {
		query, source = `SELECT e.stream_id::text, pg_xact_commit_timestamp(e.tx_id::xid) FROM events e
			WHERE e.stream_id = ANY($1::uuid[]) AND e.type = 'order.accepted'`, "commit"
	}
	rows, err := t.Pool.Query(ctx, query, ids)
	if err != nil {
		return nil, "", fmt.Errorf("acceptance times: %w", err)
	}
	defer rows.Close()
	committed := map[string]time.Time{}
	for rows.Next() {
		var id string
		var at time.Time
		if err := rows.Scan(&id, &at); err != nil {
			return nil, "", err
		}
		committed[id] = at
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	rec := newRecorder()
	for _, h := range all {
		if at, ok := committed[h.Order]; ok {
			rec.add(time.Unix(0, h.At).Sub(at))
		}
	}
	return rec, source, nil
}

// metrics are some instances' /metrics samples without labels, summed.
type metrics []map[string]float64

func (m metrics) sum(name string) float64 {
	var total float64
	for _, one := range m {
		total += one[name]
	}
	return total
}

// collectedScrape scrapes the servers right after each has collected
// garbage twice, asked through its operator listener: stacks that grew while
// connections were set up shrink at the first collection, as they do on an
// idle server, and the live heap measured at the second is current. Asking
// instead of waiting matters: a server whose heap is large next to what it
// allocates idle collects only when the runtime forces it, every two
// minutes.
func collectedScrape(ctx context.Context, urls []string) (metrics, error) {
	for _, u := range urls {
		for range 2 {
			if err := collect(ctx, u); err != nil {
				return nil, err
			}
		}
	}
	return scrapeAll(ctx, urls)
}

// collect makes the server at baseURL collect garbage: its heap profile with
// gc=1 runs a collection first.
func collect(ctx context.Context, baseURL string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", baseURL+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("collect garbage at %s: %w", baseURL, err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return fmt.Errorf("collect garbage at %s: %w", baseURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("collect garbage at %s: %s", baseURL, resp.Status)
	}
	return nil
}

func scrapeAll(ctx context.Context, urls []string) (metrics, error) {
	out := make(metrics, 0, len(urls))
	for _, u := range urls {
		one, err := scrape(ctx, u)
		if err != nil {
			return nil, err
		}
		out = append(out, one)
	}
	return out, nil
}

func scrape(ctx context.Context, baseURL string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", baseURL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", baseURL, err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.Contains(line, "{") {
			continue
		}
		if name, value, ok := strings.Cut(line, " "); ok {
			if v, err := strconv.ParseFloat(value, 64); err == nil {
				out[name] = v
			}
		}
	}
	return out, sc.Err()
}
