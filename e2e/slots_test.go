package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// TestCustomerOrdersForASlotAndTheKitchenSeesItsLoad: the customer's page
// offers as soon as possible or a published slot; an order for a slot is
// scheduled with its pickup time, and the kitchen display lists the coming
// slots with the load they hold.
func TestCustomerOrdersForASlotAndTheKitchenSeesItsLoad(t *testing.T) {
	w := setup(t)
	m, _ := w.merchant(t, "Slot Tea", 2, "Oolong")
	_, err := w.st.UpdateMerchant(context.Background(), m.ID, store.MerchantPatch{
		Slots: &domain.SlotSettings{Minutes: 15, Capacity: 3, LeadMinutes: 30, HorizonDays: 2},
	}, store.Meta{Actor: domain.ActorAdmin})
	require.NoError(t, err)

	phone := w.tab(t, 390, 844)
	require.NoError(t, chromedp.Run(phone, chromedp.Navigate(w.customerLink(t, "alice", m.ID)), chromedp.WaitVisible(`#menu li .more`, chromedp.ByQuery)))
	until(phone, t, `!document.querySelector("#when").classList.contains("hidden") && document.querySelectorAll("#when option").length > 1`)
	var slot string
	require.NoError(t, chromedp.Run(phone, chromedp.Evaluate(`document.querySelectorAll("#when option")[1].value`, &slot)))
	at, err := time.Parse(time.RFC3339, slot)
	require.NoError(t, err)
	require.True(t, at.After(time.Now().Add(30*time.Minute)), "the first slot offered is past the lead time")
	require.NoError(t, chromedp.Run(phone, chromedp.SetValue(`#when`, slot, chromedp.ByQuery)))
	click(phone, t, "#menu li .more")
	click(phone, t, "#place")
	until(phone, t, `document.querySelector("#status").dataset.status === "scheduled" && !document.querySelector("#pickup-at").classList.contains("hidden")`)
	require.False(t, hidden(phone, t, "#cancel"), "a scheduled order may be cancelled: the button is shown")

	kitchen := w.tab(t, 1280, 800)
	require.NoError(t, chromedp.Run(kitchen, chromedp.Navigate(w.kitchenLink(t, m.ID)), chromedp.WaitVisible(`#slots li`, chromedp.ByQuery)))
	until(kitchen, t, `[...document.querySelectorAll("#slots li .when")].some((e) => e.textContent === "1 / 3")`)
}

// hidden reports whether sel carries the hidden class.
func hidden(ctx context.Context, t *testing.T, sel string) bool {
	t.Helper()
	var hidden bool
	require.NoError(t, chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(`document.querySelector(%s).classList.contains("hidden")`, js(sel)), &hidden)))
	return hidden
}
