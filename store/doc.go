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
//   - Placements (PlaceOrder, place.go) go to placementLanes lanes
//     (placebatch.go), each deciding one batch at a time. A merchant's paid
//     orders always take the same lane (laneOf), so that they are decided
//     in arrival order; unpaid ones spread over every lane. A batch never waits for a merchant's row:
//     requests of a merchant another transaction holds are parked
//     (placeParked) and decided by that merchant's own waiter, and a request
//     whose stock another transaction holds goes first in a batch of its own
//     right after (stockHeldElsewhere).
//   - Payment deadlines are closed by each process's look (CloseDueUnpaid,
//     close.go), which closes the orders it finds past their deadline in
//     one transaction; on Citus one process per worker looks, holding the
//     worker's timer lock, and closes them in a transaction on that worker
//     (nodetimers.go). A River job set before (CloseUnpaid) goes by the
//     closer's batches. Drop joins (JoinDrop, join.go) go
//     by the joiner's lanes.
//   - A command on one order (orderCommand, ordercommands.go) runs in a pipelined
//     transaction of its own; this process's commands on one order take
//     turns (orderTurns), other processes' wait for the rows' locks.
//     The admissions a command makes room for are decided in the same
//     transaction (drainAfter; the line's head is read with the locks,
//     queueHead).
//
// On Citus a batch is split before it is decided (splitOnCitus): placements
// by the worker holding their merchants (nodeMap, shards.go), each part
// decided in a transaction opened on that worker, with no coordinator in it:
// it first holds its merchants' shards (holdShards, nodeproducts.go), then
// names them in its statements (lockShardGroups, shards.go; heldShardGroups
// and addToHeldShards, heldshards.go); a worker's payment deadlines are
// closed the same way on that worker (closeOnNode, nodetimers.go); other
// closes and joins by merchant, through the coordinator. No transaction writes on two nodes, and each
// commits in one phase.
//
// # Lock order
//
// Every transaction takes its locks in one order, so that no two
// transactions, batched or not, wait for each other in a circle:
//
//  0. on a Citus worker, a placement batch's or a close's hold on its
//     merchants' shards:
//     Citus's lock on their placements in share mode, in shard id order,
//     with the check that the worker still has them (holdShards), so that
//     a shard cannot move while the batch names it and a move waits for
//     the batch, which waits for no row lock before it;
//  1. merchants, in id order: FOR NO KEY UPDATE where the decision changes
//     the merchant's load, FOR KEY SHARE for unpaid placements, which change
//     none (addBatchMerchants); a batch skips a merchant held elsewhere;
//  2. drops, in id order (joins), then their entries after the orders they
//     lapse with (lockOrderEntries, droporders.go);
//  3. orders, in id order (closeInTx; one order after its merchant in
//     orderCommand);
//  4. products in id order, and for each product the customer's purchase
//     claim before its stock buckets, which are taken in (product id,
//     bucket) order (takeStock; the dead-letter retry waits for all of
//     its products' buckets at once, retakeStock); a placement batch's
//     round trip for many orders sends all their claims, in (merchant,
//     product, customer) order, before any of their takes
//     (takeBatchStock); a transaction holding a
//     later bucket never waits for an earlier one (errStockHeldElsewhere);
//  5. pickup counters, advanced once, just before the commit (pickup.go);
//  6. a placement's idempotency key, entered with its order's row among the
//     commit's writes (orders_idempotency_key_idx): a transaction waits there
//     only for another one placing the same key, which locks nothing new
//     after its orders' insert (addKeyReads). Two batches entering two such
//     keys in opposite orders are a deadlock PostgreSQL breaks, and the
//     batch it fails runs again (isRetryable).
//
// Every row a transaction locks names its merchant (merchant_id), so that a
// transaction that finds an order's merchant first reads it without a lock:
// an order never changes merchant.
//
// # Where each rule is
//
// Each rule of the guarantee table (docs/guarantees.md) is a pure function
// of domain/ with a table test, asked by the store file that its route
// enters, so that a reader goes from the route to the rule through three
// files: the handler (api/, or jobs/ for a timer), that store file, and
// the domain file. Constraints back some of them in the schema.
//
//   - Orders' state machine: POST /v1/orders/{id}/pay, cancel, complete,
//     picked-up, reopen: api/orders.go, ordercommands.go, domain/commands.go
//     (Pay, Cancel, Complete, PickUp, Reopen); who may complete, pick up,
//     reopen or prioritize: the same files, domain/access.go
//     (Party.MayServe, Party.MayPrioritize).
//   - Admission (active <= capacity, queue order, weighted loads, the
//     priority lane): POST /v1/orders with a payment: api/orders.go,
//     place.go, domain/commands.go (PayAtPlacement, which asks
//     Load.CanAdmitNew). Every route that lets the line in asks
//     domain/commands.go (DrainLine, which asks AdmitQueued and
//     Load.CanDrain) from the store file it enters, on the line's head as
//     line.go reads it (readLineHead), and line.go writes the answer
//     (lineHead.admit): a cancellation, completion, prioritization or
//     queue expiry admitting the head: api/orders.go or jobs/queueexpiry.go,
//     ordercommands.go (drainAfter), domain/commands.go, and so does a
//     dead letter's retry (POST /v1/admin/dead-letters/{id}/retry:
//     api/admin.go, ordercommands.go); the drain job: jobs/jobs.go, line.go
//     (DrainMerchant), domain/commands.go; the routes below that admit the
//     line (a capacity raise, a resumption, a period's edge, a release)
//     from their own store files.
//   - Capacity changes (a raise admits the line, a fall evicts nobody):
//     PATCH /v1/merchants/{id}: api/merchants.go, merchants.go,
//     domain/merchant.go (ChangeSettings), and who may change which
//     settings: api/merchants.go, domain/access.go
//     (Party.MayChangeSomeMerchantSettings, MayChangeMerchantSettings); at a period's edge: jobs/jobs.go,
//     slots.go, domain/slots.go (PeriodChange, AdmitsLine).
//   - Pause and resume: POST /v1/merchants/{id}/pause and the pause's
//     timer: api/merchants.go or jobs/jobs.go, merchants.go, domain/pause.go
//     (PauseMerchant, ResumeDue). Priority: POST /v1/orders/{id}/prioritize:
//     api/orders.go, ordercommands.go, domain/commands.go (Prioritize).
//   - Queue expiry and retry: the expiry timer: jobs/queueexpiry.go (each
//     process's look, close.go's QueuedDue, on one PostgreSQL; on Citus the
//     River job's worker, jobs/jobs.go; or the backstop, jobs/timers.go:
//     ExpireQueuedOverdue), ordercommands.go (ExpireQueued),
//     domain/commands.go (Expire); POST
//     /v1/admin/dead-letters/{id}/retry: api/admin.go, ordercommands.go
//     (RetryDeadLetter, which deadletters.go's dead letters name),
//     domain/commands.go (Requeue), and for the stock it takes again
//     domain/stock.go (RefuseStock, ClaimsOf, TakeFromBuckets:
//     retakeStock).
//   - The ETA (a queued order's place in line: its position and wait): POST
//     /v1/orders: api/orders.go, place.go (placeOne), domain/merchant.go
//     (PlaceOnJoining). Every other answer with an order's view asks
//     domain/merchant.go (PlaceInLine, which asks WaitBasis.Wait) of the
//     line its read found (OrderView.line), from the store file its route
//     enters: GET /v1/orders/{id}: api/orders.go, orderview.go (GetOrder);
//     the lists: api/orders.go or api/merchants.go, lists.go (ListOrders);
//     a command's answer: ordercommands.go (runOrderCommand); a placement's
//     replay: place.go (PlaceOrder). The live positions: ws/, live.go
//     (QueuePositions), domain/merchant.go (WaitBasis.Wait). Who may see an
//     order: GET /v1/orders/{id}: api/orders.go, orderview.go,
//     domain/access.go (Party.MaySeeOrder). A merchant's public status
//     (open, busy, the wait of one unit paid now):
//     GET /v1/merchants/{id} and the live status: api/merchants.go or
//     ws/, merchants.go (GetMerchant) or live.go (MerchantLoads),
//     domain/merchant.go (StatusOf).
//   - Pickup codes (none repeats in a merchant's local day): POST
//     /v1/orders: api/orders.go, place.go (pickupDays, stampPickupCodes),
//     domain/capacity.go (LocalDay, the day whose numbers a placement
//     takes; PickupCode); backed by pickup_counters' primary key (merchant,
//     day), whose rows pickup.go advances. An order placed before codes were
//     numbered at placement gets its code at POST /v1/orders/{id}/pay:
//     api/orders.go, ordercommands.go (PayOrder, which asks LocalDay of its
//     placement and takes the number from pickup.go), domain/capacity.go.
//   - Payment against close at the deadline: POST /v1/orders/{id}/pay:
//     api/orders.go, ordercommands.go, domain/commands.go (Pay); the
//     deadline: jobs/timers.go (each process's look, CloseDueUnpaid, on one
//     PostgreSQL; the backstop, CloseUnpaidOverdue) or jobs/jobs.go (its
//     River job on Citus, CloseUnpaid), close.go, domain/commands.go
//     (Close).
//   - Stock (never oversold, the per-customer limit, sold_out only when the
//     units are not there): POST /v1/orders: api/orders.go, place.go
//     (placeOne, takeStock), domain/stock.go (RefuseStock, SoldOut,
//     TakeFromBuckets); backed by stock_buckets.remaining >= 0 and
//     purchase_claims.quantity <= limit_qty. A line over the limit is
//     refused by domain.OverPurchaseLimit; across orders, takeStock asks
//     domain.ClaimsOf how many units the customer may hold already for
//     each line to be claimed (Claim.MostHeld), which the claim's upsert
//     compares with the customer's row under its lock, refusing without
//     failing the batch (domain.PurchaseLimitReached; stock.go's addClaims
//     runs the statements). A line's units come first, in the round trip of
//     the claims, from one bucket: of those the transaction holds, the one
//     domain.TakeFromHeld picks, asked by takeStock; else the first that has
//     them all and no other transaction holds, which only the database
//     knows (stock.go's addTakeOne, each take guarded by remaining >= the
//     quantity); only when none has them does takeStock ask domain.SoldOut
//     and TakeFromBuckets. A placement batch sends the claims and takes of
//     its orders of one line of such a product in one round trip for all
//     of them, up to the units the product's buckets held when the batch
//     began (place.go's batchTakers, stock.go's takeBatchStock), and asks
//     domain.SettleBatchTakes which orders keep what they got (first come,
//     first served: after an order that got no units, the later ones of
//     its product give theirs back and take in their turn, takeStock);
//     what refused orders got goes back in one statement. A dead letter's retry asks domain.ClaimsOf and
//     TakeFromBuckets in ordercommands.go (retakeStock). Restocks: POST
//     /v1/products/{id}/restock: api/merchants.go, products.go,
//     domain/product.go (Product.Restock).
//   - Idempotency keys: POST /v1/orders: api/orders.go, place.go
//     (keyReads.resolve), domain/commands.go (CheckReplay); backed by
//     orders_idempotency_key_idx (merchant, customer, key), on the order's
//     own row. A replay
//     answers the key's order as it is now, which place.go's PlaceOrder
//     reads and lets its customer see (domain/access.go, Party.MaySeeOrder).
//   - Drops: POST /v1/products/{id}/drops, POST /v1/drops/{id}/entries:
//     api/drops.go, drops.go or join.go, domain/drop.go (CreateDrop; Join,
//     and Drop.OrderKey, an entry's key in the draw); the drop's timers:
//     jobs/drops.go, dropsettle.go, domain/drop.go (AdvanceDrop, Invite,
//     LapseAtDeadline, SellOut, and Drop.OrderKey for the early entries
//     drawn at the start). GET /v1/drops/{id}/draw (drops.go's GetDraw)
//     decides nothing: it reads the ranks those wrote. One entry a
//     customer and one drop of a product at a time are backed by
//     drop_entries_one_per_customer and drops_active_product_idx. Only
//     invited customers buy, one unit each, within their window, which
//     bounds the payment deadline: POST
//     /v1/orders: api/orders.go, place.go (claimInvitations),
//     domain/drop.go (ClaimInvitation) and domain/access.go
//     (PaymentDeadline). What a later payment or end of a drop's order
//     does to its entry (purchased, lapsed) is decided by the store file
//     that decides the order, which hands it to the write path
//     (writeSet.addEntry): POST /v1/orders/{id}/pay, cancel and the queue
//     expiry: api/orders.go or jobs/queueexpiry.go, ordercommands.go,
//     domain/drop.go (EntryAfterOrder, for the orders ChangesEntry names);
//     the payment deadline: jobs/timers.go or jobs/jobs.go, close.go,
//     domain/drop.go (LapseForOrder).
//   - Pickup slots and opening hours (only published slots, closed shops,
//     never oversold): POST /v1/orders: api/orders.go, place.go (takeSlots,
//     and PlaceOrder for slots known full), domain/slots.go
//     (CheckPlacementTime, FitSlots, RefuseKnownFull); backed by
//     pickup_slots' CHECK (taken <= capacity). GET
//     /v1/merchants/{id}/slots: api/merchants.go, slots.go, domain/slots.go
//     (PublishedSlots). A scheduled order's release: jobs/jobs.go, slots.go,
//     domain/slots.go (Release). A cancelled or closed order gives its
//     slot's room back: POST /v1/orders/{id}/cancel: api/orders.go,
//     ordercommands.go (giveBack, for CancelOrder and ExpireQueued),
//     domain/slots.go (SlotReturn); the deadline: jobs/timers.go or
//     jobs/jobs.go, close.go, domain/slots.go (SlotReturn); the write path
//     only runs the statement (writeSet.returnSlot, slotReturns).
//   - Decision times (read once the locks are held; skewed clocks never
//     make an order's times or a merchant's admissions run backwards):
//     every route that locks a merchant asks domain/order.go
//     (DecisionTime) from the store file it enters, right after
//     lockMerchant (merchantrow.go) returns the locked row: the routes
//     above into ordercommands.go, merchants.go and slots.go, and place.go
//     for a placement batch's merchants; close.go asks it of the orders it
//     locks. The time is saved as the merchant's decided_at with its load
//     or state.
package store
