package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/orderd/orderd/domain"
)

// Stream types of drops.
const (
	StreamDrop      = "drop"
	StreamDropEntry = "drop_entry"
)

// DropView is the drop read model in the API's shape.
type DropView struct {
	ID                    uuid.UUID        `json:"id"`
	ProductID             uuid.UUID        `json:"product_id"`
	MerchantID            uuid.UUID        `json:"merchant_id"`
	OpensAt               time.Time        `json:"opens_at"`
	StartsAt              time.Time        `json:"starts_at"`
	Mode                  domain.DropMode  `json:"mode"`
	PurchaseWindowSeconds int              `json:"purchase_window_seconds"`
	Units                 int              `json:"units"`
	State                 domain.DropState `json:"state"`
	SeedCommitment        string           `json:"seed_commitment"`
	Seed                  *string          `json:"seed"`
	Entries               int              `json:"entries"`
	Invited               int              `json:"invited"`
	Purchased             int              `json:"purchased"`
	Lapsed                int              `json:"lapsed"`
	Version               int              `json:"-"`
}

// EntryView is the drop entry read model in the API's shape.
type EntryView struct {
	ID               uuid.UUID          `json:"id"`
	DropID           uuid.UUID          `json:"drop_id"`
	MerchantID       uuid.UUID          `json:"-"`
	CustomerID       string             `json:"customer_id"`
	JoinedAt         time.Time          `json:"joined_at"`
	Rank             *int               `json:"rank"`
	Position         *int               `json:"position"`
	Status           domain.EntryStatus `json:"status"`
	InvitedAt        *time.Time         `json:"invited_at"`
	PurchaseDeadline *time.Time         `json:"purchase_deadline"`
	Version          int                `json:"-"`
}

// DrawEntry is one line of a drop's draw.
type DrawEntry struct {
	EntryID  uuid.UUID `json:"entry_id"`
	JoinedAt time.Time `json:"joined_at"`
	Rank     *int      `json:"rank"`
}

// Draw is what anyone needs to recompute a drop's ranks.
type Draw struct {
	SeedCommitment string  `json:"seed_commitment"`
	Seed           *string `json:"seed"`
	// EntriesDigest is a lottery's digest of its early entries (hex),
	// recorded at the start; nil before, in fifo drops, and in draws made
	// before digests.
	EntriesDigest *string     `json:"entries_digest"`
	Entries       []DrawEntry `json:"entries"`
}

var (
	errDropNotFound  = domain.Errorf(domain.CodeNotFound, "drop not found")
	errEntryNotFound = domain.Errorf(domain.CodeNotFound, "entry not found")
)

// CreateDropParams describes a new drop.
type CreateDropParams struct {
	ProductID             uuid.UUID
	OpensAt, StartsAt     time.Time
	Mode                  domain.DropMode
	PurchaseWindowSeconds *int
	Units                 *int
	Access                domain.Party
	RequestID             string
}

