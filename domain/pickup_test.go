package domain_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
)

func TestPickUpAndReopen(t *testing.T) {
	t.Parallel()
	completedAt := t0.Add(time.Minute)
	accepted := domain.Order{ID: testID("o"), Status: domain.StatusAccepted, Load: 3, AcceptedAt: &t0}
	completed := accepted
	completed.Status, completed.CompletedAt, completed.EndedAt = domain.StatusCompleted, &completedAt, &completedAt
	pickedUp := completed
	pickedUp.PickedUpAt = &completedAt
	queued := domain.Order{ID: testID("q"), Status: domain.StatusQueued, Load: 1}
	full := domain.Load{Capacity: 4, Active: 4, ActiveOrders: 2, Queued: 1, QueuedUnits: 1, NextSeq: 2}

	t.Run("pick up", func(t *testing.T) {
		t.Parallel()
		cases := []struct {
			name   string
			order  domain.Order
			code   domain.Code
			events int
		}{
			{"completed", completed, "", 1},
			{"picked up again", pickedUp, "", 0},
			{"accepted", accepted, domain.CodeInvalidTransition, 0},
			{"queued", queued, domain.CodeInvalidTransition, 0},
		}
		for _, tc := range cases {
			events, err := domain.PickUp(tc.order, completedAt.Add(5*time.Minute))
			require.Equal(t, tc.code, codeOf(err), tc.name)
			require.Len(t, events, tc.events, tc.name)
			if tc.events > 0 {
				o := mustApply(t, tc.order, events...)
				require.Equal(t, domain.StatusCompleted, o.Status, "a picked-up order stays completed")
				require.Equal(t, completedAt.Add(5*time.Minute), *o.PickedUpAt)
			}
		}
	})

	t.Run("reopen", func(t *testing.T) {
		t.Parallel()
		cases := []struct {
			name   string
			order  domain.Order
			at     time.Time
			code   domain.Code
			detail string
		}{
			{"at once", completed, completedAt, "", ""},
			{"at 60 s", completed, completedAt.Add(domain.ReopenWindow), "", ""},
			{"at 60 s and a nanosecond", completed, completedAt.Add(domain.ReopenWindow + time.Nanosecond), domain.CodeInvalidTransition, "within 60 s"},
			{"once picked up", pickedUp, completedAt.Add(time.Second), domain.CodeInvalidTransition, "picked up"},
			{"accepted", accepted, completedAt, domain.CodeInvalidTransition, "accepted"},
			{"queued", queued, completedAt, domain.CodeInvalidTransition, "queued"},
		}
		for _, tc := range cases {
			events, load, err := domain.Reopen(tc.order, full, tc.at)
			if tc.code != "" {
				require.Equal(t, tc.code, codeOf(err), tc.name)
				require.Contains(t, domain.ErrorMessage(err), tc.detail, tc.name)
				require.Equal(t, full, load, "%s: a refusal leaves the load alone", tc.name)
				continue
			}
			require.NoError(t, err, tc.name)
			require.Equal(t, 7, load.Active, "%s: the order takes its units back past capacity, ahead of the line", tc.name)
			require.Equal(t, 3, load.ActiveOrders)
			require.Equal(t, full.Queued, load.Queued, "the line is left as it was")
			o := mustApply(t, tc.order, events...)
			require.Equal(t, domain.StatusAccepted, o.Status)
			require.Nil(t, o.CompletedAt)
			require.Nil(t, o.EndedAt)
			require.Equal(t, t0, *o.AcceptedAt, "it keeps its acceptance")
			// It can be completed again, freeing what it took.
			done, after, err := domain.Complete(o, load, tc.at.Add(time.Second))
			require.NoError(t, err)
			require.Len(t, done, 1)
			require.Equal(t, full.Active, after.Active)
		}
	})
}

func codeOf(err error) domain.Code {
	if err == nil {
		return ""
	}
	return domain.ErrorCode(err)
}
