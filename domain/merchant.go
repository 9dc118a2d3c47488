package domain

import (
	"fmt"
	"math"
	"net/url"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
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
	EventProductUpdated        = "product.updated"
	EventProductHidden         = "product.hidden"
)

// MerchantSettings are the merchant's tunable fields.
type MerchantSettings struct {
	Name                  string `json:"name"`
	Capacity              int    `json:"capacity"`
	PrepSeconds           int    `json:"prep_seconds"`
	MaxQueueWaitSeconds   int    `json:"max_queue_wait_seconds"`
	PaymentTimeoutSeconds int    `json:"payment_timeout_seconds"`
	WebhookURL            string `json:"webhook_url,omitempty"`
	// Absent from events recorded before they existed; WithDefaults fills them.
	CapacityUnit CapacityUnit `json:"capacity_unit,omitempty"`
	Timezone     string       `json:"timezone,omitempty"`
	PickupPrefix string       `json:"pickup_prefix,omitempty"`
	// Slots publishes pickup slots (nil: none); Hours are the opening
	// hours (none: always open).
	Slots *SlotSettings `json:"slots,omitempty"`
	Hours []Period      `json:"hours,omitempty"`
	// GuestCheckout lets anyone without a token take a guest session and
	// order (a QR code on the counter).
	GuestCheckout bool `json:"guest_checkout,omitempty"`
}

// Equal reports whether s and o are the same settings once defaults fill
// them.
func (s MerchantSettings) Equal(o MerchantSettings) bool {
	return reflect.DeepEqual(s.WithDefaults(), o.WithDefaults())
}

// WithDefaults fills the fields a request or an older event left empty.
func (s MerchantSettings) WithDefaults() MerchantSettings {
	if s.CapacityUnit == "" {
		s.CapacityUnit = UnitOrders
	}
	if s.Timezone == "" {
		s.Timezone = DefaultTimezone
	}
	if len(s.Hours) == 0 {
		s.Hours = nil
	}
	return s
}

// TakesGuests reports whether the merchant lets anyone without a token
// take a guest session and order.
func (s MerchantSettings) TakesGuests() bool { return s.GuestCheckout }

// CheckSettingsChange refuses what a settings change may not do given the
// merchant's load: a unit change while orders are accepted or queued, whose
// loads were fixed in the old unit.
func CheckSettingsChange(before, after MerchantSettings, load Load) error {
	if before.WithDefaults().CapacityUnit != after.WithDefaults().CapacityUnit && (load.ActiveOrders > 0 || load.Queued > 0) {
		return Errorf(CodeConflict, "capacity_unit can change only while no order is accepted or queued (%d accepted, %d queued)",
			load.ActiveOrders, load.Queued)
	}
	return nil
}

// SettingsChange is what a change of a merchant's settings records, and
// what it does to the merchant's line.
type SettingsChange struct {
	// Events are the update and, where the new hours open or close a period
	// now, Period: the capacity in force changes with them, not at the
	// next edge.
	Events, Period []Event
	// AdmitsLine says the capacity in force rose: the line is admitted at
	// once, in its order, as far as it fits (AdmitsLine).
	AdmitsLine bool
}

