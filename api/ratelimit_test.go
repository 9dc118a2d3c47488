package api

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/auth"
)

// fakeClock is a settable clock, safe for concurrent use.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (l *RateLimiter) keys() int {
	n := 0
	for i := range l.shards {
		l.shards[i].mu.Lock()
		n += len(l.shards[i].full)
		l.shards[i].mu.Unlock()
	}
	return n
}

func TestRateLimiterBurstIsTwiceTheRate(t *testing.T) {
	t.Parallel()
	for _, n := range []float64{1, 5, 20} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			clock := newFakeClock()
			l := newRateLimiter(n, clock.Now)
			for i := range int(2 * n) {
				ok, _ := l.Allow("alice")
				require.True(t, ok, "request %d", i+1)
			}
			ok, retry := l.Allow("alice")
			require.False(t, ok)
			require.Equal(t, time.Duration(float64(time.Second)/n), retry)

			ok, _ = l.Allow("bob")
			require.True(t, ok, "keys have their own buckets")

			clock.Advance(retry)
			ok, _ = l.Allow("alice")
			require.True(t, ok, "a refused attempt consumes nothing")
		})
	}
}

// After its burst a key gets the rate, no more and no less.
func TestRateLimiterRefillsAtTheRate(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	l := newRateLimiter(20, clock.Now)
	for range 40 {
		ok, _ := l.Allow("alice")
		require.True(t, ok)
	}
	allowed := 0
	for range 100 {
		clock.Advance(10 * time.Millisecond)
		for {
			ok, _ := l.Allow("alice")
			if !ok {
				break
			}
			allowed++
		}
	}
	require.Equal(t, 20, allowed)
}

// A key's bucket is a map entry: a customer whose bucket was forgotten, the
// common case under many customers each ordering now and then, costs no
// allocation. Not parallel: testing.AllocsPerRun refuses to run beside other
// tests.
func TestRateLimiterAllocatesNothingPerKey(t *testing.T) {
	clock := newFakeClock()
	l := newRateLimiter(20, clock.Now)
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprint("customer-", i)
	}
	round := func() {
		for _, k := range keys {
			ok, _ := l.Allow(k)
			require.True(t, ok)
		}
		clock.Advance(l.idle)
	}
	round() // the shards' maps grow once
	require.Zero(t, testing.AllocsPerRun(10, round))
}

func TestRateLimiterZeroDisables(t *testing.T) {
	t.Parallel()
	l := newRateLimiter(0, time.Now)
	require.Nil(t, l)
	for range 1000 {
		ok, _ := l.Allow("alice")
		require.True(t, ok)
	}
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	require.NotNil(t, perIPLimit(l, h))
}

func TestRateLimiterForgetsIdleKeys(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	l := newRateLimiter(10, clock.Now)
	for i := range 1000 {
		l.Allow(fmt.Sprint("ip-", i))
	}
	require.Equal(t, 1000, l.keys())
	clock.Advance(l.idle)
	l.Allow("newcomer")
	// Each shard sweeps on its own next use; touch them all.
	for i := range 1000 {
		l.Allow(fmt.Sprint("again-", i))
	}
	require.Equal(t, 1001, l.keys(), "only the keys used since the sweep remain")
}

func TestRateLimiterMemoryIsCapped(t *testing.T) {
	t.Parallel()
	l := newRateLimiter(1, newFakeClock().Now)
	total := limiterShards*maxKeysPerShard + 1000
	for i := range total {
		l.Allow(fmt.Sprint("flood-", i))
	}
	for i := range l.shards {
		require.LessOrEqual(t, len(l.shards[i].full), maxKeysPerShard)
	}
}

func TestRateLimiterConcurrent(t *testing.T) {
	t.Parallel()
	l := newRateLimiter(50, newFakeClock().Now)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		allowed int
	)
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if ok, _ := l.Allow("shared"); ok {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	require.Equal(t, 100, allowed, "exactly the burst passes at one instant")
}

func TestPerIPLimit(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	h := withRequestID(perIPLimit(newRateLimiter(1, clock.Now), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})))
	send := func(remote, forwarded string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		if forwarded != "" {
			r.Header.Set("X-Forwarded-For", forwarded)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	require.Equal(t, http.StatusNoContent, send("192.0.2.1:1000", "").Code)
	require.Equal(t, http.StatusNoContent, send("192.0.2.1:1001", "198.51.100.7").Code)
	rec := send("192.0.2.1:1002", "198.51.100.8")
	require.Equal(t, http.StatusTooManyRequests, rec.Code, "X-Forwarded-For is not trusted")
	require.Equal(t, "1", rec.Header().Get("Retry-After"))
	require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	require.Contains(t, rec.Body.String(), `"code":"rate_limited"`)
	require.Contains(t, rec.Body.String(), `"instance":"`+rec.Header().Get("X-Request-Id")+`"`)

	require.Equal(t, http.StatusNoContent, send("192.0.2.2:1000", "").Code)

	// One IPv6 host holds a whole /64.
	require.Equal(t, http.StatusNoContent, send("[2001:db8:1:2::1]:1", "").Code)
	require.Equal(t, http.StatusNoContent, send("[2001:db8:1:2::2]:1", "").Code)
	require.Equal(t, http.StatusTooManyRequests, send("[2001:db8:1:2:ffff::3]:1", "").Code)
	require.Equal(t, http.StatusNoContent, send("[2001:db8:1:3::1]:1", "").Code)
}

func TestClientKey(t *testing.T) {
	t.Parallel()
	require.Equal(t, "192.0.2.1", clientKey("192.0.2.1:80"))
	require.Equal(t, "192.0.2.1", clientKey("[::ffff:192.0.2.1]:80"))
	require.Equal(t, "2001:db8::/64", clientKey("[2001:db8::7]:80"))
	require.Equal(t, "pipe", clientKey("pipe"))
}

// TestDropEntryLimitIsOneLineAway: a handler guards itself with
// allow(r, s.limits.dropEntries); RateDropEntries configures it, per
// caller, with 429 and Retry-After, and 0 turns it off.
func TestDropEntryLimitIsOneLineAway(t *testing.T) {
	t.Parallel()
	serve := func(s *Server, sub string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/v1/drops/x/entries", nil)
		r = r.WithContext(auth.WithPrincipal(r.Context(), auth.Principal{Subject: sub, Role: auth.RoleCustomer}))
		rec := httptest.NewRecorder()
		handlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			if err := allow(r, s.limits.dropEntries); err != nil {
				return err
			}
			w.WriteHeader(http.StatusCreated)
			return nil
		}).ServeHTTP(rec, r)
		return rec
	}
	limited := New(Config{RateDropEntries: 1})
	for range 2 {
		require.Equal(t, http.StatusCreated, serve(limited, "alice").Code)
	}
	refused := serve(limited, "alice")
	require.Equal(t, http.StatusTooManyRequests, refused.Code)
	require.Equal(t, "1", refused.Header().Get("Retry-After"))
	require.Contains(t, refused.Body.String(), `"code":"rate_limited"`)
	require.Equal(t, http.StatusCreated, serve(limited, "bob").Code)

	open := New(Config{RateDropEntries: 0})
	for range 10 {
		require.Equal(t, http.StatusCreated, serve(open, "alice").Code)
	}
}
