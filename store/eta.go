package store

import (
	"github.com/orderd/orderd/domain"
)

// etaColumns are what an order's wait is estimated from, read from its
// merchant m.
const etaColumns = `coalesce(m.period_capacity, m.capacity), m.active, m.prep_seconds, m.completion_interval_s, m.completion_samples, m.completion_units, m.next_seq`

// etaBasis is a merchant's state that queued orders' waits are estimated from.
type etaBasis struct {
	capacity, active, prep int
	stats                  domain.CompletionStats
	lineSeq                int64
}

func (b *etaBasis) dest() []any {
	return []any{&b.capacity, &b.active, &b.prep, &b.stats.IntervalSeconds, &b.stats.Samples, &b.stats.UnitsPerCompletion, &b.lineSeq}
}

// wait estimates the wait of a queued order of load behind unitsAhead
// queued units.
func (b etaBasis) wait(unitsAhead, load int) int {
	return domain.EstimateWait(domain.UnitsToWaitFor(b.active, b.capacity, unitsAhead, load), b.capacity, b.prep, b.stats)
}