// CreateDrop records a drop of a limited product, with its secret seed and
// the timers of its opening and start.
func (s *Store) CreateDrop(ctx context.Context, p CreateDropParams) (*DropView, error) {
	seed := make([]byte, domain.SeedBytes)
	if _, err := rand.Read(seed); err != nil {
		return nil, fmt.Errorf("draw seed: %w", err)
	}
	id := newID()
	var merchantID uuid.UUID
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var stockTotal, remaining *int
		var active bool
		// The product's row lock orders drops of one product; the partial
		// unique index is what refuses a second active one. The lock is a
		// statement of its own, the product's row alone: Citus takes row
		// locks only in a statement it can send to one shard whole, which
		// one with subqueries of other tables is not.
		var err error
		if merchantID, err = productMerchant(ctx, tx, p.ProductID); err != nil {
			return err
		}
		b := &pgx.Batch{}
		b.Queue(`SELECT stock_total FROM products WHERE merchant_id = $1 AND id = $2 FOR NO KEY UPDATE`, merchantID, p.ProductID).
			QueryRow(func(row pgx.Row) error { return row.Scan(&stockTotal) })
		b.Queue(`SELECT (SELECT sum(remaining)::int FROM stock_buckets WHERE merchant_id = $1 AND product_id = $2),
				EXISTS (SELECT 1 FROM drops WHERE merchant_id = $1 AND product_id = $2 AND state IN ('scheduled', 'open', 'selling'))`,
			merchantID, p.ProductID).QueryRow(func(row pgx.Row) error { return row.Scan(&remaining, &active) })
		err = tx.SendBatch(ctx, b).Close()
		if errors.Is(err, pgx.ErrNoRows) {
			return domain.Errorf(domain.CodeNotFound, "product not found")
		}
		if err != nil {
			return fmt.Errorf("lock product: %w", err)
		}
		if !p.Access.MayActForMerchant(merchantID) {
			return domain.Errorf(domain.CodeForbidden, "only that merchant or an admin may do this")
		}
		if stockTotal == nil {
			remaining = nil
		}
		now := s.now()
		events, err := domain.CreateDrop(domain.NewDropParams{
			DropID: id, ProductID: p.ProductID, MerchantID: merchantID,
			OpensAt: p.OpensAt.UTC().Truncate(time.Microsecond), StartsAt: p.StartsAt.UTC().Truncate(time.Microsecond),
			Mode: p.Mode, PurchaseWindowSeconds: p.PurchaseWindowSeconds, Units: p.Units,
			StockRemaining: remaining, ProductHasActiveDrop: active, Seed: seed,
		}, now)
		if err != nil {
			return err
		}
		d, err := domain.Drop{}.Apply(events...)
		if err != nil {
			return err
		}
		if err := writeDrop(ctx, tx, dropChange{after: d, events: events, meta: metaOf(p.Access, p.RequestID)}, now); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO drop_seeds (merchant_id, drop_id, seed) VALUES ($1, $2, $3)`, merchantID, id, seed); err != nil {
			return fmt.Errorf("keep seed: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO drop_lines (merchant_id, drop_id) VALUES ($1, $2)`, merchantID, id); err != nil {
			return fmt.Errorf("start line: %w", err)
		}
		return s.insertJobs(ctx, tx, []river.InsertManyParams{
			settleJob(merchantID, id, d.OpensAt), settleJob(merchantID, id, d.StartsAt),
		})
	})
	if err != nil {
		return nil, err
	}
	return s.GetDrop(ctx, id)
}

const dropColumns = `d.merchant_id, d.id, d.product_id, d.opens_at, d.starts_at, d.mode, d.purchase_window_seconds, d.units,
	d.state, d.seed_commitment, d.seed, d.created_at, d.version, d.entries_digest`

func scanDrop(row pgx.Row, dest ...any) (domain.Drop, error) {
	var d domain.Drop
	err := row.Scan(append([]any{&d.MerchantID, &d.DropID, &d.ProductID, &d.OpensAt, &d.StartsAt, &d.Mode, &d.PurchaseWindowSeconds, &d.Units,
		&d.State, &d.SeedCommitment, &d.Seed, &d.CreatedAt, &d.Version, &d.EntriesDigest}, dest...)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, errDropNotFound
	}
	if err != nil {
		return d, fmt.Errorf("scan drop: %w", err)
	}
	return d, nil
}

// GetDrop returns a drop with its counts.
func (s *Store) GetDrop(ctx context.Context, id uuid.UUID) (*DropView, error) {
	var v DropView
	d, err := scanDrop(s.pool.QueryRow(ctx, `SELECT `+dropColumns+`,
			count(e.id)::int, count(e.invited_at)::int,
			count(*) FILTER (WHERE e.status = 'purchased')::int, count(*) FILTER (WHERE e.status = 'lapsed')::int
		FROM drops d LEFT JOIN drop_entries e ON e.merchant_id = d.merchant_id AND e.drop_id = d.id
		WHERE d.id = $1 GROUP BY d.merchant_id, d.id`, id), &v.Entries, &v.Invited, &v.Purchased, &v.Lapsed)
	if err != nil {
		return nil, mapErr(err)
	}
	counts := v
	v = dropView(d)
	v.Entries, v.Invited, v.Purchased, v.Lapsed = counts.Entries, counts.Invited, counts.Purchased, counts.Lapsed
	return &v, nil
}

