package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orderd/orderd/domain"
)

// webhookEvents are the order events merchants hear about.
var webhookEvents = map[string]bool{
	domain.EventOrderAccepted:  true,
	domain.EventOrderCancelled: true,
	domain.EventOrderExpired:   true,
	domain.EventOrderCompleted: true,
}

func isWebhookEvent(events []domain.Event) bool {
	for _, e := range events {
		if webhookEvents[e.Type] {
			return true
		}
	}
	return false
}

// WebhookPayload is the body POSTed to a merchant.
type WebhookPayload struct {
	ID         uuid.UUID `json:"id"`
	Type       string    `json:"type"`
	OccurredAt time.Time `json:"occurred_at"`
	Order      OrderView `json:"order"`
}

// outboxFor returns one message per webhook event of the change, when the
// merchant has a webhook; they are written with the change.
func outboxFor(m *merchantRow, c change, now time.Time) ([]outboxMessage, error) {
	if m == nil || m.WebhookURL == nil || !isWebhookEvent(c.events) {
		return nil, nil
	}
	var out []outboxMessage
	var err error
	state := c.before
	for i, e := range c.events {
		if state, err = state.Evolve(e); err != nil {
			return nil, err
		}
		if !webhookEvents[e.Type] {
			continue
		}
		id := newID()
		payload, err := json.Marshal(WebhookPayload{
			ID: id, Type: e.Type, OccurredAt: now,
			Order: toView(state),
		})
		if err != nil {
			return nil, fmt.Errorf("encode webhook: %w", err)
		}
		out = append(out, outboxMessage{id: id, merchant: m.ID, order: c.after.ID, version: c.before.Version + i + 1, eventType: e.Type, payload: payload})
	}
	return out, nil
}

// RetryWebhook hands a dead-lettered webhook back to the relay with a fresh
// set of attempts and closes its dead letter, in one transaction.
func (s *Store) RetryWebhook(ctx context.Context, merchantID, outboxID, deadLetterID uuid.UUID) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE outbox SET status = 'pending', attempts = 0, next_attempt_at = now(), last_error = NULL
			WHERE merchant_id = $2 AND id = $1 AND status = 'dead'`, outboxID, merchantID)
		if err != nil {
			return fmt.Errorf("retry webhook: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return domain.Errorf(domain.CodeInvalidTransition, "the webhook is not dead-lettered")
		}
		return closeDeadLetter(ctx, tx, merchantID, deadLetterID, "retried", "")
	})
}
