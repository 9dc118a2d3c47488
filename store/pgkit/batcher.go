package pgkit

import "sync"

// Batcher groups concurrent requests into shared transactions (group
// commit): one commit, one lock and a handful of statements serve a whole
// batch, which is what lets a hot merchant take, or a burst of deadlines
// close, more orders per second than one transaction per order allows. A
// batch forms from whatever arrived while the previous one ran, so a quiet
// system still commits each request at once.
type Batcher[T any] struct {
	mu         sync.Mutex
	pending    []T
	workers    int
	maxWorkers int
	maxBatch   int
	run        func([]T)
}

// NewBatcher runs run on batches of at most maxBatch submitted items, in at
// most maxWorkers goroutines at once.
func NewBatcher[T any](maxWorkers, maxBatch int, run func([]T)) *Batcher[T] {
	return &Batcher[T]{maxWorkers: maxWorkers, maxBatch: maxBatch, run: run}
}

// Submit queues item for the next batch.
func (b *Batcher[T]) Submit(item T) {
	b.mu.Lock()
	b.pending = append(b.pending, item)
	if b.workers < b.maxWorkers {
		b.workers++
		go b.loop()
	}
	b.mu.Unlock()
}

func (b *Batcher[T]) loop() {
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
		b.run(batch)
	}
}
