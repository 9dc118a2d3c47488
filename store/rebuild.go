package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orderd/orderd/domain"
)

// RebuildReport says what replaying the log found.
type RebuildReport struct {
	Streams int `json:"streams"`
	Events  int `json:"events"`
	// DifferenceCount is exact; Differences shows the first ones.
	DifferenceCount int          `json:"difference_count"`
	Differences     []Difference `json:"differences"`
	Applied         bool         `json:"applied"`
}

// Difference is one projection row that the events disagree with.
type Difference struct {
	Table  string `json:"table"`
	ID     string `json:"id"`
	Live   string `json:"live"`
	Replay string `json:"replay"`
}

// maxReportedDifferences bounds the report; the count of differences is exact.
const maxReportedDifferences = 100

// Rebuild replays every stream into fresh projection tables (temporary,
// inside one repeatable-read transaction, so the replay and the live tables
// are read from the same snapshot) and compares them with the live ones.
// With apply, it writes the replayed values over the live tables in that
// same transaction, holding locks that stop every writer meanwhile. Webhook
// secrets never enter the log and are kept; completion statistics are kept.
func (s *Store) Rebuild(ctx context.Context, apply bool) (*RebuildReport, error) {
	report := &RebuildReport{Differences: []Difference{}}
	iso := pgx.TxOptions{IsoLevel: pgx.RepeatableRead}
	if apply {
		iso.IsoLevel = pgx.Serializable
	}
	tx, err := s.pool.BeginTx(ctx, iso)
	if err != nil {
		return nil, mapErr(fmt.Errorf("begin: %w", err))
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after commit
	if apply {
		if _, err := tx.Exec(ctx, `LOCK TABLE merchants, products, orders, stock_buckets, events IN EXCLUSIVE MODE`); err != nil {
			return nil, mapErr(fmt.Errorf("lock projections: %w", err))
		}
	}
	if err := replay(ctx, tx, report); err != nil {
		return nil, mapErr(err)
	}
	if err := compare(ctx, tx, report); err != nil {
		return nil, mapErr(err)
	}
	if apply {
		if err := swapIn(ctx, tx); err != nil {
			return nil, mapErr(err)
		}
		if err := tx.Commit(ctx); err != nil {
			return nil, mapErr(fmt.Errorf("commit rebuild: %w", err))
		}
		report.Applied = true
	}
	return report, nil
}

type replayedMerchant struct {
	id        uuid.UUID
	settings  domain.MerchantSettings
	createdAt time.Time
	version   int
}

type replayedProduct struct {
	created domain.ProductCreated
	total   *int
	version int
}

func replay(ctx context.Context, tx pgx.Tx, report *RebuildReport) error {
	if _, err := tx.Exec(ctx, `
		CREATE TEMP TABLE rebuild_orders (LIKE orders) ON COMMIT DROP;
		CREATE TEMP TABLE rebuild_merchants (id uuid PRIMARY KEY, name text, capacity int, prep_seconds int,
			max_queue_wait_seconds int, payment_timeout_seconds int, webhook_url text, created_at timestamptz, version int) ON COMMIT DROP;
		CREATE TEMP TABLE rebuild_products (LIKE products) ON COMMIT DROP;`); err != nil {
		return fmt.Errorf("create rebuild tables: %w", err)
	}
	rows, err := tx.Query(ctx, `SELECT stream_id, stream_type, version, type, data FROM events ORDER BY global_position`)
	if err != nil {
		return fmt.Errorf("read events: %w", err)
	}
	orders := map[uuid.UUID]*domain.Order{}
	merchants := map[uuid.UUID]*replayedMerchant{}
	products := map[uuid.UUID]*replayedProduct{}
	for rows.Next() {
		var id uuid.UUID
		var streamType, typ string
		var version int
		var data []byte
		if err := rows.Scan(&id, &streamType, &version, &typ, &data); err != nil {
			rows.Close()
			return fmt.Errorf("scan event: %w", err)
		}
		report.Events++
		e, err := domain.DecodeEvent(typ, data)
		if err != nil {
			rows.Close()
			return err
		}
		switch streamType {
		case StreamOrder:
			o := orders[id]
			if o == nil {
				o = &domain.Order{}
				orders[id] = o
			}
			if *o, err = o.Evolve(e); err != nil {
				rows.Close()
				return err
			}
		case StreamMerchant:
			m := merchants[id]
			switch d := e.Data.(type) {
			case domain.MerchantCreated:
				m = &replayedMerchant{id: id, settings: d.MerchantSettings, createdAt: d.CreatedAt}
				merchants[id] = m
			case domain.MerchantUpdated:
				if m != nil {
					m.settings = d.After
				}
			}
			if m != nil {
				m.version = version
			}
		case StreamProduct:
			p := products[id]
			switch d := e.Data.(type) {
			case domain.ProductCreated:
				p = &replayedProduct{created: d, total: d.Stock}
				products[id] = p
			case domain.ProductRestocked:
				if p != nil && p.total != nil {
					t := *p.total + d.Quantity
					p.total = &t
				}
			}
			if p != nil {
				p.version = version
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read events: %w", err)
	}
	report.Streams = len(orders) + len(merchants) + len(products)

	orderRows := make([][]any, 0, len(orders))
	for _, o := range orders {
		items, err := json.Marshal(o.Items)
		if err != nil {
			return err
		}
		orderRows = append(orderRows, []any{uuid.MustParse(o.ID), uuid.MustParse(o.MerchantID), o.CustomerID, items, o.TotalCents,
			string(o.Status), int32(o.Version), o.PlacedAt, o.PaymentDeadline, nullable(o.PaymentRef), o.PaidAt, o.AcceptedAt,
			o.CompletedAt, o.EndedAt, nullable(o.StatusReason), seqOrNil(o.QueueSeq), o.QueuedAt, o.QueueExpiresAt})
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"rebuild_orders"}, []string{"id", "merchant_id", "customer_id", "items",
		"total_cents", "status", "version", "placed_at", "payment_deadline", "payment_ref", "paid_at", "accepted_at",
		"completed_at", "ended_at", "status_reason", "queue_seq", "queued_at", "queue_expires_at"}, pgx.CopyFromRows(orderRows)); err != nil {
		return fmt.Errorf("write rebuilt orders: %w", err)
	}
	merchantRows := make([][]any, 0, len(merchants))
	for _, m := range merchants {
		merchantRows = append(merchantRows, []any{m.id, m.settings.Name, int32(m.settings.Capacity), int32(m.settings.PrepSeconds),
			int32(m.settings.MaxQueueWaitSeconds), int32(m.settings.PaymentTimeoutSeconds), nullable(m.settings.WebhookURL), m.createdAt, int32(m.version)})
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"rebuild_merchants"}, []string{"id", "name", "capacity", "prep_seconds",
		"max_queue_wait_seconds", "payment_timeout_seconds", "webhook_url", "created_at", "version"}, pgx.CopyFromRows(merchantRows)); err != nil {
		return fmt.Errorf("write rebuilt merchants: %w", err)
	}
	productRows := make([][]any, 0, len(products))
	for id, p := range products {
		var total, limit any
		if p.total != nil {
			total = int32(*p.total)
		}
		if p.created.PerUserLimit != nil {
			limit = int32(*p.created.PerUserLimit)
		}
		productRows = append(productRows, []any{id, uuid.MustParse(p.created.MerchantID), p.created.Name, p.created.PriceCents,
			total, limit, p.created.CreatedAt, int32(p.version)})
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"rebuild_products"}, []string{"id", "merchant_id", "name", "price_cents",
		"stock_total", "per_user_limit", "created_at", "version"}, pgx.CopyFromRows(productRows)); err != nil {
		return fmt.Errorf("write rebuilt products: %w", err)
	}
	return nil
}

