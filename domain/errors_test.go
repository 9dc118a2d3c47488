package domain_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
)

func TestErrorHelpers(t *testing.T) {
	t.Parallel()
	err := domain.Errorf(domain.CodeSoldOut, "product %s is sold out", "p1")
	require.Equal(t, "sold_out: product p1 is sold out", err.Error())
	wrapped := fmt.Errorf("reserve: %w", err)
	require.Equal(t, domain.CodeSoldOut, domain.ErrorCode(wrapped))
	require.Equal(t, "product p1 is sold out", domain.ErrorMessage(wrapped))
	require.ErrorIs(t, wrapped, domain.ErrSoldOut, "a sentinel matches on the code alone")
	require.ErrorIs(t, wrapped, &domain.Error{Code: domain.CodeSoldOut, Message: "product p1 is sold out"})
	require.NotErrorIs(t, wrapped, &domain.Error{Code: domain.CodeSoldOut, Message: "other"})
	require.NotErrorIs(t, wrapped, domain.ErrNotFound)
	require.NotErrorIs(t, wrapped, errors.New("sold_out"))

	plain := errors.New("connection reset by 10.0.0.7")
	require.Equal(t, domain.CodeInternal, domain.ErrorCode(plain))
	require.Equal(t, "Internal error.", domain.ErrorMessage(plain), "internal details stay hidden")
	require.Equal(t, domain.CodeInternal, domain.ErrorCode(nil))
}

func TestStatusPredicates(t *testing.T) {
	t.Parallel()
	for status, want := range map[domain.OrderStatus]struct{ terminal, holdsStock bool }{
		domain.StatusAwaitingPayment: {false, true},
		domain.StatusQueued:          {false, true},
		domain.StatusAccepted:        {false, true},
		domain.StatusCompleted:       {true, true},
		domain.StatusClosed:          {true, false},
		domain.StatusCancelled:       {true, false},
		domain.StatusExpired:         {true, false},
	} {
		require.Equal(t, want.terminal, status.Terminal(), status)
		require.Equal(t, want.holdsStock, status.HoldsStock(), status)
	}
}

func TestCancelReasonLength(t *testing.T) {
	t.Parallel()
	o := placeOne(t, "o")
	load := v1(domain.Load{Capacity: 1})
	ev, l, err := domain.Cancel(o, domain.ActorCustomer, strings.Repeat("r", domain.MaxReasonLength+1), load, t0)
	require.Equal(t, domain.CodeValidation, domain.ErrorCode(err))
	require.Empty(t, ev)
	require.Equal(t, load, l)
	ev, _, err = domain.Cancel(o, domain.ActorCustomer, strings.Repeat("r", domain.MaxReasonLength), load, t0)
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("r", domain.MaxReasonLength), mustApply(t, o, ev...).StatusReason)
}
