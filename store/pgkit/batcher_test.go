package pgkit

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type item struct {
	key string
	n   int
}

// batchOf has a batcher, its split answering split, run the batch that
// forms while a first item's run is held.
func batchOf(t *testing.T, split bool, parallel int, run func([]item)) {
	t.Helper()
	hold, held := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	b := NewBatcher[item, string](1, 100, func(batch []item) {
		if batch[0].key == "hold" {
			close(held)
			<-hold
		} else {
			run(batch)
		}
		wg.Add(-len(batch))
	}).SplitBy(func() bool { return split }, func(it item) string { return it.key }, parallel)
	wg.Add(1)
	b.Submit(item{key: "hold"})
	<-held
	for i, k := range []string{"a", "b", "a", "c", "b", "a", "d"} {
		wg.Add(1)
		b.Submit(item{key: k, n: i})
	}
	close(hold)
	wg.Wait()
}

func TestBatcherKeepsBatchesWholeUnlessSplit(t *testing.T) {
	t.Parallel()
	var runs [][]item
	batchOf(t, false, 4, func(batch []item) { runs = append(runs, batch) })
	require.Len(t, runs, 1)
	require.Len(t, runs[0], 7)
}

// TestBatcherRunsKeysConcurrently: a split batch runs each key's items
// together in the order submitted, up to parallel keys at once.
func TestBatcherRunsKeysConcurrently(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	got := map[string][]int{}
	var inFlight, most atomic.Int32
	batchOf(t, true, 2, func(batch []item) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		for _, it := range batch {
			require.Equal(t, batch[0].key, it.key, "one key per run")
			got[it.key] = append(got[it.key], it.n)
		}
	})
	require.Equal(t, map[string][]int{"a": {0, 2, 5}, "b": {1, 4}, "c": {3}, "d": {6}}, got)
	require.Equal(t, int32(2), most.Load(), "two keys at once, never more")
}

func TestGroupByKeepsOrder(t *testing.T) {
	t.Parallel()
	groups := GroupBy([]int{5, 2, 7, 4, 9, 6}, func(v int) bool { return v%2 == 0 })
	require.Equal(t, [][]int{{5, 7, 9}, {2, 4, 6}}, groups)
}
