package store

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/orderd/orderd/domain"
)

// bucketCount spreads limited stock over enough rows that concurrent buyers
// rarely meet on one row lock, without making the sold-out check scan much.
func bucketCount(stock int) int {
	return min(max(stock/8, 1), 32)
}

// addStock spreads quantity over the product's buckets, creating them first
// for a new product.
func addStock(ctx context.Context, tx pgx.Tx, productID, merchantID uuid.UUID, quantity int, create bool) error {
	if create {
		n := bucketCount(quantity)
		buckets, remaining := make([]int32, n), make([]int32, n)
		for b := range n {
			buckets[b], remaining[b] = int32(b), int32(quantity/n)
			if b < quantity%n {
				remaining[b]++
			}
		}
		err := insertRows{
			Into:    `INSERT INTO stock_buckets (product_id, bucket, merchant_id, remaining)`,
			Row:     `$1, $3, $2, $4`,
			Args:    []any{productID, merchantID},
			Columns: []column{col("int", buckets), col("int", remaining)},
		}.exec(ctx, tx)
		if err != nil {
			return fmt.Errorf("create stock buckets: %w", err)
		}
		return nil
	}
	// Locking every bucket in bucket order keeps restocks from deadlocking with
	// buyers, who lock at most one bucket each or all of them in the same order.
	_, err := tx.Exec(ctx, `
		WITH locked AS (
			SELECT bucket FROM stock_buckets WHERE merchant_id = $3 AND product_id = $1 ORDER BY bucket FOR UPDATE
		), b AS (
			SELECT bucket, count(*) OVER () AS n, row_number() OVER (ORDER BY bucket) - 1 AS i FROM locked
		)
		UPDATE stock_buckets s
		SET remaining = s.remaining + $2 / b.n + CASE WHEN b.i < $2 % b.n THEN 1 ELSE 0 END
		FROM b WHERE s.merchant_id = $3 AND s.product_id = $1 AND s.bucket = b.bucket`,
		productID, quantity, merchantID)
	if err != nil {
		return fmt.Errorf("restock buckets: %w", err)
	}
	return nil
}

// stockMemo is what one transaction knows about the stock it touches.
type stockMemo struct {
	// left is how many units of a product are left once the transaction
	// holds every one of its buckets, or saw it sold out: the rest of a
	// batch is answered without a query.
	left map[uuid.UUID]int
	// highestHeld is the greatest product id of which the transaction holds
	// a bucket: it may wait only for buckets of greater products.
	highestHeld uuid.UUID
	// held is what each bucket the transaction holds has left, by product,
	// in bucket order (domain.TakeFromHeld).
	held map[uuid.UUID][]domain.BucketTake
}

func newStockMemo() *stockMemo {
	return &stockMemo{left: map[uuid.UUID]int{}, held: map[uuid.UUID][]domain.BucketTake{}}
}

// stockLines are the order's lines, in the lock order, as the stock rules
// see them before any unit is taken (domain.RefuseStock).
func stockLines(o domain.Order, products map[uuid.UUID]productInfo, memo *stockMemo) []domain.StockLine {
	items := sortedItems(o.Items)
	lines := make([]domain.StockLine, len(items))
	for i, it := range items {
		p := products[it.ProductID]
		lines[i] = domain.StockLine{ProductID: it.ProductID, Quantity: it.Quantity, Limit: p.perUserLimit}
		if left, known := memo.known(it.ProductID); known && p.limited {
			lines[i].Left = &left
		}
	}
	return lines
}

// stockTake is an order's take of stock in one transaction (takeStock):
// the customer's claims and the units taken, which a refusal puts back
// (undo), so that a batch shared with other orders goes on.
type stockTake struct {
	tx      pgx.Tx
	order   domain.Order
	memo    *stockMemo
	claimed []domain.Item
	taken   []takenUnits
}

// wantedUnits is a limited line whose units are still to take; freeTried
// says its free buckets were tried already.
type wantedUnits struct {
	domain.Item
	freeTried bool
}

