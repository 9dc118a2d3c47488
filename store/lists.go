package store

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/orderd/orderd/domain"
)

// PageKey is the sort key of a page's last row, from which the next page
// continues (keyset pagination: rows added or removed elsewhere in the list
// move no row across a page boundary). Queue lists are keyed by Seq, lists
// that run newest first by At and ID.
type PageKey struct {
	Seq int64
	At  time.Time
	ID  uuid.UUID
}

// OrderList asks for one page of orders: a customer's (CustomerID) or a
// merchant's (MerchantID), of one status or, for a customer, of any ("").
type OrderList struct {
	CustomerID string
	MerchantID uuid.UUID
	Status     domain.OrderStatus
	Limit      int
	After      *PageKey
}

// ListOrders returns a page of orders and the key the next page starts
// after, nil at the end. Queued orders of a merchant run in queue order;
// everything else runs newest first.
func (s *Store) ListOrders(ctx context.Context, l OrderList) ([]OrderView, *PageKey, error) {
	if l.Status != "" && !l.Status.Known() {
		return nil, nil, domain.Errorf(domain.CodeValidation, "status must be one of %s", statusNames())
	}
	if (l.CustomerID == "") == (l.MerchantID == uuid.Nil) {
		return nil, nil, domain.Errorf(domain.CodeValidation, "a list of orders is a customer's or a merchant's")
	}
	if l.MerchantID != uuid.Nil && l.Status == "" {
		return nil, nil, domain.Errorf(domain.CodeValidation, "a merchant's orders are listed by status")
	}
	if l.Limit <= 0 {
		return nil, nil, domain.Errorf(domain.CodeValidation, "limit must be positive")
	}
	byQueue := byQueue(l)
	sql, args := pageQuery(l)
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, nil, mapErr(fmt.Errorf("list orders: %w", err))
	}
	views, err := scanOrderViews(rows, byQueue)
	if err != nil {
		return nil, nil, mapErr(err)
	}
	for i := range views {
		views[i].showPlace(domain.PlaceInLine(views[i].line))
	}
	if len(views) <= l.Limit {
		return views, nil, nil
	}
	views = views[:l.Limit]
	last := views[len(views)-1]
	next := &PageKey{At: last.PlacedAt, ID: last.ID}
	if byQueue {
		next = &PageKey{Seq: last.queueSeq}
	}
	return views, next, nil
}

func byQueue(l OrderList) bool { return l.MerchantID != uuid.Nil && l.Status.ListedInQueueOrder() }

// pageQuery is the query of a list's page, and its arguments.
func pageQuery(l OrderList) (string, []any) {
	if byQueue(l) {
		return queuePageQuery(l)
	}
	return newestFirstQuery(l)
}

// queuePageQuery reads a merchant's queue from after the key, one row more
// than the page, in orders_queue_idx (the priority lane first, each lane in
// sequence order). Its position and units columns count the orders, and
// their units, ahead of the page, read once, which scanOrderViews adds each
// row's rank and the loads before it in the page to.
func queuePageQuery(l OrderList) (string, []any) {
	after := int64(math.MinInt64)
	if l.After != nil {
		after = l.After.Seq
	}
	return `SELECT ` + orderColumns + `, a.n, a.units, ` + etaColumns + `
		FROM orders o JOIN merchants m ON m.id = o.merchant_id
		CROSS JOIN (SELECT count(*)::int AS n, coalesce(sum(q.load), 0)::int AS units FROM orders q
			WHERE q.merchant_id = $1 AND q.status = 'queued' AND ` + lineKeySQL("q") + ` <= $2) a
		WHERE o.merchant_id = $1 AND o.status = 'queued' AND ` + lineKeySQL("o") + ` > $2
		ORDER BY o.lane DESC, o.queue_seq LIMIT $3`, []any{l.MerchantID, after, l.Limit + 1}
}

// priorityLineOffset puts the priority lane before the normal one in a
// single key: sequence numbers stay far below it.
const priorityLineOffset = int64(1) << 62

// lineKey is an order's place in its merchant's line as one number: the
// priority lane's orders, then the normal lane's, each in sequence order.
// It keys a page of a queue list.
func lineKey(lane domain.Lane, seq int64) int64 {
	if lane == domain.LanePriority {
		return seq - priorityLineOffset
	}
	return seq
}

// lineKeySQL is lineKey of the order aliased alias, in SQL.
func lineKeySQL(alias string) string {
	return `(CASE WHEN ` + alias + `.lane = 'priority' THEN ` + alias + `.queue_seq - ` + strconv.FormatInt(priorityLineOffset, 10) +
		` ELSE ` + alias + `.queue_seq END)`
}

// newestFirstQuery reads orders by (placed_at, id) descending from before
// the key, one row more than the page; the orders_customer_placed_idx and
// orders_merchant_status_idx indexes serve it in that order.
func newestFirstQuery(l OrderList) (string, []any) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if l.CustomerID != "" {
		where = append(where, "o.customer_id = "+arg(l.CustomerID))
	} else {
		where = append(where, "o.merchant_id = "+arg(l.MerchantID))
	}
	if l.Status != "" {
		where = append(where, "o.status = "+arg(l.Status))
	}
	if l.After != nil {
		where = append(where, "(o.placed_at, o.id) < ("+arg(l.After.At)+", "+arg(l.After.ID)+")")
	}
	limit := arg(l.Limit + 1)
	return orderViewQuery + ` WHERE ` + strings.Join(where, " AND ") + ` ORDER BY o.placed_at DESC, o.id DESC LIMIT ` + limit, args
}

func statusNames() string {
	names := make([]string, len(domain.OrderStatuses))
	for i, s := range domain.OrderStatuses {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// ListMerchantOrders returns the first page of a merchant's orders of one
// status.
func (s *Store) ListMerchantOrders(ctx context.Context, merchantID uuid.UUID, status domain.OrderStatus, limit int) ([]OrderView, error) {
	orders, _, err := s.ListOrders(ctx, OrderList{MerchantID: merchantID, Status: status, Limit: limit})
	return orders, err
}
