package domain

import (
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// Merchant settings limits.
const (
	MaxCapacity       = 100_000
	MaxSettingSeconds = 7 * 24 * 3600
	MaxNameLength     = 200
	MaxURLLength      = 2048

	DefaultPrepSeconds           = 120
	DefaultMaxQueueWaitSeconds   = 1800
	DefaultPaymentTimeoutSeconds = 900
)

// Merchant and product event types.
const (
	EventMerchantCreated       = "merchant.created"
	EventMerchantUpdated       = "merchant.updated"
	EventMerchantSecretRotated = "merchant.webhook_secret_rotated"
	EventProductCreated        = "product.created"
	EventProductRestocked      = "product.restocked"
)

// MerchantSettings are the merchant's tunable fields.
type MerchantSettings struct {
	Name                  string `json:"name"`
	Capacity              int    `json:"capacity"`
	PrepSeconds           int    `json:"prep_seconds"`
	MaxQueueWaitSeconds   int    `json:"max_queue_wait_seconds"`
	PaymentTimeoutSeconds int    `json:"payment_timeout_seconds"`
	WebhookURL            string `json:"webhook_url,omitempty"`
}

// Validate checks every field; the webhook URL is checked for shape only, the
// network policy (loopback, link-local) belongs to the delivery side.
func (s MerchantSettings) Validate() error {
	name := strings.TrimSpace(s.Name)
	if name == "" || utf8.RuneCountInString(s.Name) > MaxNameLength {
		return Errorf(CodeValidation, "name must be 1-%d characters", MaxNameLength)
	}
	if s.Capacity < 0 || s.Capacity > MaxCapacity {
		return Errorf(CodeValidation, "capacity must be between 0 and %d", MaxCapacity)
	}
	for _, f := range []struct {
		name string
		v    int
		min  int
	}{
		{"prep_seconds", s.PrepSeconds, 1},
		{"max_queue_wait_seconds", s.MaxQueueWaitSeconds, 1},
		{"payment_timeout_seconds", s.PaymentTimeoutSeconds, 1},
	} {
		if f.v < f.min || f.v > MaxSettingSeconds {
			return Errorf(CodeValidation, "%s must be between %d and %d", f.name, f.min, MaxSettingSeconds)
		}
	}
	if s.WebhookURL != "" {
		if err := ValidateWebhookURL(s.WebhookURL); err != nil {
			return err
		}
	}
	return nil
}

// ValidateWebhookURL accepts absolute http(s) URLs with a host and no credentials.
func ValidateWebhookURL(raw string) error {
	if len(raw) > MaxURLLength {
		return Errorf(CodeValidation, "webhook_url must be at most %d characters", MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		return Errorf(CodeValidation, "webhook_url must be an absolute http or https URL")
	}
	if u.User != nil {
		return Errorf(CodeValidation, "webhook_url must not carry credentials")
	}
	return nil
}

type MerchantCreated struct {
	MerchantID string `json:"merchant_id"`
	MerchantSettings
	CreatedAt time.Time `json:"created_at"`
}

// MerchantUpdated records a settings change with the values before and after,
// so a capacity change is auditable on its own.
type MerchantUpdated struct {
	Before    MerchantSettings `json:"before"`
	After     MerchantSettings `json:"after"`
	UpdatedAt time.Time        `json:"updated_at"`
}

// MerchantSecretRotated records that the webhook secret changed; the secret
// itself never enters the event log, which auditors can read.
type MerchantSecretRotated struct {
	RotatedAt time.Time `json:"rotated_at"`
}

type ProductCreated struct {
	ProductID    string    `json:"product_id"`
	MerchantID   string    `json:"merchant_id"`
	Name         string    `json:"name"`
	PriceCents   int64     `json:"price_cents"`
	Stock        *int      `json:"stock"`
	PerUserLimit *int      `json:"per_user_limit"`
	CreatedAt    time.Time `json:"created_at"`
}

type ProductRestocked struct {
	Quantity    int       `json:"quantity"`
	RestockedAt time.Time `json:"restocked_at"`
}

// Product limits.
const (
	MaxPriceCents   = 100_000_000
	MaxStock        = 100_000_000
	MaxRestock      = 1_000_000
	MaxPerUserLimit = 1_000
)

// ValidateProduct checks a new product's fields.
func ValidateProduct(name string, priceCents int64, stock, perUserLimit *int) error {
	if strings.TrimSpace(name) == "" || utf8.RuneCountInString(name) > MaxNameLength {
		return Errorf(CodeValidation, "name must be 1-%d characters", MaxNameLength)
	}
	if priceCents < 0 || priceCents > MaxPriceCents {
		return Errorf(CodeValidation, "price_cents must be between 0 and %d", MaxPriceCents)
	}
	if stock != nil && (*stock < 0 || *stock > MaxStock) {
		return Errorf(CodeValidation, "stock must be between 0 and %d, or null for unlimited", MaxStock)
	}
	if perUserLimit != nil && (*perUserLimit < 1 || *perUserLimit > MaxPerUserLimit) {
		return Errorf(CodeValidation, "per_user_limit must be between 1 and %d, or null for none", MaxPerUserLimit)
	}
	return nil
}

// ValidateRestock checks a restock quantity.
func ValidateRestock(quantity int) error {
	if quantity < 1 || quantity > MaxRestock {
		return Errorf(CodeValidation, "quantity must be between 1 and %d", MaxRestock)
	}
	return nil
}

// CompletionStats is what the ETA estimator keeps about a merchant: an
// exponentially weighted mean of the time between completions while the
// merchant was saturated (had a queue), which is its real service rate.
type CompletionStats struct {
	IntervalSeconds float64 // 0 = no history yet
	LastCompletion  *time.Time
	Samples         int
}

const (
	ewmaAlpha       = 0.2
	minIntervalSecs = 0.01
	maxIntervalSecs = 3600.0
	minETASamples   = 3
	maxETASeconds   = 7 * 24 * 3600
)

// ObserveCompletion updates the stats at a completion. saturated says whether
// orders were waiting: only then does the gap measure the merchant's pace
// rather than a lull in demand.
func (c CompletionStats) ObserveCompletion(now time.Time, saturated bool) CompletionStats {
	if saturated && c.LastCompletion != nil {
		gap := now.Sub(*c.LastCompletion).Seconds()
		gap = math.Min(math.Max(gap, minIntervalSecs), maxIntervalSecs)
		if c.Samples == 0 || c.IntervalSeconds == 0 {
			c.IntervalSeconds = gap
		} else {
			c.IntervalSeconds = ewmaAlpha*gap + (1-ewmaAlpha)*c.IntervalSeconds
		}
		c.Samples++
	}
	c.LastCompletion = &now
	return c
}

// EstimateWait returns the estimated seconds until the order at position
// (1 = next) is accepted. With enough measured completions it is position ×
// the measured gap between completions; before that it falls back to
// prep_seconds × position / capacity.
func EstimateWait(position, capacity, prepSeconds int, stats CompletionStats) int {
	if position < 1 {
		return 0
	}
	var secs float64
	if stats.Samples >= minETASamples && stats.IntervalSeconds > 0 {
		secs = float64(position) * stats.IntervalSeconds
	} else {
		secs = float64(prepSeconds) * float64(position) / float64(max(capacity, 1))
	}
	return int(math.Min(math.Ceil(secs), maxETASeconds))
}

// Merchant is a merchant as its events fold: settings, creation time and
// version (the webhook secret and live load are not events' business).
type Merchant struct {
	ID        string
	Settings  MerchantSettings
	CreatedAt time.Time
	Version   int
}

// Evolve folds one event of the merchant's stream.
func (m Merchant) Evolve(e Event) (Merchant, error) {
	switch d := e.Data.(type) {
	case MerchantCreated:
		if m.Version != 0 {
			return m, fmt.Errorf("merchant %s created twice", m.ID)
		}
		m.ID, m.Settings, m.CreatedAt = d.MerchantID, d.MerchantSettings, d.CreatedAt
	case MerchantUpdated:
		m.Settings = d.After
	}
	// Other events of the stream (a rotated secret, say) change nothing
	// the fold keeps but its version.
	m.Version++
	return m, nil
}

// Product is a product as its events fold.
type Product struct {
	ProductCreated
	// StockTotal is every unit ever stocked; nil for unlimited stock.
	StockTotal *int
	Version    int
}

// Evolve folds one event of the product's stream.
func (p Product) Evolve(e Event) (Product, error) {
	switch d := e.Data.(type) {
	case ProductCreated:
		if p.Version != 0 {
			return p, fmt.Errorf("product %s created twice", p.ProductID)
		}
		p.ProductCreated, p.StockTotal = d, d.Stock
	case ProductRestocked:
		if p.StockTotal != nil {
			total := *p.StockTotal + d.Quantity
			p.StockTotal = &total
		}
	}
	p.Version++
	return p, nil
}
