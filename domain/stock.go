package domain

import "github.com/google/uuid"

// A product with stock keeps its units in buckets (rows of stock_buckets),
// so that concurrent placements take units from different rows. These are
// the rules a placement's stock follows; store applies them to the rows it
// reads and locks, and the schema backs them (stock_buckets' remaining >= 0,
// purchase_claims' quantity <= limit_qty).

// SoldOut refuses quantity units of a product of which available remain.
func SoldOut(productID uuid.UUID, available, quantity int) error {
	if available < quantity {
		return Errorf(CodeSoldOut, "product %s is sold out", productID)
	}
	return nil
}

// OverPurchaseLimit refuses a line of quantity units of a product that a
// customer may buy at most limit of (nil: no limit), before any claim.
func OverPurchaseLimit(productID uuid.UUID, limit *int, quantity int) error {
	if limit != nil && quantity > *limit {
		return Errorf(CodePurchaseLimit, "at most %d of product %s per customer", *limit, productID)
	}
	return nil
}

// StockLine is a line of an order as the stock rules see it before any
// unit is taken: its product's per-customer limit (nil: none) and the units
// known to be left (nil: not known without taking them).
type StockLine struct {
	ProductID uuid.UUID
	Quantity  int
	Limit     *int
	Left      *int
}

// RefuseStock refuses an order, line by line, before it takes any stock or
// claim: a line for more units than are known to be left (SoldOut), or over
// its product's per-customer limit (OverPurchaseLimit).
func RefuseStock(lines []StockLine) error {
	for _, l := range lines {
		if l.Left != nil {
			if err := SoldOut(l.ProductID, *l.Left, l.Quantity); err != nil {
				return err
			}
		}
		if err := OverPurchaseLimit(l.ProductID, l.Limit, l.Quantity); err != nil {
			return err
		}
	}
	return nil
}

// PurchaseLimitReached is the refusal of a claim that would take a customer
// past limit, the units it already holds counted.
func PurchaseLimitReached(productID uuid.UUID, limit int) error {
	return Errorf(CodePurchaseLimit, "the per-customer limit of %d for product %s is reached", limit, productID)
}

// Claim is a line's claim on a product with a per-customer limit: its
// units are added to those the customer's orders hold (those that hold
// stock) only while the customer holds at most MostHeld, the limit less the
// line's units: the per-customer limit across orders. A claim past it is
// refused (PurchaseLimitReached).
type Claim struct {
	ProductID                 uuid.UUID
	Quantity, Limit, MostHeld int
}

// ClaimsOf are the claims of an order's lines, in their order: one for each
// line of a product with a per-customer limit.
func ClaimsOf(lines []StockLine) []Claim {
	var claims []Claim
	for _, l := range lines {
		if l.Limit != nil {
			claims = append(claims, Claim{ProductID: l.ProductID, Quantity: l.Quantity, Limit: *l.Limit, MostHeld: *l.Limit - l.Quantity})
		}
	}
	return claims
}

// BucketTake is how many units a placement takes from one bucket.
type BucketTake struct {
	Bucket, Units int
}

// TakeFromHeld decides which of the buckets a transaction holds already
// (held, in bucket order, with what each has left) gives a line's quantity
// units: the first that has them all, so that a batch keeps to the buckets
// it holds and leaves the others to concurrent batches. ok is false when
// none has them: the units then come from one bucket that has them all and
// no other transaction holds, the first in bucket order, or from several
// (TakeFromBuckets).
func TakeFromHeld(held []BucketTake, quantity int) (take BucketTake, ok bool) {
	for _, b := range held {
		if b.Units >= quantity {
			return BucketTake{Bucket: b.Bucket, Units: quantity}, true
		}
	}
	return BucketTake{}, false
}

// TakeFromBuckets decides which buckets give quantity units of a product:
// the buckets in the order given (their lock order), each giving what it
// has until the quantity is met. It refuses when all of them together hold
// fewer.
func TakeFromBuckets(productID uuid.UUID, remaining []BucketTake, quantity int) ([]BucketTake, error) {
	var takes []BucketTake
	need := quantity
	for _, b := range remaining {
		if need == 0 {
			break
		}
		if n := min(b.Units, need); n > 0 {
			takes = append(takes, BucketTake{Bucket: b.Bucket, Units: n})
			need -= n
		}
	}
	if need > 0 {
		return nil, SoldOut(productID, quantity-need, quantity)
	}
	return takes, nil
}

// BatchTake is what one round trip of a batch answered an order's line of
// a product with limited stock: the claims and takes of several orders are
// sent together, the claims first, then the takes in the orders' arrival
// order, each from one bucket that has the line's units and no other
// transaction holds.
type BatchTake struct {
	ProductID uuid.UUID
	// ClaimRefused: the customer's claim would have taken it past the
	// per-customer limit (PurchaseLimitReached).
	ClaimRefused bool
	// Took: a bucket gave the line's units.
	Took bool
}

// TakeOutcome is what an order does with what its BatchTake answered.
type TakeOutcome int

const (
	// KeepTake: the order keeps its claim and its units.
	KeepTake TakeOutcome = iota
	// RefuseClaim: the order is refused at the limit; units it took go back.
	RefuseClaim
	// TakeInTurn: the order keeps its claim, gives back units it took, and
	// takes its units as an order decided alone would, in its turn.
	TakeInTurn
)

// SettleBatchTakes decides, for takes in the orders' arrival order, what
// each order does with its answer. First come, first served holds within
// the batch: once an order of a product that may buy it took nothing (no
// bucket held the line's units unheld by another transaction), an order
// after it of that product took only because it wanted fewer or a bucket
// came free meanwhile, so it gives its units back and takes in its turn,
// after the one before it.
func SettleBatchTakes(takes []BatchTake) []TakeOutcome {
	out := make([]TakeOutcome, len(takes))
	missed := map[uuid.UUID]bool{}
	for i, t := range takes {
		switch {
		case t.ClaimRefused:
			out[i] = RefuseClaim
		case !t.Took || missed[t.ProductID]:
			missed[t.ProductID] = true
			out[i] = TakeInTurn
		default:
			out[i] = KeepTake
		}
	}
	return out
}
