package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orderd/orderd/jobs"
	"github.com/orderd/orderd/webhook"
)

// webhookGoal is deliveries per second the relay must reach inside `bench all`.
const webhookGoal = 5000

// webhookPatience bounds the wait for every message to arrive; what has not
// arrived by then is reported, and the run goes on to the next scenario.
const webhookPatience = 2 * time.Minute

// messagesPerOrder: each order has several messages, so that the relay's
// promise to send an order's messages in version order is under test.
const messagesPerOrder = 4

// webhookTypes are the order events merchants hear about, in the order
// an order's messages carry them.
var webhookTypes = []string{"order.accepted", "order.cancelled", "order.expired", "order.completed"}

// receiver is a merchant endpoint on loopback that answers 200 at once, and
// checks every delivery's signature and each order's version order. It
// counts messages by their delivery id: delivery is at least once, and a
// message delivered twice is one message received (and one duplicate).
type receiver struct {
	srv        *httptest.Server
	secrets    sync.Map // path → webhook secret
	received   atomic.Int64
	duplicates atomic.Int64
	badSig     atomic.Int64
	late       atomic.Int64 // deliveries of a version older than one already received
	mu         sync.Mutex
	versions   map[string]int // order id → highest version received
	seen       map[string]bool
}

func newReceiver() *receiver {
	r := &receiver{versions: map[string]int{}, seen: map[string]bool{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if sec, ok := r.secrets.Load(req.URL.Path); !ok || req.Header.Get("X-Orderd-Signature") != webhook.Sign(sec.(string), body) {
			r.badSig.Add(1)
		}
		var m struct {
			Order struct {
				ID      string `json:"id"`
				Version int    `json:"version"`
			} `json:"order"`
		}
		parsed := json.Unmarshal(body, &m) == nil
		delivery := req.Header.Get("X-Orderd-Delivery")
		r.mu.Lock()
		if r.seen[delivery] {
			r.duplicates.Add(1)
		} else {
			r.seen[delivery] = true
			r.received.Add(1)
			if parsed {
				if m.Order.Version < r.versions[m.Order.ID] {
					r.late.Add(1)
				}
				r.versions[m.Order.ID] = max(r.versions[m.Order.ID], m.Order.Version)
			}
		}
		r.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	return r
}

func (r *receiver) reset() {
	r.received.Store(0)
	r.duplicates.Store(0)
	r.badSig.Store(0)
	r.late.Store(0)
	r.mu.Lock()
	r.versions = map[string]int{}
	r.seen = map[string]bool{}
	r.mu.Unlock()
}

// outboxMessage is one message as the relay finds it in the outbox.
type outboxMessage struct {
	id, merchant, order uuid.UUID
	version             int
	typ                 string
	path, secret        string
	body                []byte
}

// webhooks: outbox messages of real orders' size, several per order, to a
// receiver on loopback that answers 200, as fast as the relay delivers them,
// against the receiver's own capacity measured first in the same run: the
// same signed bodies POSTed straight to it, by as many workers as the relay
// has, with the relay's own sender and no database.
func webhooks(ctx context.Context, t *Target, o Options) (*Result, error) {
	count := orDefault(o.Count, 50000) / messagesPerOrder * messagesPerOrder
	const merchants = 20
	workers := jobs.DefaultRelayConfig().Workers
	rcv := newReceiver()
	defer rcv.srv.Close()

	type hooked struct {
		id           uuid.UUID
		path, secret string
	}
	shops := make([]hooked, merchants)
	for i := range shops {
		path := fmt.Sprintf("/hook/%d", i)
		var out struct {
			ID            string `json:"id"`
			WebhookSecret string `json:"webhook_secret"`
		}
		if _, err := t.call(ctx, "POST", "/v1/merchants", t.admin(), map[string]any{"name": "hooked", "capacity": 1000, "webhook_url": rcv.srv.URL + path}, nil, &out); err != nil {
			return nil, err
		}
		rcv.secrets.Store(path, out.WebhookSecret)
		shops[i] = hooked{id: uuid.MustParse(out.ID), path: path, secret: out.WebhookSecret}
	}
	view, err := t.sampleOrderView(ctx)
	if err != nil {
		return nil, err
	}
	msgs := make([]outboxMessage, count)
	occurred := time.Now().UTC()
	var bodyBytes int
	for k := range count / messagesPerOrder {
		shop := shops[k%merchants]
		order := uuid.New()
		for v := range messagesPerOrder {
			m := outboxMessage{id: uuid.New(), merchant: shop.id, order: order, version: v + 2, typ: webhookTypes[v%len(webhookTypes)], path: shop.path, secret: shop.secret}
			view["id"], view["merchant_id"], view["version"] = order.String(), shop.id.String(), m.version
			body, err := json.Marshal(map[string]any{"id": m.id.String(), "type": m.typ, "occurred_at": occurred, "order": view})
			if err != nil {
				return nil, err
			}
			m.body = body
			bodyBytes += len(body)
			msgs[k*messagesPerOrder+v] = m
		}
	}

	// The receiver's capacity: every body POSTed straight to it.
	sender := webhook.NewSender(webhook.Options{AllowLoopback: true})
	var next atomic.Int64
	var failed atomic.Int64
	bar := newBar(o, count, "webhooks: the receiver alone")
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < count && ctx.Err() == nil; i = int(next.Add(1)) - 1 {
				m := msgs[i]
				if !sender.Send(ctx, webhook.Message{ID: m.id.String(), URL: rcv.srv.URL + m.path, Secret: m.secret, Body: m.body}).OK() {
					failed.Add(1)
				}
				_ = bar.Add(1)
			}
		}()
	}
	wg.Wait()
	capacitySeconds := time.Since(start).Seconds()
	_ = bar.Finish()
	if rcv.badSig.Load() > 0 {
		return nil, fmt.Errorf("webhooks: %d of the bench's own bodies carried a bad signature", rcv.badSig.Load())
	}
	// What the receiver acknowledged: on a busy machine some posts time
	// out, as the relay's would.
	capacity := float64(rcv.received.Load()) / capacitySeconds
	refused := failed.Load()
	rcv.reset()

	fillStart := time.Now()
	if _, err := t.Pool.CopyFrom(ctx, pgx.Identifier{"outbox"}, []string{"id", "merchant_id", "order_id", "order_version", "event_type", "payload"},
		pgx.CopyFromSlice(len(msgs), func(i int) ([]any, error) {
			m := msgs[i]
			return []any{m.id, m.merchant, m.order, m.version, m.typ, string(m.body)}, nil
		})); err != nil {
		return nil, fmt.Errorf("fill outbox: %w", err)
	}
	// Deliveries are timed from the commit that made the messages visible:
	// filling the outbox is the bench's work, not the relay's.
	start = time.Now()
	fill := start.Sub(fillStart)
	cpu := t.readCPU()
	bar = newBar(o, count, "webhooks: delivering")
	deadline := time.Now().Add(webhookPatience)
	for rcv.received.Load() < int64(count) && time.Now().Before(deadline) {
		_ = bar.Set(int(rcv.received.Load()))
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(start)
	_ = bar.Finish()
	received := rcv.received.Load()
	res := &Result{Extra: map[string]any{
		"messages": count, "merchants": merchants, "messages_per_order": messagesPerOrder, "mean_body_bytes": bodyBytes / count,
		"workers": workers, "received": received, "duplicates": rcv.duplicates.Load(), "seconds": round3(elapsed.Seconds()), "fill_seconds": round3(fill.Seconds()),
		"receiver_alone_seconds": round3(capacitySeconds), "receiver_alone_failed": refused, "goal_per_s": webhookGoal,
	}}
	res.setCost(t.perUnit(res.Extra, "delivery", cpu, received))
	res.PerS = float64(received) / elapsed.Seconds()
	res.BaselinePerS = capacity
	res.Ratio = ratio(res.PerS, res.BaselinePerS)
	res.GoalText = fmt.Sprintf("≥ %d/s", webhookGoal)
	res.setGoalMet(res.PerS >= webhookGoal)
	if received < int64(count) {
		res.Violations = append(res.Violations, fmt.Sprintf("only %d of %d messages arrived", received, count))
	}
	if n := rcv.badSig.Load(); n > 0 {
		res.Violations = append(res.Violations, fmt.Sprintf("%d deliveries with a bad signature", n))
	}
	if n := rcv.late.Load(); n > 0 {
		res.Violations = append(res.Violations, fmt.Sprintf("%d deliveries arrived after a later version of their order", n))
	}
	var pending int
	waitUntil := time.Now().Add(10 * time.Second)
	for {
		if err := t.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE status <> 'delivered'`).Scan(&pending); err != nil {
			return nil, err
		}
		if pending == 0 || time.Now().After(waitUntil) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if pending > 0 {
		res.Violations = append(res.Violations, fmt.Sprintf("%d outbox rows not marked delivered", pending))
	}
	res.InvariantsOK = len(res.Violations) == 0
	return res, nil
}

// sampleOrderView places one paid order of three lines and returns its
// view as the API answers it: what a webhook's order looks like.
func (t *Target) sampleOrderView(ctx context.Context) (map[string]any, error) {
	mID, err := t.createMerchant(ctx, merchantSpec{Name: "sample " + strings.Repeat("x", 8), Capacity: 10})
	if err != nil {
		return nil, err
	}
	var items []line
	for j := range 3 {
		pID, err := t.createProduct(ctx, mID, map[string]any{"name": fmt.Sprintf("oolong milk tea %d", j), "price_cents": 300 + j})
		if err != nil {
			return nil, err
		}
		items = append(items, line{ProductID: pID, Quantity: 1 + j})
	}
	var view map[string]any
	_, err = t.call(ctx, "POST", "/v1/orders", t.token(customer("sample", 0)), placeBody{MerchantID: mID, Items: items, PaymentRef: "pay-sample"},
		map[string]string{"Idempotency-Key": uuid.NewString()}, &view)
	return view, err
}
