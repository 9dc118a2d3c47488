package jobs

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/store/pgkit"
)

// queueExpiries fire, on one PostgreSQL, the queue expiries as they fall due
// (store.QueuedDue): each merchant's in a goroutine of its own, which goes on
// with that merchant's orders falling due meanwhile, and a look passes over
// the merchants whose expiries are under way. An expiry waits for its
// merchant's row lock; one merchant's row held by a long transaction then
// delays its own expiries only, as a River job per order did, not the
// other merchants' behind it in the same look.
type queueExpiries struct {
	due    func(ctx context.Context, limit int, skip []uuid.UUID) ([]store.QueuedStay, error)
	dueOf  func(ctx context.Context, merchantID uuid.UUID, limit int) ([]store.QueuedStay, error)
	expire func(ctx context.Context, orderID uuid.UUID, queuedAt time.Time) (bool, error)
	fired  func(store.QueuedStay)
	warn   func(error)

	mu       sync.Mutex
	underWay map[uuid.UUID]bool
	running  sync.WaitGroup
}

func newQueueExpiries(st *store.Store, fired func(store.QueuedStay), warn func(error)) *queueExpiries {
	return &queueExpiries{
		due: st.QueuedDue, dueOf: st.MerchantQueuedDue, expire: st.ExpireQueued,
		fired: fired, warn: warn, underWay: map[uuid.UUID]bool{},
	}
}

// look starts the expiry of the orders due whose merchant has none under
// way, and reports whether its read was full.
func (q *queueExpiries) look(ctx context.Context) (bool, error) {
	due, err := q.due(ctx, timerFireLimit, q.merchantsUnderWay())
	if err != nil {
		return false, err
	}
	for _, stays := range pgkit.GroupBy(due, func(s store.QueuedStay) uuid.UUID { return s.MerchantID }) {
		merchant := stays[0].MerchantID
		if !q.start(merchant) {
			continue
		}
		q.running.Add(1)
		go func() {
			defer q.running.Done()
			defer q.finish(merchant)
			q.expireMerchant(ctx, merchant, stays)
		}()
	}
	return len(due) >= timerFireLimit, nil
}

// expireMerchant expires a merchant's due orders, then those that fell due
// meanwhile, until a pass expires none (the rest, if any, another process
// expired, or the next look finds).
func (q *queueExpiries) expireMerchant(ctx context.Context, merchant uuid.UUID, stays []store.QueuedStay) {
	for len(stays) > 0 {
		expiredAny := false
		for _, s := range stays {
			expired, err := q.expire(ctx, s.ID, s.QueuedAt)
			if err != nil {
				if ctx.Err() == nil {
					q.warn(fmt.Errorf("expire order %s: %w", s.ID, err))
				}
				return
			}
			if expired {
				expiredAny = true
				q.fired(s)
			}
		}
		if !expiredAny {
			return
		}
		var err error
		if stays, err = q.dueOf(ctx, merchant, timerFireLimit); err != nil {
			if ctx.Err() == nil {
				q.warn(err)
			}
			return
		}
	}
}

func (q *queueExpiries) merchantsUnderWay() []uuid.UUID {
	q.mu.Lock()
	defer q.mu.Unlock()
	ids := make([]uuid.UUID, 0, len(q.underWay))
	for id := range q.underWay {
		ids = append(ids, id)
	}
	return ids
}

func (q *queueExpiries) start(merchant uuid.UUID) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.underWay[merchant] {
		return false
	}
	q.underWay[merchant] = true
	return true
}

func (q *queueExpiries) finish(merchant uuid.UUID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.underWay, merchant)
}

// wait waits for the expiries under way, which end with the context their
// look was given.
func (q *queueExpiries) wait() { q.running.Wait() }
