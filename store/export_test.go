package store

import "github.com/google/uuid"

// SamePlacementLane reports whether two merchants' paid orders share a
// placement lane, so that a test can put a locked merchant next to others.
func SamePlacementLane(a, b uuid.UUID) bool {
	return laneOf(&placement{p: PlaceParams{MerchantID: a, PaymentRef: "r"}}) ==
		laneOf(&placement{p: PlaceParams{MerchantID: b, PaymentRef: "r"}})
}
