package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// TestAShopRunsOnIt walks a milk-tea shop's counter: the kitchen shows the
// order-here QR code; a walk-in guest opens the page it leads to, orders a
// large, less-sugar tea with pearls; the kitchen hears it, sees the options
// on the ticket, completes it, finds it under "ready for pickup", undoes
// the completion, completes it again and hands it over; and a price the
// kitchen changes on its menu screen shows on the customer's open page.
func TestAShopRunsOnIt(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	m, err := w.st.CreateMerchant(ctx, domain.MerchantSettings{Name: "Lantern Milk Tea", Capacity: 4, CapacityUnit: domain.UnitItems,
		PrepSeconds: 90, MaxQueueWaitSeconds: 1800, PaymentTimeoutSeconds: 900, PickupPrefix: "T", GuestCheckout: true}, store.Meta{})
	require.NoError(t, err)
	tea, err := w.st.CreateProduct(ctx, store.CreateProductParams{MerchantID: m.ID, Name: "Brown sugar milk tea", PriceCents: 450,
		OptionGroups: []domain.OptionGroup{
			{Name: "Size", MinSelect: 1, MaxSelect: 1, Options: []domain.Option{{Name: "Regular"}, {Name: "Large", PriceDeltaCents: 80, LoadUnits: 1}}},
			{Name: "Sugar", MaxSelect: 1, Options: []domain.Option{{Name: "Less sugar"}, {Name: "No sugar"}}},
			{Name: "Toppings", MaxSelect: 2, Options: []domain.Option{{Name: "Pearls", PriceDeltaCents: 60}, {Name: "Pudding", PriceDeltaCents: 70}}},
		}})
	require.NoError(t, err)
	option := map[string]string{}
	for _, g := range tea.OptionGroups {
		for _, o := range g.Options {
			option[o.Name] = o.ID
		}
	}

	kitchen := w.tab(t, 1280, 800)
	require.NoError(t, chromedp.Run(kitchen, chromedp.Navigate(w.kitchenLink(t, m.ID))))
	until(kitchen, t, `!!document.querySelector("#ready-tickets .empty") && !!document.querySelector("#tickets .empty")`)

	// The QR code the kitchen shows and prints leads to the shop's page.
	click(kitchen, t, "#show-qr")
	until(kitchen, t, `document.querySelector("#qr").complete && document.querySelector("#qr").naturalWidth > 0`)
	orderHere := text(kitchen, t, "#qr-url")
	require.Equal(t, w.base+"/?merchant="+m.ID.String(), orderHere)
	require.Contains(t, text(kitchen, t, "#qr-guests"), "Scan to order")
	click(kitchen, t, "#qr-close")

	phone := w.tab(t, 390, 844)
	require.NoError(t, chromedp.Run(phone, chromedp.Navigate(orderHere), chromedp.WaitVisible("#order-here", chromedp.ByQuery)))
	click(phone, t, "#order-here")
	item := fmt.Sprintf(`#menu li[data-product-id=%q]`, tea.ID)
	require.NoError(t, chromedp.Run(phone, chromedp.WaitVisible(item+" .more", chromedp.ByQuery)))
	var sub string
	require.NoError(t, chromedp.Run(phone, chromedp.Evaluate(`JSON.parse(sessionStorage.getItem("orderd.session")).sub`, &sub)))
	require.True(t, strings.HasPrefix(sub, "guest:"), sub)
	choose := func(name string) {
		click(phone, t, fmt.Sprintf(`%s label[data-option-id=%q] input`, item, option[name]))
	}
	choose("Large")
	choose("Less sugar")
	choose("Pearls")
	click(phone, t, item+" .more")
	until(phone, t, `document.querySelector("#cart-count").textContent === "1 item"`)
	require.Contains(t, text(phone, t, "#cart-total"), "5.90", "4.50 + 0.80 for large + 0.60 for pearls")
	click(phone, t, "#place")
	until(phone, t, `document.querySelector("#status").dataset.status === "accepted"`)
	require.Contains(t, text(phone, t, "#ticket-items"), "1 × Brown sugar milk tea")
	require.Contains(t, text(phone, t, "#ticket-items"), "Large · Less sugar · Pearls")
	var mine string
	require.NoError(t, chromedp.Run(phone, chromedp.Evaluate(`sessionStorage.getItem("orderd.order."+new URLSearchParams(location.search).get("merchant"))`, &mine)))

	// The kitchen chimes and flashes, and the ticket names the choices.
	ticket := fmt.Sprintf(`.kticket[data-order-id=%q]`, mine)
	ready := fmt.Sprintf(`.rticket[data-order-id=%q]`, mine)
	until(kitchen, t, fmt.Sprintf(`!!document.querySelector(%s)`, js(ticket)))
	require.Contains(t, text(kitchen, t, ticket), "Large · Less sugar · Pearls")
	until(kitchen, t, `Number(document.body.dataset.chimes || 0) >= 1 && Number(document.body.dataset.flashes || 0) >= 1`)
	click(kitchen, t, "#mute")
	require.Contains(t, text(kitchen, t, "#mute"), "Muted")
	click(kitchen, t, "#mute")
	require.Contains(t, text(kitchen, t, "#mute"), "Sound on")

	// Completed: it waits at the counter, and the phone says ready.
	click(kitchen, t, ticket+" .complete")
	until(kitchen, t, fmt.Sprintf(`!!document.querySelector(%s) && !document.querySelector(%s)`, js("#ready-tickets "+ready), js(ticket)))
	until(phone, t, `document.querySelector("#status").dataset.status === "completed" && !document.querySelector("#ready").classList.contains("hidden")`)

	// Undo within the minute: back to preparing, on both screens.
	click(kitchen, t, ready+" .undo")
	until(kitchen, t, fmt.Sprintf(`!!document.querySelector(%s) && !document.querySelector(%s)`, js(ticket), js(ready)))
	until(phone, t, `document.querySelector("#status").dataset.status === "accepted"`)

	// Completed again and picked up: the counter is clear.
	click(kitchen, t, ticket+" .complete")
	until(kitchen, t, fmt.Sprintf(`!!document.querySelector(%s)`, js(ready)))
	click(kitchen, t, ready+" .picked-up")
	until(kitchen, t, fmt.Sprintf(`!document.querySelector(%s) && !!document.querySelector("#ready-tickets .empty")`, js(ready)))
	until(phone, t, `document.querySelector("#status").textContent.startsWith("Picked up")`)
	o, err := w.st.GetOrder(ctx, uuid.MustParse(mine), domain.Party{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	require.NotNil(t, o.PickedUpAt)

	// A new price from the kitchen's menu screen reaches the open page.
	click(kitchen, t, "#show-menu")
	form := fmt.Sprintf(`#menu-items form[data-product-id=%q]`, tea.ID)
	require.NoError(t, chromedp.Run(kitchen, chromedp.WaitVisible(form+" .price", chromedp.ByQuery), chromedp.SetValue(form+" .price", "4.80", chromedp.ByQuery)))
	click(kitchen, t, form+" .save")
	until(kitchen, t, fmt.Sprintf(`document.querySelector(%s).value === "4.80"`, js(form+" .price")))
	until(phone, t, fmt.Sprintf(`document.querySelector(%s).textContent.includes("6.20")`, js(item+" .price")))
	require.Contains(t, text(phone, t, "#ticket-total"), "5.90", "the placed order keeps its price")
}