// limitedLines are the order's lines of products with limited stock, in
// the lock order, whose units are still to take.
func limitedLines(o domain.Order, products map[uuid.UUID]productInfo) []wantedUnits {
	var wanted []wantedUnits
	for _, it := range sortedItems(o.Items) {
		if products[it.ProductID].limited {
			wanted = append(wanted, wantedUnits{Item: it})
		}
	}
	return wanted
}

// claim records the customer's claims and, in the same round trip, takes
// the first of the wanted lines' units from one bucket (addTakeOne: from,
// when held says the transaction holds it), which is what a flash sale's
// buyer costs: the take waits for no lock, so sending it before the claims'
// answers changes no lock order, and a refused claim puts the units back.
// It returns the wanted lines whose units are still to take.
func (t *stockTake) claim(ctx context.Context, claims []domain.Claim, wanted []wantedUnits, from domain.BucketTake, held bool) ([]wantedUnits, error) {
	b := &pgx.Batch{}
	var refused error
	addClaims(b, t.order, claims, &refused, func(c domain.Claim) {
		t.claimed = append(t.claimed, domain.Item{ProductID: c.ProductID, Quantity: c.Quantity})
	})
	tookFirst := false
	if len(wanted) > 0 {
		wanted[0].freeTried = true
		t.addTakeOne(b, wanted[0].Item, from, held, func() { tookFirst = true })
	}
	if b.Len() > 0 {
		if err := t.tx.SendBatch(ctx, b).Close(); err != nil {
			return nil, fmt.Errorf("reserve stock: %w", err)
		}
	}
	if refused != nil {
		return nil, refused
	}
	if tookFirst {
		wanted = wanted[1:]
	}
	return wanted, nil
}

// addClaims adds to b the customer's claims (domain.ClaimsOf), in the lock
// order. Each upsert locks the customer's row and adds the claim's units
// only when the row holds at most the claim's MostHeld; otherwise it changes
// nothing, so that a refusal (domain.PurchaseLimitReached) does not abort a
// batch, and purchase_claims' CHECK (quantity <= limit_qty) backs the rule.
// Once b's results are read, *refused holds the first refusal, and claimed
// has been told of every claim made.
func addClaims(b *pgx.Batch, o domain.Order, claims []domain.Claim, refused *error, claimed func(domain.Claim)) {
	for _, c := range claims {
		b.Queue(`
			INSERT INTO purchase_claims (product_id, customer_id, merchant_id, quantity, limit_qty)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (merchant_id, product_id, customer_id) DO UPDATE
			SET quantity = purchase_claims.quantity + excluded.quantity, limit_qty = excluded.limit_qty
			WHERE purchase_claims.quantity <= $6`,
			c.ProductID, o.CustomerID, o.MerchantID, c.Quantity, c.Limit, c.MostHeld).Exec(func(tag pgconn.CommandTag) error {
			switch {
			case tag.RowsAffected() > 0:
				claimed(c)
			case *refused == nil:
				*refused = domain.PurchaseLimitReached(c.ProductID, c.Limit)
			}
			return nil
		})
	}
}

// takenUnits records where an order's units came from, to put them back.
type takenUnits struct {
	merchantID, productID uuid.UUID
	buckets               []int32
	counts                []int32
}

// undo puts back what the order claimed and took.
func (t *stockTake) undo(ctx context.Context) error {
	for _, it := range t.claimed {
		if _, err := t.tx.Exec(ctx, `UPDATE purchase_claims SET quantity = quantity - $3 WHERE merchant_id = $4 AND product_id = $1 AND customer_id = $2`,
			it.ProductID, t.order.CustomerID, it.Quantity, t.order.MerchantID); err != nil {
			return fmt.Errorf("undo claim: %w", err)
		}
	}
	for _, u := range t.taken {
		if _, err := t.tx.Exec(ctx, `UPDATE stock_buckets s SET remaining = s.remaining + t.n
			FROM unnest($2::int[], $3::int[]) AS t(bucket, n) WHERE s.merchant_id = $4 AND s.product_id = $1 AND s.bucket = t.bucket`,
			u.productID, u.buckets, u.counts, u.merchantID); err != nil {
			return fmt.Errorf("undo stock: %w", err)
		}
		for i, n := range u.counts {
			t.memo.add(u.productID, int(n))
			t.memo.addHeld(u.productID, int(u.buckets[i]), int(n))
		}
	}
	return nil
}

