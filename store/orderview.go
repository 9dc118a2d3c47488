package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store/pgkit"
)

// OrderView is the order read model in the API's shape.
type OrderView struct {
	ID              uuid.UUID          `json:"id"`
	MerchantID      uuid.UUID          `json:"merchant_id"`
	CustomerID      string             `json:"customer_id"`
	Items           []domain.Item      `json:"items"`
	TotalCents      int64              `json:"total_cents"`
	Status          domain.OrderStatus `json:"status"`
	Version         int                `json:"version"`
	PlacedAt        time.Time          `json:"placed_at"`
	PaymentDeadline time.Time          `json:"payment_deadline"`
	PaidAt          *time.Time         `json:"paid_at"`
	AcceptedAt      *time.Time         `json:"accepted_at"`
	CompletedAt     *time.Time         `json:"completed_at"`
	EndedAt         *time.Time         `json:"ended_at"`
	StatusReason    *string            `json:"status_reason"`
	QueuePosition   *int               `json:"queue_position"`
	EtaSeconds      *int               `json:"eta_seconds"`
	Load            int                `json:"load"`
	Lane            domain.Lane        `json:"lane"`
	PickupCode      *string            `json:"pickup_code"`
	// PickupAt is the start of the order's pickup slot, nil for as soon
	// as possible.
	PickupAt   *time.Time `json:"pickup_at"`
	PickedUpAt *time.Time `json:"picked_up_at"`
	// LineSeq is the merchant's next queue sequence number when the
	// position was read: it grows whenever an order joins the line, so a
	// reader can tell a later read whose position grew (a priority order
	// joined ahead) from an earlier one.
	LineSeq int64 `json:"-"`

	queueSeq int64 // keys a page of a queue list (lineKey)
	// line is the order's line as the read found it, which domain turns
	// into its place (domain.PlaceInLine, asked by the store file the
	// route enters), and lineSeq the line's sequence at the read.
	line    domain.LineReading
	lineSeq int64
}

const orderColumns = `o.id, o.merchant_id, o.customer_id, o.items, o.total_cents, o.status, o.version, o.placed_at,
	o.payment_deadline, o.payment_ref, o.paid_at, o.accepted_at, o.completed_at, o.ended_at, o.status_reason,
	o.queue_seq, o.queued_at, o.queue_expires_at, o.load, o.lane, o.pickup_code, o.pickup_at, o.release_at, o.picked_up_at`

func scanOrderInto(o *domain.Order, dest ...any) []any {
	return append([]any{&o.ID, &o.MerchantID, &o.CustomerID, &o.Items, &o.TotalCents, &o.Status, &o.Version,
		&o.PlacedAt, &o.PaymentDeadline, pgkit.NullString{Dst: &o.PaymentRef}, &o.PaidAt, &o.AcceptedAt, &o.CompletedAt,
		&o.EndedAt, pgkit.NullString{Dst: &o.StatusReason}, pgkit.NullInt64{Dst: &o.QueueSeq}, &o.QueuedAt, &o.QueueExpiresAt,
		&o.Load, &o.Lane, pgkit.NullString{Dst: &o.PickupCode}, &o.PickupAt, &o.ReleaseAt, &o.PickedUpAt}, dest...)
}

// scanOrders reads rows of orderColumns.
func scanOrders(rows pgx.Rows) ([]domain.Order, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.Order, error) {
		var o domain.Order
		err := row.Scan(scanOrderInto(&o)...)
		return o, err
	})
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func seqOrNil(seq int64) *int64 {
	if seq == 0 {
		return nil
	}
	return &seq
}

// orderByIDQuery reads one order's view.
const orderByIDQuery = orderViewQuery + ` WHERE o.id = $1`

// readOrder reads an order with its live line (OrderView.line).
func readOrder(ctx context.Context, q querier, id uuid.UUID) (*OrderView, error) {
	rows, err := q.Query(ctx, orderByIDQuery, id)
	if err != nil {
		return nil, fmt.Errorf("read order: %w", err)
	}
	return scanOrderView(rows)
}