// ChangeSettings decides a change of m's settings to after, under the
// merchant's lock, so that it governs the very next admission: after
// must be valid, and allowed given the line (CheckSettingsChange); settings
// equal to m's record nothing.
func ChangeSettings(m Merchant, after MerchantSettings, load Load, now time.Time) (SettingsChange, error) {
	if err := after.Validate(); err != nil {
		return SettingsChange{}, err
	}
	after = after.WithDefaults()
	if after.Equal(m.Settings) {
		return SettingsChange{}, nil
	}
	if err := CheckSettingsChange(m.Settings, after, load); err != nil {
		return SettingsChange{}, err
	}
	events := []Event{{Type: EventMerchantUpdated, Data: MerchantUpdated{Before: m.Settings, After: after, UpdatedAt: now}}}
	updated, err := m.Apply(events...)
	if err != nil {
		return SettingsChange{}, err
	}
	period, err := PeriodChange(updated, now)
	if err != nil {
		return SettingsChange{}, err
	}
	if updated, err = updated.Apply(period...); err != nil {
		return SettingsChange{}, err
	}
	return SettingsChange{Events: append(events, period...), Period: period, AdmitsLine: AdmitsLine(m, updated)}, nil
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
	if s.CapacityUnit != "" && !s.CapacityUnit.Valid() {
		return Errorf(CodeValidation, `capacity_unit must be "orders" or "items"`)
	}
	if _, err := LoadTimezone(s.Timezone); err != nil {
		return err
	}
	if s.Slots != nil {
		if err := s.Slots.Validate(); err != nil {
			return err
		}
	}
	if err := ValidateHours(s.Hours); err != nil {
		return err
	}
	return ValidatePickupPrefix(s.PickupPrefix)
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
	MerchantID uuid.UUID `json:"merchant_id"`
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
	ProductID    uuid.UUID `json:"product_id"`
	MerchantID   uuid.UUID `json:"merchant_id"`
	Name         string    `json:"name"`
	PriceCents   int64     `json:"price_cents"`
	Stock        *int      `json:"stock"`
	PerUserLimit *int      `json:"per_user_limit"`
	// LoadUnits is absent (0) from events recorded before it existed, which
	// means the default.
	LoadUnits    int           `json:"load_units,omitempty"`
	OptionGroups []OptionGroup `json:"option_groups,omitempty"`
	CreatedAt    time.Time     `json:"created_at"`
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

// CompletionStats is what the ETA estimator keeps about a merchant:
// exponentially weighted means of the time between completions, and of the
// units each completion freed, while the merchant was saturated (had a
// queue). Their ratio is its real service rate in units.
type CompletionStats struct {
	IntervalSeconds float64 // 0 = no history yet
	// UnitsPerCompletion is 0 in stats kept before weighted capacity: 1.
	UnitsPerCompletion float64
	// LastCompletion is the last completion while saturated, nil after one
	// with nobody waiting: the next gap is measured only from a saturated
	// completion, so a lull never counts as slow work.
	LastCompletion *time.Time
	Samples        int
}

const (
	// ewmaAlpha weighs each new gap. The time between two completions of a
	// kitchen making several orders at once varies by about as much as the
	// gap itself, so the rate is a mean over a few dozen completions: a
	// shorter memory follows that noise, not the kitchen's pace (a replay
	// of a recorded kitchen, domain.TestETAInUnitsFollowsARecordedKitchen,
	// misses its 25 % with the former 0.2).
	ewmaAlpha       = 0.03
	minIntervalSecs = 0.01
	maxIntervalSecs = 3600.0
	minETASamples   = 3
	maxETASeconds   = 7 * 24 * 3600
)

// ObserveCompletion updates the stats at the completion of an order of
// units. saturated says whether orders were waiting: only then does the
// gap measure the merchant's pace rather than a lull in demand. Until there
// are enough gaps for the weighted mean, each weighs as much as the others.
func (c CompletionStats) ObserveCompletion(now time.Time, saturated bool, units int) CompletionStats {
	if !saturated {
		c.LastCompletion = nil
		return c
	}
	if c.LastCompletion != nil {
		gap := now.Sub(*c.LastCompletion).Seconds()
		gap = math.Min(math.Max(gap, minIntervalSecs), maxIntervalSecs)
		u := float64(max(units, 1))
		if c.Samples == 0 || c.IntervalSeconds == 0 {
			c.IntervalSeconds, c.UnitsPerCompletion, c.Samples = gap, u, 0
		} else {
			a := max(ewmaAlpha, 1/float64(c.Samples+1))
			c.IntervalSeconds = a*gap + (1-a)*c.IntervalSeconds
			c.UnitsPerCompletion = a*u + (1-a)*c.unitsPerCompletion()
		}
		c.Samples++
	}
	c.LastCompletion = &now
	return c
}

func (c CompletionStats) unitsPerCompletion() float64 {
	if c.UnitsPerCompletion <= 0 {
		return 1
	}
	return c.UnitsPerCompletion
}

// UnitsToWaitFor is how many units must complete before a queued order of
// load is admitted, with active units in use and unitsAhead units queued
// before it: enough to make room for everything up to and including it, or,
// for an order larger than the whole capacity, everything before it. It is
// at least 1, since the order is waiting.
func UnitsToWaitFor(active, capacity, unitsAhead, load int) int {
	need := active + unitsAhead + load - capacity
	if load > capacity && capacity > 0 {
		need = active + unitsAhead
	}
	return max(need, 1)
}

// EstimateWait returns the estimated seconds until a queued order is
// accepted, given the units that must complete first (UnitsToWaitFor; the
// position when every load is 1). With enough measured completions it is
// those units at the measured rate of units completed; before that it falls
// back to prep_seconds × units / capacity.
func EstimateWait(units, capacity, prepSeconds int, stats CompletionStats) int {
	if units < 1 {
		return 0
	}
	var secs float64
	if stats.Samples >= minETASamples && stats.IntervalSeconds > 0 {
		secs = float64(units) * stats.IntervalSeconds / stats.unitsPerCompletion()
	} else {
		secs = float64(prepSeconds) * float64(units) / float64(max(capacity, 1))
	}
	return int(math.Min(math.Ceil(secs), maxETASeconds))
}

// WaitBasis is the state of a merchant that its queued orders' waits are
// estimated from: the capacity in force, the units active, the preparation
// time it declared and the pace it was measured at.
type WaitBasis struct {
	Capacity, Active, PrepSeconds int
	Stats                         CompletionStats
}

// Wait estimates the seconds a queued order of load waits behind
// unitsAhead queued units (UnitsToWaitFor, then EstimateWait).
func (b WaitBasis) Wait(unitsAhead, load int) int {
	return EstimateWait(UnitsToWaitFor(b.Active, b.Capacity, unitsAhead, load), b.Capacity, b.PrepSeconds, b.Stats)
}

// LinePlace is where a queued order stands in its merchant's line, as its
// answers show it: its position (1 is the head) and the seconds it is
// estimated to wait.
type LinePlace struct {
	Position    int
	WaitSeconds int
}

// LineReading is a queued order's line as a read found it: the order's
// status and load, its position (nil: not read) and the units queued ahead
// of it, with the merchant's state its wait is estimated from.
type LineReading struct {
	Status     OrderStatus
	Load       int
	Position   *int
	UnitsAhead int
	Basis      WaitBasis
}

// PlaceInLine is the place a read of the line shows: none for an order that
// is not queued or whose position was not read, else its position and the
// wait behind the units ahead of it (WaitBasis.Wait).
func PlaceInLine(r LineReading) *LinePlace {
	if r.Status != StatusQueued || r.Position == nil {
		return nil
	}
	return &LinePlace{Position: *r.Position, WaitSeconds: r.Basis.Wait(r.UnitsAhead, max(r.Load, 1))}
}

// PlaceOnJoining is the place of an order o that has just been decided
// under the merchant's load l, which counts it: none unless it queued, else
// the last of its lane. The priority lane's units are not counted apart,
// so its orders ahead are taken at the line's mean load.
func PlaceOnJoining(o Order, l Load, b WaitBasis) *LinePlace {
	if o.Status != StatusQueued {
		return nil
	}
	position, unitsAhead := l.Queued, l.QueuedUnits-o.Load
	if o.Lane == LanePriority {
		position = l.QueuedPriority
		unitsAhead = (position - 1) * l.QueuedUnits / max(l.Queued, 1)
	}
	return PlaceInLine(LineReading{Status: o.Status, Load: o.Load, Position: &position, UnitsAhead: unitsAhead, Basis: b})
}

// Merchant is a merchant as its events fold: settings, pause, creation time
// and version (the webhook secret and live load are not events' business).
type Merchant struct {
	ID        uuid.UUID
	Settings  MerchantSettings
	Pause     Pause
	CreatedAt time.Time
	Version   int
	// PeriodCapacity is the capacity the open period of hours sets (nil:
	// the merchant's own), NextEdge the next moment it may change: both as
	// the last period edge recorded them (PeriodChange).
	PeriodCapacity *int
	NextEdge       *time.Time
}

// CapacityInForce is the capacity that admits m's orders: its period's,
// as the last edge recorded it, else its own.
func (m Merchant) CapacityInForce() int {
	if m.PeriodCapacity != nil {
		return *m.PeriodCapacity
	}
	return m.Settings.Capacity
}

// Evolve folds one event of the merchant's stream.
func (m Merchant) Evolve(e Event) (Merchant, error) {
	switch d := e.Data.(type) {
	case MerchantCreated:
		if m.Version != 0 {
			return m, fmt.Errorf("merchant %s created twice", m.ID)
		}
		m.ID, m.Settings, m.CreatedAt = d.MerchantID, d.MerchantSettings.WithDefaults(), d.CreatedAt
	case MerchantUpdated:
		m.Settings = d.After.WithDefaults()
	case MerchantPaused:
		m.Pause = Pause{Mode: d.Mode, Until: d.Until}
	case MerchantResumed:
		m.Pause = Pause{}
	case MerchantPeriodChanged:
		m.PeriodCapacity, m.NextEdge = d.Capacity, d.NextEdge
	}
	// Other events of the stream (a rotated secret, say) change nothing
	// the fold keeps but its version.
	m.Version++
	return m, nil
}

// Apply folds events into m in order.
func (m Merchant) Apply(events ...Event) (Merchant, error) {
	var err error
	for _, e := range events {
		if m, err = m.Evolve(e); err != nil {
			return m, err
		}
	}
	return m, nil
}

// ProductUpdated records a menu change: the fields it set, as they are
// after it. Orders placed before keep their lines as they were.
type ProductUpdated struct {
	Name         *string        `json:"name,omitempty"`
	PriceCents   *int64         `json:"price_cents,omitempty"`
	OptionGroups *[]OptionGroup `json:"option_groups,omitempty"`
	Available    *bool          `json:"available,omitempty"`
	UpdatedAt    time.Time      `json:"updated_at"`
}

// ProductHidden takes a product off the menu for good; orders that name it
// keep their lines.
type ProductHidden struct {
	HiddenAt time.Time `json:"hidden_at"`
}

// Product is a product as its events fold.
type Product struct {
	ProductCreated
	// StockTotal is every unit ever stocked; nil for unlimited stock.
	StockTotal *int
	// Unavailable is "sold out today": on the menu, not orderable.
	Unavailable bool
	Hidden      bool
	Version     int
}

// Evolve folds one event of the product's stream.
func (p Product) Evolve(e Event) (Product, error) {
	switch d := e.Data.(type) {
	case ProductCreated:
		if p.Version != 0 {
			return p, fmt.Errorf("product %s created twice", p.ProductID)
		}
		p.ProductCreated, p.StockTotal = d, d.Stock
	case ProductUpdated:
		if d.Name != nil {
			p.Name = *d.Name
		}
		if d.PriceCents != nil {
			p.PriceCents = *d.PriceCents
		}
		if d.OptionGroups != nil {
			p.OptionGroups = *d.OptionGroups
		}
		if d.Available != nil {
			p.Unavailable = !*d.Available
		}
	case ProductHidden:
		p.Hidden = true
	case ProductRestocked:
		if p.StockTotal != nil {
			total := *p.StockTotal + d.Quantity
			p.StockTotal = &total
		}
	}
	p.Version++
	return p, nil
}

// PublicStatus is what any customer may know of a merchant now, beside its
// line's length: whether it takes new orders (Open), whether one placed and
// paid now would wait in line (Busy), and how long that one would wait.
type PublicStatus struct {
	Open, Busy     bool
	EstWaitSeconds int
}

// StatusOf is the public status of a merchant with load l (whose Paused is
// the pause's), pause p, its preparation time and completion stats: busy when
// an order of one unit paid now would not be admitted at once, and then its
// wait for the units ahead of it.
func StatusOf(l Load, p Pause, prepSeconds int, stats CompletionStats) PublicStatus {
	s := PublicStatus{Open: !p.Refuses(), Busy: !l.CanAdmitNew(1, LaneNormal)}
	if s.Busy {
		s.EstWaitSeconds = EstimateWait(UnitsToWaitFor(l.Active, l.Capacity, l.QueuedUnits, 1), l.Capacity, prepSeconds, stats)
	}
	return s
}
