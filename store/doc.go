// Package store keeps orderd's state in PostgreSQL: the append-only event log,
// the projections updated in the same transaction as each append, merchant
// load and queues, stock, the outbox and dead letters.
//
// # Group commit
//
// Requests that arrive together share transactions (pgkit.Batcher): one
// commit, one merchant lock and a handful of statements serve a whole batch,
// and a batch forms from what arrived while the one before it ran.
//
//   - Placements (PlaceOrder, place.go) go to placementLanes lanes, each
//     deciding one batch at a time. A merchant's paid orders always take the
//     same lane (laneOf), so that they are decided in arrival order; unpaid
//     ones spread over every lane. A batch never waits for a merchant's row:
//     requests of a merchant another transaction holds are parked
//     (placeParked) and decided by that merchant's own waiter, and a request
//     whose stock another transaction holds goes first in a batch of its own
//     right after (stockHeldElsewhere).
//   - Payment deadlines (CloseUnpaid, close.go) are closed by the closer's
//     batches, drop joins (JoinDrop, join.go) by the joiner's lanes.
//   - A command on one order (orderCommand, ordercommands.go) runs in a pipelined
//     transaction of its own; this process's commands on one order take
//     turns (orderTurns), other processes' wait for the rows' locks.
//     The admissions a command makes room for (drain, admitHead) are
//     decided in the same transaction, in the same file.
//
// On Citus a batch is split before it is decided (splitOnCitus): placements
// by the worker holding their merchants (nodeMap, shards.go), each part
// decided in a transaction opened on that worker, with no coordinator in it
// (its statements that lock rows name one shard each: lockGroups); closes
// and joins by merchant, through the coordinator. No transaction writes on
// two nodes, and each commits in one phase.
//
// # Lock order
//
// Every transaction takes its row locks in one order, so that no two
// transactions, batched or not, wait for each other in a circle:
//
//  1. a placement's idempotency keys;
//  2. merchants, in id order: FOR NO KEY UPDATE where the decision changes
//     the merchant's load, FOR KEY SHARE for unpaid placements, which change
//     none (addBatchMerchants); a batch skips a merchant held elsewhere;
//  3. drops, in id order (joins), then their entries after the orders they
//     lapse with (dropEffects, droporders.go);
//  4. orders, in id order (closeInTx; one order after its merchant in
//     orderCommand);
//  5. products in id order, and for each product the customer's purchase
//     claim before its stock buckets, which are taken in (product id,
//     bucket) order (takeStock); a transaction holding a later
//     bucket never waits for an earlier one (errStockHeldElsewhere);
//  6. pickup counters, advanced once, just before the commit (pickup.go).
//
// Every row a transaction locks names its merchant (merchant_id), so that a
// transaction that finds an order's merchant first reads it without a lock:
// an order never changes merchant.
package store
