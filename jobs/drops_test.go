package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// TestTimersDriveADrop runs a drop on its timers alone: it opens and starts
// by itself, invites the best-ranked entry, and when that customer's order
// closes unpaid invites the next, who buys the last unit and sells it out.
func TestTimersDriveADrop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	startWorkers(t, b)
	merchantID, _ := merchantAndProduct(t, b.store, 10, 1)
	stock := 1
	p, err := b.store.CreateProduct(ctx, store.CreateProductParams{MerchantID: merchantID, Name: "cup", PriceCents: 100, Stock: &stock})
	require.NoError(t, err)
	now := time.Now()
	d, err := b.store.CreateDrop(ctx, store.CreateDropParams{
		ProductID: p.ID, OpensAt: now.Add(time.Second), StartsAt: now.Add(2 * time.Second), Mode: domain.DropLottery,
		Access: domain.Party{Actor: domain.ActorAdmin},
	})
	require.NoError(t, err)
	state := func() domain.DropState {
		got, err := b.store.GetDrop(ctx, d.ID)
		require.NoError(t, err)
		return got.State
	}
	require.Eventually(t, func() bool { return state() == domain.DropStateOpen }, 5*time.Second, 20*time.Millisecond)
	for _, c := range []string{"a", "b"} {
		_, err := b.store.JoinDrop(ctx, d.ID, c, "")
		require.NoError(t, err)
	}
	entry := func(c string) *store.EntryView {
		e, err := b.store.MyEntry(ctx, d.ID, c)
		require.NoError(t, err)
		return e
	}
	var first, second string
	require.Eventually(t, func() bool {
		if entry("a").Status == domain.EntryStatusInvited {
			first, second = "a", "b"
		} else if entry("b").Status == domain.EntryStatusInvited {
			first, second = "b", "a"
		}
		return first != ""
	}, 5*time.Second, 20*time.Millisecond, "the start invites the best-ranked entry")
	require.Equal(t, domain.DropStateSelling, state())
	require.Equal(t, 1, *entry(first).Rank)

	line := []domain.LineRequest{{ProductID: p.ID, Quantity: 1}}
	res, err := b.store.PlaceOrder(ctx, store.PlaceRequest{MerchantID: merchantID, CustomerID: first, Lines: line, IdempotencyKey: "k1", RequestHash: []byte("1")})
	require.NoError(t, err)
	require.Equal(t, domain.StatusAwaitingPayment, res.Order.Status)
	require.Eventually(t, func() bool { return entry(second).Status == domain.EntryStatusInvited }, 10*time.Second, 20*time.Millisecond,
		"the order closes unpaid and the next entry is invited")
	require.Equal(t, domain.EntryStatusLapsed, entry(first).Status)

	_, err = b.store.PlaceOrder(ctx, store.PlaceRequest{MerchantID: merchantID, CustomerID: second, Lines: line, PaymentRef: "r", IdempotencyKey: "k2", RequestHash: []byte("2")})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return state() == domain.DropStateSoldOut }, 5*time.Second, 20*time.Millisecond)
	require.Equal(t, domain.EntryStatusPurchased, entry(second).Status)
}
