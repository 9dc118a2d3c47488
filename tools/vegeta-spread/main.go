// Command vegeta-spread drives orderd's spread scenario (paid orders of 1-3
// lines over 1,000 merchants) with vegeta, a load generator orderd does not
// contain, to cross-check what `orderd bench spread` reports. It talks to
// orderd only as API.md describes: HTTP, JSON and HS256 bearer tokens it
// signs itself.
//
//	go run ./tools/vegeta-spread --url http://127.0.0.1:8080 --jwt-secret S --duration 30s
//
// Against a server that requires an issuer and an audience
// (ORDERD_JWT_ISSUER, ORDERD_JWT_AUDIENCE), give the same with --jwt-issuer
// and --jwt-audience; they default to those variables.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "orderd's base URL")
	// No default from the environment here: -help would print it.
	secret := flag.String("jwt-secret", "", "orderd's JWT secret (default $ORDERD_JWT_SECRET)")
	issuer := flag.String("jwt-issuer", os.Getenv("ORDERD_JWT_ISSUER"), "the iss of every token, as orderd's ORDERD_JWT_ISSUER")
	audience := flag.String("jwt-audience", os.Getenv("ORDERD_JWT_AUDIENCE"), "the aud of every token, as orderd's ORDERD_JWT_AUDIENCE")
	duration := flag.Duration("duration", 30*time.Second, "attack duration")
	workers := flag.Uint64("workers", 64, "concurrent connections, as orderd bench spread's clients")
	merchants := flag.Int("merchants", 1000, "merchants, 3 products each")
	customers := flag.Int("customers", 20000, "distinct customers the orders come from")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()
	if *secret == "" {
		*secret = os.Getenv("ORDERD_JWT_SECRET")
	}
	if *secret == "" {
		fmt.Fprintln(os.Stderr, "vegeta-spread: --jwt-secret (or ORDERD_JWT_SECRET) is required")
		os.Exit(1)
	}
	sign := signer([]byte(*secret), *issuer, *audience, time.Now)
	if err := run(*url, sign, *duration, *workers, *merchants, *customers, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "vegeta-spread:", err)
		os.Exit(1)
	}
}

type shop struct {
	id       string
	products [3]string
}

// signer returns what signs the tool's tokens: HS256 with the claims of
// API.md, and iss and aud when the server requires them.
func signer(secret []byte, issuer, audience string, now func() time.Time) func(sub, role string) (string, error) {
	return func(sub, role string) (string, error) {
		at := now()
		claims := jwt.MapClaims{"sub": sub, "role": role, "iat": at.Unix(), "exp": at.Add(24 * time.Hour).Unix()}
		if issuer != "" {
			claims["iss"] = issuer
		}
		if audience != "" {
			claims["aud"] = audience
		}
		return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
	}
}

func run(url string, sign func(sub, role string) (string, error), duration time.Duration, workers uint64, merchants, customers int, seed uint64) error {
	admin, err := sign("vegeta-admin", "admin")
	if err != nil {
		return err
	}
	shops, err := setup(url, admin, merchants)
	if err != nil {
		return err
	}
	tokens := make([]string, customers)
	for i := range tokens {
		if tokens[i], err = sign(fmt.Sprintf("vegeta-c%d", i), "customer"); err != nil {
			return err
		}
	}

	type line struct {
		ProductID string `json:"product_id"`
		Quantity  int    `json:"quantity"`
	}
	var next atomic.Uint64
	targeter := func(t *vegeta.Target) error {
		i := next.Add(1)
		rng := rand.New(rand.NewPCG(seed, i))
		s := shops[rng.IntN(len(shops))]
		items := make([]line, 1+rng.IntN(3))
		for j := range items {
			items[j] = line{ProductID: s.products[j], Quantity: 1 + rng.IntN(3)}
		}
		body, err := json.Marshal(map[string]any{"merchant_id": s.id, "items": items, "payment_ref": "pay"})
		if err != nil {
			return err
		}
		t.Method, t.URL, t.Body = "POST", url+"/v1/orders", body
		t.Header = http.Header{
			"Content-Type":    {"application/json"},
			"Authorization":   {"Bearer " + tokens[i%uint64(len(tokens))]},
			"Idempotency-Key": {uuid.NewString()},
		}
		return nil
	}
	attacker := vegeta.NewAttacker(vegeta.Workers(workers), vegeta.MaxWorkers(workers), vegeta.Connections(int(workers)),
		vegeta.KeepAlive(true), vegeta.Timeout(30*time.Second))
	var m vegeta.Metrics
	// A zero rate is as fast as the workers go: closed-loop load, as
	// orderd bench's clients apply.
	for res := range attacker.Attack(targeter, vegeta.ConstantPacer{}, duration, "spread") {
		m.Add(res)
	}
	m.Close()
	codes := make([]string, 0, len(m.StatusCodes))
	for c, n := range m.StatusCodes {
		codes = append(codes, fmt.Sprintf("%s:%d", c, n))
	}
	sort.Strings(codes)
	fmt.Printf("vegeta spread: %d requests in %s, %.0f successful/s, success %.2f%%, p50 %.1f ms, p99 %.1f ms, codes %v\n",
		m.Requests, m.Duration.Round(time.Millisecond), m.Throughput, m.Success*100,
		float64(m.Latencies.P50.Microseconds())/1000, float64(m.Latencies.P99.Microseconds())/1000, codes)
	if len(m.Errors) > 0 {
		fmt.Printf("errors: %v\n", m.Errors[:min(5, len(m.Errors))])
	}
	return nil
}

// setup creates the merchants and their products from 16 connections.
func setup(url, admin string, merchants int) ([]shop, error) {
	shops := make([]shop, merchants)
	post := func(path string, body any) (string, error) {
		b, err := json.Marshal(body)
		if err != nil {
			return "", err
		}
		req, err := http.NewRequest("POST", url+path, bytes.NewReader(b))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			return "", err
		}
		if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, raw)
		}
		var out struct {
			ID string `json:"id"`
		}
		return out.ID, json.Unmarshal(raw, &out)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < merchants; i = int(next.Add(1)) - 1 {
				id, err := post("/v1/merchants", map[string]any{"name": fmt.Sprintf("vegeta-%d", i), "capacity": 100000})
				if err != nil {
					errs <- err
					return
				}
				shops[i].id = id
				for j := range 3 {
					if shops[i].products[j], err = post("/v1/merchants/"+id+"/products", map[string]any{"name": fmt.Sprintf("p%d", j), "price_cents": 300 + j}); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	return shops, nil
}
