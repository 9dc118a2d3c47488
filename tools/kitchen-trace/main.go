// Command kitchen-trace records what domain's ETA test replays: a kitchen
// counting cups, run by orderd, whose orders take uneven times to make. It
// creates a merchant counting items, places paid orders of 1-14 cups from
// one customer stream whose pace swings between a rush and a lull, and
// plays the kitchen: each accepted order is completed after a preparation
// time drawn at random for its size. Time runs --scale times faster than a
// real kitchen's; the trace is written in kitchen seconds, every time read
// from orderd's answers (placed_at, accepted_at, completed_at).
//
//	go run ./tools/kitchen-trace --url http://127.0.0.1:8080 --jwt-secret S --orders 600 > domain/testdata/eta_orders.csv
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "orderd's base URL")
	secret := flag.String("jwt-secret", "", "orderd's JWT secret (default $ORDERD_JWT_SECRET)")
	orders := flag.Int("orders", 600, "orders to place and complete")
	scale := flag.Float64("scale", 100, "kitchen seconds per real second")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()
	if *secret == "" {
		*secret = os.Getenv("ORDERD_JWT_SECRET")
	}
	if *secret == "" {
		fmt.Fprintln(os.Stderr, "kitchen-trace: --jwt-secret (or ORDERD_JWT_SECRET) is required")
		os.Exit(1)
	}
	k := &kitchen{url: *url, secret: []byte(*secret), scale: *scale, seed: *seed, arrivals: rand.New(rand.NewPCG(*seed, 1)), cooks: rand.New(rand.NewPCG(*seed, 2)), completed: map[string]order{}, http: &http.Client{Timeout: 10 * time.Second}}
	if err := k.run(context.Background(), *orders); err != nil {
		fmt.Fprintln(os.Stderr, "kitchen-trace:", err)
		os.Exit(1)
	}
}

// The kitchen: ten cups in the making at once.
const capacity = 10

// sizes are the cups of an order and how often they come: mostly one to
// three cups, sometimes an office order of ten, now and then one larger
// than the whole kitchen.
var sizes = []struct {
	cups   int
	weight float64
}{{1, 30}, {2, 18}, {3, 17}, {4, 10}, {5, 7}, {6, 8}, {10, 7}, {14, 3}}

// prepSeconds is how long an order of cups takes, in kitchen seconds: a
// fixed part and a part growing less than linearly with the cups, times a
// log-normal spread, and one order in twenty held up twice as long (a
// machine to clean, a missing topping).
func prepSeconds(rng *rand.Rand, cups int) float64 {
	base := 45 + 25*math.Pow(float64(cups), 0.7)
	t := base * math.Exp(0.4*rng.NormFloat64())
	if rng.Float64() < 0.05 {
		t *= 2
	}
	return t
}

type kitchen struct {
	url, merchant, product string
	secret                 []byte
	scale                  float64
	seed                   uint64
	arrivals, cooks        *rand.Rand
	http                   *http.Client
	mu                     sync.Mutex
	placed                 []record
	completed              map[string]order
}

type record struct {
	n    int
	id   string
	cups int
}

type order struct {
	ID          string     `json:"id"`
	Status      string     `json:"status"`
	Load        int        `json:"load"`
	PlacedAt    time.Time  `json:"placed_at"`
	AcceptedAt  *time.Time `json:"accepted_at"`
	CompletedAt *time.Time `json:"completed_at"`
}

