package pgkit

import "sync"

// Batcher groups concurrent requests into shared transactions (group
// commit): one commit, one lock and a handful of statements serve a whole
// batch, which is what lets a hot merchant take, or a burst of deadlines
// close, more orders per second than one transaction per order allows. A
// batch forms from whatever arrived while the previous one ran, so a quiet
// system still commits each request at once.
//
// A batcher may also split its batches by key (SplitBy): where a
// transaction must not span keys (a merchant's rows on Citus live on one
// node), each key's items of a batch are run on their own, the keys
// concurrently.
type Batcher[T any, K comparable] struct {
	mu         sync.Mutex
	pending    []T
	workers    int
	maxWorkers int
	maxBatch   int
	run        func([]T)

	split    func() bool
	key      func(T) K
	parallel int
}

// NewBatcher runs run on batches of at most maxBatch submitted items, in at
// most maxWorkers goroutines at once.
func NewBatcher[T any, K comparable](maxWorkers, maxBatch int, run func([]T)) *Batcher[T, K] {
	return &Batcher[T, K]{maxWorkers: maxWorkers, maxBatch: maxBatch, run: run}
}

// SplitBy makes each batch for which split reports true (asked once per
// batch) run as one run per key, with the items of a key in the order they
// were submitted, and up to parallel runs at once. The batch's worker takes
// its next batch only when every run of this one has returned, so a key's
// items in a later batch never overtake its earlier ones. Call it before
// the first Submit.
func (b *Batcher[T, K]) SplitBy(split func() bool, key func(T) K, parallel int) *Batcher[T, K] {
	b.split, b.key, b.parallel = split, key, max(1, parallel)
	return b
}

// Submit queues item for the next batch.
func (b *Batcher[T, K]) Submit(item T) {
	b.mu.Lock()
	b.pending = append(b.pending, item)
	if b.workers < b.maxWorkers {
		b.workers++
		go b.loop()
	}
	b.mu.Unlock()
}

func (b *Batcher[T, K]) loop() {
	for {
		b.mu.Lock()
		if len(b.pending) == 0 {
			b.workers--
			b.mu.Unlock()
			return
		}
		n := min(len(b.pending), b.maxBatch)
		batch := make([]T, n)
		copy(batch, b.pending)
		b.pending = append(b.pending[:0], b.pending[n:]...)
		b.mu.Unlock()
		b.runBatch(batch)
	}
}

func (b *Batcher[T, K]) runBatch(batch []T) {
	if b.key == nil || !b.split() {
		b.run(batch)
		return
	}
	groups := GroupBy(batch, b.key)
	if len(groups) == 1 {
		b.run(groups[0])
		return
	}
	var wg sync.WaitGroup
	next := make(chan []T)
	for range min(b.parallel, len(groups)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for g := range next {
				b.run(g)
			}
		}()
	}
	for _, g := range groups {
		next <- g
	}
	close(next)
	wg.Wait()
}

// GroupBy splits items by key, keeping their order within each group and
// ordering the groups by their first item.
func GroupBy[T any, K comparable](items []T, key func(T) K) [][]T {
	index := map[K]int{}
	var groups [][]T
	for _, it := range items {
		k := key(it)
		i, ok := index[k]
		if !ok {
			i = len(groups)
			index[k] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], it)
	}
	return groups
}
