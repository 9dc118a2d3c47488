package domain

import (
	"fmt"
	"time"
)

// CapacityUnit is what a merchant's capacity counts: whole orders, or the
// items the kitchen makes (a ten-cup order weighs ten cups).
type CapacityUnit string

const (
	UnitOrders CapacityUnit = "orders"
	UnitItems  CapacityUnit = "items"
)

// Valid reports whether u is a known unit.
func (u CapacityUnit) Valid() bool { return u == UnitOrders || u == UnitItems }

// Lane is the line a queued order waits in. The priority lane's head is
// admitted before the normal lane's; each lane is first come, first served.
type Lane string

const (
	LaneNormal   Lane = "normal"
	LanePriority Lane = "priority"
)

// Valid reports whether l is a known lane.
func (l Lane) Valid() bool { return l == LaneNormal || l == LanePriority }

// Load units of a product: the capacity one unit of it takes when its
// merchant counts items.
const (
	MinLoadUnits     = 1
	MaxLoadUnits     = 100
	DefaultLoadUnits = 1
)

// ValidateLoadUnits checks a product's load_units.
func ValidateLoadUnits(n int) error {
	if n < MinLoadUnits || n > MaxLoadUnits {
		return Errorf(CodeValidation, "load_units must be between %d and %d", MinLoadUnits, MaxLoadUnits)
	}
	return nil
}

// OrderLoad is the capacity an order holds while accepted: 1 when its
// merchant counts orders, the sum of quantity × the line's units per unit
// (its product's load_units and its options') when it counts items.
func OrderLoad(unit CapacityUnit, items []Item, lineUnits []int) int {
	if unit != UnitItems {
		return 1
	}
	total := 0
	for i, it := range items {
		total += it.Quantity * max(lineUnits[i], MinLoadUnits)
	}
	return max(total, 1)
}

// Pickup codes.
const (
	MaxPickupPrefix = 2
	DefaultTimezone = "UTC"
)

// ValidatePickupPrefix accepts 0-2 upper-case ASCII letters.
func ValidatePickupPrefix(p string) error {
	if len(p) > MaxPickupPrefix {
		return Errorf(CodeValidation, "pickup_prefix must be 0-%d upper-case letters", MaxPickupPrefix)
	}
	for _, r := range p {
		if r < 'A' || r > 'Z' {
			return Errorf(CodeValidation, "pickup_prefix must be 0-%d upper-case letters", MaxPickupPrefix)
		}
	}
	return nil
}

// LoadTimezone resolves an IANA time zone name; "" is UTC. Names the
// standard library would take but that are no IANA zone ("Local") are
// refused, since they mean a different zone on every machine.
func LoadTimezone(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	if name == "Local" {
		return nil, Errorf(CodeValidation, "timezone must be an IANA time zone name such as Europe/Paris")
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, Errorf(CodeValidation, "timezone must be an IANA time zone name such as Europe/Paris")
	}
	return loc, nil
}

// LocalDay is the date at now in loc.
func LocalDay(now time.Time, loc *time.Location) string { return now.In(loc).Format(time.DateOnly) }

// PickupCode is the n-th code of a merchant's local day: the prefix and n,
// zero-padded to three digits.
func PickupCode(prefix string, n int) string { return fmt.Sprintf("%s%03d", prefix, n) }

// StampPickupCode records an order's pickup code in the placement that
// starts its stream (order.placed, or the placement an order.accepted or
// order.queued carries), paid or not: the code is the order's from its placement on, and
// no later event changes it. An order placed before
// codes were numbered at placement gets its code in its order.paid event
// (NeedsPickupCodeAtPayment).
func StampPickupCode(events []Event, code string) []Event {
	out := append([]Event(nil), events...)
	for i, e := range out {
		switch d := e.Data.(type) {
		case OrderPlaced:
			d.PickupCode = code
			out[i].Data = d
			return out
		case OrderAccepted:
			if d.Placed == nil {
				continue
			}
			d.Placed = withPickupCode(*d.Placed, code)
			out[i].Data = d
			return out
		case OrderQueued:
			if d.Placed == nil {
				continue
			}
			d.Placed = withPickupCode(*d.Placed, code)
			out[i].Data = d
			return out
		case OrderPaid:
			d.PickupCode = code
			out[i].Data = d
			return out
		}
	}
	return out
}

func withPickupCode(p OrderPlaced, code string) *OrderPlaced {
	p.PickupCode = code
	return &p
}

// NeedsPickupCodeAtPayment reports an order being paid without a pickup
// code: one placed unpaid before codes were numbered at placement. Its
// customer will wait for it to be called like everyone else, so the
// payment numbers it.
func (o Order) NeedsPickupCodeAtPayment() bool { return o.PickupCode == "" }
