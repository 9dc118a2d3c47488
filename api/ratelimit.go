package api

import (
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RateLimiter keeps one token bucket per key (burst twice the rate) and
// forgets keys idle for a while, so memory stays bounded.
type RateLimiter struct {
	limit   rate.Limit
	burst   int
	mu      sync.Mutex
	buckets map[string]*bucket
	swept   time.Time
}

type bucket struct {
	limiter *rate.Limiter
	seen    time.Time
}

const idleKeyTTL = 5 * time.Minute

// NewRateLimiter allows perSecond events per key; 0 turns limiting off.
func NewRateLimiter(perSecond float64) *RateLimiter {
	if perSecond <= 0 {
		return nil
	}
	return &RateLimiter{limit: rate.Limit(perSecond), burst: max(1, int(2*perSecond)), buckets: map[string]*bucket{}, swept: time.Now()}
}

// Allow reports whether key may act now, and if not, when to retry.
func (l *RateLimiter) Allow(key string) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	now := time.Now()
	l.mu.Lock()
	if now.Sub(l.swept) > idleKeyTTL {
		for k, b := range l.buckets {
			if now.Sub(b.seen) > idleKeyTTL {
				delete(l.buckets, k)
			}
		}
		l.swept = now
	}
	b, ok := l.buckets[key]
	if !ok {
		b = &bucket{limiter: rate.NewLimiter(l.limit, l.burst)}
		l.buckets[key] = b
	}
	b.seen = now
	l.mu.Unlock()
	r := b.limiter.ReserveN(now, 1)
	if delay := r.DelayFrom(now); delay > 0 {
		r.CancelAt(now)
		return false, delay
	}
	return true, 0
}

// perIPLimit limits every request by the client's address. X-Forwarded-For
// is not trusted: anyone can write it.
func perIPLimit(l *RateLimiter, next http.Handler) http.Handler {
	if l == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		if ok, retry := l.Allow(host); !ok {
			writeProblem(w, r, rateLimited(retry))
			return
		}
		next.ServeHTTP(w, r)
	})
}