// comparisons are the rebuilt views of each projection next to the live
// ones, as text rows keyed by id. Merchant load counters and stock are
// derived from the rebuilt orders.
var comparisons = []struct{ table, live, replay string }{
	{"orders",
		`SELECT id::text, concat_ws('|', merchant_id, customer_id, items::text, total_cents, status, version, placed_at, payment_deadline,
			payment_ref, paid_at, accepted_at, completed_at, ended_at, status_reason, queue_seq, queued_at, queue_expires_at) FROM orders`,
		`SELECT id::text, concat_ws('|', merchant_id, customer_id, items::text, total_cents, status, version, placed_at, payment_deadline,
			payment_ref, paid_at, accepted_at, completed_at, ended_at, status_reason, queue_seq, queued_at, queue_expires_at) FROM rebuild_orders`},
	{"merchants",
		`SELECT id::text, concat_ws('|', name, capacity, prep_seconds, max_queue_wait_seconds, payment_timeout_seconds, webhook_url,
			created_at, version, active, queued, next_seq) FROM merchants`,
		`SELECT m.id::text, concat_ws('|', m.name, m.capacity, m.prep_seconds, m.max_queue_wait_seconds, m.payment_timeout_seconds,
			m.webhook_url, m.created_at, m.version,
			(SELECT count(*) FROM rebuild_orders o WHERE o.merchant_id = m.id AND o.status = 'accepted'),
			(SELECT count(*) FROM rebuild_orders o WHERE o.merchant_id = m.id AND o.status = 'queued'),
			(SELECT coalesce(max(queue_seq), 0) + 1 FROM rebuild_orders o WHERE o.merchant_id = m.id)) FROM rebuild_merchants m`},
	{"products",
		`SELECT id::text, concat_ws('|', merchant_id, name, price_cents, stock_total, per_user_limit, created_at, version,
			(SELECT sum(remaining) FROM stock_buckets b WHERE b.product_id = p.id)) FROM products p`,
		`SELECT p.id::text, concat_ws('|', p.merchant_id, p.name, p.price_cents, p.stock_total, p.per_user_limit, p.created_at, p.version,
			p.stock_total - (SELECT coalesce(sum((i->>'quantity')::int), 0) FROM rebuild_orders o, jsonb_array_elements(o.items) i
				WHERE o.merchant_id = p.merchant_id AND i->>'product_id' = p.id::text
				AND o.status NOT IN ('closed', 'cancelled', 'expired'))) FROM rebuild_products p`},
}