// takeOne takes the line's units from one bucket, without waiting for a
// lock (addTakeOne). It reports whether one had them.
func (t *stockTake) takeOne(ctx context.Context, it domain.Item, from domain.BucketTake, held bool) (bool, error) {
	b := &pgx.Batch{}
	took := false
	t.addTakeOne(b, it, from, held, func() { took = true })
	if err := t.tx.SendBatch(ctx, b).Close(); err != nil {
		return false, fmt.Errorf("take stock: %w", err)
	}
	return took, nil
}

// addTakeOne adds to b the take of the line's units from one bucket: from,
// one the transaction holds, when held (domain.TakeFromHeld picked it), else
// the first in bucket order that has them all and no other transaction
// holds (SKIP LOCKED), a bucket domain cannot know of without a round trip
// more. Each statement takes the units only from a bucket that has them
// (remaining >= the quantity), which stock_buckets' CHECK (remaining >= 0)
// backs. took is called when it took them.
func (t *stockTake) addTakeOne(b *pgx.Batch, it domain.Item, from domain.BucketTake, held bool, took func()) {
	merchantID, productID, quantity := t.order.MerchantID, it.ProductID, it.Quantity
	var q *pgx.QueuedQuery
	if held {
		q = b.Queue(`UPDATE stock_buckets SET remaining = remaining - $2
			WHERE merchant_id = $3 AND product_id = $1 AND bucket = $4 AND remaining >= $2
			RETURNING bucket, remaining`, productID, quantity, merchantID, from.Bucket)
	} else {
		q = b.Queue(`
			UPDATE stock_buckets SET remaining = remaining - $2
			WHERE merchant_id = $3 AND (product_id, bucket) = (
				SELECT product_id, bucket FROM stock_buckets
				WHERE merchant_id = $3 AND product_id = $1 AND remaining >= $2
				ORDER BY bucket
				LIMIT 1 FOR UPDATE SKIP LOCKED)
			RETURNING bucket, remaining`, productID, quantity, merchantID)
	}
	q.QueryRow(func(row pgx.Row) error {
		var left domain.BucketTake
		err := row.Scan(&left.Bucket, &left.Units)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		t.taken = append(t.taken, takenUnits{merchantID: merchantID, productID: productID, buckets: []int32{int32(left.Bucket)}, counts: []int32{int32(quantity)}})
		t.memo.add(productID, -quantity)
		t.memo.hold(productID)
		t.memo.setHeld(productID, left)
		took()
		return nil
	})
}

// available is how many units of the product its buckets hold, read
// without waiting for their locks.
func (t *stockTake) available(ctx context.Context, productID uuid.UUID) (int, error) {
	var available int
	if err := t.tx.QueryRow(ctx, `SELECT coalesce(sum(remaining), 0) FROM stock_buckets WHERE merchant_id = $2 AND product_id = $1`,
		productID, t.order.MerchantID).Scan(&available); err != nil {
		return 0, fmt.Errorf("sum stock: %w", err)
	}
	return available, nil
}

// soldOutOrHeldElsewhere answers an order that may not make its claims in
// this transaction (takeStock): sold out when an unlocked sum of one of its
// limited lines says so, which needs no claim, else errStockHeldElsewhere.
func (t *stockTake) soldOutOrHeldElsewhere(ctx context.Context, wanted []wantedUnits) error {
	for _, it := range wanted {
		available, err := t.available(ctx, it.ProductID)
		if err != nil {
			return err
		}
		if err := domain.SoldOut(it.ProductID, available, it.Quantity); err != nil {
			t.memo.set(it.ProductID, available)
			return err
		}
	}
	return errStockHeldElsewhere
}

