package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/riverqueue/river"

	"github.com/orderd/orderd/domain"
)

// Load is a merchant's live load as clients see it: active counts units
// (orders when the merchant counts orders), queued counts orders.
type Load struct {
	Capacity       int                 `json:"capacity"`
	CapacityUnit   domain.CapacityUnit `json:"capacity_unit"`
	Active         int                 `json:"active"`
	ActiveOrders   int                 `json:"active_orders"`
	Queued         int                 `json:"queued"`
	QueuedUnits    int                 `json:"queued_units"`
	EstWaitSeconds int                 `json:"est_wait_seconds"`
	Paused         bool                `json:"paused"`
	PauseMode      *domain.PauseMode   `json:"pause_mode"`
	PausedUntil    *time.Time          `json:"paused_until"`
	// Open says whether the merchant takes new orders now, and Busy whether
	// one placed and paid now would wait in line: its public status, which
	// any customer may watch live, beside the line's length and estimate.
	Open bool `json:"-"`
	Busy bool `json:"-"`
}

// Merchant is the merchant read model in the API's shape.
type Merchant struct {
	ID                    uuid.UUID            `json:"id"`
	Name                  string               `json:"name"`
	Capacity              int                  `json:"capacity"`
	PrepSeconds           int                  `json:"prep_seconds"`
	MaxQueueWaitSeconds   int                  `json:"max_queue_wait_seconds"`
	PaymentTimeoutSeconds int                  `json:"payment_timeout_seconds"`
	CapacityUnit          domain.CapacityUnit  `json:"capacity_unit"`
	Timezone              string               `json:"timezone"`
	PickupPrefix          string               `json:"pickup_prefix"`
	Slots                 *domain.SlotSettings `json:"slots"`
	Hours                 []domain.Period      `json:"hours"`
	GuestCheckout         bool                 `json:"guest_checkout"`
	WebhookURL            *string              `json:"webhook_url"`
	WebhookSecret         string               `json:"webhook_secret,omitempty"`
	CreatedAt             time.Time            `json:"created_at"`
	Version               int                  `json:"version"`
	Load                  Load                 `json:"load"`
}

