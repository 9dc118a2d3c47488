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

// LoadView is a merchant's live load as clients see it: active counts units
// (orders when the merchant counts orders), queued counts orders.
type LoadView struct {
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

// setStatus sets the load's public status: Open, Busy and EstWaitSeconds.
func (v *LoadView) setStatus(s domain.PublicStatus) {
	v.Open, v.Busy, v.EstWaitSeconds = s.Open, s.Busy, s.EstWaitSeconds
}

// MerchantView is the merchant read model in the API's shape.
type MerchantView struct {
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
	Load                  LoadView             `json:"load"`
}

// Settings are the merchant's settings in the domain's terms.
func (m *MerchantView) Settings() domain.MerchantSettings {
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

var errMerchantNotFound = domain.Errorf(domain.CodeNotFound, "merchant not found")

func newSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return "whsec_" + hex.EncodeToString(b)
}

// CreateMerchant records a new merchant; the answer carries its webhook secret,
// the only time it is shown.
func (s *Store) CreateMerchant(ctx context.Context, settings domain.MerchantSettings, meta Meta) (*MerchantView, error) {
	if err := settings.Validate(); err != nil {
		return nil, err
	}
	settings = settings.WithDefaults()
	now := s.now()
	id := newID()
	secret := newSecret()
	events := []domain.Event{{Type: domain.EventMerchantCreated, Data: domain.MerchantCreated{
		MerchantID: id, MerchantSettings: settings, CreatedAt: now,
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
		cols.addTo(tx, b, "merchants", true)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("insert merchant: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.merchantWithSecret(ctx, id, secret)
}

// merchantWithSecret returns the merchant whose webhook secret was just
// set, with that secret: the one answer that shows it.
func (s *Store) merchantWithSecret(ctx context.Context, id uuid.UUID, secret string) (*MerchantView, error) {
	m, err := s.GetMerchant(ctx, id)
	if err != nil {
		return nil, err
	}
	m.WebhookSecret = secret
	return m, nil
}

// GetMerchant returns the merchant with its live load.
func (s *Store) GetMerchant(ctx context.Context, id uuid.UUID) (*MerchantView, error) {
	m, err := scanMerchant(s.pool.QueryRow(ctx, `SELECT `+merchantColumns+` FROM merchants WHERE id = $1`, id))
	if err != nil {
		return nil, mapErr(err)
	}
	m.Load.setStatus(domain.StatusOf(m.load(), m.pause, m.PrepSeconds, m.stats))
	return &m.MerchantView, nil
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

// UpdateMerchant changes settings under the merchant's lock as
// domain.ChangeSettings decides, so that a capacity change governs the very
// next admission decision: a raise of the capacity in force admits queued
// orders in the same transaction, in queue order; a fall evicts nobody.
func (s *Store) UpdateMerchant(ctx context.Context, id uuid.UUID, p MerchantPatch, meta Meta) (*MerchantView, error) {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		m, err := s.lockMerchant(ctx, tx, merchantLock{id: id})
		if err != nil {
			return err
		}
		now := domain.DecisionTime(s.now(), m.lastDecision())
		before := m.settings()
		change, err := domain.ChangeSettings(m.folded(), p.apply(before), m.load(), now)
		if err != nil || change.Events == nil {
			return err
		}
		if err := writeMerchant(ctx, tx, m, change.Events, meta, now); err != nil {
			return err
		}
		if err := s.afterPeriodChange(ctx, tx, m, change.Period); err != nil {
			return err
		}
		if err := resizeSlots(ctx, tx, m, before, now); err != nil {
			return err
		}
		if change.AdmitsLine {
			return s.admitLine(ctx, tx, m, now)
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
func (s *Store) PauseMerchant(ctx context.Context, id uuid.UUID, req domain.PauseRequest, meta Meta) (*MerchantView, error) {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		m, err := s.lockMerchant(ctx, tx, merchantLock{id: id})
		if err != nil {
			return err
		}
		now := domain.DecisionTime(s.now(), m.lastDecision())
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
func (s *Store) ResumeMerchant(ctx context.Context, id uuid.UUID, meta Meta) (*MerchantView, error) {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		m, err := s.lockMerchant(ctx, tx, merchantLock{id: id})
		if err != nil {
			return err
		}
		now := domain.DecisionTime(s.now(), m.lastDecision())
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
	return s.admitLine(ctx, tx, m, now)
}

// admitLine lets the line in as far as a merchant's change made room for
// (domain.DrainLine), in its transaction.
func (s *Store) admitLine(ctx context.Context, tx pgx.Tx, m *merchantRow, now time.Time) error {
	head, err := s.readLineHead(ctx, tx, m, s.cfg.InlineDrainLimit, writeSet{loads: []*merchantRow{m}}, now)
	if err != nil {
		return err
	}
	return head.commit(domain.DrainLine(head.orders, m.load(), head.limit, now))
}

// ResumeDue resumes a merchant whose pause ending at until has ended: the
// pause timer. It reports whether it resumed it; a pause replaced or
// resumed since is left alone.
func (s *Store) ResumeDue(ctx context.Context, id uuid.UUID, until time.Time) (bool, error) {
	resumed := false
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		m, err := s.lockMerchant(ctx, tx, merchantLock{id: id})
		if errors.Is(err, domain.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		now := domain.DecisionTime(s.now(), m.lastDecision())
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
	return sweepOverdue(ctx, s, "overdue pauses", "merchants", func(from string) string {
		return `SELECT id, paused_until FROM ` + from + ` WHERE paused_until < $1 ORDER BY paused_until LIMIT $2`
	}, cutoff, limit, func(p pause) error {
		_, err := s.ResumeDue(ctx, p.ID, p.Until)
		return err
	})
}

// RotateWebhookSecret replaces the merchant's webhook secret and returns the
// merchant with the new secret, shown this once.
func (s *Store) RotateWebhookSecret(ctx context.Context, id uuid.UUID, meta Meta) (*MerchantView, error) {
	secret := newSecret()
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		m, err := s.lockMerchant(ctx, tx, merchantLock{id: id})
		if err != nil {
			return err
		}
		now := domain.DecisionTime(s.now(), m.lastDecision())
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
	return s.merchantWithSecret(ctx, id, secret)
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
func (s *Store) FindMerchantByName(ctx context.Context, name string) (*MerchantView, error) {
	m, err := scanMerchant(s.pool.QueryRow(ctx, `SELECT `+merchantColumns+` FROM merchants WHERE name = $1 ORDER BY created_at LIMIT 1`, name))
	if err != nil {
		return nil, mapErr(err)
	}
	m.Load.setStatus(domain.StatusOf(m.load(), m.pause, m.PrepSeconds, m.stats))
	return &m.MerchantView, nil
}