// lockBuckets waits for every bucket of the product, in bucket order, and
// returns what each holds.
func (t *stockTake) lockBuckets(ctx context.Context, productID uuid.UUID) ([]domain.BucketTake, error) {
	b := &pgx.Batch{}
	held := addLockBuckets(b, t.order.MerchantID, []uuid.UUID{productID})
	if err := t.tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("lock stock: %w", err)
	}
	buckets := held[productID]
	total := 0
	for _, b := range buckets {
		total += b.Units
		t.memo.setHeld(productID, b)
	}
	t.memo.set(productID, total)
	t.memo.hold(productID)
	return buckets, nil
}

// addLockBuckets adds to b the wait for every bucket of the merchant's
// products, in the lock order (product id, bucket); the map holds what
// each product's buckets hold, in that order, once b's results are read.
func addLockBuckets(b *pgx.Batch, merchantID uuid.UUID, productIDs []uuid.UUID) map[uuid.UUID][]domain.BucketTake {
	held := make(map[uuid.UUID][]domain.BucketTake, len(productIDs))
	b.Queue(`SELECT product_id, bucket, remaining FROM stock_buckets WHERE merchant_id = $2 AND product_id = ANY($1::uuid[])
		ORDER BY product_id, bucket FOR UPDATE`, productIDs, merchantID).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var productID uuid.UUID
			var bucket domain.BucketTake
			if err := rows.Scan(&productID, &bucket.Bucket, &bucket.Units); err != nil {
				return fmt.Errorf("scan stock: %w", err)
			}
			held[productID] = append(held[productID], bucket)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("lock stock: %w", err)
		}
		return nil
	})
	return held
}

// take takes the line's units from the buckets as takes says.
func (t *stockTake) take(ctx context.Context, it domain.Item, takes []domain.BucketTake) error {
	u := takenFrom(t.order.MerchantID, it.ProductID, takes)
	b := &pgx.Batch{}
	addTake(b, u)
	if err := t.tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("take stock: %w", err)
	}
	t.taken = append(t.taken, u)
	t.memo.add(it.ProductID, -it.Quantity)
	for _, take := range takes {
		t.memo.addHeld(it.ProductID, take.Bucket, -take.Units)
	}
	return nil
}

// takenFrom is what takes, domain.TakeFromBuckets' answer, take from a
// product's buckets.
func takenFrom(merchantID, productID uuid.UUID, takes []domain.BucketTake) takenUnits {
	u := takenUnits{merchantID: merchantID, productID: productID}
	for _, take := range takes {
		u.buckets, u.counts = append(u.buckets, int32(take.Bucket)), append(u.counts, int32(take.Units))
	}
	return u
}

// addTake adds to b the take of u's units from the buckets it names.
func addTake(b *pgx.Batch, u takenUnits) {
	b.Queue(`
		UPDATE stock_buckets s SET remaining = s.remaining - t.take
		FROM unnest($2::int[], $3::int[]) AS t(bucket, take)
		WHERE s.merchant_id = $4 AND s.product_id = $1 AND s.bucket = t.bucket`, u.productID, u.buckets, u.counts, u.merchantID)
}

func (m *stockMemo) known(product uuid.UUID) (int, bool) {
	if m == nil {
		return 0, false
	}
	left, ok := m.left[product]
	return left, ok
}

func (m *stockMemo) set(product uuid.UUID, left int) {
	if m != nil {
		m.left[product] = left
	}
}

func (m *stockMemo) add(product uuid.UUID, n int) {
	if m == nil {
		return
	}
	if left, ok := m.left[product]; ok {
		m.left[product] = left + n
	}
}

// heldBuckets is what the buckets of the product the transaction holds
// have left, in bucket order.
func (m *stockMemo) heldBuckets(product uuid.UUID) []domain.BucketTake {
	if m == nil {
		return nil
	}
	return m.held[product]
}

// setHeld records that the transaction holds the bucket, with b.Units left.
func (m *stockMemo) setHeld(product uuid.UUID, b domain.BucketTake) {
	if m == nil {
		return
	}
	held := m.held[product]
	i, found := slices.BinarySearchFunc(held, b.Bucket, func(h domain.BucketTake, bucket int) int { return cmp.Compare(h.Bucket, bucket) })
	if found {
		held[i] = b
		return
	}
	m.held[product] = slices.Insert(held, i, b)
}

