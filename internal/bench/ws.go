package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"

	"github.com/orderd/orderd/auth"
)

// wsLagGoal is issue #5's bound on p99 lag from commit to client.
const wsLagGoal = 500 * time.Millisecond

// wsWatch: websocket clients each watching one queued order of a merchant of
// capacity 50, while the merchant completes orders until the queue is
// empty; the lag from the acceptance's commit to the client hearing of it.
// It runs once against one server process and, when the bench can start
// servers, once more with the clients split over two.
func wsWatch(ctx context.Context, t *Target, o Options) (*Result, error) {
	clients := orDefault(o.Count, 5000)
	raiseFileLimit()
	res, err := wsRound(ctx, t, o, clients, 1)
	if err != nil {
		return nil, err
	}
	rounds := []*Result{res}
	if t.Spawn != nil {
		two, err := wsRound(ctx, t, o, clients, 2)
		if err != nil {
			return nil, err
		}
		for _, k := range []string{"lag_p50_ms", "lag_p99_ms", "messages_sent", "server_cpu_cores", "seconds", "idle_conn_kib"} {
			res.Extra["two_instances_"+k] = two.Extra[k]
		}
		res.Violations = append(res.Violations, two.Violations...)
		rounds = append(rounds, two)
	}
	met := judgeWS(rounds...)
	res.Extra["lag_goal_ms"] = wsLagGoal.Milliseconds()
	res.Extra["idle_conn_goal_kib"] = wsIdleConnGoal
	res.GoalText = fmt.Sprintf("lag p99 ≤ %d ms and ≤ %.0f KiB per idle connection, in every round", wsLagGoal.Milliseconds(), wsIdleConnGoal)
	res.setGoalMet(met)
	// Compared by messages delivered per second with a server that reads
	// no database, sending as many messages of an order update's size to
	// as many clients as fast as it can.
	sent, _ := res.Extra["messages_sent"].(int64)
	seconds, _ := res.Extra["seconds"].(float64)
	n, _ := res.Extra["clients"].(int)
	if sent > 0 && seconds > 0 && n > 0 {
		res.Extra["accepted_heard_per_s"] = round1(res.PerS)
		res.PerS = float64(sent) / seconds
		body, err := t.wsMessage(ctx)
		if err != nil {
			return nil, err
		}
		perClient := max(1, int(sent)/n)
		base, err := wsBaseline(ctx, n, perClient, body)
		if err != nil {
			return nil, err
		}
		res.BaselinePerS, res.Ratio = base, ratio(res.PerS, base)
		res.Extra["baseline_messages_per_client"] = perClient
		res.Extra["baseline_message_bytes"] = len(body)
	}
	res.InvariantsOK = len(res.Violations) == 0
	return res, nil
}

type heard struct {
	order string
	at    time.Time
}

