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

// merchantRow is the full row, including what only the store sees.
type merchantRow struct {
	MerchantView
	secret         string
	nextSeq        int64
	queuedPriority int
	stats          domain.CompletionStats
	pause          domain.Pause
	// dirty marks a load changed in memory and not yet saved.
	dirty bool
	// decidedAt is the time of the merchant's last decision that saved its
	// load, with the load.
	decidedAt *time.Time
	// periodCapacity and nextEdge are the period of hours in force as its
	// last edge recorded it (domain.Merchant).
	periodCapacity *int
	nextEdge       *time.Time
}

// lastDecision is decidedAt, or the zero time if none was recorded.
func (m *merchantRow) lastDecision() time.Time {
	if m.decidedAt == nil {
		return time.Time{}
	}
	return *m.decidedAt
}

func (m *merchantRow) settings() domain.MerchantSettings { return m.MerchantView.Settings() }

// folded is the merchant as its stream folds.
func (m *merchantRow) folded() domain.Merchant {
	return domain.Merchant{ID: m.ID, Settings: m.settings(), Pause: m.pause, CreatedAt: m.CreatedAt, Version: m.Version,
		PeriodCapacity: m.periodCapacity, NextEdge: m.nextEdge}
}

// setFolded takes the folded state of the merchant's stream.
func (m *merchantRow) setFolded(f domain.Merchant) {
	s := f.Settings.WithDefaults()
	m.Name, m.Capacity, m.PrepSeconds = s.Name, s.Capacity, s.PrepSeconds
	m.MaxQueueWaitSeconds, m.PaymentTimeoutSeconds = s.MaxQueueWaitSeconds, s.PaymentTimeoutSeconds
	m.CapacityUnit, m.Timezone, m.PickupPrefix = s.CapacityUnit, s.Timezone, s.PickupPrefix
	m.Slots, m.Hours, m.GuestCheckout = s.Slots, s.Hours, s.GuestCheckout
	m.periodCapacity, m.nextEdge = f.PeriodCapacity, f.NextEdge
	m.WebhookURL = nil
	if s.WebhookURL != "" {
		m.WebhookURL = &s.WebhookURL
	}
	m.pause, m.Version = f.Pause, f.Version
	m.fillLoad()
}

// capacityInForce is the capacity that admits the merchant's orders: the
// open period's, as its last edge recorded it, else its own.
func (m *merchantRow) capacityInForce() int {
	return domain.Merchant{Settings: domain.MerchantSettings{Capacity: m.Capacity}, PeriodCapacity: m.periodCapacity}.CapacityInForce()
}

func (m *merchantRow) load() domain.Load {
	return domain.Load{
		Capacity: m.capacityInForce(), Active: m.Load.Active, ActiveOrders: m.Load.ActiveOrders,
		Queued: m.Load.Queued, QueuedPriority: m.queuedPriority, QueuedUnits: m.Load.QueuedUnits,
		NextSeq: m.nextSeq, Paused: m.pause.Paused(),
	}
}

func (m *merchantRow) setLoad(l domain.Load) {
	m.Load.Capacity = l.Capacity
	m.Load.Active, m.Load.ActiveOrders, m.Load.Queued, m.Load.QueuedUnits = l.Active, l.ActiveOrders, l.Queued, l.QueuedUnits
	m.queuedPriority, m.nextSeq = l.QueuedPriority, l.NextSeq
}

func (m *merchantRow) waitBasis() domain.WaitBasis {
	return domain.WaitBasis{Capacity: m.capacityInForce(), Active: m.Load.Active, PrepSeconds: m.PrepSeconds, Stats: m.stats}
}

func (m *merchantRow) maxQueueWait() time.Duration {
	return time.Duration(m.MaxQueueWaitSeconds) * time.Second
}

// fillLoad sets the load's copies of the merchant's fields. Its public
// status is the reader's to ask (LoadView.setStatus).
func (m *merchantRow) fillLoad() {
	m.Load.Capacity, m.Load.CapacityUnit = m.capacityInForce(), m.CapacityUnit
	m.Load.Paused, m.Load.PauseMode, m.Load.PausedUntil = m.pause.Paused(), nil, m.pause.Until
	if m.pause.Paused() {
		mode := m.pause.Mode
		m.Load.PauseMode = &mode
	}
}

const merchantColumns = `id, name, capacity, prep_seconds, max_queue_wait_seconds, payment_timeout_seconds,
	webhook_url, webhook_secret, created_at, version, active, queued, next_seq,
	completion_interval_s, completion_samples, last_completion_at,
	capacity_unit, timezone, pickup_prefix, active_orders, queued_priority, queued_units,
	coalesce(pause_mode, ''), paused_until, completion_units, decided_at,
	slots, hours, period_capacity, next_period_at, guest_checkout`

