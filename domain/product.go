package domain

import (
	"slices"
	"time"
)

// CreateProduct decides a new product: the one event that records it. No
// load_units is the default.
func CreateProduct(c ProductCreated) ([]Event, error) {
	if err := ValidateProduct(c.Name, c.PriceCents, c.Stock, c.PerUserLimit); err != nil {
		return nil, err
	}
	if c.LoadUnits != 0 {
		if err := ValidateLoadUnits(c.LoadUnits); err != nil {
			return nil, err
		}
	}
	if err := ValidateOptionGroups(c.OptionGroups, c.PriceCents); err != nil {
		return nil, err
	}
	return []Event{{Type: EventProductCreated, Data: c}}, nil
}

// Restock decides adding quantity units to p at time at. Only limited
// products take units, and never past MaxStock in all.
func (p Product) Restock(quantity int, at time.Time) ([]Event, error) {
	if err := ValidateRestock(quantity); err != nil {
		return nil, err
	}
	if p.StockTotal == nil {
		return nil, Errorf(CodeValidation, "the product has unlimited stock; restock applies to limited products only")
	}
	if *p.StockTotal+quantity > MaxStock {
		return nil, Errorf(CodeValidation, "stock_total would exceed %d", MaxStock)
	}
	return []Event{{Type: EventProductRestocked, Data: ProductRestocked{Quantity: quantity, RestockedAt: at}}}, nil
}

// ProductPatch is a menu change: the fields to set, nil for those kept.
type ProductPatch struct {
	Name         *string
	PriceCents   *int64
	OptionGroups *[]OptionGroup
	Available    *bool
}

// Update decides a menu change at time at: the product as it would be
// after it is validated whole (a new price is checked against the option
// groups it keeps, and the other way round). A hidden product is not on the
// menu to change; a change that sets every field as it is records nothing.
func (p Product) Update(c ProductPatch, at time.Time) ([]Event, error) {
	if p.Hidden {
		return nil, Errorf(CodeNotFound, "product not found (it was removed from the menu)")
	}
	e := ProductUpdated{UpdatedAt: at}
	changed := false
	if c.Name != nil && *c.Name != p.Name {
		e.Name, changed = c.Name, true
	}
	if c.PriceCents != nil && *c.PriceCents != p.PriceCents {
		e.PriceCents, changed = c.PriceCents, true
	}
	if c.OptionGroups != nil && !slices.EqualFunc(*c.OptionGroups, p.OptionGroups, equalGroups) {
		groups := *c.OptionGroups
		e.OptionGroups, changed = &groups, true
	}
	if c.Available != nil && *c.Available == p.Unavailable {
		e.Available, changed = c.Available, true
	}
	if !changed {
		return nil, nil
	}
	after, err := p.Evolve(Event{Type: EventProductUpdated, Data: e})
	if err != nil {
		return nil, err
	}
	if err := ValidateProduct(after.Name, after.PriceCents, nil, nil); err != nil {
		return nil, err
	}
	if err := ValidateOptionGroups(after.OptionGroups, after.PriceCents); err != nil {
		return nil, err
	}
	return []Event{{Type: EventProductUpdated, Data: e}}, nil
}

func equalGroups(a, b OptionGroup) bool {
	return a.ID == b.ID && a.Name == b.Name && a.MinSelect == b.MinSelect && a.MaxSelect == b.MaxSelect && slices.Equal(a.Options, b.Options)
}

// Hide takes p off the menu at time at; hiding it again records nothing.
func (p Product) Hide(at time.Time) []Event {
	if p.Hidden {
		return nil
	}
	return []Event{{Type: EventProductHidden, Data: ProductHidden{HiddenAt: at}}}
}

// Apply folds events into p in order.
func (p Product) Apply(events ...Event) (Product, error) {
	var err error
	for _, e := range events {
		if p, err = p.Evolve(e); err != nil {
			return p, err
		}
	}
	return p, nil
}