// wsRound runs the scenario once with the clients spread over instances
// server processes (started with Spawn), or over the target itself when the
// bench cannot start servers.
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
	var (
		mu         sync.Mutex
		heardAll   []heard
		violations atomic.Int64
		accepted   atomic.Int64
		lost       atomic.Int64 // connections that ended before the run did
		lastSeen   sync.Map     // order id → the last status and position its client heard
		wg         sync.WaitGroup
		dialErr    atomic.Value
	)
	subscribed := make(chan struct{}, clients)
	runCtx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	n := 0
	for _, ord := range orders {
		if ord.Status != "queued" {
			continue
		}
		wsURL := "ws" + strings.TrimPrefix(urls[n%len(urls)], "http") + "/v1/ws"
		n++
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok := t.token(auth.Principal{Subject: ord.Customer, Role: auth.RoleCustomer})
			dialer := websocket.Dialer{HandshakeTimeout: 30 * time.Second}
			c, _, err := dialer.DialContext(runCtx, wsURL+"?access_token="+url.QueryEscape(tok), nil)
			if err != nil {
				dialErr.Store(err)
				subscribed <- struct{}{}
				return
			}
			defer c.Close()
			go func() { <-runCtx.Done(); c.Close() }()
			_ = c.WriteJSON(map[string]string{"op": "subscribe", "order_id": ord.ID})
			lastPos, lastVersion, first := 1<<30, 0, true
			for {
				var m struct {
					Type   string `json:"type"`
					Code   string `json:"code"`
					Detail string `json:"detail"`
					Order  struct {
						Version       int    `json:"version"`
						Status        string `json:"status"`
						QueuePosition *int   `json:"queue_position"`
					} `json:"order"`
				}
				if err := c.ReadJSON(&m); err != nil {
					if first {
						subscribed <- struct{}{}
					}
					if runCtx.Err() == nil {
						lost.Add(1)
					}
					return
				}
				at := time.Now()
				if first {
					subscribed <- struct{}{}
					first = false
				}
				if m.Type == "error" {
					lastSeen.Store(ord.ID, "error "+m.Code+": "+m.Detail)
					// A busy server may answer a subscription "unavailable";
					// like any client of API.md, this one retries.
					if m.Code == "unavailable" {
						time.Sleep(100 * time.Millisecond)
						_ = c.WriteJSON(map[string]string{"op": "subscribe", "order_id": ord.ID})
					}
				}
				if m.Type != "order" {
					continue
				}
				if m.Order.Version < lastVersion {
					violations.Add(1)
				}
				lastVersion = m.Order.Version
				if m.Order.QueuePosition != nil {
					lastSeen.Store(ord.ID, fmt.Sprintf("%s v%d at %d", m.Order.Status, m.Order.Version, *m.Order.QueuePosition))
				} else {
					lastSeen.Store(ord.ID, fmt.Sprintf("%s v%d", m.Order.Status, m.Order.Version))
				}
				// The merchant may complete an order before its watcher
				// hears of the acceptance; then the newer state is what
				// reaches the client, and it carries the acceptance too.
				if m.Order.Status == "accepted" || m.Order.Status == "completed" {
					mu.Lock()
					heardAll = append(heardAll, heard{order: ord.ID, at: at})
					mu.Unlock()
					accepted.Add(1)
					return
				}
				if m.Order.QueuePosition != nil {
					if *m.Order.QueuePosition >= lastPos {
						violations.Add(1)
					}
					lastPos = *m.Order.QueuePosition
				}
			}
		}()
	}
	for range n {
		<-subscribed
	}
	if err, _ := dialErr.Load().(error); err != nil {
		return nil, fmt.Errorf("ws dial: %w", err)
	}
	// Let the subscriptions' refresh reads pass before weighing the servers.
	time.Sleep(time.Second)
	loaded, err := collectedScrape(ctx, opsURLs)
	if err != nil {
		return nil, err
	}

	// The merchant completes orders as fast as it can until the queue is empty.
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
			for accepted.Load() < int64(n) && completed.Load() < int64(len(orders)) && runCtx.Err() == nil {
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
				_ = bar.Set(int(accepted.Load()))
			}
		}()
	}
	completer.Wait()
	elapsed := time.Since(start)
	// Give the last updates time to arrive: a late one counts in the lag,
	// one that never comes is a violation.
	for wait := time.Now().Add(10 * time.Second); accepted.Load() < int64(n) && time.Now().Before(wait); {
		time.Sleep(10 * time.Millisecond)
	}
	after, err := scrapeAll(ctx, opsURLs)
	if err != nil {
		return nil, err
	}
	cancel()
	wg.Wait()
	_ = bar.Finish()

	lags, source, err := commitLags(ctx, t, heardAll)
	if err != nil {
		return nil, err
	}
	res := &Result{Extra: map[string]any{
		"clients": n, "instances": len(urls), "capacity": capacity, "accepted_heard": accepted.Load(),
		"seconds": round1(elapsed.Seconds()), "lag_from": source,
	}}
	lags.summarize(res)
	res.Series = nil
	res.PerS = float64(accepted.Load()) / elapsed.Seconds()
	res.Extra["lag_p50_ms"], res.Extra["lag_p99_ms"] = res.P50ms, res.P99ms
	sent := after.sum("orderd_ws_messages_sent_total") - loaded.sum("orderd_ws_messages_sent_total")
	cpu := after.sum("process_cpu_seconds_total") - loaded.sum("process_cpu_seconds_total")
	res.Extra["messages_sent"] = int64(sent)
	res.Extra["clients_dropped"] = int64(after.sum("orderd_ws_dropped_total") - loaded.sum("orderd_ws_dropped_total"))
	res.Extra["messages_per_client"] = round1(sent / float64(n))
	res.Extra["server_cpu_seconds"] = round1(cpu)
	res.Extra["server_cpu_cores"] = round1(cpu / elapsed.Seconds())
	perConn := func(metric ...string) float64 {
		var grown float64
		for _, m := range metric {
			grown += loaded.sum(m) - idle.sum(m)
		}
		return round1(grown / float64(n) / 1024)
	}
	res.Extra["idle_conn_kib"] = perConn("go_gc_heap_live_bytes", "go_memstats_stack_inuse_bytes")
	res.Extra["idle_conn_rss_kib"] = perConn("process_resident_memory_bytes")
	res.Extra["server_rss_mib"] = round1(after.sum("process_resident_memory_bytes") / (1 << 20))
	if accepted.Load() < int64(n) {
		// What the clients that never heard of the acceptance heard last.
		got := map[string]bool{}
		for _, h := range heardAll {
			got[h.order] = true
		}
		lastHeard := map[string]int{}
		for _, ord := range orders {
			if ord.Status != "queued" || got[ord.ID] {
				continue
			}
			last, _ := lastSeen.Load(ord.ID)
			lastHeard[fmt.Sprint(last)]++
		}
		summary := fmt.Sprint(lastHeard)
		if len(summary) > 400 {
			summary = summary[:400] + "…"
		}
		res.Violations = append(res.Violations, fmt.Sprintf("%s: only %d of %d clients heard their order accepted (%d connections lost; last heard by those that did not: %s)",
			label, accepted.Load(), n, lost.Load(), summary))
	}
	if v := violations.Load(); v > 0 {
		res.Violations = append(res.Violations, fmt.Sprintf("%s: %d updates went backwards", label, v))
	}
	res.Violations = append(res.Violations, t.fifoInvariants(ctx, mID)...)
	res.InvariantsOK = len(res.Violations) == 0
	return res, nil
}

