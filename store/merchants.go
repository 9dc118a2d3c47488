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

	"github.com/orderd/orderd/domain"
)

// Load is a merchant's live load as clients see it.
type Load struct {
	Capacity       int `json:"capacity"`
	Active         int `json:"active"`
	Queued         int `json:"queued"`
	EstWaitSeconds int `json:"est_wait_seconds"`
}

// Merchant is the merchant read model in the API's shape.
type Merchant struct {
	ID                    uuid.UUID `json:"id"`
	Name                  string    `json:"name"`
	Capacity              int       `json:"capacity"`
	PrepSeconds           int       `json:"prep_seconds"`
	MaxQueueWaitSeconds   int       `json:"max_queue_wait_seconds"`
	PaymentTimeoutSeconds int       `json:"payment_timeout_seconds"`
	WebhookURL            *string   `json:"webhook_url"`
	WebhookSecret         string    `json:"webhook_secret,omitempty"`
	CreatedAt             time.Time `json:"created_at"`
	Version               int       `json:"version"`
	Load                  Load      `json:"load"`
}

// merchantRow is the full row, including what only the store sees.
type merchantRow struct {
	Merchant
	secret  string
	nextSeq int64
	stats   domain.CompletionStats
	// dirty marks a load changed in memory and not yet saved.
	dirty bool
}

func (m *merchantRow) settings() domain.MerchantSettings {
	s := domain.MerchantSettings{
		Name: m.Name, Capacity: m.Capacity, PrepSeconds: m.PrepSeconds,
		MaxQueueWaitSeconds: m.MaxQueueWaitSeconds, PaymentTimeoutSeconds: m.PaymentTimeoutSeconds,
	}
	if m.WebhookURL != nil {
		s.WebhookURL = *m.WebhookURL
	}
	return s
}

func (m *merchantRow) load() domain.Load {
	return domain.Load{Capacity: m.Capacity, Active: m.Load.Active, Queued: m.Load.Queued, NextSeq: m.nextSeq}
}

func (m *merchantRow) setLoad(l domain.Load) {
	m.Capacity, m.Load.Capacity = l.Capacity, l.Capacity
	m.Load.Active, m.Load.Queued, m.nextSeq = l.Active, l.Queued, l.NextSeq
}

func (m *merchantRow) maxQueueWait() time.Duration {
	return time.Duration(m.MaxQueueWaitSeconds) * time.Second
}

// fillEstimate sets the estimated wait of an order paid now.
func (m *merchantRow) fillEstimate() {
	m.Load.Capacity = m.Capacity
	if m.load().CanAdmitNew(1, domain.LaneNormal) {
		m.Load.EstWaitSeconds = 0
		return
	}
	m.Load.EstWaitSeconds = domain.EstimateWait(m.Load.Queued+1, m.Capacity, m.PrepSeconds, m.stats)
}

const merchantColumns = `id, name, capacity, prep_seconds, max_queue_wait_seconds, payment_timeout_seconds,
	webhook_url, webhook_secret, created_at, version, active, queued, next_seq,
	completion_interval_s, completion_samples, last_completion_at`

func scanMerchant(row pgx.Row) (*merchantRow, error) {
	var m merchantRow
	err := row.Scan(&m.ID, &m.Name, &m.Capacity, &m.PrepSeconds, &m.MaxQueueWaitSeconds, &m.PaymentTimeoutSeconds,
		&m.WebhookURL, &m.secret, &m.CreatedAt, &m.Version, &m.Load.Active, &m.Load.Queued, &m.nextSeq,
		&m.stats.IntervalSeconds, &m.stats.Samples, &m.stats.LastCompletion)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, domain.Errorf(domain.CodeNotFound, "merchant not found")
	}
	if err != nil {
		return nil, fmt.Errorf("scan merchant: %w", err)
	}
	m.fillEstimate()
	return &m, nil
}

// lockMerchant takes the merchant's row lock, which serializes every decision
// about its load. NO KEY UPDATE does not conflict with the key-share locks
// that foreign keys from new orders take.
func lockMerchant(ctx context.Context, tx pgx.Tx, id uuid.UUID) (*merchantRow, error) {
	return scanMerchant(tx.QueryRow(ctx, `SELECT `+merchantColumns+` FROM merchants WHERE id = $1 FOR NO KEY UPDATE`, id))
}

