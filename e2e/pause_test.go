package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// TestKitchenPausesAndTheCustomerSeesIt: the kitchen pauses; the
// customer's page says so, and an order placed meanwhile waits in line
// although a unit is free; the kitchen moves a later order to the priority
// lane and the customer's place grows; resuming admits the line in order.
// Paused to refuse, a placement is refused with the reason shown, and the
// error goes once an order goes through. The merchant raises its capacity.
func TestKitchenPausesAndTheCustomerSeesIt(t *testing.T) {
	w := setup(t)
	m, products := w.merchant(t, "Pause Tea", 1, "Oolong")

	phone := w.tab(t, 390, 844)
	require.NoError(t, chromedp.Run(phone, chromedp.Navigate(w.customerLink(t, "alice", m.ID)), chromedp.WaitVisible(`#menu li .more`, chromedp.ByQuery)))
	require.Equal(t, "", text(phone, t, "#paused"))

	kitchen := w.tab(t, 1280, 800)
	require.NoError(t, chromedp.Run(kitchen, chromedp.Navigate(w.kitchenLink(t, m.ID)), chromedp.WaitVisible(`#pause-queue`, chromedp.ByQuery)))
	click(kitchen, t, "#pause-queue")
	until(kitchen, t, `!document.querySelector("#paused-badge").classList.contains("hidden") && !document.querySelector("#resume").classList.contains("hidden")`)

	// The phone watches the merchant's status over its websocket: the
	// banner comes without a reload, and well within the 10 s a poll took.
	untilWithin(phone, t, 5*time.Second, `!document.querySelector("#paused").classList.contains("hidden")`)
	require.Contains(t, text(phone, t, "#paused"), "paused")
	click(phone, t, "#menu li .more")
	click(phone, t, "#place")
	until(phone, t, `document.querySelector("#status").dataset.status === "queued" && document.querySelector("#position").textContent === "1"`)
	until(phone, t, `document.querySelector("#line").textContent.startsWith("1 order in line")`)
	until(kitchen, t, `document.querySelectorAll("#line li[data-order-id]").length === 1`)

	// Bob queues behind; the kitchen moves him to the priority lane, so he
	// goes first and Alice's place grows.
	bob := w.paidOrder(t, m.ID, products[0], "bob")
	row := fmt.Sprintf(`#line li[data-order-id=%q]`, bob.ID)
	until(kitchen, t, fmt.Sprintf(`!!document.querySelector(%s)`, js(row+" .prioritize")))
	click(kitchen, t, row+" .prioritize")
	until(kitchen, t, fmt.Sprintf(`document.querySelector("#line li").dataset.orderId === %s`, js(bob.ID.String())))
	until(phone, t, `document.querySelector("#position").textContent === "2"`)

	click(kitchen, t, "#resume")
	until(phone, t, `document.querySelector("#paused").classList.contains("hidden") && document.querySelector("#position").textContent === "1"`)
	ticket := fmt.Sprintf(`.kticket[data-order-id=%q]`, bob.ID)
	until(kitchen, t, fmt.Sprintf(`!!document.querySelector(%s) && document.querySelector("#paused-badge").classList.contains("hidden")`, js(ticket)))
	click(kitchen, t, ticket+" .complete")
	until(phone, t, `document.querySelector("#status").dataset.status === "accepted"`)
	until(kitchen, t, `document.querySelectorAll(".kticket").length === 1`)
	click(kitchen, t, ".kticket .complete")
	until(phone, t, `document.querySelector("#status").dataset.status === "completed"`)

	click(kitchen, t, "#pause-refuse")
	until(phone, t, `document.querySelector("#paused").textContent.includes("not taking orders")`)
	click(phone, t, "#again")
	click(phone, t, "#menu li .more")
	click(phone, t, "#place")
	until(phone, t, `document.querySelector("#error").textContent !== ""`)
	click(kitchen, t, "#resume")
	until(phone, t, `document.querySelector("#paused").classList.contains("hidden")`)
	click(phone, t, "#place")
	until(phone, t, `document.querySelector("#status").dataset.status === "accepted" && document.querySelector("#error").textContent === ""`)

	// The merchant's own kitchen may change its capacity.
	click(kitchen, t, "#capacity-more")
	until(kitchen, t, `document.querySelector("#capacity-now").textContent === "2" && document.querySelector("#error").textContent === ""`)
}

// untilWithin is until with a deadline.
func untilWithin(ctx context.Context, t *testing.T, d time.Duration, cond string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	until(ctx, t, cond)
}
