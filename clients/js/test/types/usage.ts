// Compiled by types.test.mjs against the package's declarations: what a
// TypeScript user writes type-checks, and each @ts-expect-error line is a
// mistake the types catch (tsc fails if one of them compiles).
import { OrderdClient, OrderdError } from "@orderd/client";
import type { Order, ProblemCode } from "@orderd/client";

export async function usage(client: OrderdClient, merchantId: string, productId: string): Promise<Order> {
  const order = await client.placeOrder({ merchant_id: merchantId, items: [{ product_id: productId, quantity: 2 }] });
  const status: "awaiting_payment" | "scheduled" | "queued" | "accepted" | "completed" | "cancelled" | "closed" | "expired" = order.status;
  const { orders, next_cursor } = await client.listMerchantOrders(merchantId, { status: "queued", limit: 10 });
  void status; void orders; void next_cursor;
  try {
    await client.payOrder(order.id, { payment_ref: "psp-1" }, { idempotencyKey: "k" });
  } catch (err) {
    if (err instanceof OrderdError) {
      const code: ProblemCode = err.code;
      // @ts-expect-error: not a problem code of the API
      const wrong: ProblemCode = "sold_out_today";
      void code; void wrong;
    }
  }
  // @ts-expect-error: items are required
  await client.placeOrder({ merchant_id: merchantId });
  // @ts-expect-error: quantity is a number
  await client.placeOrder({ merchant_id: merchantId, items: [{ product_id: productId, quantity: "2" }] });
  // @ts-expect-error: getOrder takes the order's id
  await client.getOrder();
  // @ts-expect-error: an order has no such field
  void order.colour;
  const w = client.watchOrder(order.id, (o) => { const v: number = o.version; void v; });
  w.close();
  return order;
}