func dropView(d domain.Drop) DropView {
	v := DropView{
		ID: d.DropID, ProductID: d.ProductID, MerchantID: d.MerchantID,
		OpensAt: d.OpensAt, StartsAt: d.StartsAt, Mode: d.Mode, PurchaseWindowSeconds: d.PurchaseWindowSeconds,
		Units: d.Units, State: d.State, SeedCommitment: d.SeedCommitment, Version: d.Version,
	}
	if d.Seed != nil {
		seed := hex.EncodeToString(d.Seed)
		v.Seed = &seed
	}
	return v
}

const entryColumns = `e.merchant_id, e.drop_id, e.id, e.customer_id, e.joined_at, e.status,
	e.invited_at, e.purchase_deadline, coalesce(e.order_id, '00000000-0000-0000-0000-000000000000'), e.version`

func scanEntryInto(e *domain.Entry, dest ...any) []any {
	return append([]any{&e.MerchantID, &e.DropID, &e.ID, &e.CustomerID, &e.JoinedAt, &e.Status,
		&e.InvitedAt, &e.PurchaseDeadline, &e.OrderID, &e.Version}, dest...)
}

// entryViewQuery reads entries with their rank (among every entry),
// position (among the waiting), both known once the entry is ranked, and
// their drop's state. Invitations go in rank order, so the waiting entries
// ranked before an entry are those ranked before it less those invited.
const entryViewQuery = `SELECT ` + entryColumns + `, e.rank, CASE WHEN e.status = 'waiting' THEN e.rank - l.invited END, d.state
	FROM drop_entries e JOIN drop_lines l ON l.merchant_id = e.merchant_id AND l.drop_id = e.drop_id
	JOIN drops d ON d.merchant_id = e.merchant_id AND d.id = e.drop_id`

func (s *Store) readEntry(ctx context.Context, q querier, where string, args ...any) (*EntryView, error) {
	rows, err := q.Query(ctx, entryViewQuery+` WHERE `+where, args...)
	if err != nil {
		return nil, mapErr(fmt.Errorf("read entry: %w", err))
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, mapErr(fmt.Errorf("read entry: %w", err))
		}
		return nil, errEntryNotFound
	}
	var e domain.Entry
	var rank, pos *int
	var state domain.DropState
	if err := rows.Scan(scanEntryInto(&e, &rank, &pos, &state)...); err != nil {
		return nil, mapErr(fmt.Errorf("scan entry: %w", err))
	}
	v := entryView(e, rank, pos, state)
	return &v, nil
}

// entryView is e in the API's shape, in a drop in state d; pos is its
// position while it waits.
func entryView(e domain.Entry, rank, pos *int, d domain.DropState) EntryView {
	status := e.StatusIn(d)
	if status != domain.EntryStatusWaiting {
		pos = nil
	}
	return EntryView{
		ID: e.ID, DropID: e.DropID, MerchantID: e.MerchantID,
		CustomerID: e.CustomerID, JoinedAt: e.JoinedAt, Rank: rank, Position: pos, Status: status,
		InvitedAt: e.InvitedAt, PurchaseDeadline: e.PurchaseDeadline, Version: e.Version,
	}
}

// MyEntry returns the customer's entry in a drop.
func (s *Store) MyEntry(ctx context.Context, dropID uuid.UUID, customerID string) (*EntryView, error) {
	return s.readEntry(ctx, s.pool, `e.id = $1 AND e.drop_id = $2 AND e.customer_id = $3`,
		domain.EntryID(dropID, customerID), dropID, customerID)
}

