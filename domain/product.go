package domain

import "time"

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