func scanMerchant(row pgx.Row) (*merchantRow, error) {
	var m merchantRow
	err := row.Scan(&m.ID, &m.Name, &m.Capacity, &m.PrepSeconds, &m.MaxQueueWaitSeconds, &m.PaymentTimeoutSeconds,
		&m.WebhookURL, &m.secret, &m.CreatedAt, &m.Version, &m.Load.Active, &m.Load.Queued, &m.nextSeq,
		&m.stats.IntervalSeconds, &m.stats.Samples, &m.stats.LastCompletion,
		&m.CapacityUnit, &m.Timezone, &m.PickupPrefix, &m.Load.ActiveOrders, &m.queuedPriority, &m.Load.QueuedUnits,
		&m.pause.Mode, &m.pause.Until, &m.stats.UnitsPerCompletion, &m.decidedAt,
		&m.Slots, &m.Hours, &m.periodCapacity, &m.nextEdge, &m.GuestCheckout)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, domain.Errorf(domain.CodeNotFound, "merchant not found")
	}
	if err != nil {
		return nil, fmt.Errorf("scan merchant: %w", err)
	}
	if m.Hours == nil {
		m.Hours = []domain.Period{}
	}
	m.fillLoad()
	return &m, nil
}

// merchantLock names what lockMerchant locks.
type merchantLock struct {
	id uuid.UUID
	// skipLocked finds no merchant when another transaction holds its lock.
	skipLocked bool
	// order, when set, is the order orderID, locked after the merchant in
	// the same round trip; the decision is about it, so its last time
	// floors the decision's.
	order   *domain.Order
	orderID uuid.UUID
	// head, when set, is filled with the queue's head, read after the
	// locks in the same round trip.
	head *queueHead
}

// lockMerchant takes the merchant's row lock, which serializes every decision
// about its load, and returns the row once the lock is held: the decision
// under it reads its time only then (domain.DecisionTime). NO KEY UPDATE
// does not conflict with the key-share locks that placements of unpaid
// orders and the foreign keys of new pickup counters take.
func (s *Store) lockMerchant(ctx context.Context, tx pgx.Tx, l merchantLock) (*merchantRow, error) {
	b := &pgx.Batch{}
	var locks merchantLocks
	sql := `SELECT ` + merchantColumns + ` FROM merchants WHERE id = $1 FOR NO KEY UPDATE`
	if l.skipLocked {
		sql += ` SKIP LOCKED`
	}
	locks.addTo(b, sql, l.id)
	if l.order != nil {
		addOrderLock(b, l.id, l.orderID, l.order)
	}
	if l.head != nil {
		addLineHeadRead(b, l.id, l.head.limit, &l.head.orders)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("lock merchant %s: %w", l.id, err)
	}
	m := locks.rows[l.id]
	if m == nil {
		return nil, errMerchantNotFound
	}
	return m, nil
}

// merchantLocks are merchants' rows read in a round trip that locks them,
// perhaps with other rows after them. Their last decisions (lastDecision)
// bound the time of the decisions taken under those locks, read once the
// round trip is done, and saved with each row's load or state
// (addSaveLoad, writeMerchant), so that a merchant's later decisions, from
// whichever process, are not recorded before it.
type merchantLocks struct {
	rows map[uuid.UUID]*merchantRow
}

// addTo adds to b the statement sql, which selects merchantColumns from
// merchants under a lock.
func (l *merchantLocks) addTo(b *pgx.Batch, sql string, args ...any) {
	if l.rows == nil {
		l.rows = map[uuid.UUID]*merchantRow{}
	}
	b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			m, err := scanMerchant(rows)
			if err != nil {
				return err
			}
			l.rows[m.ID] = m
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("lock merchants: %w", err)
		}
		return nil
	})
}

// lastDecisions are the times of the locked merchants' last decisions.
func (l *merchantLocks) lastDecisions() []time.Time {
	last := make([]time.Time, 0, len(l.rows))
	for _, m := range l.rows {
		last = append(last, m.lastDecision())
	}
	return last
}

// addSaveLoad adds to b the statement that writes the merchant's load
// counters and completion stats, decided at now, to travel with other
// writes.
func addSaveLoad(b *pgx.Batch, m *merchantRow, now time.Time) {
	b.Queue(`
		UPDATE merchants SET active = $2, queued = $3, next_seq = $4,
			completion_interval_s = $5, completion_samples = $6, last_completion_at = $7,
			active_orders = $8, queued_priority = $9, queued_units = $10, completion_units = $11, decided_at = $12, updated_at = now()
		WHERE id = $1`,
		m.ID, m.Load.Active, m.Load.Queued, m.nextSeq, m.stats.IntervalSeconds, m.stats.Samples, m.stats.LastCompletion,
		m.Load.ActiveOrders, m.queuedPriority, m.Load.QueuedUnits, m.stats.UnitsPerCompletion, now)
}