// scanOrderView reads the one row of orderByIDQuery.
func scanOrderView(rows pgx.Rows) (*OrderView, error) {
	views, err := scanOrderViews(rows, false)
	if err != nil {
		return nil, err
	}
	if len(views) == 0 {
		return nil, errOrderNotFound
	}
	return &views[0], nil
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// etaColumns are what an order's wait is estimated from, read from its
// merchant m.
const etaColumns = `coalesce(m.period_capacity, m.capacity), m.active, m.prep_seconds, m.completion_interval_s, m.completion_samples, m.completion_units, m.next_seq`

// etaBasis is the merchant's state a queued order's wait is estimated from
// (domain.WaitBasis), with the line's sequence at the read.
type etaBasis struct {
	domain.WaitBasis
	lineSeq int64
}

func (b *etaBasis) dest() []any {
	return []any{&b.Capacity, &b.Active, &b.PrepSeconds, &b.Stats.IntervalSeconds, &b.Stats.Samples, &b.Stats.UnitsPerCompletion, &b.lineSeq}
}

// queueAhead reads, for a queued order o, the loads of the orders of its
// merchant admitted before it: the priority lane ('priority' > 'normal')
// first, each lane in sequence order. Each lane is its own range of
// orders_queue_idx, so the read stops at o instead of filtering the whole
// line; and an order that is not queued reads none of it (a lateral join's
// ON is applied only after the subquery ran).
const queueAhead = `SELECT q.load FROM orders q WHERE o.status = 'queued'
		AND q.merchant_id = o.merchant_id AND q.status = 'queued' AND q.lane > o.lane
	UNION ALL
	SELECT q.load FROM orders q WHERE o.status = 'queued'
		AND q.merchant_id = o.merchant_id AND q.status = 'queued' AND q.lane = o.lane AND q.queue_seq < o.queue_seq`

const orderViewQuery = `SELECT ` + orderColumns + `, a.n, a.units, ` + etaColumns + `
	FROM orders o JOIN merchants m ON m.id = o.merchant_id
	LEFT JOIN LATERAL (SELECT count(*)::int + 1 AS n, coalesce(sum(q.load), 0)::int AS units FROM (` + queueAhead + `) q) a
		ON o.status = 'queued'`

// scanOrderViews reads rows of orderViewQuery. With rankByRow the rows are a
// stretch of a merchant's queue in order and their position column counts
// the orders ahead of the stretch: each row's position follows from its rank
// in the rows, which spares a count per row.
func scanOrderViews(rows pgx.Rows, rankByRow bool) ([]OrderView, error) {
	defer rows.Close()
	out := []OrderView{}
	unitsInPage := 0
	for rows.Next() {
		var o domain.Order
		var pos, ahead *int
		var basis etaBasis
		if err := rows.Scan(scanOrderInto(&o, append([]any{&pos, &ahead}, basis.dest()...)...)...); err != nil {
			return nil, fmt.Errorf("scan order: %w", err)
		}
		if rankByRow && o.Status == domain.StatusQueued && pos != nil {
			p, a := *pos+len(out)+1, unitsInPage
			if ahead != nil {
				a += *ahead
			}
			pos, ahead = &p, &a
			unitsInPage += max(o.Load, 1)
		}
		v := toView(o)
		v.line = domain.LineReading{Status: o.Status, Load: v.Load, Position: pos, Basis: basis.WaitBasis}
		if ahead != nil {
			v.line.UnitsAhead = *ahead
		}
		v.lineSeq = basis.lineSeq
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read orders: %w", err)
	}
	return out, nil
}

// toView is the order's view without its place in line (showPlace).
func toView(o domain.Order) OrderView {
	v := OrderView{
		ID: o.ID, MerchantID: o.MerchantID, CustomerID: o.CustomerID,
		Items: o.Items, TotalCents: o.TotalCents, Status: o.Status, Version: o.Version,
		PlacedAt: o.PlacedAt, PaymentDeadline: o.PaymentDeadline, PaidAt: o.PaidAt, AcceptedAt: o.AcceptedAt,
		CompletedAt: o.CompletedAt, EndedAt: o.EndedAt, StatusReason: nullable(o.StatusReason),
		queueSeq: lineKey(o.Lane, o.QueueSeq),
		Load:     max(o.Load, 1), Lane: o.Lane, PickupCode: nullable(o.PickupCode), PickupAt: o.PickupAt, PickedUpAt: o.PickedUpAt,
	}
	if v.Lane == "" {
		v.Lane = domain.LaneNormal
	}
	return v
}

// showPlace shows the order's place in line as domain decided it (nil:
// none), with the line's sequence at the read.
func (v *OrderView) showPlace(p *domain.LinePlace) {
	if p == nil {
		return
	}
	v.QueuePosition, v.EtaSeconds, v.LineSeq = &p.Position, &p.WaitSeconds, v.lineSeq
}

var errOrderNotFound = domain.Errorf(domain.CodeNotFound, "order not found")

// GetOrder returns an order the caller may see.
func (s *Store) GetOrder(ctx context.Context, id uuid.UUID, access domain.Party) (*OrderView, error) {
	o, err := readOrder(ctx, s.pool, id)
	if err != nil {
		return nil, mapErr(err)
	}
	if !access.MaySeeOrder(o.CustomerID, o.MerchantID) {
		return nil, errOrderNotFound
	}
	o.showPlace(domain.PlaceInLine(o.line))
	return o, nil
}

// OrderEvent is one entry of an order's history.
type OrderEvent struct {
	Version    int             `json:"version"`
	Type       string          `json:"type"`
	Data       json.RawMessage `json:"data"`
	RecordedAt time.Time       `json:"recorded_at"`
	// Hash is the event's link in its stream's chain (encoded as base64).
	Hash []byte `json:"hash"`
}

// OrderEvents returns an order's full history, oldest first.
func (s *Store) OrderEvents(ctx context.Context, id uuid.UUID, access domain.Party) ([]OrderEvent, error) {
	o, err := s.GetOrder(ctx, id, access)
	if err != nil {
		return nil, err
	}
	stored, err := s.ReadStream(ctx, o.MerchantID, id)
	if err != nil {
		return nil, err
	}
	out := make([]OrderEvent, len(stored))
	for i, e := range stored {
		out[i] = OrderEvent{Version: e.Version, Type: e.Type, Data: e.Data, RecordedAt: e.RecordedAt, Hash: e.Hash}
	}
	return out, nil
}
