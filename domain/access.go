package domain

import (
	"time"

	"github.com/google/uuid"
)

// Party is who asks: an actor, its subject and, for a merchant, the
// merchant it acts for.
type Party struct {
	Actor      Actor
	Subject    string
	MerchantID uuid.UUID
}

// MaySeeOrder reports whether the party may see an order, and so act on it
// as its role allows: admins and the system every order, a merchant its
// own orders, a customer the orders it placed. An order the party may not
// see is answered as not found, so that its existence is not revealed.
func (p Party) MaySeeOrder(customerID string, merchantID uuid.UUID) bool {
	switch p.Actor {
	case ActorAdmin, ActorSystem, ActorAuditor:
		return true
	case ActorMerchant:
		return p.MayActForMerchant(merchantID)
	case ActorCustomer:
		return p.Subject != "" && p.Subject == customerID
	}
	return false
}

// MayBuy reports whether the party may place and pay orders and join
// drops: customers only; merchants and admins serve and run the shops.
func (p Party) MayBuy() bool { return p.Actor == ActorCustomer }

// MayAdminister reports whether the party may run the platform: create
// merchants, mint sign-in codes, retry dead letters and read the webhook
// attempts and the audits' report. Admins only.
func (p Party) MayAdminister() bool { return p.Actor == ActorAdmin }

// MayAudit reports whether the party may read the audits, the log's
// checkpoints and proofs: an admin or an auditor.
func (p Party) MayAudit() bool { return p.Actor == ActorAdmin || p.Actor == ActorAuditor }

// AuditorMayCall reports whether an auditor may make a request of that
// method at all: it reads (each read then follows its own rule, under which
// an auditor sees every order) and changes nothing.
func AuditorMayCall(method string) bool { return method == "GET" || method == "HEAD" }

// OwnOrderList is whose orders the party's own order list holds: a
// customer's are the orders it placed. Merchants and admins read orders by
// merchant, so they have no list of their own (ok is false).
func (p Party) OwnOrderList() (customerID string, ok bool) {
	if p.Actor == ActorCustomer && p.Subject != "" {
		return p.Subject, true
	}
	return "", false
}

// MayActForMerchant reports whether the party may act on a merchant's
// behalf: an admin, or that merchant itself. A merchant party without a
// merchant never matches.
func (p Party) MayActForMerchant(merchantID uuid.UUID) bool {
	return p.Actor == ActorAdmin || (p.Actor == ActorMerchant && p.MerchantID != uuid.Nil && p.MerchantID == merchantID)
}

// MayChangeSomeMerchantSettings reports whether the party may change any
// merchant's settings at all, before its request says which merchant and
// which settings (MayChangeMerchantSettings): an admin, or a merchant.
func (p Party) MayChangeSomeMerchantSettings() bool {
	return p.Actor == ActorAdmin || p.Actor == ActorMerchant
}

// MayChangeMerchantSettings reports whether the party may change the named
// settings of a merchant: an admin any, the merchant itself its capacity
// only (a kitchen scaling up or down); everything else about a merchant is
// the platform's.
func (p Party) MayChangeMerchantSettings(merchantID uuid.UUID, fields []string) bool {
	if p.Actor == ActorAdmin {
		return true
	}
	if !p.MayActForMerchant(merchantID) {
		return false
	}
	for _, f := range fields {
		if f != "capacity" {
			return false
		}
	}
	return true
}

// MayEditMenu reports whether the party may add, change and hide a
// merchant's products: an admin or that merchant.
func (p Party) MayEditMenu(merchantID uuid.UUID) bool { return p.MayActForMerchant(merchantID) }

// MayServe reports whether the party may hand a merchant's orders over the
// counter: mark them picked up, or undo their completion. An admin or that
// merchant.
func (p Party) MayServe(merchantID uuid.UUID) bool { return p.MayActForMerchant(merchantID) }

// MayPauseMerchant reports whether the party may pause and resume a
// merchant's intake: an admin or the merchant itself.
func (p Party) MayPauseMerchant(merchantID uuid.UUID) bool { return p.MayActForMerchant(merchantID) }

// MayPrioritize reports whether the party may move an order of the merchant
// into the priority lane: an admin or that merchant.
func (p Party) MayPrioritize(merchantID uuid.UUID) bool { return p.MayActForMerchant(merchantID) }

// PaymentDeadline is when an order placed at placedAt closes unpaid: after
// its merchant's payment timeout, or when the purchase window of a drop it
// buys from ends (purchaseWindowEnds, one for each drop it buys from),
// whichever comes first, since a drop's order is paid within its window or
// not at all.
func PaymentDeadline(placedAt time.Time, paymentTimeoutSeconds int, purchaseWindowEnds ...time.Time) time.Time {
	deadline := placedAt.Add(time.Duration(paymentTimeoutSeconds) * time.Second)
	for _, end := range purchaseWindowEnds {
		if end.Before(deadline) {
			deadline = end
		}
	}
	return deadline
}

// PlacementTakesMerchantLock reports whether a placement decides admission,
// and so must hold its merchant's lock: one that pays as it places.
// Unpaid placements change no merchant's load.
func PlacementTakesMerchantLock(paymentRef string) bool { return paymentRef != "" }
