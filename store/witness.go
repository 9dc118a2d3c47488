package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orderd/orderd/ledger/verify"
)

// WitnessMerchant is the merchant id under which checkpoints for the
// witness travel in the outbox. No merchant has it; the relay sends its
// messages to the witness instead of a merchant's endpoint, with the
// retries, leases and dead letters of every webhook.
var WitnessMerchant = uuid.Nil

// EventCheckpoint is the outbox event type of a checkpoint for the witness.
const EventCheckpoint = "checkpoint"

// witnessNamespace names each log's stream of checkpoints in the outbox.
var witnessNamespace = uuid.MustParse("6f0b1f52-3c55-4f0e-9d2e-6c1b7a4e2f10")

// WitnessStream is the outbox's order id of a log's checkpoints: the
// relay delivers the messages of one order id one after another, so a
// witness receives a log's checkpoints in the order they were made.
func WitnessStream(log string) uuid.UUID {
	return uuid.NewSHA1(witnessNamespace, []byte(log))
}

// writeWitnessMessage writes the checkpoint's message to the witness in the
// transaction that stores the checkpoint: both are committed or neither.
func writeWitnessMessage(ctx context.Context, tx pgx.Tx, c *verify.Checkpoint) error {
	payload, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode checkpoint for the witness: %w", err)
	}
	// The log's one writer holds its head, so no other checkpoint of this
	// log takes the same number meanwhile.
	if _, err := tx.Exec(ctx, `
		INSERT INTO outbox (id, merchant_id, order_id, order_version, event_type, payload)
		SELECT $1, $2, $3, coalesce(max(order_version), 0) + 1, $4, $5::jsonb
		FROM outbox WHERE order_id = $3 AND merchant_id = $2`,
		newID(), WitnessMerchant, WitnessStream(c.Log), EventCheckpoint, string(payload)); err != nil {
		return fmt.Errorf("queue checkpoint for the witness: %w", err)
	}
	return nil
}