// GetEntry returns an entry the caller may see.
func (s *Store) GetEntry(ctx context.Context, id uuid.UUID, access domain.Party) (*EntryView, error) {
	e, err := s.readEntry(ctx, s.pool, `e.id = $1`, id)
	if err != nil {
		return nil, err
	}
	if !access.MaySeeEntry(e.CustomerID, e.MerchantID) {
		return nil, errEntryNotFound
	}
	return e, nil
}

// EntriesByID reads entries with their rank and position, for live updates.
func (s *Store) EntriesByID(ctx context.Context, ids []uuid.UUID) ([]EntryView, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, entryViewQuery+` WHERE e.id = ANY($1)`, ids)
	if err != nil {
		return nil, mapErr(fmt.Errorf("read entries: %w", err))
	}
	defer rows.Close()
	var out []EntryView
	for rows.Next() {
		var e domain.Entry
		var rank, pos *int
		var state domain.DropState
		if err := rows.Scan(scanEntryInto(&e, &rank, &pos, &state)...); err != nil {
			return nil, mapErr(fmt.Errorf("scan entry: %w", err))
		}
		out = append(out, entryView(e, rank, pos, state))
	}
	return out, mapErr(rows.Err())
}

// EntryDrops returns the drops of the given entries.
func (s *Store) EntryDrops(ctx context.Context, ids []uuid.UUID) ([]uuid.UUID, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT drop_id FROM drop_entries WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, mapErr(fmt.Errorf("entry drops: %w", err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	return out, mapErr(err)
}

// GetDraw returns the drop's commitment, its seed once published, and its
// entries in rank order (those not yet ranked last, by joined_at), without
// customer ids.
func (s *Store) GetDraw(ctx context.Context, dropID uuid.UUID) (*Draw, error) {
	var out Draw
	var seed, digest []byte
	var merchantID uuid.UUID
	err := s.pool.QueryRow(ctx, `SELECT merchant_id, seed_commitment, seed, entries_digest FROM drops WHERE id = $1`, dropID).
		Scan(&merchantID, &out.SeedCommitment, &seed, &digest)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errDropNotFound
	}
	if err != nil {
		return nil, mapErr(fmt.Errorf("read drop: %w", err))
	}
	if seed != nil {
		h := hex.EncodeToString(seed)
		out.Seed = &h
	}
	if digest != nil {
		h := hex.EncodeToString(digest)
		out.EntriesDigest = &h
	}
	rows, err := s.pool.Query(ctx, `SELECT id, joined_at, rank FROM drop_entries
		WHERE merchant_id = $1 AND drop_id = $2 ORDER BY rank NULLS LAST, joined_at, id`, merchantID, dropID)
	if err != nil {
		return nil, mapErr(fmt.Errorf("read draw: %w", err))
	}
	defer rows.Close()
	out.Entries = []DrawEntry{}
	for rows.Next() {
		var e DrawEntry
		if err := rows.Scan(&e.EntryID, &e.JoinedAt, &e.Rank); err != nil {
			return nil, mapErr(fmt.Errorf("scan draw: %w", err))
		}
		out.Entries = append(out.Entries, e)
	}
	return &out, mapErr(rows.Err())
}

func lockEntries(ctx context.Context, tx pgx.Tx, sql string, args ...any) ([]domain.Entry, error) {
	rows, err := tx.Query(ctx, `SELECT `+entryColumns+` FROM drop_entries e WHERE `+sql, args...)
	if err != nil {
		return nil, fmt.Errorf("lock entries: %w", err)
	}
	defer rows.Close()
	var out []domain.Entry
	for rows.Next() {
		var e domain.Entry
		if err := rows.Scan(scanEntryInto(&e)...); err != nil {
			return nil, fmt.Errorf("scan entry: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock entries: %w", err)
	}
	return out, nil
}