// saveLoad writes the merchant's load counters and completion stats.
func saveLoad(ctx context.Context, tx pgx.Tx, m *merchantRow) error {
	_, err := tx.Exec(ctx, `
		UPDATE merchants SET active = $2, queued = $3, next_seq = $4,
			completion_interval_s = $5, completion_samples = $6, last_completion_at = $7, updated_at = now()
		WHERE id = $1`,
		m.ID, m.Load.Active, m.Load.Queued, m.nextSeq, m.stats.IntervalSeconds, m.stats.Samples, m.stats.LastCompletion)
	if err != nil {
		return fmt.Errorf("save load of merchant %s: %w", m.ID, err)
	}
	return nil
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
	now := s.now()
	id := newID()
	secret := newSecret()
	var webhook *string
	if settings.WebhookURL != "" {
		webhook = &settings.WebhookURL
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := appendEvents(ctx, tx, AppendParams{
			StreamID: id, StreamType: StreamMerchant, Meta: meta, RecordedAt: now,
			Events: []domain.Event{{Type: domain.EventMerchantCreated, Data: domain.MerchantCreated{
				MerchantID: id.String(), MerchantSettings: settings, CreatedAt: now,
			}}},
		}); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `
			INSERT INTO merchants (id, name, capacity, prep_seconds, max_queue_wait_seconds, payment_timeout_seconds,
				webhook_url, webhook_secret, created_at, version)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 1)`,
			id, settings.Name, settings.Capacity, settings.PrepSeconds, settings.MaxQueueWaitSeconds,
			settings.PaymentTimeoutSeconds, webhook, secret, now)
		if err != nil {
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
}

// UpdateMerchant changes settings under the merchant's lock, so a capacity
// change governs the very next admission decision. Raising capacity admits
// queued orders in the same transaction, in queue order; lowering it evicts
// nobody (active may stay above capacity until orders complete).
func (s *Store) UpdateMerchant(ctx context.Context, id uuid.UUID, p MerchantPatch, meta Meta) (*Merchant, error) {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		m, err := lockMerchant(ctx, tx, id)
		if err != nil {
			return err
		}
		before := m.settings()
		after := before
		if p.Name != nil {
			after.Name = *p.Name
		}
		if p.Capacity != nil {
			after.Capacity = *p.Capacity
		}
		if p.PrepSeconds != nil {
			after.PrepSeconds = *p.PrepSeconds
		}
		if p.MaxQueueWaitSeconds != nil {
			after.MaxQueueWaitSeconds = *p.MaxQueueWaitSeconds
		}
		if p.PaymentTimeoutSeconds != nil {
			after.PaymentTimeoutSeconds = *p.PaymentTimeoutSeconds
		}
		if p.WebhookURL != nil {
			after.WebhookURL = *p.WebhookURL
		}
		if p.ClearWebhook {
			after.WebhookURL = ""
		}
		if err := after.Validate(); err != nil {
			return err
		}
		if after == before {
			return nil
		}
		now := s.now()
		if err := appendEvents(ctx, tx, AppendParams{
			StreamID: id, StreamType: StreamMerchant, ExpectedVersion: m.Version, Meta: meta, RecordedAt: now,
			Events: []domain.Event{{Type: domain.EventMerchantUpdated, Data: domain.MerchantUpdated{
				Before: before, After: after, UpdatedAt: now,
			}}},
		}); err != nil {
			return err
		}
		var webhook *string
		if after.WebhookURL != "" {
			webhook = &after.WebhookURL
		}
		if _, err := tx.Exec(ctx, `
			UPDATE merchants SET name = $2, capacity = $3, prep_seconds = $4, max_queue_wait_seconds = $5,
				payment_timeout_seconds = $6, webhook_url = $7, version = version + 1, updated_at = now()
			WHERE id = $1`,
			id, after.Name, after.Capacity, after.PrepSeconds, after.MaxQueueWaitSeconds,
			after.PaymentTimeoutSeconds, webhook); err != nil {
			return fmt.Errorf("update merchant: %w", err)
		}
		m.Version++
		m.Name, m.Capacity, m.PrepSeconds = after.Name, after.Capacity, after.PrepSeconds
		m.MaxQueueWaitSeconds, m.PaymentTimeoutSeconds, m.WebhookURL = after.MaxQueueWaitSeconds, after.PaymentTimeoutSeconds, webhook
		if after.Capacity > before.Capacity {
			return s.drainLocked(ctx, tx, m, now, s.InlineDrainLimit)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.GetMerchant(ctx, id)
}

// RotateWebhookSecret replaces the merchant's webhook secret and returns the
// merchant with the new secret, shown this once.
func (s *Store) RotateWebhookSecret(ctx context.Context, id uuid.UUID, meta Meta) (*Merchant, error) {
	secret := newSecret()
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		m, err := lockMerchant(ctx, tx, id)
		if err != nil {
			return err
		}
		now := s.now()
		if err := appendEvents(ctx, tx, AppendParams{
			StreamID: id, StreamType: StreamMerchant, ExpectedVersion: m.Version, Meta: meta, RecordedAt: now,
			Events: []domain.Event{{Type: domain.EventMerchantSecretRotated, Data: domain.MerchantSecretRotated{RotatedAt: now}}},
		}); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE merchants SET webhook_secret = $2, version = version + 1 WHERE id = $1`, id, secret)
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
