package domain_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
)

func TestClaimInvitation(t *testing.T) {
	t.Parallel()
	d := newTestDrop(t, func(p *domain.NewDropParams) { p.PurchaseWindowSeconds = intPtr(60) })
	joined, err := domain.Join(d, testEntryID, "alice", d.OpensAt.Add(time.Second))
	require.NoError(t, err)
	waiting, err := domain.Entry{}.Apply(joined...)
	require.NoError(t, err)
	invited, err := domain.Invite(d, waiting, d.StartsAt)
	require.NoError(t, err)
	open, err := waiting.Apply(invited...)
	require.NoError(t, err)
	ordered, err := domain.OrderForEntry(open, "alice", testOrder2, d.StartsAt)
	require.NoError(t, err)
	taken, err := open.Apply(ordered...)
	require.NoError(t, err)

	in := d.StartsAt.Add(time.Second)
	for _, tc := range []struct {
		name     string
		quantity int
		entries  []domain.Entry
		customer string
		at       time.Time
		want     domain.Code // "" when the order is attached
	}{
		{"one unit on an open invitation", 1, []domain.Entry{open}, "alice", in, ""},
		{"two units", 2, []domain.Entry{open}, "alice", in, domain.CodeValidation},
		{"no unit", 0, []domain.Entry{open}, "alice", in, domain.CodeValidation},
		{"never joined", 1, nil, "alice", in, domain.CodeNotInvited},
		{"not invited yet", 1, []domain.Entry{waiting}, "alice", in, domain.CodeNotInvited},
		{"someone else's invitation", 1, []domain.Entry{open}, "bob", in, domain.CodeNotInvited},
		{"the window has ended", 1, []domain.Entry{open}, "alice", *open.PurchaseDeadline, domain.CodeNotInvited},
		{"the invitation has its order", 1, []domain.Entry{taken}, "alice", in, domain.CodeNotInvited},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line := domain.LineRequest{ProductID: testID("p"), Quantity: tc.quantity}
			events, err := domain.ClaimInvitation(line, tc.entries, tc.customer, testOrder1, tc.at)
			if tc.want != "" {
				require.Equal(t, tc.want, domain.ErrorCode(err), "%v", err)
				require.Empty(t, events)
				return
			}
			require.NoError(t, err)
			after, err := open.Apply(events...)
			require.NoError(t, err)
			require.Equal(t, testOrder1, after.OrderID)
		})
	}
}
