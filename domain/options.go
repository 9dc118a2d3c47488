package domain

import (
	"fmt"
	"github.com/google/uuid"
	"slices"
	"strings"
	"unicode/utf8"
)

// OptionGroup is a choice a product offers (size, sugar, ice, toppings):
// between MinSelect and MaxSelect of its options. A group with MinSelect
// above 0 is required.
type OptionGroup struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	MinSelect int      `json:"min_select"`
	MaxSelect int      `json:"max_select"`
	Options   []Option `json:"options"`
}

// Option is one choice of a group: what it adds to a unit's price (or takes
// off) and to a unit's load when the merchant counts items.
type Option struct {
	ID              string `json:"id"`
	Name            string `json:"name"`
	PriceDeltaCents int64  `json:"price_delta_cents"`
	LoadUnits       int    `json:"load_units"`
}

// ChosenOption is an option as an order line records it: its name and price
// delta at placement, which later menu changes leave as they were.
type ChosenOption struct {
	ID              string `json:"id"`
	Name            string `json:"name"`
	PriceDeltaCents int64  `json:"price_delta_cents"`
}

// Option limits.
const (
	MaxOptionGroups        = 20
	MaxOptionsPerGroup     = 30
	MaxSelectLimit         = 10
	MaxOptionNameLength    = 100
	MaxOptionLoadUnits     = 100
	MaxOptionIDLength      = 64
	MaxOptionsPerLine      = MaxOptionGroups * MaxSelectLimit
	maxPriceDeltaMagnitude = MaxPriceCents
)

// AssignOptionIDs gives every group and option without an id one from
// newID, so that a merchant may send a new menu item without inventing ids.
func AssignOptionIDs(groups []OptionGroup, newID func() string) []OptionGroup {
	out := make([]OptionGroup, len(groups))
	for i, g := range groups {
		if g.ID == "" {
			g.ID = newID()
		}
		g.Options = slices.Clone(g.Options)
		for j := range g.Options {
			if g.Options[j].ID == "" {
				g.Options[j].ID = newID()
			}
		}
		out[i] = g
	}
	return out
}

// ValidateOptionGroups checks a product's option groups against its base
// price: every field in range, every id unique within the product, and no
// choice a customer may make bringing a unit's price below 0.
func ValidateOptionGroups(groups []OptionGroup, basePriceCents int64) error {
	if len(groups) > MaxOptionGroups {
		return Errorf(CodeValidation, "option_groups must have at most %d groups", MaxOptionGroups)
	}
	seen := map[string]string{}
	claim := func(id, field string) error {
		if id == "" || len(id) > MaxOptionIDLength || strings.TrimSpace(id) != id {
			return Errorf(CodeValidation, "%s must be 1-%d characters without surrounding spaces", field, MaxOptionIDLength)
		}
		if earlier, ok := seen[id]; ok {
			return Errorf(CodeValidation, "%s repeats the id of %s", field, earlier)
		}
		seen[id] = field
		return nil
	}
	cheapest := basePriceCents
	for i, g := range groups {
		at := fmt.Sprintf("option_groups[%d]", i)
		if err := claim(g.ID, at+".id"); err != nil {
			return err
		}
		if err := validateOptionName(g.Name, at+".name"); err != nil {
			return err
		}
		if g.MinSelect < 0 || g.MinSelect > MaxSelectLimit {
			return Errorf(CodeValidation, "%s.min_select must be between 0 and %d", at, MaxSelectLimit)
		}
		if g.MaxSelect < 1 || g.MaxSelect > MaxSelectLimit {
			return Errorf(CodeValidation, "%s.max_select must be between 1 and %d", at, MaxSelectLimit)
		}
		if g.MinSelect > g.MaxSelect {
			return Errorf(CodeValidation, "%s.min_select must not exceed max_select", at)
		}
		if len(g.Options) == 0 || len(g.Options) > MaxOptionsPerGroup {
			return Errorf(CodeValidation, "%s.options must have between 1 and %d options", at, MaxOptionsPerGroup)
		}
		if g.MinSelect > len(g.Options) {
			return Errorf(CodeValidation, "%s.min_select must not exceed the number of options", at)
		}
		deltas := make([]int64, 0, len(g.Options))
		for j, o := range g.Options {
			oat := fmt.Sprintf("%s.options[%d]", at, j)
			if err := claim(o.ID, oat+".id"); err != nil {
				return err
			}
			if err := validateOptionName(o.Name, oat+".name"); err != nil {
				return err
			}
			if o.PriceDeltaCents < -maxPriceDeltaMagnitude || o.PriceDeltaCents > maxPriceDeltaMagnitude {
				return Errorf(CodeValidation, "%s.price_delta_cents must be between %d and %d", oat, -maxPriceDeltaMagnitude, maxPriceDeltaMagnitude)
			}
			if o.LoadUnits < 0 || o.LoadUnits > MaxOptionLoadUnits {
				return Errorf(CodeValidation, "%s.load_units must be between 0 and %d", oat, MaxOptionLoadUnits)
			}
			deltas = append(deltas, o.PriceDeltaCents)
		}
		cheapest += cheapestChoice(deltas, g.MinSelect, g.MaxSelect)
		if cheapest < 0 {
			return Errorf(CodeValidation, "%s: its price deltas could bring a unit's price below 0 (price_cents plus the cheapest choices)", at)
		}
	}
	return nil
}

