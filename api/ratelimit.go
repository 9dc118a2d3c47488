package api

import (
	"hash/maphash"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

const (
	limiterShards = 16
	// maxKeysPerShard caps memory even when a flood of distinct addresses
	// arrives faster than idle keys expire.
	maxKeysPerShard = 4096
)

// RateLimiter keeps one token bucket per key, refilled at a fixed rate with a
// burst of twice that. Keys are spread over shards so that unrelated callers
// rarely contend on one mutex.
//
// A key's bucket is one number: the moment it will be full again. A bucket
// that holds at least one token is one that will be full within burst-1
// intervals; taking a token moves that moment one interval on. So a key
// costs a map entry and nothing to allocate, and a bucket found full is one
// that is past its moment, which the sweep forgets: under many customers
// each ordering now and then, nearly every placement finds its customer's
// bucket forgotten and makes a new one.
type RateLimiter struct {
	// interval is the time one token takes to come back; slack is burst-1
	// of them.
	interval, slack time.Duration
	// idle is how often a shard sweeps, at least the time a bucket takes to
	// refill completely.
	idle   time.Duration
	now    func() time.Time
	start  time.Time
	seed   maphash.Seed
	shards [limiterShards]limiterShard
}

type limiterShard struct {
	mu sync.Mutex
	// full is each key's moment its bucket is full again, as a time since
	// the limiter's start.
	full  map[string]time.Duration
	swept time.Duration
}

// newRateLimiter allows perSecond events per key, in bursts of up to twice
// that, by the clock now. It returns nil, which allows everything, when
// perSecond is 0.
func newRateLimiter(perSecond float64, now func() time.Time) *RateLimiter {
	if !(perSecond > 0) {
		return nil
	}
	burst := max(1, int(2*perSecond))
	interval := time.Duration(float64(time.Second) / perSecond)
	l := &RateLimiter{
		interval: interval,
		slack:    time.Duration(burst-1) * interval,
		idle:     max(time.Second, time.Duration(float64(burst)/perSecond*float64(time.Second))),
		now:      now,
		start:    now(),
		seed:     maphash.MakeSeed(),
	}
	for i := range l.shards {
		l.shards[i] = limiterShard{full: map[string]time.Duration{}}
	}
	return l
}

// Allow reports whether key may act now, and if not, how long until it may.
// A refused attempt consumes nothing.
func (l *RateLimiter) Allow(key string) (ok bool, retryAfter time.Duration) {
	if l == nil {
		return true, 0
	}
	now := l.now().Sub(l.start)
	sh := &l.shards[maphash.String(l.seed, key)%limiterShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if now-sh.swept >= l.idle {
		sh.sweep(now)
	}
	full, found := sh.full[key]
	if !found && len(sh.full) >= maxKeysPerShard {
		sh.sweep(now)
		sh.evictOne()
	}
	if !found || full < now {
		full = now
	}
	if wait := full - now - l.slack; wait > 0 {
		return false, wait
	}
	sh.full[key] = full + l.interval
	return true, 0
}

// sweep forgets the keys whose buckets are full by now: a full bucket is
// what a new key gets.
func (sh *limiterShard) sweep(now time.Duration) {
	for k, full := range sh.full {
		if full <= now {
			delete(sh.full, k)
		}
	}
	sh.swept = now
}

// evictOne drops an arbitrary key (map order is random) when the shard is
// full of active keys: that caller merely gets a fresh bucket next time,
// whereas refusing new keys would lock out every newcomer during a flood.
func (sh *limiterShard) evictOne() {
	if len(sh.full) < maxKeysPerShard {
		return
	}
	for k := range sh.full {
		delete(sh.full, k)
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
