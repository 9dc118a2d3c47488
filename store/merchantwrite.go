package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/orderd/orderd/domain"
)

// writeMerchant is the one write of a merchant's change: its events,
// appended after the version m was read at and recorded at now, and the
// state they fold to, in one statement each. m holds the merchant's lock
// and takes the new state. The state carries now as its last decision, so
// that a change that saves no load still floors the merchant's later
// decisions, from whichever process, at the time its events were recorded.
func writeMerchant(ctx context.Context, tx pgx.Tx, m *merchantRow, events []domain.Event, meta Meta, now time.Time) error {
	if len(events) == 0 {
		return nil
	}
	after, err := m.folded().Apply(events...)
	if err != nil {
		return err
	}
	var cols merchantColumnsOf
	if err := cols.add(after, "", &now); err != nil {
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
	id := [16]byte(m.ID)
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

// addTo adds to b the statement that writes the rows into table (merchants,
// or a table like it): inserted with their secrets when new, else every
// column the fold knows updated, and decided_at where a decision time is
// given (a replay has none, and leaves it alone).
func (c *merchantColumnsOf) addTo(tx pgx.Tx, b *pgx.Batch, table string, insert bool) {
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
		}.addTo(tx, b, nil)
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
