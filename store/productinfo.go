package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/orderd/orderd/domain"
)

// productInfo is what placement needs about a product.
type productInfo struct {
	domain.ProductRef
	limited      bool
	perUserLimit *int
	// dropID is the drop that governs the product, if one has not ended.
	dropID uuid.UUID
}

// takesStock reports whether placing the product takes a lock another
// transaction may hold: a stock bucket, a per-customer claim or a drop's
// entry.
func (p productInfo) takesStock() bool {
	return p.limited || p.perUserLimit != nil || p.dropID != uuid.Nil
}

func loadProducts(ctx context.Context, tx pgx.Tx, merchantID uuid.UUID, ids []uuid.UUID) (map[uuid.UUID]productInfo, error) {
	b := &pgx.Batch{}
	out := addProducts(b, [][16]byte{merchantID}, ids)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	return out, nil
}

// productsSelect reads products with the drop that governs each, if one
// has not ended (at most one: drops_active_product_idx). A join, not a
// correlated subquery, which kept Citus from pruning the read to the
// merchants' shards: it read every shard.
var productsSelect = productsFrom("products", "drops")

// productsFrom is productsSelect from the tables, or shards, named.
func productsFrom(products, drops string) string {
	return `SELECT p.id, p.merchant_id, p.name, p.price_cents, p.stock_total IS NOT NULL, p.per_user_limit, p.load_units, d.id,
		p.option_groups, NOT p.available, p.hidden
	FROM ` + products + ` p LEFT JOIN ` + drops + ` d ON d.merchant_id = p.merchant_id AND d.product_id = p.id AND d.state IN ('scheduled', 'open', 'selling')`
}

// addProducts adds the read of merchants' products to b; the map is
// filled when the batch's results are read. The merchants keep the read on
// their shards on Citus (by id alone it reads every shard); a product of
// another merchant is left to readMissingProducts.
func addProducts(b *pgx.Batch, merchants [][16]byte, ids []uuid.UUID) map[uuid.UUID]productInfo {
	out := make(map[uuid.UUID]productInfo, len(ids))
	b.Queue(productsSelect+` WHERE p.id = ANY($1::uuid[]) AND p.merchant_id = ANY($2)`, ids, merchants).
		Query(func(rows pgx.Rows) error { return scanProducts(rows, out) })
	return out
}

// readMissingProducts adds to products those of ids it lacks, whatever
// their merchant, so that a line naming another merchant's product is
// refused as such rather than as unknown. It costs a round trip only when
// a product is missing.
func readMissingProducts(ctx context.Context, tx pgx.Tx, ids []uuid.UUID, products map[uuid.UUID]productInfo) error {
	var missing []uuid.UUID
	for _, id := range ids {
		if _, ok := products[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, productsSelect+` WHERE p.id = ANY($1::uuid[])`, missing)
	if err != nil {
		return fmt.Errorf("load products: %w", err)
	}
	defer rows.Close()
	return scanProducts(rows, products)
}

func scanProducts(rows pgx.Rows, out map[uuid.UUID]productInfo) error {
	for rows.Next() {
		var p productInfo
		var dropID pgtype.UUID
		if err := rows.Scan(&p.ID, &p.MerchantID, &p.Name, &p.PriceCents, &p.limited, &p.perUserLimit, &p.LoadUnits, &dropID,
			&p.OptionGroups, &p.Unavailable, &p.Hidden); err != nil {
			return fmt.Errorf("scan product: %w", err)
		}
		if dropID.Valid {
			p.dropID = dropID.Bytes
		}
		out[p.ID] = p
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load products: %w", err)
	}
	return nil
}
