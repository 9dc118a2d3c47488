package store

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
)

func TestQueueHeadCovers(t *testing.T) {
	named := func(name string) uuid.UUID { return uuid.NewSHA1(uuid.NameSpaceURL, []byte(name)) }
	queued := func(ids ...string) []domain.Order {
		var os []domain.Order
		for _, id := range ids {
			os = append(os, domain.Order{ID: named(id), Status: domain.StatusQueued})
		}
		return os
	}
	left := func(id string) []change { return []change{{after: domain.Order{ID: named(id)}}} }
	for _, tc := range []struct {
		name    string
		head    *queueHead
		n       int
		changed []change
		want    []string
		covered bool
	}{
		{name: "not read", head: nil, n: 1},
		{name: "as many as needed", head: &queueHead{limit: 2, orders: queued("a", "b")}, n: 2, want: []string{"a", "b"}, covered: true},
		{name: "more than needed", head: &queueHead{limit: 3, orders: queued("a", "b", "c")}, n: 1, want: []string{"a"}, covered: true},
		{name: "the whole queue", head: &queueHead{limit: 3, orders: queued("a")}, n: 2, want: []string{"a"}, covered: true},
		{name: "an empty queue", head: &queueHead{limit: 1}, n: 1, covered: true},
		{name: "fewer than needed", head: &queueHead{limit: 1, orders: queued("a")}, n: 2},
		{name: "the command's own order left", head: &queueHead{limit: 2, orders: queued("a", "b")}, n: 1, changed: left("a"), want: []string{"b"}, covered: true},
		{name: "its own order left, too few", head: &queueHead{limit: 2, orders: queued("a", "b")}, n: 2, changed: left("a")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.head.covering(tc.n, tc.changed)
			require.Equal(t, tc.covered, ok)
			if !ok {
				return
			}
			var want, ids []uuid.UUID
			for _, name := range tc.want {
				want = append(want, named(name))
			}
			for _, o := range got {
				ids = append(ids, o.ID)
			}
			require.Equal(t, want, ids)
		})
	}
}