// addHeld adds n units to what a bucket the transaction holds has left.
func (m *stockMemo) addHeld(product uuid.UUID, bucket, n int) {
	if m == nil {
		return
	}
	for i := range m.held[product] {
		if m.held[product][i].Bucket == bucket {
			m.held[product][i].Units += n
		}
	}
}

func (m *stockMemo) hold(product uuid.UUID) {
	if m != nil && bytes.Compare(product[:], m.highestHeld[:]) > 0 {
		m.highestHeld = product
	}
}

// holdsBuckets reports whether the transaction holds a bucket of any
// product.
func (m *stockMemo) holdsBuckets() bool {
	return m != nil && m.highestHeld != uuid.Nil
}

// mayWaitFor reports whether waiting for the product's buckets keeps the
// global lock order.
func (m *stockMemo) mayWaitFor(product uuid.UUID) bool {
	return m == nil || bytes.Compare(m.highestHeld[:], product[:]) < 0
}

// releaseStock returns an ended order's units and frees the customer's claims.
func releaseStock(ctx context.Context, tx pgx.Tx, o domain.Order) error {
	var u releasedUnits
	u.add(o)
	return releaseUnits(ctx, tx, u)
}

// releasedUnits are the units of ended orders, line by line.
type releasedUnits struct {
	merchants, products []uuid.UUID
	customers           []string
	quantities          []int32
}

func (u *releasedUnits) add(o domain.Order) {
	for _, it := range o.Items {
		u.merchants, u.customers = append(u.merchants, o.MerchantID), append(u.customers, o.CustomerID)
		u.products, u.quantities = append(u.products, it.ProductID), append(u.quantities, int32(it.Quantity))
	}
}

// byShard splits u into the parts that one statement may release on a
// Citus worker: one per shard of the merchants (byShard); elsewhere u
// whole.
func (u releasedUnits) byShard(tx pgx.Tx) []releasedUnits {
	items := make([]int, len(u.merchants))
	for i := range items {
		items[i] = i
	}
	var parts []releasedUnits
	for _, g := range byShard(tx, items, func(i int) uuid.UUID { return u.merchants[i] }) {
		var part releasedUnits
		for _, i := range g {
			part.merchants, part.customers = append(part.merchants, u.merchants[i]), append(part.customers, u.customers[i])
			part.products, part.quantities = append(part.products, u.products[i]), append(part.quantities, u.quantities[i])
		}
		parts = append(parts, part)
	}
	return parts
}