func compare(ctx context.Context, tx pgx.Tx, report *RebuildReport) error {
	for _, c := range comparisons {
		// next_seq only ever grows, so a live value above the replayed one
		// (orders that left the queue) is not drift.
		rows, err := tx.Query(ctx, `
			WITH live AS (`+c.live+`), replayed AS (`+c.replay+`)
			SELECT coalesce(l.id, r.id), coalesce(l.concat_ws, ''), coalesce(r.concat_ws, '')
			FROM live l FULL JOIN replayed r ON l.id = r.id
			WHERE l.concat_ws IS DISTINCT FROM r.concat_ws`)
		if err != nil {
			return fmt.Errorf("compare %s: %w", c.table, err)
		}
		for rows.Next() {
			var d Difference
			if err := rows.Scan(&d.ID, &d.Live, &d.Replay); err != nil {
				rows.Close()
				return fmt.Errorf("compare %s: %w", c.table, err)
			}
			d.Table = c.table
			if c.table == "merchants" && onlyNextSeqAhead(d) {
				continue
			}
			report.DifferenceCount++
			if len(report.Differences) < maxReportedDifferences {
				report.Differences = append(report.Differences, d)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("compare %s: %w", c.table, err)
		}
	}
	return nil
}

// onlyNextSeqAhead reports a merchant row that differs only by a live
// next_seq beyond the replayed one: sequence numbers of orders that left the
// queue are not reused, and the replay cannot see them.
func onlyNextSeqAhead(d Difference) bool {
	li, ri := lastField(d.Live), lastField(d.Replay)
	if li < 0 || ri < 0 || d.Live[:li] != d.Replay[:ri] {
		return false
	}
	var l, r int64
	if _, err := fmt.Sscan(d.Live[li+1:], &l); err != nil {
		return false
	}
	if _, err := fmt.Sscan(d.Replay[ri+1:], &r); err != nil {
		return false
	}
	return l >= r
}

func lastField(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '|' {
			return i
		}
	}
	return -1
}

// swapIn writes the replayed values over the live projections.
func swapIn(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `
		UPDATE orders o SET status = r.status, version = r.version, payment_ref = r.payment_ref, paid_at = r.paid_at,
			accepted_at = r.accepted_at, completed_at = r.completed_at, ended_at = r.ended_at, status_reason = r.status_reason,
			queue_seq = r.queue_seq, queued_at = r.queued_at, queue_expires_at = r.queue_expires_at, items = r.items,
			total_cents = r.total_cents, payment_deadline = r.payment_deadline, placed_at = r.placed_at
		FROM rebuild_orders r WHERE o.id = r.id;
		INSERT INTO orders SELECT * FROM rebuild_orders r WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.id = r.id);
		UPDATE merchants m SET name = r.name, capacity = r.capacity, prep_seconds = r.prep_seconds,
			max_queue_wait_seconds = r.max_queue_wait_seconds, payment_timeout_seconds = r.payment_timeout_seconds,
			webhook_url = r.webhook_url, version = r.version,
			active = (SELECT count(*) FROM orders o WHERE o.merchant_id = m.id AND o.status = 'accepted'),
			queued = (SELECT count(*) FROM orders o WHERE o.merchant_id = m.id AND o.status = 'queued'),
			next_seq = greatest(m.next_seq, (SELECT coalesce(max(queue_seq), 0) + 1 FROM orders o WHERE o.merchant_id = m.id))
		FROM rebuild_merchants r WHERE m.id = r.id;
		UPDATE products p SET name = r.name, price_cents = r.price_cents, stock_total = r.stock_total,
			per_user_limit = r.per_user_limit, version = r.version
		FROM rebuild_products r WHERE p.id = r.id;
		WITH held AS (
			SELECT (i->>'product_id')::uuid AS product_id, sum((i->>'quantity')::int) AS q
			FROM orders o, jsonb_array_elements(o.items) i
			WHERE o.status NOT IN ('closed', 'cancelled', 'expired') GROUP BY 1
		), want AS (
			SELECT p.id, p.stock_total - coalesce(h.q, 0) AS remaining FROM products p LEFT JOIN held h ON h.product_id = p.id
			WHERE p.stock_total IS NOT NULL
		), have AS (
			SELECT product_id, sum(remaining) AS remaining, min(bucket) AS first FROM stock_buckets GROUP BY product_id
		)
		UPDATE stock_buckets b SET remaining = b.remaining + (w.remaining - h.remaining)
		FROM want w JOIN have h ON h.product_id = w.id
		WHERE b.product_id = w.id AND b.bucket = h.first AND w.remaining <> h.remaining
			AND b.remaining + (w.remaining - h.remaining) >= 0;`)
	if err != nil {
		return fmt.Errorf("swap in rebuilt projections: %w", err)
	}
	return nil
}
