package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/orderd/orderd/domain"
)

// productChange is one product's new events and the state they fold to.
type productChange struct {
	before domain.Product // the zero Product for a new one
	after  domain.Product
	events []domain.Event
	meta   Meta
}

// newProductChange folds events into p.
func newProductChange(p domain.Product, events []domain.Event, meta Meta) (productChange, error) {
	after, err := p.Apply(events...)
	if err != nil {
		return productChange{}, err
	}
	return productChange{before: p, after: after, events: events, meta: meta}, nil
}

// writeProduct is the one write of a product: its events, appended after
// the stream's version, and its folded state, inserted or updated. Stock
// buckets are not the fold's: they count units left, which orders move.
func writeProduct(ctx context.Context, tx pgx.Tx, c productChange, now time.Time) error {
	if len(c.events) == 0 {
		return nil
	}
	var rows productColumnsOf
	if err := rows.add(c.after); err != nil {
		return err
	}
	return writeStream(ctx, tx, AppendParams{
		StreamID: c.after.ProductID, StreamType: StreamProduct, MerchantID: c.after.MerchantID, ExpectedVersion: c.before.Version, Events: c.events, Meta: c.meta, RecordedAt: now,
	}, &rows, "products", c.before.Version == 0)
}

// productColumnsOf holds folded products column by column, as unnest takes
// them.
type productColumnsOf struct {
	id, merchant [][16]byte
	name         []string
	price        []int64
	total, limit []pgtype.Int4
	createdAt    []time.Time
	version      []int32
	loadUnits    []int32
	optionGroups []string
	available    []bool
	hidden       []bool
}

func (c *productColumnsOf) add(p domain.Product) error {
	c.id, c.merchant, c.name, c.price = append(c.id, p.ProductID), append(c.merchant, p.MerchantID), append(c.name, p.Name), append(c.price, p.PriceCents)
	c.total, c.limit = append(c.total, int4(p.StockTotal)), append(c.limit, int4(p.PerUserLimit))
	c.createdAt, c.version = append(c.createdAt, p.CreatedAt), append(c.version, int32(p.Version))
	c.loadUnits = append(c.loadUnits, int32(max(p.LoadUnits, domain.DefaultLoadUnits)))
	groups := p.OptionGroups
	if groups == nil {
		groups = []domain.OptionGroup{}
	}
	encoded, err := json.Marshal(groups)
	if err != nil {
		return fmt.Errorf("encode option groups: %w", err)
	}
	c.optionGroups, c.available, c.hidden = append(c.optionGroups, string(encoded)), append(c.available, !p.Unavailable), append(c.hidden, p.Hidden)
	return nil
}

// addTo adds to b the statement that writes the rows into table (products,
// or a table like it): inserted when new, else every column the fold knows
// updated.
func (c *productColumnsOf) addTo(tx pgx.Tx, b *pgx.Batch, table string, insert bool) {
	if len(c.id) == 0 {
		return
	}
	t := pgx.Identifier{table}.Sanitize()
	columns := []column{col("uuid", c.id), col("uuid", c.merchant), col("text", c.name), col("bigint", c.price),
		col("int", c.total), col("int", c.limit), col("timestamptz", c.createdAt), col("int", c.version), col("int", c.loadUnits),
		col("jsonb", c.optionGroups), col("boolean", c.available), col("boolean", c.hidden)}
	if insert {
		insertRows{
			Into: `INSERT INTO ` + t + ` (id, merchant_id, name, price_cents, stock_total, per_user_limit, created_at, version, load_units,
				option_groups, available, hidden)`,
			Columns: columns,
		}.addTo(tx, b, nil)
		return
	}
	rows, args := unnestOf(0, columns)
	b.Queue(`UPDATE `+t+` p SET name = r.name, price_cents = r.price_cents, stock_total = r.stock_total,
			per_user_limit = r.per_user_limit, created_at = r.created_at, version = r.version, load_units = r.load_units,
			option_groups = r.option_groups, available = r.available, hidden = r.hidden
		FROM `+rows+` AS r(id, merchant_id, name, price_cents, stock_total, per_user_limit, created_at, version, load_units,
			option_groups, available, hidden)
		WHERE p.id = r.id AND p.merchant_id = r.merchant_id AND p.merchant_id = ANY($2::uuid[])`, args...)
}

func int4(v *int) pgtype.Int4 {
	if v == nil {
		return pgtype.Int4{}
	}
	return pgtype.Int4{Int32: int32(*v), Valid: true}
}

// productMerchant reads, without a lock, the merchant of a product, which
// its locks name (a product never changes merchant).
func productMerchant(ctx context.Context, tx pgx.Tx, id uuid.UUID) (uuid.UUID, error) {
	var merchant uuid.UUID
	err := tx.QueryRow(ctx, `SELECT merchant_id FROM products WHERE id = $1`, id).Scan(&merchant)
	if errors.Is(err, pgx.ErrNoRows) {
		return merchant, domain.Errorf(domain.CodeNotFound, "product not found")
	}
	if err != nil {
		return merchant, fmt.Errorf("find product: %w", err)
	}
	return merchant, nil
}

// lockProduct reads a product's folded state from its row, under a lock
// that serializes its changes. The creation's own stock figure is not kept
// in the row; StockTotal is.
func lockProduct(ctx context.Context, tx pgx.Tx, merchantID, id uuid.UUID) (domain.Product, error) {
	var p domain.Product
	var available bool
	err := tx.QueryRow(ctx, `SELECT id, merchant_id, name, price_cents, stock_total, per_user_limit, created_at, version, load_units,
			option_groups, available, hidden
		FROM products WHERE merchant_id = $1 AND id = $2 FOR NO KEY UPDATE`, merchantID, id).
		Scan(&p.ProductID, &p.MerchantID, &p.Name, &p.PriceCents, &p.StockTotal, &p.PerUserLimit, &p.CreatedAt, &p.Version, &p.LoadUnits,
			&p.OptionGroups, &available, &p.Hidden)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, domain.Errorf(domain.CodeNotFound, "product not found")
	}
	if err != nil {
		return p, fmt.Errorf("lock product: %w", err)
	}
	p.Unavailable = !available
	if len(p.OptionGroups) == 0 {
		// The fold of a product created without groups has none (nil).
		p.OptionGroups = nil
	}
	return p, nil
}