// releaseUnits returns units of many orders in one round trip, in the
// store's lock order: each customer's claims first, then one bucket per
// product (the one with the fewest units). Two statements, not one: a
// data-modifying WITH that the main statement does not read runs after it,
// so the buckets would be locked before the claims, and a release waiting
// for a claim would hold the bucket that the claim's holder, a purchase
// of the same customer, waits for. It may wait for a bucket a buyer holds;
// buyers never wait for an order's lock. The buckets are locked in the
// lock order (merchant, product, bucket) before they are changed: an
// UPDATE … FROM locks its rows in whatever order its plan meets them (a
// hash join, in the order they lie in the table), and a release holding a
// later product's bucket while it waits for an earlier one would make a
// circle with a batch that waits for every bucket of both in that order
// (addLockBuckets). On a Citus worker the two are a
// statement per shard each, every claims' before any bucket's, naming the
// shards when the transaction holds them (heldTable), so that the worker
// runs them as plain PostgreSQL, planned once per connection.
func releaseUnits(ctx context.Context, tx pgx.Tx, u releasedUnits) error {
	b := &pgx.Batch{}
	parts := u.byShard(tx)
	for _, part := range parts {
		b.Queue(`
		WITH per_claim AS (
			SELECT m, c, p, sum(q)::int AS q FROM unnest($4::uuid[], $1::text[], $2::uuid[], $3::int[]) AS t(m, c, p, q)
			GROUP BY m, c, p
		)
		UPDATE `+heldTable(tx, "purchase_claims", firstMerchant(part))+` pc SET quantity = pc.quantity - a.q
		FROM per_claim a WHERE pc.merchant_id = a.m AND pc.product_id = a.p AND pc.customer_id = a.c AND pc.merchant_id = ANY($4::uuid[])`,
			part.customers, part.products, part.quantities, part.merchants)
	}
	for _, part := range parts {
		buckets := heldTable(tx, "stock_buckets", firstMerchant(part))
		b.Queue(`
		WITH per_product AS (
			SELECT m, p, sum(q)::int AS q FROM unnest($3::uuid[], $1::uuid[], $2::int[]) AS t(m, p, q) GROUP BY m, p
		),
		target AS (
			SELECT DISTINCT ON (b.product_id) b.merchant_id, b.product_id, b.bucket, u.q
			FROM `+buckets+` b JOIN per_product u ON u.m = b.merchant_id AND u.p = b.product_id
			WHERE b.merchant_id = ANY($3::uuid[])
			ORDER BY b.product_id, b.remaining, b.bucket
		),
		locked AS (
			SELECT s.merchant_id, s.product_id, s.bucket, t.q
			FROM `+buckets+` s JOIN target t ON s.merchant_id = t.merchant_id AND s.product_id = t.product_id AND s.bucket = t.bucket
			WHERE s.merchant_id = ANY($3::uuid[])
			ORDER BY s.merchant_id, s.product_id, s.bucket FOR UPDATE OF s
		)
		UPDATE `+buckets+` s SET remaining = s.remaining + l.q
		FROM locked l WHERE s.merchant_id = l.merchant_id AND s.product_id = l.product_id AND s.bucket = l.bucket
			AND s.merchant_id = ANY($3::uuid[])`,
			part.products, part.quantities, part.merchants)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("release stock: %w", err)
	}
	return nil
}

// firstMerchant is the merchant of u's first line, or the zero id.
func firstMerchant(u releasedUnits) [16]byte {
	if len(u.merchants) == 0 {
		return [16]byte{}
	}
	return u.merchants[0]
}

func sortedItems(items []domain.Item) []domain.Item {
	out := append([]domain.Item(nil), items...)
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].ProductID[:], out[j].ProductID[:]) < 0 })
	return out
}

// addStockSums adds to b, for the batch's products known to take stock
// (known), the read of how many units each product's buckets hold, without
// waiting for their locks: one statement per merchant, which on Citus is
// its shard's. The map holds the sums, of products with buckets only, once
// b's results are read.
func addStockSums(b *pgx.Batch, batch []*placement, known func(uuid.UUID) bool) map[uuid.UUID]int {
	sums := map[uuid.UUID]int{}
	products := map[uuid.UUID][]uuid.UUID{}
	var merchants []uuid.UUID
	seen := map[[2]uuid.UUID]bool{}
	for _, pl := range batch {
		for _, l := range pl.p.Lines {
			key := [2]uuid.UUID{pl.p.MerchantID, l.ProductID}
			if seen[key] || !known(l.ProductID) {
				continue
			}
			seen[key] = true
			if _, ok := products[pl.p.MerchantID]; !ok {
				merchants = append(merchants, pl.p.MerchantID)
			}
			products[pl.p.MerchantID] = append(products[pl.p.MerchantID], l.ProductID)
		}
	}
	for _, m := range merchants {
		b.Queue(`SELECT product_id, sum(remaining)::int FROM stock_buckets WHERE merchant_id = $1 AND product_id = ANY($2::uuid[])
			GROUP BY product_id`, m, products[m]).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var id uuid.UUID
				var sum int
				if err := rows.Scan(&id, &sum); err != nil {
					return fmt.Errorf("sum stock: %w", err)
				}
				sums[id] = sum
			}
			if err := rows.Err(); err != nil {
				return fmt.Errorf("sum stock: %w", err)
			}
			return nil
		})
	}
	return sums
}