func (k *kitchen) token(sub, role, merchant string) string {
	claims := jwt.MapClaims{"sub": sub, "role": role, "iat": time.Now().Unix(), "exp": time.Now().Add(24 * time.Hour).Unix()}
	if merchant != "" {
		claims["merchant_id"] = merchant
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(k.secret)
	if err != nil {
		panic(err)
	}
	return tok
}

func (k *kitchen) call(ctx context.Context, method, path, token string, body any, header map[string]string, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, k.url+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	for h, v := range header {
		req.Header.Set(h, v)
	}
	resp, err := k.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

func (k *kitchen) run(ctx context.Context, total int) error {
	admin := k.token("kitchen-trace", "admin", "")
	var m, p struct {
		ID string `json:"id"`
	}
	if err := k.call(ctx, "POST", "/v1/merchants", admin, map[string]any{
		"name": "kitchen-trace " + uuid.NewString()[:8], "capacity": capacity, "capacity_unit": "items",
		"prep_seconds": 60, "max_queue_wait_seconds": 86400,
	}, nil, &m); err != nil {
		return err
	}
	if err := k.call(ctx, "POST", "/v1/merchants/"+m.ID+"/products", admin, map[string]any{
		"name": "milk tea", "price_cents": 1800, "load_units": 1,
	}, nil, &p); err != nil {
		return err
	}
	k.merchant, k.product = m.ID, p.ID
	errs := make(chan error, 2)
	go func() { errs <- k.cook(ctx, total) }()
	go func() { errs <- k.place(ctx, total) }()
	for range 2 {
		if err := <-errs; err != nil {
			return err
		}
	}
	return k.write(os.Stdout)
}

// place sends paid orders in arrival order, one at a time. The pace swings
// every 60 orders between a rush, faster than the kitchen's rate (the line
// grows), and a lull, slower (it shrinks, sometimes to nothing).
func (k *kitchen) place(ctx context.Context, total int) error {
	var sum float64
	for _, s := range sizes {
		sum += s.weight
	}
	// The kitchen completes an order about every 65 s (its large orders
	// wait for it to empty, which leaves cups idle).
	const meanGap = 65.0
	for n := range total {
		rush := (n/60)%2 == 0
		gap := meanGap * 1.4
		if rush {
			gap = meanGap * 0.75
		}
		time.Sleep(time.Duration(k.arrivals.ExpFloat64() * gap / k.scale * float64(time.Second)))
		pick, cups := k.arrivals.Float64()*sum, 0
		for _, s := range sizes {
			if pick -= s.weight; pick < 0 {
				cups = s.cups
				break
			}
		}
		customer := fmt.Sprintf("guest-%s-%d", k.merchant[:8], n)
		var o order
		if err := k.call(ctx, "POST", "/v1/orders", k.token(customer, "customer", ""), map[string]any{
			"merchant_id": k.merchant, "payment_ref": "pay-" + customer,
			"items": []map[string]any{{"product_id": k.product, "quantity": cups}},
		}, map[string]string{"Idempotency-Key": customer}, &o); err != nil {
			return err
		}
		k.mu.Lock()
		k.placed = append(k.placed, record{n: n, id: o.ID, cups: cups})
		k.mu.Unlock()
	}
	return nil
}

// cook completes each accepted order once its preparation time, drawn when
// the kitchen first sees it, has passed since its acceptance.
func (k *kitchen) cook(ctx context.Context, total int) error {
	tok := k.token("kitchen", "merchant", k.merchant)
	due := map[string]time.Time{}
	completed := 0
	for completed < total {
		var list struct {
			Orders []order `json:"orders"`
		}
		if err := k.call(ctx, "GET", "/v1/merchants/"+k.merchant+"/orders?status=accepted&limit=200", tok, nil, nil, &list); err != nil {
			return err
		}
		for _, o := range list.Orders {
			if _, ok := due[o.ID]; !ok && o.AcceptedAt != nil {
				prep := prepSeconds(k.cooks, o.Load) / k.scale
				due[o.ID] = o.AcceptedAt.Add(time.Duration(prep * float64(time.Second)))
			}
		}
		for _, o := range list.Orders {
			if d, ok := due[o.ID]; !ok || time.Now().Before(d) {
				continue
			}
			var c order
			if err := k.call(ctx, "POST", "/v1/orders/"+o.ID+"/complete", tok, nil, nil, &c); err != nil {
				return err
			}
			delete(due, o.ID)
			completed++
			k.mu.Lock()
			k.completed[c.ID] = c
			k.mu.Unlock()
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

func (k *kitchen) write(w io.Writer) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	t0 := k.completed[k.placed[0].id].PlacedAt
	at := func(t time.Time) string { return fmt.Sprintf("%.1f", t.Sub(t0).Seconds()*k.scale) }
	fmt.Fprintf(w, "# recorded by tools/kitchen-trace against orderd serve: a merchant counting cups, capacity %d,\n", capacity)
	fmt.Fprintf(w, "# paid orders in arrival order, each completed after a random preparation time for its size;\n")
	fmt.Fprintf(w, "# time ran %g times faster, written in kitchen seconds since the first placement\n", k.scale)
	fmt.Fprintf(w, "# made by: go run ./tools/kitchen-trace --orders %d --scale %g --seed %d\n", len(k.placed), k.scale, k.seed)
	fmt.Fprintln(w, "# order,cups,placed,accepted,completed")
	for _, r := range k.placed {
		c, ok := k.completed[r.id]
		if !ok || c.AcceptedAt == nil || c.CompletedAt == nil || c.Load != r.cups {
			return fmt.Errorf("order %d (%s) was not completed as placed: %+v", r.n, r.id, c)
		}
		fmt.Fprintf(w, "%d,%d,%s,%s,%s\n", r.n, r.cups, at(c.PlacedAt), at(*c.AcceptedAt), at(*c.CompletedAt))
	}
	return nil
}
