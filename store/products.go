package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orderd/orderd/domain"
)

// ProductView is the product read model in the API's shape. Stock fields are nil
// for an unlimited product.
type ProductView struct {
	ID             uuid.UUID `json:"id"`
	MerchantID     uuid.UUID `json:"merchant_id"`
	Name           string    `json:"name"`
	PriceCents     int64     `json:"price_cents"`
	StockTotal     *int      `json:"stock_total"`
	StockRemaining *int      `json:"stock_remaining"`
	PerUserLimit   *int      `json:"per_user_limit"`
	LoadUnits      int       `json:"load_units"`
	// OptionGroups are the choices a customer makes on each unit.
	OptionGroups []domain.OptionGroup `json:"option_groups"`
	// Available is false while the product is sold out for the day.
	Available bool      `json:"available"`
	CreatedAt time.Time `json:"created_at"`
	Version   int       `json:"-"`
	// Hidden is off the menu: the menu leaves it out, orders keep it.
	Hidden bool `json:"-"`
}

// CreateProductParams describes a new product.
type CreateProductParams struct {
	MerchantID   uuid.UUID
	Name         string
	PriceCents   int64
	Stock        *int
	PerUserLimit *int
	// LoadUnits is the capacity one unit takes when the merchant counts
	// items; 0 is the default.
	LoadUnits int
	// OptionGroups' groups and options without an id are given one.
	OptionGroups []domain.OptionGroup
	Meta         Meta
}