// batchStock is the stock a batch claimed and took for several of its
// orders in one round trip (takeBatchStock), which each order keeps or
// gives back as the batch decides it (domain.SettleBatchTakes, placeOne).
type batchStock struct {
	tx   pgx.Tx
	memo *stockMemo
	of   map[*placement]*batchTake
	// back is what orders gave back, known to the memo at once and put back
	// in the database before the transaction's next take (flush) or with
	// its commit (addReturns).
	back stockReturns
}

// batchTake is one order's part of a batchStock.
type batchTake struct {
	take    *stockTake
	outcome domain.TakeOutcome
	refusal error
}

// stockReturns are claims and units to put back, by merchant.
type stockReturns struct {
	claims map[returnedClaim]int
	units  map[returnedUnits]int
}

type returnedClaim struct {
	merchantID, productID uuid.UUID
	customerID            string
}

type returnedUnits struct {
	merchantID, productID uuid.UUID
	bucket                int32
}

// takeBatchStock claims and takes, in one round trip, the units of orders
// of one line of a product with limited stock (lines: each order's line,
// in arrival order): first every claim, in (merchant, product, customer)
// order, as the store's lock order wants claims before buckets, then every
// take, in arrival order, each from the first bucket that has the line's
// units and no other transaction holds (addTakeOne; it waits for no lock).
// domain.SettleBatchTakes then says which orders keep what they got; the
// others' units go back at once, to the memo.
func takeBatchStock(ctx context.Context, tx pgx.Tx, memo *stockMemo, orders []*placement, lines []domain.StockLine) (*batchStock, error) {
	bs := &batchStock{tx: tx, memo: memo, of: make(map[*placement]*batchTake, len(orders))}
	if len(orders) == 0 {
		return bs, nil
	}
	takes := make([]*batchTake, len(orders))
	for i, pl := range orders {
		takes[i] = &batchTake{take: &stockTake{tx: tx, memo: memo, order: domain.Order{MerchantID: pl.p.MerchantID, CustomerID: pl.p.CustomerID}}}
		bs.of[pl] = takes[i]
	}
	byClaim := make([]int, len(orders))
	for i := range byClaim {
		byClaim[i] = i
	}
	slices.SortFunc(byClaim, func(i, j int) int {
		a, b := orders[i].p, orders[j].p
		return cmp.Or(bytes.Compare(a.MerchantID[:], b.MerchantID[:]), bytes.Compare(lines[i].ProductID[:], lines[j].ProductID[:]),
			cmp.Compare(a.CustomerID, b.CustomerID))
	})
	b := &pgx.Batch{}
	for _, i := range byClaim {
		t := takes[i]
		addClaims(b, t.take.order, domain.ClaimsOf(lines[i:i+1]), &t.refusal, func(c domain.Claim) {
			t.take.claimed = append(t.take.claimed, domain.Item{ProductID: c.ProductID, Quantity: c.Quantity})
		})
	}
	answers := make([]domain.BatchTake, len(orders))
	for i, t := range takes {
		answers[i].ProductID = lines[i].ProductID
		t.take.addTakeOne(b, domain.Item{ProductID: lines[i].ProductID, Quantity: lines[i].Quantity}, domain.BucketTake{}, false, func() { answers[i].Took = true })
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("reserve stock: %w", err)
	}
	for i, t := range takes {
		answers[i].ClaimRefused = t.refusal != nil
	}
	for i, outcome := range domain.SettleBatchTakes(answers) {
		t := takes[i]
		t.outcome = outcome
		if outcome != domain.KeepTake {
			bs.returnUnits(t.take)
		}
	}
	return bs, nil
}

// returnUnits gives back the units t took, keeping its claims.
func (bs *batchStock) returnUnits(t *stockTake) {
	for _, u := range t.taken {
		for i, n := range u.counts {
			if bs.back.units == nil {
				bs.back.units = map[returnedUnits]int{}
			}
			bs.back.units[returnedUnits{u.merchantID, u.productID, u.buckets[i]}] += int(n)
			bs.memo.add(u.productID, int(n))
			bs.memo.addHeld(u.productID, int(u.buckets[i]), int(n))
		}
	}
	t.taken = nil
}