// cheapestChoice is the lowest sum of deltas a customer may choose from a
// group: the min most negative, and more while they lower it, up to max.
func cheapestChoice(deltas []int64, minSelect, maxSelect int) int64 {
	sorted := slices.Clone(deltas)
	slices.Sort(sorted)
	var sum int64
	for i, d := range sorted {
		if i >= maxSelect || (i >= minSelect && d >= 0) {
			break
		}
		sum += d
	}
	return sum
}

func validateOptionName(name, field string) error {
	if strings.TrimSpace(name) == "" || utf8.RuneCountInString(name) > MaxOptionNameLength {
		return Errorf(CodeValidation, "%s must be 1-%d characters", field, MaxOptionNameLength)
	}
	return nil
}

// validateLineOptions checks the shape of a line's choices before any
// product is read: a bounded list with no option twice.
func validateLineOptions(i int, options []string) error {
	if len(options) > MaxOptionsPerLine {
		return Errorf(CodeValidation, "items[%d].options must have at most %d options", i, MaxOptionsPerLine)
	}
	for j, id := range options {
		if slices.Contains(options[:j], id) {
			return Errorf(CodeValidation, "items[%d].options[%d] repeats option %q", i, j, id)
		}
	}
	return nil
}

// chooseOptions decides line i's choices against its product's groups:
// every option of the product, every group's count within its bounds. It
// returns the options in the product's order, with what they add to a
// unit's price.
func chooseOptions(i int, groups []OptionGroup, chosen []string) ([]ChosenOption, int64, error) {
	picked := make(map[string]bool, len(chosen))
	for _, id := range chosen {
		picked[id] = true
	}
	var out []ChosenOption
	var delta int64
	found := 0
	for _, g := range groups {
		n := 0
		for _, o := range g.Options {
			if !picked[o.ID] {
				continue
			}
			n++
			out = append(out, ChosenOption{ID: o.ID, Name: o.Name, PriceDeltaCents: o.PriceDeltaCents})
			delta += o.PriceDeltaCents
		}
		found += n
		if n < g.MinSelect {
			return nil, 0, Errorf(CodeValidation, "items[%d]: group %q (%s) needs at least %d choice(s)", i, g.Name, g.ID, g.MinSelect)
		}
		if n > g.MaxSelect {
			return nil, 0, Errorf(CodeValidation, "items[%d]: group %q (%s) allows at most %d choice(s)", i, g.Name, g.ID, g.MaxSelect)
		}
	}
	if found != len(chosen) {
		for j, id := range chosen {
			if !groupsHaveOption(groups, id) {
				return nil, 0, Errorf(CodeValidation, "items[%d].options[%d]: %q is not an option of this product", i, j, id)
			}
		}
	}
	return out, delta, nil
}

func groupsHaveOption(groups []OptionGroup, id string) bool {
	for _, g := range groups {
		for _, o := range g.Options {
			if o.ID == id {
				return true
			}
		}
	}
	return false
}

// RequestLoad is the load an order of lines will have at a merchant
// counting in unit, as Place fixes it, before Place validates the lines: a
// product missing from products weighs the default, and an option it does
// not offer nothing.
func RequestLoad(unit CapacityUnit, lines []LineRequest, products map[uuid.UUID]ProductRef) int {
	items := make([]Item, len(lines))
	units := make([]int, len(lines))
	for i, l := range lines {
		items[i] = Item{ProductID: l.ProductID, Quantity: l.Quantity}
		units[i] = MinLoadUnits
		if p, ok := products[l.ProductID]; ok {
			units[i] = unitLoad(p, l.Options)
		}
	}
	return OrderLoad(unit, items, units)
}

// unitLoad is what one unit of a line weighs: its product's load_units and
// its chosen options'.
func unitLoad(p ProductRef, chosen []string) int {
	units := max(p.LoadUnits, MinLoadUnits)
	for _, g := range p.OptionGroups {
		for _, o := range g.Options {
			if slices.Contains(chosen, o.ID) {
				units += o.LoadUnits
			}
		}
	}
	return units
}
