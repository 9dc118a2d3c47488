package api

import (
	"hash/maphash"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

const (
	limiterShards = 16
	// maxKeysPerShard caps memory (a bucket costs about 200 bytes) even when
	// a flood of distinct addresses arrives faster than idle keys expire.
	maxKeysPerShard = 4096
)

// RateLimiter keeps one token bucket per key, refilled at a fixed rate with a
// burst of twice that. Keys are spread over shards so that unrelated callers
// rarely contend on one mutex.
type RateLimiter struct {
	limit rate.Limit
	burst int
	// idle is how long a bucket takes to refill completely. A bucket idle
	// that long is indistinguishable from a new one, so forgetting it is free.
	idle   time.Duration
	now    func() time.Time
	seed   maphash.Seed
	shards [limiterShards]limiterShard
}

type limiterShard struct {
	mu      sync.Mutex
	buckets map[string]*bucket
	swept   time.Time
}

type bucket struct {
	limiter *rate.Limiter
	seen    time.Time
}

// newRateLimiter allows perSecond events per key, in bursts of up to twice
// that, by the clock now. It returns nil, which allows everything, when
// perSecond is 0.
func newRateLimiter(perSecond float64, now func() time.Time) *RateLimiter {
	if !(perSecond > 0) {
		return nil
	}
	burst := max(1, int(2*perSecond))
	l := &RateLimiter{
		limit: rate.Limit(perSecond),
		burst: burst,
		idle:  max(time.Second, time.Duration(float64(burst)/perSecond*float64(time.Second))),
		now:   now,
		seed:  maphash.MakeSeed(),
	}
	start := now()
	for i := range l.shards {
		l.shards[i] = limiterShard{buckets: map[string]*bucket{}, swept: start}
	}
	return l
}

// Allow reports whether key may act now, and if not, how long until it may.
// A refused attempt consumes nothing.
func (l *RateLimiter) Allow(key string) (ok bool, retryAfter time.Duration) {
	if l == nil {
		return true, 0
	}
	now := l.now()
	sh := &l.shards[maphash.String(l.seed, key)%limiterShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if now.Sub(sh.swept) >= l.idle {
		sh.sweep(now, l.idle)
	}
	b, found := sh.buckets[key]
	if !found {
		if len(sh.buckets) >= maxKeysPerShard {
			sh.sweep(now, l.idle)
			sh.evictOne()
		}
		b = &bucket{limiter: rate.NewLimiter(l.limit, l.burst)}
		sh.buckets[key] = b
	}
	b.seen = now
	res := b.limiter.ReserveN(now, 1)
	if delay := res.DelayFrom(now); delay > 0 {
		res.CancelAt(now)
		return false, delay
	}
	return true, 0
}

func (sh *limiterShard) sweep(now time.Time, idle time.Duration) {
	for k, b := range sh.buckets {
		if now.Sub(b.seen) >= idle {
			delete(sh.buckets, k)
		}
	}
	sh.swept = now
}

// evictOne drops an arbitrary key (map order is random) when the shard is
// full of active keys: that caller merely gets a fresh bucket next time,
// whereas refusing new keys would lock out every newcomer during a flood.
func (sh *limiterShard) evictOne() {
	if len(sh.buckets) < maxKeysPerShard {
		return
	}
	for k := range sh.buckets {
		delete(sh.buckets, k)
		return
	}
}

// customerLimits are the per-caller limits on writes, one set of buckets for
// each kind of write, so that paying for an order does not use up the
// allowance to place the next one.
type customerLimits struct {
	place, pay, cancel, tickets, dropEntries *RateLimiter
	// merchantOps limits a caller's pauses, resumes, capacity changes and
	// prioritizations, each a write under the merchant's lock.
	merchantOps *RateLimiter
}

// allow refuses, with 429 and Retry-After, an authenticated caller over l.
// A handler calls it once it knows the request is the caller's to make,
// before any database work:
//
//	if err := allow(r, s.limits.dropEntries); err != nil {
//		return err
//	}
func allow(r *http.Request, l *RateLimiter) error {
	if ok, retry := l.Allow(principalOf(r).Subject); !ok {
		return rateLimited(retry)
	}
	return nil
}

// perIPLimit limits every request by the client's address. X-Forwarded-For
// is not trusted: anyone can write it.
func perIPLimit(l *RateLimiter, next http.Handler) http.Handler {
	if l == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ok, retry := l.Allow(clientKey(r.RemoteAddr)); !ok {
			writeProblem(w, r, rateLimited(retry))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// clientKey is the client's IPv4 address, or its IPv6 /64: one IPv6 host
// usually holds a whole /64 and could otherwise rotate through it.
func clientKey(remoteAddr string) string {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return remoteAddr
	}
	addr := ap.Addr().Unmap()
	if addr.Is6() {
		prefix, _ := addr.Prefix(64)
		return prefix.String()
	}
	return addr.String()
}