// CreateProduct records a product of a merchant.
func (s *Store) CreateProduct(ctx context.Context, p CreateProductParams) (*ProductView, error) {
	id := newID()
	now := s.now()
	events, err := domain.CreateProduct(domain.ProductCreated{
		ProductID: id, MerchantID: p.MerchantID, Name: p.Name, PriceCents: p.PriceCents,
		Stock: p.Stock, PerUserLimit: p.PerUserLimit, LoadUnits: p.LoadUnits, CreatedAt: now,
		OptionGroups: optionGroupsWithIDs(p.OptionGroups),
	})
	if err != nil {
		return nil, err
	}
	c, err := newProductChange(domain.Product{}, events, p.Meta)
	if err != nil {
		return nil, err
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM merchants WHERE id = $1)`, p.MerchantID).Scan(&exists); err != nil {
			return fmt.Errorf("check merchant: %w", err)
		}
		if !exists {
			return domain.Errorf(domain.CodeNotFound, "merchant not found")
		}
		if err := writeProduct(ctx, tx, c, now); err != nil {
			return err
		}
		if p.Stock != nil {
			return addStock(ctx, tx, id, p.MerchantID, *p.Stock, true)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.GetProduct(ctx, id)
}

// Restock adds units to a limited product.
func (s *Store) Restock(ctx context.Context, productID uuid.UUID, quantity int, meta Meta) (*ProductView, error) {
	if err := domain.ValidateRestock(quantity); err != nil {
		return nil, err
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		merchantID, err := productMerchant(ctx, tx, productID)
		if err != nil {
			return err
		}
		p, err := lockProduct(ctx, tx, merchantID, productID)
		if err != nil {
			return err
		}
		now := s.now()
		events, err := p.Restock(quantity, now)
		if err != nil {
			return err
		}
		c, err := newProductChange(p, events, meta)
		if err != nil {
			return err
		}
		if err := writeProduct(ctx, tx, c, now); err != nil {
			return err
		}
		return addStock(ctx, tx, productID, merchantID, quantity, false)
	})
	if err != nil {
		return nil, err
	}
	return s.GetProduct(ctx, productID)
}

// optionGroupsWithIDs gives the groups and options a request left without
// an id one of their own; nil stays nil (no groups).
func optionGroupsWithIDs(groups []domain.OptionGroup) []domain.OptionGroup {
	if groups == nil {
		return nil
	}
	return domain.AssignOptionIDs(groups, func() string { return newID().String() })
}

const productColumns = `p.id, p.merchant_id, p.name, p.price_cents, p.stock_total, p.per_user_limit, p.created_at, p.version,
	(SELECT sum(remaining)::int FROM stock_buckets b WHERE b.merchant_id = p.merchant_id AND b.product_id = p.id), p.load_units,
	p.option_groups, p.available, p.hidden`

func scanProduct(row pgx.Row) (*ProductView, error) {
	var p ProductView
	err := row.Scan(&p.ID, &p.MerchantID, &p.Name, &p.PriceCents, &p.StockTotal, &p.PerUserLimit, &p.CreatedAt, &p.Version, &p.StockRemaining, &p.LoadUnits,
		&p.OptionGroups, &p.Available, &p.Hidden)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, domain.Errorf(domain.CodeNotFound, "product not found")
	}
	if err != nil {
		return nil, fmt.Errorf("scan product: %w", err)
	}
	if p.StockTotal == nil {
		p.StockRemaining = nil
	}
	return &p, nil
}

// GetProduct returns a product with its exact remaining stock.
func (s *Store) GetProduct(ctx context.Context, id uuid.UUID) (*ProductView, error) {
	p, err := scanProduct(s.pool.QueryRow(ctx, `SELECT `+productColumns+` FROM products p WHERE p.id = $1`, id))
	return p, mapErr(err)
}

// ListProducts returns a merchant's menu: its products but those taken off
// it, sold-out ones included.
func (s *Store) ListProducts(ctx context.Context, merchantID uuid.UUID) ([]ProductView, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+productColumns+` FROM products p WHERE p.merchant_id = $1 AND NOT p.hidden ORDER BY p.created_at, p.id`, merchantID)
	if err != nil {
		return nil, mapErr(fmt.Errorf("list products: %w", err))
	}
	defer rows.Close()
	out := []ProductView{}
	for rows.Next() {
		p, err := scanProduct(rows)
		if err != nil {
			return nil, mapErr(err)
		}
		out = append(out, *p)
	}
	return out, mapErr(rows.Err())
}

// UpdateProductParams is a menu change of one of a merchant's products.
type UpdateProductParams struct {
	MerchantID, ProductID uuid.UUID
	Patch                 domain.ProductPatch
	Meta                  Meta
}

// UpdateProduct changes a product's name, price, option groups or
// availability. Orders placed before keep their lines: they recorded the
// product's price and options' names at placement.
func (s *Store) UpdateProduct(ctx context.Context, p UpdateProductParams) (*ProductView, error) {
	if p.Patch.OptionGroups != nil {
		groups := optionGroupsWithIDs(*p.Patch.OptionGroups)
		p.Patch.OptionGroups = &groups
	}
	return s.changeProduct(ctx, p.MerchantID, p.ProductID, p.Meta, func(prod domain.Product, now time.Time) ([]domain.Event, error) {
		return prod.Update(p.Patch, now)
	})
}

// HideProduct takes a product off its merchant's menu; hiding it again
// changes nothing.
func (s *Store) HideProduct(ctx context.Context, merchantID, productID uuid.UUID, meta Meta) error {
	_, err := s.changeProduct(ctx, merchantID, productID, meta, func(prod domain.Product, now time.Time) ([]domain.Event, error) {
		return prod.Hide(now), nil
	})
	return err
}

// changeProduct decides a change of a merchant's product under its lock
// and writes it; a product of another merchant is not found.
func (s *Store) changeProduct(ctx context.Context, merchantID, productID uuid.UUID, meta Meta,
	decide func(domain.Product, time.Time) ([]domain.Event, error),
) (*ProductView, error) {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		prod, err := lockProduct(ctx, tx, merchantID, productID)
		if err != nil {
			return err
		}
		now := s.now()
		events, err := decide(prod, now)
		if err != nil {
			return err
		}
		c, err := newProductChange(prod, events, meta)
		if err != nil {
			return err
		}
		return writeProduct(ctx, tx, c, now)
	})
	if err != nil {
		return nil, err
	}
	return s.GetProduct(ctx, productID)
}