func round1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }

// commitLags times each acceptance from its commit when the database keeps
// commit timestamps (the bench's own cluster does), else from the order's
// accepted_at, which is earlier: the start of the accepting transaction.
func commitLags(ctx context.Context, t *Target, all []heard) (*recorder, string, error) {
	var tracked bool
	if err := t.Pool.QueryRow(ctx, `SELECT current_setting('track_commit_timestamp')::bool`).Scan(&tracked); err != nil {
		return nil, "", fmt.Errorf("read track_commit_timestamp: %w", err)
	}
	ids := make([]string, len(all))
	for i, h := range all {
		ids[i] = h.order
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
		if at, ok := committed[h.order]; ok {
			rec.add(h.at.Sub(at))
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

// collectedScrape scrapes the servers once each has collected garbage three
// times since the call began: their live heap is then current, and stacks
// that grew while connections were set up have shrunk back as they do on an
// idle server. Scraping allocates, so it is also what brings the
// collections about.
func collectedScrape(ctx context.Context, urls []string) (metrics, error) {
	before, err := scrapeAll(ctx, urls)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(time.Minute)
	for i, u := range urls {
		for {
			now, err := scrape(ctx, u)
			if err != nil {
				return nil, err
			}
			if now["go_gc_duration_seconds_count"] >= before[i]["go_gc_duration_seconds_count"]+3 {
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("%s collected no garbage within a minute of scraping", u)
			}
		}
	}
	return scrapeAll(ctx, urls)
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