// merchantRow is the full row, including what only the store sees.
type merchantRow struct {
	Merchant
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

// decidedAtOrZero is decidedAt, or the zero time if none was recorded.
func (m *merchantRow) decidedAtOrZero() time.Time {
	if m.decidedAt == nil {
		return time.Time{}
	}
	return *m.decidedAt
}

func (m *merchantRow) settings() domain.MerchantSettings { return m.Merchant.Settings() }

// Settings are the merchant's settings in the domain's terms.
func (m *Merchant) Settings() domain.MerchantSettings {
	s := domain.MerchantSettings{
		Name: m.Name, Capacity: m.Capacity, PrepSeconds: m.PrepSeconds,
		MaxQueueWaitSeconds: m.MaxQueueWaitSeconds, PaymentTimeoutSeconds: m.PaymentTimeoutSeconds,
		CapacityUnit: m.CapacityUnit, Timezone: m.Timezone, PickupPrefix: m.PickupPrefix,
		Slots: m.Slots, Hours: m.Hours, GuestCheckout: m.GuestCheckout,
	}
	if m.WebhookURL != nil {
		s.WebhookURL = *m.WebhookURL
	}
	return s
}

// folded is the merchant as its stream folds.
func (m *merchantRow) folded() domain.Merchant {
	return domain.Merchant{ID: m.ID.String(), Settings: m.settings(), Pause: m.pause, CreatedAt: m.CreatedAt, Version: m.Version,
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

func (m *merchantRow) eta() etaBasis {
	return etaBasis{capacity: m.capacityInForce(), active: m.Load.Active, prep: m.PrepSeconds, stats: m.stats, lineSeq: m.nextSeq}
}

func (m *merchantRow) maxQueueWait() time.Duration {
	return time.Duration(m.MaxQueueWaitSeconds) * time.Second
}

// fillLoad sets the load's copies of the merchant's fields and the
// estimated wait of an order of one unit paid now.
func (m *merchantRow) fillLoad() {
	m.Load.Capacity, m.Load.CapacityUnit = m.capacityInForce(), m.CapacityUnit
	m.Load.Paused, m.Load.PauseMode, m.Load.PausedUntil = m.pause.Paused(), nil, m.pause.Until
	if m.pause.Paused() {
		mode := m.pause.Mode
		m.Load.PauseMode = &mode
	}
	m.Load.Open = !m.pause.Refuses()
	m.Load.Busy = !m.load().CanAdmitNew(1, domain.LaneNormal)
	if !m.Load.Busy {
		m.Load.EstWaitSeconds = 0
		return
	}
	capacity := m.capacityInForce()
	units := domain.UnitsToWaitFor(m.Load.Active, capacity, m.Load.QueuedUnits, 1)
	m.Load.EstWaitSeconds = domain.EstimateWait(units, capacity, m.PrepSeconds, m.stats)
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
// about its load, and returns the row with the time of the decision taken
// under it (merchantLocks.held). NO KEY UPDATE does not conflict with the
// key-share locks that placements of unpaid orders and the foreign keys of
// new pickup counters take.
func (s *Store) lockMerchant(ctx context.Context, tx pgx.Tx, l merchantLock) (*merchantRow, time.Time, error) {
	b := &pgx.Batch{}
	var locks merchantLocks
	sql := `SELECT ` + merchantColumns + ` FROM merchants WHERE id = $1 FOR NO KEY UPDATE`
	if l.skipLocked {
		sql += ` SKIP LOCKED`
	}
	locks.queue(b, sql, l.id)
	if l.order != nil {
		addOrderLock(b, l.id, l.orderID, l.order)
	}
	if l.head != nil {
		addLineHeadRead(b, l.id, l.head.limit, &l.head.orders)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, time.Time{}, fmt.Errorf("lock merchant %s: %w", l.id, err)
	}
	var follows []time.Time
	if l.order != nil {
		follows = append(follows, l.order.LastDecidedAt())
	}
	rows, now := locks.held(s.now, follows...)
	m := rows[l.id]
	if m == nil {
		return nil, now, errMerchantNotFound
	}
	return m, now, nil
}

var errMerchantNotFound = domain.Errorf(domain.CodeNotFound, "merchant not found")

// merchantLocks are merchants' rows read in a round trip that locks them,
// perhaps with other rows after them. They are handed out only with the
// time of the decisions taken under those locks (held), so that no decision
// holding a merchant's lock reads the clock before its locks are held or
// records a time before the merchant's last decision: every read of
// merchants under a lock goes through it.
type merchantLocks struct {
	rows map[uuid.UUID]*merchantRow
}

// queue adds to b the statement sql, which selects merchantColumns from
// merchants under a lock.
func (l *merchantLocks) queue(b *pgx.Batch, sql string, args ...any) {
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

// held returns the rows read, once the round trip that locked them is
// done, and the time of the decisions taken under their locks: the clock
// read now, unless a merchant's last decision or a time in follows (the last
// time of another row the decisions change) is later (domain.DecisionTime).
// Every row takes that time as its last decision, which its load or its
// state is saved with, so a merchant's later decisions, from whichever
// process, are not recorded before it.
func (l *merchantLocks) held(clock func() time.Time, follows ...time.Time) (map[uuid.UUID]*merchantRow, time.Time) {
	now := domain.DecisionTime(clock(), follows...)
	for _, m := range l.rows {
		now = domain.DecisionTime(now, m.decidedAtOrZero())
	}
	for _, m := range l.rows {
		m.decidedAt = &now
	}
	return l.rows, now
}

// addSaveLoad adds to b the statement that writes the merchant's load
// counters and completion stats, to travel with other writes.
func addSaveLoad(b *pgx.Batch, m *merchantRow) {
	b.Queue(`
		UPDATE merchants SET active = $2, queued = $3, next_seq = $4,
			completion_interval_s = $5, completion_samples = $6, last_completion_at = $7,
			active_orders = $8, queued_priority = $9, queued_units = $10, completion_units = $11, decided_at = $12, updated_at = now()
		WHERE id = $1`,
		m.ID, m.Load.Active, m.Load.Queued, m.nextSeq, m.stats.IntervalSeconds, m.stats.Samples, m.stats.LastCompletion,
		m.Load.ActiveOrders, m.queuedPriority, m.Load.QueuedUnits, m.stats.UnitsPerCompletion, m.decidedAt)
}

func newSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return "whsec_" + hex.EncodeToString(b)
}

// CreateMerchant records a new merchant; the answer carries its webhook secret,
// the only time it is shown.
func (s *Store) CreateMerchant(ctx context.Context, settings domain.MerchantSettings, meta Meta) (*Merchant, error) {
	if err := settings.Validate(); err != nil {
		return nil, err
	}
	settings = settings.WithDefaults()
	now := s.now()
	id := newID()
	secret := newSecret()
	events := []domain.Event{{Type: domain.EventMerchantCreated, Data: domain.MerchantCreated{
		MerchantID: id.String(), MerchantSettings: settings, CreatedAt: now,
	}}}
	created, err := domain.Merchant{}.Apply(events...)
	if err != nil {
		return nil, err
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if err := appendEvents(ctx, tx, AppendParams{
			StreamID: id, StreamType: StreamMerchant, MerchantID: id, Meta: meta, RecordedAt: now, Events: events,
		}); err != nil {
			return err
		}
		var cols merchantColumnsOf
		if err := cols.add(created, secret, &now); err != nil {
			return err
		}
		b := &pgx.Batch{}
		cols.queue(tx, b, "merchants", true)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("insert merchant: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	m, err := s.GetMerchant(ctx, id)
	if err != nil {
		return nil, err
	}
	m.WebhookSecret = secret
	return m, nil
}

// GetMerchant returns the merchant with its live load.
func (s *Store) GetMerchant(ctx context.Context, id uuid.UUID) (*Merchant, error) {
	m, err := scanMerchant(s.pool.QueryRow(ctx, `SELECT `+merchantColumns+` FROM merchants WHERE id = $1`, id))
	if err != nil {
		return nil, mapErr(err)
	}
	return &m.Merchant, nil
}

// MerchantPatch holds the fields a PATCH may change; nil leaves a field alone.
// ClearWebhook removes the webhook URL.
type MerchantPatch struct {
	Name                  *string
	Capacity              *int
	PrepSeconds           *int
	MaxQueueWaitSeconds   *int
	PaymentTimeoutSeconds *int
	WebhookURL            *string
	ClearWebhook          bool
	CapacityUnit          *domain.CapacityUnit
	Timezone              *string
	PickupPrefix          *string
	// Slots sets the slot settings; ClearSlots removes them. Hours, when
	// not nil, replaces the opening hours (empty: always open).
	Slots         *domain.SlotSettings
	ClearSlots    bool
	Hours         *[]domain.Period
	GuestCheckout *bool
}

func (p MerchantPatch) apply(s domain.MerchantSettings) domain.MerchantSettings {
	set := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	set(&s.Capacity, p.Capacity)
	set(&s.PrepSeconds, p.PrepSeconds)
	set(&s.MaxQueueWaitSeconds, p.MaxQueueWaitSeconds)
	set(&s.PaymentTimeoutSeconds, p.PaymentTimeoutSeconds)
	for _, f := range []struct {
		dst *string
		v   *string
	}{{&s.Name, p.Name}, {&s.WebhookURL, p.WebhookURL}, {&s.Timezone, p.Timezone}, {&s.PickupPrefix, p.PickupPrefix}} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	if p.ClearWebhook {
		s.WebhookURL = ""
	}
	if p.CapacityUnit != nil {
		s.CapacityUnit = *p.CapacityUnit
	}
	if p.Slots != nil {
		slots := *p.Slots
		s.Slots = &slots
	}
	if p.ClearSlots {
		s.Slots = nil
	}
	if p.Hours != nil {
		s.Hours = append([]domain.Period(nil), *p.Hours...)
	}
	if p.GuestCheckout != nil {
		s.GuestCheckout = *p.GuestCheckout
	}
	return s
}

// writeMerchant is the one write of a merchant's change: its events,
// appended after the version m was read at and recorded at now, and the
// state they fold to, in one statement each. m holds the merchant's lock
// and takes the new state. The state carries m's last decision, so that a
// change that saves no load still floors the merchant's later decisions,
// from whichever process, at the time its events were recorded.
func writeMerchant(ctx context.Context, tx pgx.Tx, m *merchantRow, events []domain.Event, meta Meta, now time.Time) error {
	if len(events) == 0 {
		return nil
	}
	after, err := m.folded().Apply(events...)
	if err != nil {
		return err
	}
	var cols merchantColumnsOf
	if err := cols.add(after, "", m.decidedAt); err != nil {
		return err
	}
	if err := writeStream(ctx, tx, AppendParams{
		StreamID: m.ID, StreamType: StreamMerchant, MerchantID: m.ID, ExpectedVersion: m.Version, Meta: meta, RecordedAt: now, Events: events,
	}, &cols, "merchants", false); err != nil {
		return err
	}
	m.setFolded(after)
	return nil
}

// merchantFoldColumns are the merchant columns its stream folds to, as
// merchantColumnsOf writes them.
const merchantFoldColumns = `id, name, capacity, prep_seconds, max_queue_wait_seconds, payment_timeout_seconds, webhook_url,
	created_at, version, capacity_unit, timezone, pickup_prefix, pause_mode, paused_until,
	slots, hours, period_capacity, next_period_at, guest_checkout`

// merchantColumnsOf holds folded merchants column by column, as unnest
// takes them, with the webhook secret a new row is inserted with (the log
// never holds it), and the time of the decision that wrote them, which
// only a write under the merchant's lock knows.
type merchantColumnsOf struct {
	id                                                    [][16]byte
	name, unit, timezone, prefix, secret                  []string
	capacity, prep, maxQueueWait, paymentTimeout, version []int32
	webhook, pauseMode                                    []pgtype.Text
	createdAt                                             []time.Time
	pausedUntil, decidedAt, nextEdge                      []pgtype.Timestamptz
	slots, hours                                          []pgtype.Text
	periodCapacity                                        []pgtype.Int4
	guestCheckout                                         []bool
}

func (c *merchantColumnsOf) add(m domain.Merchant, secret string, decidedAt *time.Time) error {
	id, err := parseID(m.ID)
	if err != nil {
		return err
	}
	s := m.Settings.WithDefaults()
	c.id, c.name, c.unit, c.timezone, c.prefix = append(c.id, id), append(c.name, s.Name), append(c.unit, string(s.CapacityUnit)),
		append(c.timezone, s.Timezone), append(c.prefix, s.PickupPrefix)
	c.secret = append(c.secret, secret)
	c.capacity, c.prep = append(c.capacity, int32(s.Capacity)), append(c.prep, int32(s.PrepSeconds))
	c.maxQueueWait, c.paymentTimeout = append(c.maxQueueWait, int32(s.MaxQueueWaitSeconds)), append(c.paymentTimeout, int32(s.PaymentTimeoutSeconds))
	c.version, c.createdAt = append(c.version, int32(m.Version)), append(c.createdAt, m.CreatedAt)
	c.webhook = append(c.webhook, pgtype.Text{String: s.WebhookURL, Valid: s.WebhookURL != ""})
	c.pauseMode = append(c.pauseMode, pgtype.Text{String: string(m.Pause.Mode), Valid: m.Pause.Paused()})
	c.pausedUntil = append(c.pausedUntil, timestamptz(m.Pause.Until))
	c.decidedAt = append(c.decidedAt, timestamptz(decidedAt))
	slots, hours, err := scheduleJSON(s)
	if err != nil {
		return err
	}
	c.slots, c.hours = append(c.slots, slots), append(c.hours, hours)
	c.nextEdge = append(c.nextEdge, timestamptz(m.NextEdge))
	capacity := pgtype.Int4{}
	if m.PeriodCapacity != nil {
		capacity = pgtype.Int4{Int32: int32(*m.PeriodCapacity), Valid: true}
	}
	c.periodCapacity = append(c.periodCapacity, capacity)
	c.guestCheckout = append(c.guestCheckout, s.GuestCheckout)
	return nil
}

// scheduleJSON is a merchant's slot settings and hours as their jsonb
// columns hold them (null when none).
func scheduleJSON(s domain.MerchantSettings) (slots, hours pgtype.Text, err error) {
	if s.Slots != nil {
		b, err := json.Marshal(s.Slots)
		if err != nil {
			return slots, hours, fmt.Errorf("encode slots: %w", err)
		}
		slots = pgtype.Text{String: string(b), Valid: true}
	}
	if len(s.Hours) > 0 {
		b, err := json.Marshal(s.Hours)
		if err != nil {
			return slots, hours, fmt.Errorf("encode hours: %w", err)
		}
		hours = pgtype.Text{String: string(b), Valid: true}
	}
	return slots, hours, nil
}

// queue adds to b the statement that writes the rows into table (merchants,
// or a table like it): inserted with their secrets when new, else every
// column the fold knows updated, and decided_at where a decision time is
// given (a replay has none, and leaves it alone).
func (c *merchantColumnsOf) queue(tx pgx.Tx, b *pgx.Batch, table string, insert bool) {
	if len(c.id) == 0 {
		return
	}
	t := pgx.Identifier{table}.Sanitize()
	columns := []column{col("uuid", c.id), col("text", c.name), col("int", c.capacity), col("int", c.prep),
		col("int", c.maxQueueWait), col("int", c.paymentTimeout), col("text", c.webhook), col("timestamptz", c.createdAt),
		col("int", c.version), col("text", c.unit), col("text", c.timezone), col("text", c.prefix), col("text", c.pauseMode),
		col("timestamptz", c.pausedUntil), col("jsonb", c.slots), col("jsonb", c.hours), col("int", c.periodCapacity),
		col("timestamptz", c.nextEdge), col("boolean", c.guestCheckout)}
	if insert {
		insertRows{
			Into:    `INSERT INTO ` + t + ` (` + merchantFoldColumns + `, webhook_secret, decided_at)`,
			Columns: append(columns, col("text", c.secret), col("timestamptz", c.decidedAt)),
		}.queue(tx, b, nil)
		return
	}
	rows, args := unnestOf(0, append(columns, col("timestamptz", c.decidedAt)))
	b.Queue(`UPDATE `+t+` m SET name = r.name, capacity = r.capacity, prep_seconds = r.prep_seconds,
			max_queue_wait_seconds = r.max_queue_wait_seconds, payment_timeout_seconds = r.payment_timeout_seconds,
			webhook_url = r.webhook_url, created_at = r.created_at, version = r.version, capacity_unit = r.capacity_unit,
			timezone = r.timezone, pickup_prefix = r.pickup_prefix, pause_mode = r.pause_mode, paused_until = r.paused_until,
			slots = r.slots, hours = r.hours, period_capacity = r.period_capacity, next_period_at = r.next_period_at,
			guest_checkout = r.guest_checkout,
			decided_at = coalesce(r.decided_at, m.decided_at), updated_at = now()
		FROM `+rows+` AS r(`+merchantFoldColumns+`, decided_at)
		WHERE m.id = r.id AND m.id = ANY($1::uuid[])`, args...)
}

// UpdateMerchant changes settings under the merchant's lock, so a capacity
// change governs the very next admission decision. Raising capacity admits
// queued orders in the same transaction, in queue order; lowering it evicts
// nobody (active may stay above capacity until orders complete). The unit
// changes only while nothing is accepted or queued.
func (s *Store) UpdateMerchant(ctx context.Context, id uuid.UUID, p MerchantPatch, meta Meta) (*Merchant, error) {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		m, now, err := s.lockMerchant(ctx, tx, merchantLock{id: id})
		if err != nil {
			return err
		}
		before := m.settings()
		after := p.apply(before)
		if err := after.Validate(); err != nil {
			return err
		}
		after = after.WithDefaults()
		if after.Equal(before) {
			return nil
		}
		if err := domain.CheckSettingsChange(before, after, m.load()); err != nil {
			return err
		}
		inForce := m.capacityInForce()
		events := []domain.Event{{Type: domain.EventMerchantUpdated, Data: domain.MerchantUpdated{
			Before: before, After: after, UpdatedAt: now,
		}}}
		// New hours may open or close a period now: the capacity in force
		// changes with them, not at the next edge.
		updated, err := m.folded().Apply(events...)
		if err != nil {
			return err
		}
		period, err := domain.PeriodChange(updated, now)
		if err != nil {
			return err
		}
		if err := writeMerchant(ctx, tx, m, append(events, period...), meta, now); err != nil {
			return err
		}
		if err := s.afterPeriodChange(ctx, tx, m, period); err != nil {
			return err
		}
		if err := resizeSlots(ctx, tx, m, before, now); err != nil {
			return err
		}
		if m.capacityInForce() > inForce {
			return s.drainLocked(ctx, tx, m, now, s.cfg.InlineDrainLimit)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.GetMerchant(ctx, id)
}

// PauseMerchant pauses a merchant's admissions (and, in refuse mode, its
// placements); with an end, a timer resumes it then.
func (s *Store) PauseMerchant(ctx context.Context, id uuid.UUID, req domain.PauseRequest, meta Meta) (*Merchant, error) {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		m, now, err := s.lockMerchant(ctx, tx, merchantLock{id: id})
		if err != nil {
			return err
		}
		events, err := domain.PauseMerchant(m.folded(), req, meta.Actor, now)
		if err != nil {
			return err
		}
		if err := writeMerchant(ctx, tx, m, events, meta, now); err != nil {
			return err
		}
		if m.pause.Until == nil {
			return nil
		}
		return s.insertJobs(ctx, tx, []river.InsertManyParams{{
			Args:       ResumeMerchantArgs{MerchantID: id, Until: *m.pause.Until},
			InsertOpts: &river.InsertOpts{ScheduledAt: *m.pause.Until},
		}})
	})
	if err != nil {
		return nil, err
	}
	return s.GetMerchant(ctx, id)
}

// ResumeMerchant ends a merchant's pause and drains its queue in order at
// once; an unpaused merchant is left alone.
func (s *Store) ResumeMerchant(ctx context.Context, id uuid.UUID, meta Meta) (*Merchant, error) {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		m, now, err := s.lockMerchant(ctx, tx, merchantLock{id: id})
		if err != nil {
			return err
		}
		return s.resumeLocked(ctx, tx, m, domain.ResumeMerchant(m.folded(), meta.Actor, now), meta, now)
	})
	if err != nil {
		return nil, err
	}
	return s.GetMerchant(ctx, id)
}

func (s *Store) resumeLocked(ctx context.Context, tx pgx.Tx, m *merchantRow, events []domain.Event, meta Meta, now time.Time) error {
	if len(events) == 0 {
		return nil
	}
	if err := writeMerchant(ctx, tx, m, events, meta, now); err != nil {
		return err
	}
	return s.drainLocked(ctx, tx, m, now, s.cfg.InlineDrainLimit)
}

// ResumeDue resumes a merchant whose pause ending at until has ended: the
// pause timer. It reports whether it resumed it; a pause replaced or
// resumed since is left alone.
func (s *Store) ResumeDue(ctx context.Context, id uuid.UUID, until time.Time) (bool, error) {
	resumed := false
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		m, now, err := s.lockMerchant(ctx, tx, merchantLock{id: id})
		if errors.Is(err, domain.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		events := domain.ResumeDue(m.folded(), until, now)
		resumed = len(events) > 0
		return s.resumeLocked(ctx, tx, m, events, Meta{Actor: domain.ActorSystem}, now)
	})
	return resumed, err
}

// ResumeOverdue resumes up to limit merchants whose pause ended before
// cutoff and reports how many it found: the backstop behind the pause
// timers.
func (s *Store) ResumeOverdue(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	type pause struct {
		ID    uuid.UUID
		Until time.Time
	}
	return sweepOverdue(ctx, s, "overdue pauses", `SELECT id, paused_until FROM merchants WHERE paused_until < $1 ORDER BY paused_until LIMIT $2`,
		cutoff, limit, func(p pause) error {
			_, err := s.ResumeDue(ctx, p.ID, p.Until)
			return err
		})
}

// RotateWebhookSecret replaces the merchant's webhook secret and returns the
// merchant with the new secret, shown this once.
func (s *Store) RotateWebhookSecret(ctx context.Context, id uuid.UUID, meta Meta) (*Merchant, error) {
	secret := newSecret()
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		m, now, err := s.lockMerchant(ctx, tx, merchantLock{id: id})
		if err != nil {
			return err
		}
		if err := writeMerchant(ctx, tx, m, []domain.Event{{Type: domain.EventMerchantSecretRotated,
			Data: domain.MerchantSecretRotated{RotatedAt: now}}}, meta, now); err != nil {
			return err
		}
		// The secret never enters the log, so no fold writes it.
		_, err = tx.Exec(ctx, `UPDATE merchants SET webhook_secret = $2 WHERE id = $1`, id, secret)
		if err != nil {
			return fmt.Errorf("rotate secret: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	m, err := s.GetMerchant(ctx, id)
	if err != nil {
		return nil, err
	}
	m.WebhookSecret = secret
	return m, nil
}

// WebhookTarget is what a delivery needs about a merchant.
type WebhookTarget struct {
	URL    string
	Secret string
}

// MerchantWebhook returns the merchant's webhook URL and secret ("" URL when none).
func (s *Store) MerchantWebhook(ctx context.Context, id uuid.UUID) (WebhookTarget, error) {
	var t WebhookTarget
	var url *string
	err := s.pool.QueryRow(ctx, `SELECT webhook_url, webhook_secret FROM merchants WHERE id = $1`, id).Scan(&url, &t.Secret)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, domain.Errorf(domain.CodeNotFound, "merchant not found")
	}
	if err != nil {
		return t, mapErr(fmt.Errorf("merchant webhook: %w", err))
	}
	if url != nil {
		t.URL = *url
	}
	return t, nil
}

// FindMerchantByName returns the oldest merchant with that name; the dev
// command uses it to load its demo data once.
func (s *Store) FindMerchantByName(ctx context.Context, name string) (*Merchant, error) {
	m, err := scanMerchant(s.pool.QueryRow(ctx, `SELECT `+merchantColumns+` FROM merchants WHERE name = $1 ORDER BY created_at LIMIT 1`, name))
	if err != nil {
		return nil, mapErr(err)
	}
	return &m.Merchant, nil
}