// giveBack returns what the order claimed and took in the batch's round
// trip, when the batch does not place it.
func (bs *batchStock) giveBack(pl *placement) {
	t, ok := bs.of[pl]
	if !ok {
		return
	}
	delete(bs.of, pl)
	bs.returnUnits(t.take)
	for _, it := range t.take.claimed {
		if bs.back.claims == nil {
			bs.back.claims = map[returnedClaim]int{}
		}
		bs.back.claims[returnedClaim{t.take.order.MerchantID, it.ProductID, t.take.order.CustomerID}] += it.Quantity
	}
	t.take.claimed = nil
}

// take takes the stock of pl's order, whose guarded lines domain.RefuseStock
// has not refused yet: what the batch's round trip got it, or, for an order
// that was not in it or takes in its turn, what takeStock takes, once what
// orders gave back is in the database.
func (bs *batchStock) take(ctx context.Context, pl *placement, o domain.Order, products map[uuid.UUID]productInfo) error {
	t, ok := bs.of[pl]
	if ok && t.outcome == domain.KeepTake {
		return nil
	}
	if ok && t.outcome == domain.RefuseClaim {
		return t.refusal
	}
	if err := domain.RefuseStock(stockLines(o, products, bs.memo)); err != nil {
		return err
	}
	if err := bs.flush(ctx); err != nil {
		return err
	}
	return takeStock(ctx, bs.tx, o, products, bs.memo, ok)
}

// flush puts back in the database what orders gave back.
func (bs *batchStock) flush(ctx context.Context) error {
	b := &pgx.Batch{}
	bs.addReturns(b)
	if b.Len() == 0 {
		return nil
	}
	if err := bs.tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("put back stock: %w", err)
	}
	return nil
}

// addReturns adds to b the put-back of what orders gave back, per merchant
// one statement for the claims and one for the units; every row is one
// the transaction holds already. Every claim goes back before any unit,
// and the merchants in id order, as the store's lock order has them.
func (bs *batchStock) addReturns(b *pgx.Batch) {
	type returns struct {
		claimProducts []uuid.UUID
		customers     []string
		claimCounts   []int32
		unitProducts  []uuid.UUID
		buckets       []int32
		unitCounts    []int32
	}
	byMerchant := map[uuid.UUID]*returns{}
	of := func(m uuid.UUID) *returns {
		r, ok := byMerchant[m]
		if !ok {
			r = &returns{}
			byMerchant[m] = r
		}
		return r
	}
	for k, n := range bs.back.claims {
		r := of(k.merchantID)
		r.claimProducts, r.customers, r.claimCounts = append(r.claimProducts, k.productID), append(r.customers, k.customerID), append(r.claimCounts, int32(n))
	}
	for k, n := range bs.back.units {
		r := of(k.merchantID)
		r.unitProducts, r.buckets, r.unitCounts = append(r.unitProducts, k.productID), append(r.buckets, k.bucket), append(r.unitCounts, int32(n))
	}
	merchants := make([]uuid.UUID, 0, len(byMerchant))
	for m := range byMerchant {
		merchants = append(merchants, m)
	}
	slices.SortFunc(merchants, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	for _, m := range merchants {
		if r := byMerchant[m]; len(r.claimProducts) > 0 {
			b.Queue(`UPDATE purchase_claims pc SET quantity = pc.quantity - t.q
			FROM unnest($2::uuid[], $3::text[], $4::int[]) AS t(p, c, q)
			WHERE pc.merchant_id = $1 AND pc.product_id = t.p AND pc.customer_id = t.c`, m, r.claimProducts, r.customers, r.claimCounts)
		}
	}
	for _, m := range merchants {
		if r := byMerchant[m]; len(r.unitProducts) > 0 {
			b.Queue(`UPDATE stock_buckets s SET remaining = s.remaining + t.n
			FROM unnest($2::uuid[], $3::int[], $4::int[]) AS t(p, bucket, n)
			WHERE s.merchant_id = $1 AND s.product_id = t.p AND s.bucket = t.bucket`, m, r.unitProducts, r.buckets, r.unitCounts)
		}
	}
	bs.back = stockReturns{}
}
