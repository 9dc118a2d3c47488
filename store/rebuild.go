package store

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orderd/orderd/domain"
)

// RebuildReport says what replaying the log found.
type RebuildReport struct {
	Streams int `json:"streams"`
	Events  int `json:"events"`
	// MostOrdersHeld is the most folded orders the rebuild held in memory
	// at once: orders are replayed and written a chunk at a time.
	MostOrdersHeld int `json:"most_orders_held"`
	// DifferenceCount is exact; Differences shows the first ones.
	DifferenceCount int          `json:"difference_count"`
	Differences     []Difference `json:"differences"`
	Applied         bool         `json:"applied"`
}

// Difference is one projection row that the events disagree with.
type Difference struct {
	Table string    `json:"table"`
	ID    uuid.UUID `json:"id"`
	// Column is empty when the row exists on one side only; Live and
	// Replay then hold the whole row, or nothing.
	Column string `json:"column"`
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
		if _, err := tx.Exec(ctx, `LOCK TABLE merchants, products, orders, stock_buckets, drops, drop_entries, events IN EXCLUSIVE MODE`); err != nil {
			return nil, mapErr(fmt.Errorf("lock projections: %w", err))
		}
	}
	// After the lock, which must come before the snapshot: whole-table
	// comparisons gain nothing from JIT and spill with the default work_mem.
	if _, err := tx.Exec(ctx, `SET LOCAL jit = off; SET LOCAL work_mem = '256MB'`); err != nil {
		return nil, mapErr(fmt.Errorf("configure rebuild: %w", err))
	}
	chunk := orDefaultChunk(s.cfg.RebuildChunk)
	replayed, err := replay(ctx, tx, report, chunk)
	if err != nil {
		return nil, mapErr(err)
	}
	if err := compare(ctx, tx, report); err != nil {
		return nil, mapErr(err)
	}
	if apply {
		if err := writeBack(ctx, tx, replayed, report, chunk); err != nil {
			return nil, mapErr(err)
		}
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

// replayedState is what the replay folded and kept, for writing back:
// every stream but the orders', which it folds and writes a chunk at a
// time (foldOrders).
type replayedState struct {
	merchants map[uuid.UUID]domain.Merchant
	products  map[uuid.UUID]domain.Product
	drops     map[uuid.UUID]domain.Drop
	entries   map[uuid.UUID]domain.Entry
	ranks     map[uuid.UUID]int
}

// replay folds every stream with the domain's folds and writes the states
// it folds to into tables like the live ones through the write path's own
// statements (orderColumnsOf, merchantColumnsOf, productColumnsOf,
// dropColumnsOf, entryColumnsOf), so that what rebuild compares and writes
// back is what a command would have written.
func replay(ctx context.Context, tx pgx.Tx, report *RebuildReport, chunk int) (*replayedState, error) {
	if _, err := tx.Exec(ctx, `
		CREATE TEMP TABLE rebuild_orders (LIKE orders) ON COMMIT DROP;
		CREATE TEMP TABLE rebuild_merchants ON COMMIT DROP AS
			SELECT `+merchantFoldColumns+`, webhook_secret, decided_at, updated_at FROM merchants WITH NO DATA;
		CREATE TEMP TABLE rebuild_products (LIKE products) ON COMMIT DROP;
		CREATE TEMP TABLE rebuild_drops (LIKE drops) ON COMMIT DROP;
		CREATE TEMP TABLE rebuild_drop_entries (LIKE drop_entries) ON COMMIT DROP;`); err != nil {
		return nil, fmt.Errorf("create rebuild tables: %w", err)
	}
	rows, err := tx.Query(ctx, `SELECT stream_id, stream_type, version, type, data FROM events WHERE stream_type <> $1 ORDER BY global_position`, StreamOrder)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	merchants := map[uuid.UUID]domain.Merchant{}
	products := map[uuid.UUID]domain.Product{}
	drops := map[uuid.UUID]domain.Drop{}
	entries := map[uuid.UUID]domain.Entry{}
	for rows.Next() {
		var id uuid.UUID
		var streamType, typ string
		var version int
		var data []byte
		if err := rows.Scan(&id, &streamType, &version, &typ, &data); err != nil {
			rows.Close()
			return nil, fmt.Errorf("scan event: %w", err)
		}
		report.Events++
		e, err := domain.DecodeEvent(typ, data)
		if err != nil {
			rows.Close()
			return nil, err
		}
		switch streamType {
		case StreamMerchant:
			if merchants[id], err = merchants[id].Evolve(e); err != nil {
				rows.Close()
				return nil, err
			}
		case StreamProduct:
			if products[id], err = products[id].Evolve(e); err != nil {
				rows.Close()
				return nil, err
			}
		case StreamDrop:
			if drops[id], err = drops[id].Evolve(e); err != nil {
				rows.Close()
				return nil, err
			}
		case StreamDropEntry:
			if entries[id], err = entries[id].Evolve(e); err != nil {
				rows.Close()
				return nil, err
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	orders, err := foldOrders(ctx, tx, report, chunk, `stream_type = $1`, []any{StreamOrder}, func(chunk []domain.Order) error {
		return writeOrderStates(ctx, tx, "rebuild_orders", true, chunk)
	})
	if err != nil {
		return nil, err
	}
	report.Streams = orders + len(merchants) + len(products) + len(drops) + len(entries)
	r := &replayedState{merchants: merchants, products: products, drops: drops, entries: entries, ranks: rankEntries(drops, entries)}
	if err := writeMerchantStates(ctx, tx, "rebuild_merchants", true, valuesOf(merchants)); err != nil {
		return nil, err
	}
	if err := writeProductStates(ctx, tx, "rebuild_products", true, valuesOf(products)); err != nil {
		return nil, err
	}
	if err := writeDropStates(ctx, tx, "rebuild_drops", true, valuesOf(drops)); err != nil {
		return nil, err
	}
	if err := writeEntryStates(ctx, tx, "rebuild_drop_entries", true, valuesOf(entries), drops, r.ranks); err != nil {
		return nil, err
	}
	return r, nil
}

// defaultRebuildChunk is how many orders a rebuild folds and writes at a
// time when the store does not say.
const defaultRebuildChunk = 5000

func orDefaultChunk(n int) int {
	if n <= 0 {
		return defaultRebuildChunk
	}
	return n
}

// foldOrders folds the order streams whose events match where (a condition
// on events, with args), each stream whole, and hands them to write chunk
// orders at a time, so that a rebuild holds one chunk of folded orders, not
// every order in the log. The events come through a cursor, in stream and
// version order (a stream's versions follow its commits), so that a stream
// is complete when the next one begins. It returns how many streams it
// folded.
func foldOrders(ctx context.Context, tx pgx.Tx, report *RebuildReport, chunk int, where string, args []any, write func([]domain.Order) error) (int, error) {
	if _, err := tx.Exec(ctx, `DECLARE rebuild_order_events NO SCROLL CURSOR FOR
		SELECT stream_id, type, data FROM events WHERE `+where+` ORDER BY stream_id, version`, args...); err != nil {
		return 0, fmt.Errorf("read order events: %w", err)
	}
	folded := make([]domain.Order, 0, chunk)
	var current uuid.UUID
	var o domain.Order
	streams := 0
	flush := func() error {
		report.MostOrdersHeld = max(report.MostOrdersHeld, len(folded))
		if err := write(folded); err != nil {
			return err
		}
		folded = folded[:0]
		return nil
	}
	for {
		rows, err := tx.Query(ctx, `FETCH `+strconv.Itoa(chunk)+` FROM rebuild_order_events`)
		if err != nil {
			return 0, fmt.Errorf("read order events: %w", err)
		}
		n := 0
		for rows.Next() {
			n++
			var id uuid.UUID
			var typ string
			var data []byte
			if err := rows.Scan(&id, &typ, &data); err != nil {
				rows.Close()
				return 0, fmt.Errorf("scan event: %w", err)
			}
			report.Events++
			e, err := domain.DecodeEvent(typ, data)
			if err != nil {
				rows.Close()
				return 0, err
			}
			if id != current {
				if streams > 0 {
					folded = append(folded, o)
				}
				current, o = id, domain.Order{}
				streams++
			}
			if o, err = o.Evolve(e); err != nil {
				rows.Close()
				return 0, err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, fmt.Errorf("read order events: %w", err)
		}
		if n == 0 {
			break
		}
		if len(folded) >= chunk {
			if err := flush(); err != nil {
				return 0, err
			}
		}
	}
	if streams > 0 {
		folded = append(folded, o)
	}
	if err := flush(); err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, `CLOSE rebuild_order_events`); err != nil {
		return 0, fmt.Errorf("read order events: %w", err)
	}
	return streams, nil
}

func valuesOf[T any](m map[uuid.UUID]T) []T {
	values := make([]T, 0, len(m))
	for _, v := range m {
		values = append(values, v)
	}
	return values
}

// notFolded leaves out of an order's row, as jsonb, what its events do not
// hold: the idempotency key it was placed with and its request's hash,
// which the placement's request brought, and which a rebuild keeps.
const notFolded = ` - 'idempotency_key' - 'request_hash'`

// comparisons put each projection next to its replay, as one jsonb object
// of columns per id. Merchant load counters and stock are derived from the
// replayed orders; webhook secrets and completion statistics are not in the
// log and are left out.
var comparisons = []struct{ table, live, replay string }{
	{"orders",
		`SELECT id, to_jsonb(o) - 'id'` + notFolded + ` FROM orders o`,
		`SELECT id, to_jsonb(o) - 'id'` + notFolded + ` FROM rebuild_orders o`},
	{"merchants",
		`SELECT id, jsonb_build_object('name', name, 'capacity', capacity, 'prep_seconds', prep_seconds,
			'max_queue_wait_seconds', max_queue_wait_seconds, 'payment_timeout_seconds', payment_timeout_seconds,
			'webhook_url', webhook_url, 'created_at', created_at, 'version', version,
			'capacity_unit', capacity_unit, 'timezone', timezone, 'pickup_prefix', pickup_prefix,
			'pause_mode', pause_mode, 'paused_until', paused_until, 'guest_checkout', guest_checkout,
			'active', active, 'queued', queued, 'next_seq', next_seq, 'active_orders', active_orders,
			'queued_priority', queued_priority, 'queued_units', queued_units) FROM merchants`,
		`SELECT m.id, jsonb_build_object('name', m.name, 'capacity', m.capacity, 'prep_seconds', m.prep_seconds,
			'max_queue_wait_seconds', m.max_queue_wait_seconds, 'payment_timeout_seconds', m.payment_timeout_seconds,
			'webhook_url', m.webhook_url, 'created_at', m.created_at, 'version', m.version,
			'capacity_unit', m.capacity_unit, 'timezone', m.timezone, 'pickup_prefix', m.pickup_prefix,
			'pause_mode', m.pause_mode, 'paused_until', m.paused_until, 'guest_checkout', m.guest_checkout,
			'active', coalesce(l.active, 0), 'queued', coalesce(l.queued, 0), 'next_seq', coalesce(l.last_seq, 0) + 1,
			'active_orders', coalesce(l.active_orders, 0), 'queued_priority', coalesce(l.queued_priority, 0),
			'queued_units', coalesce(l.queued_units, 0))
		FROM rebuild_merchants m
		LEFT JOIN (` + loadOfOrders("rebuild_orders") + `) l ON l.merchant_id = m.id`},
	{"products",
		`SELECT p.id, jsonb_build_object('merchant_id', p.merchant_id, 'name', p.name, 'price_cents', p.price_cents,
			'stock_total', p.stock_total, 'per_user_limit', p.per_user_limit, 'created_at', p.created_at, 'version', p.version,
			'load_units', p.load_units, 'option_groups', p.option_groups, 'available', p.available, 'hidden', p.hidden, 'remaining', b.remaining)
		FROM products p LEFT JOIN (SELECT product_id, sum(remaining) AS remaining FROM stock_buckets GROUP BY 1) b ON b.product_id = p.id`,
		`SELECT p.id, jsonb_build_object('merchant_id', p.merchant_id, 'name', p.name, 'price_cents', p.price_cents,
			'stock_total', p.stock_total, 'per_user_limit', p.per_user_limit, 'created_at', p.created_at, 'version', p.version,
			'load_units', p.load_units, 'option_groups', p.option_groups, 'available', p.available, 'hidden', p.hidden,
			'remaining', p.stock_total - coalesce(h.held, 0))
		FROM rebuild_products p LEFT JOIN (` + heldByLiveOrders("rebuild_orders") + `) h ON h.product_id = p.id`},
	{"drops",
		`SELECT id, to_jsonb(d) - 'id' FROM drops d`,
		`SELECT id, to_jsonb(d) - 'id' FROM rebuild_drops d`},
	{"drop_entries",
		`SELECT id, to_jsonb(e) - 'id' FROM drop_entries e`,
		`SELECT id, to_jsonb(e) - 'id' FROM rebuild_drop_entries e`},
}

// loadOfOrders is, per merchant, the load its orders in table hold: units
// and orders accepted, orders, priority orders and units queued, and the
// last sequence number drawn.
func loadOfOrders(table string) string {
	return `SELECT merchant_id, coalesce(sum(load) FILTER (WHERE status = 'accepted'), 0) AS active,
			count(*) FILTER (WHERE status = 'accepted') AS active_orders,
			count(*) FILTER (WHERE status = 'queued') AS queued,
			count(*) FILTER (WHERE status = 'queued' AND lane = 'priority') AS queued_priority,
			coalesce(sum(load) FILTER (WHERE status = 'queued'), 0) AS queued_units, max(queue_seq) AS last_seq
		FROM ` + table + ` GROUP BY merchant_id`
}

// heldByLiveOrders sums, per product, the units of the orders that still
// hold their stock (domain.OrderStatus.HoldsStock).
func heldByLiveOrders(table string) string {
	return `SELECT (i->>'product_id')::uuid AS product_id, sum((i->>'quantity')::int) AS held
		FROM ` + table + ` o, jsonb_array_elements(o.items) i
		WHERE o.status NOT IN ('closed', 'cancelled', 'expired') GROUP BY 1`
}

// compare lists, column by column, where the live projections and the
// replay disagree. A row that only one side has is one difference with an
// empty column and the whole row on its side.
func compare(ctx context.Context, tx pgx.Tx, report *RebuildReport) error {
	for _, c := range comparisons {
		rows, err := tx.Query(ctx, `
			WITH live (id, j) AS (`+c.live+`), replayed (id, j) AS (`+c.replay+`)
			SELECT coalesce(l.id, r.id), coalesce(k.key, ''),
				coalesce((CASE WHEN k.key IS NULL THEN l.j ELSE l.j -> k.key END)::text, ''),
				coalesce((CASE WHEN k.key IS NULL THEN r.j ELSE r.j -> k.key END)::text, '')
			FROM live l
			FULL JOIN replayed r ON l.id = r.id
			LEFT JOIN LATERAL (SELECT key FROM jsonb_object_keys(l.j || r.j) key
				WHERE l.j -> key IS DISTINCT FROM r.j -> key) k ON true
			WHERE l.j IS DISTINCT FROM r.j
			ORDER BY 1, 2`)
		if err != nil {
			return fmt.Errorf("compare %s: %w", c.table, err)
		}
		for rows.Next() {
			d := Difference{Table: c.table}
			if err := rows.Scan(&d.ID, &d.Column, &d.Live, &d.Replay); err != nil {
				rows.Close()
				return fmt.Errorf("compare %s: %w", c.table, err)
			}
			if d.Table == "merchants" && d.Column == "next_seq" && numberNotBelow(d.Live, d.Replay) {
				// Sequence numbers are never reused, and those of orders that
				// left the queue unseen by the replay may have moved it on.
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

func numberNotBelow(a, b string) bool {
	x, errA := strconv.ParseInt(a, 10, 64)
	y, errB := strconv.ParseInt(b, 10, 64)
	return errA == nil && errB == nil && x >= y
}

// rebuildChunk is how many rows one statement of a rebuild writes.
const rebuildChunk = 5000

// writeInChunks writes states a chunk per statement, add adding a
// chunk's statement to the batch.
func writeInChunks[T any](ctx context.Context, tx pgx.Tx, what string, states []T, add func(*pgx.Batch, []T) error) error {
	for start := 0; start < len(states); start += rebuildChunk {
		b := &pgx.Batch{}
		if err := add(b, states[start:min(start+rebuildChunk, len(states))]); err != nil {
			return err
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("write %s: %w", what, err)
		}
	}
	return nil
}

// writeOrderStates writes folded orders into table with the write path's
// statement, inserted or updated.
func writeOrderStates(ctx context.Context, tx pgx.Tx, table string, insert bool, orders []domain.Order) error {
	return writeInChunks(ctx, tx, "orders into "+table, orders, func(b *pgx.Batch, chunk []domain.Order) error {
		var cols orderColumnsOf
		for _, o := range chunk {
			if err := cols.add(o); err != nil {
				return err
			}
		}
		cols.addTo(tx, b, table, insert)
		return nil
	})
}

// writeMerchantStates is writeOrderStates for merchants; the replay has no
// webhook secrets, and an update leaves them alone.
func writeMerchantStates(ctx context.Context, tx pgx.Tx, table string, insert bool, merchants []domain.Merchant) error {
	return writeInChunks(ctx, tx, "merchants into "+table, merchants, func(b *pgx.Batch, chunk []domain.Merchant) error {
		var cols merchantColumnsOf
		for _, m := range chunk {
			if err := cols.add(m, "", nil); err != nil {
				return err
			}
		}
		cols.addTo(tx, b, table, insert)
		return nil
	})
}

// writeProductStates is writeOrderStates for products.
func writeProductStates(ctx context.Context, tx pgx.Tx, table string, insert bool, products []domain.Product) error {
	return writeInChunks(ctx, tx, "products into "+table, products, func(b *pgx.Batch, chunk []domain.Product) error {
		var cols productColumnsOf
		for _, p := range chunk {
			if err := cols.add(p); err != nil {
				return err
			}
		}
		cols.addTo(tx, b, table, insert)
		return nil
	})
}

// writeDropStates is writeOrderStates for drops.
func writeDropStates(ctx context.Context, tx pgx.Tx, table string, insert bool, drops []domain.Drop) error {
	return writeInChunks(ctx, tx, "drops into "+table, drops, func(b *pgx.Batch, chunk []domain.Drop) error {
		var cols dropColumnsOf
		for _, d := range chunk {
			cols.add(d)
		}
		cols.addTo(tx, b, table, insert)
		return nil
	})
}

// rankEntries ranks the entries of every ranked drop in the order of their
// keys.
func rankEntries(drops map[uuid.UUID]domain.Drop, entries map[uuid.UUID]domain.Entry) map[uuid.UUID]int {
	type keyed struct {
		id  uuid.UUID
		key []byte
	}
	byDrop := map[uuid.UUID][]keyed{}
	for id, e := range entries {
		d := drops[e.DropID]
		if !d.Ranked() {
			continue
		}
		byDrop[e.DropID] = append(byDrop[e.DropID], keyed{id, d.OrderKey(id, e.JoinedAt)})
	}
	ranks := map[uuid.UUID]int{}
	for _, line := range byDrop {
		sort.Slice(line, func(i, j int) bool { return domain.CompareOrderKeys(line[i].key, line[j].key) < 0 })
		for i, e := range line {
			ranks[e.id] = i + 1
		}
	}
	return ranks
}

// writeEntryStates is writeOrderStates for drop entries, each with the
// order key its drop's draw gives it and its rank.
func writeEntryStates(ctx context.Context, tx pgx.Tx, table string, insert bool, entries []domain.Entry, drops map[uuid.UUID]domain.Drop, ranks map[uuid.UUID]int) error {
	return writeInChunks(ctx, tx, "drop entries into "+table, entries, func(b *pgx.Batch, chunk []domain.Entry) error {
		var cols entryColumnsOf
		for _, e := range chunk {
			var rank *int
			if r, ok := ranks[e.ID]; ok {
				rank = &r
			}
			cols.add(e, drops[e.DropID].OrderKey(e.ID, e.JoinedAt), rank, true)
		}
		cols.addTo(tx, b, table, insert)
		return nil
	})
}

// writeBack writes the replayed states that differ from their live rows
// over them, and the orders, drops and entries missing from the live tables
// into them, through the write path's statements. A merchant or product
// whose row is missing is left to a person, as rows with no stream are: a
// merchant's webhook secret is not in the log, nor are a product's stock
// buckets.
func writeBack(ctx context.Context, tx pgx.Tx, r *replayedState, report *RebuildReport, chunk int) error {
	missing, drifted, err := findDrift(ctx, tx, "orders", `SELECT r.id, o.id IS NULL FROM rebuild_orders r LEFT JOIN orders o ON o.id = r.id
		WHERE o.id IS NULL OR to_jsonb(o)`+notFolded+` IS DISTINCT FROM to_jsonb(r)`+notFolded)
	if err != nil {
		return err
	}
	// The orders to write are folded again from their events, a chunk of
	// ids at a time: the replay kept none of them.
	for _, set := range []struct {
		ids    []uuid.UUID
		insert bool
	}{{missing, true}, {drifted, false}} {
		for start := 0; start < len(set.ids); start += chunk {
			ids := set.ids[start:min(start+chunk, len(set.ids))]
			if _, err := foldOrders(ctx, tx, &RebuildReport{}, chunk, `stream_id = ANY($1)`, []any{ids}, func(orders []domain.Order) error {
				report.MostOrdersHeld = max(report.MostOrdersHeld, len(orders))
				return writeOrderStates(ctx, tx, "orders", set.insert, orders)
			}); err != nil {
				return err
			}
		}
	}
	_, drifted, err = findDrift(ctx, tx, "merchants", `SELECT r.id, false FROM (SELECT `+merchantFoldColumns+` FROM rebuild_merchants) r
		JOIN (SELECT `+merchantFoldColumns+` FROM merchants) m ON m.id = r.id WHERE to_jsonb(m) IS DISTINCT FROM to_jsonb(r)`)
	if err != nil {
		return err
	}
	if err := writeMerchantStates(ctx, tx, "merchants", false, pick(drifted, mapped(r.merchants))); err != nil {
		return err
	}
	_, drifted, err = findDrift(ctx, tx, "products", `SELECT r.id, false FROM rebuild_products r JOIN products p ON p.id = r.id
		WHERE to_jsonb(p) IS DISTINCT FROM to_jsonb(r)`)
	if err != nil {
		return err
	}
	if err := writeProductStates(ctx, tx, "products", false, pick(drifted, mapped(r.products))); err != nil {
		return err
	}
	missing, drifted, err = findDrift(ctx, tx, "drops", `SELECT r.id, d.id IS NULL FROM rebuild_drops r
		LEFT JOIN drops d ON d.merchant_id = r.merchant_id AND d.id = r.id
		WHERE d.id IS NULL OR to_jsonb(d) IS DISTINCT FROM to_jsonb(r)`)
	if err != nil {
		return err
	}
	if err := writeDropStates(ctx, tx, "drops", true, pick(missing, mapped(r.drops))); err != nil {
		return err
	}
	if err := writeDropStates(ctx, tx, "drops", false, pick(drifted, mapped(r.drops))); err != nil {
		return err
	}
	missing, drifted, err = findDrift(ctx, tx, "drop entries", `SELECT r.id, e.id IS NULL FROM rebuild_drop_entries r
		LEFT JOIN drop_entries e ON e.merchant_id = r.merchant_id AND e.drop_id = r.drop_id AND e.id = r.id
		WHERE e.id IS NULL OR to_jsonb(e) IS DISTINCT FROM to_jsonb(r)`)
	if err != nil {
		return err
	}
	if err := writeEntryStates(ctx, tx, "drop_entries", true, pick(missing, mapped(r.entries)), r.drops, r.ranks); err != nil {
		return err
	}
	return writeEntryStates(ctx, tx, "drop_entries", false, pick(drifted, mapped(r.entries)), r.drops, r.ranks)
}

// findDrift runs query, which lists the ids of replayed rows that differ
// from their live rows and whether the live row is missing.
func findDrift(ctx context.Context, tx pgx.Tx, what, query string) (missing, drifted []uuid.UUID, err error) {
	rows, err := tx.Query(ctx, query)
	if err != nil {
		return nil, nil, fmt.Errorf("find drifted %s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id uuid.UUID
		var isMissing bool
		if err := rows.Scan(&id, &isMissing); err != nil {
			return nil, nil, fmt.Errorf("find drifted %s: %w", what, err)
		}
		if isMissing {
			missing = append(missing, id)
		} else {
			drifted = append(drifted, id)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("find drifted %s: %w", what, err)
	}
	return missing, drifted, nil
}

func mapped[T any](m map[uuid.UUID]T) func(uuid.UUID) T {
	return func(id uuid.UUID) T { return m[id] }
}

func pick[T any](ids []uuid.UUID, state func(uuid.UUID) T) []T {
	states := make([]T, len(ids))
	for i, id := range ids {
		states[i] = state(id)
	}
	return states
}

// swapIn writes the merchants' load, which their orders imply, and spreads
// the stock left over the buckets, after writeBack has put the states
// right. Rows that exist only live, with no stream behind them, are left
// for a person to judge: they stay in the report of the next rebuild.
func swapIn(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `
		UPDATE merchants m SET active = coalesce(l.active, 0), queued = coalesce(l.queued, 0),
			active_orders = coalesce(l.active_orders, 0), queued_priority = coalesce(l.queued_priority, 0),
			queued_units = coalesce(l.queued_units, 0), next_seq = greatest(m.next_seq, coalesce(l.last_seq, 0) + 1),
			updated_at = now()
		FROM rebuild_merchants r
		LEFT JOIN (`+loadOfOrders("orders")+`) l ON l.merchant_id = r.id
		WHERE m.id = r.id`)
	if err != nil {
		return fmt.Errorf("swap in merchants' load: %w", err)
	}
	// Spread what is left evenly over a product's buckets. Stock that the
	// live orders oversell cannot be put right here: the buckets' CHECK
	// refuses it and the whole rebuild rolls back.
	_, err = tx.Exec(ctx, `
		WITH want AS (
			SELECT p.id, p.stock_total - coalesce(h.held, 0) AS remaining
			FROM products p LEFT JOIN (`+heldByLiveOrders("orders")+`) h ON h.product_id = p.id
			WHERE p.stock_total IS NOT NULL
		), have AS (
			SELECT product_id, bucket, count(*) OVER (PARTITION BY product_id) AS n,
				row_number() OVER (PARTITION BY product_id ORDER BY bucket) - 1 AS rank,
				sum(remaining) OVER (PARTITION BY product_id) AS remaining
			FROM stock_buckets
		)
		UPDATE stock_buckets b SET remaining = w.remaining / h.n + CASE WHEN h.rank < w.remaining % h.n THEN 1 ELSE 0 END
		FROM have h JOIN want w ON w.id = h.product_id
		WHERE b.product_id = h.product_id AND b.bucket = h.bucket AND w.remaining <> h.remaining`)
	if err != nil {
		return fmt.Errorf("swap in rebuilt stock: %w", err)
	}
	return nil
}
