package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// GetOrder returns an order the caller may see.
func (s *Store) GetOrder(ctx context.Context, id uuid.UUID, access Access) (*OrderView, error) {
	o, err := readOrder(ctx, s.pool, id)
	if err != nil {
		return nil, mapErr(err)
	}
	if !access.canSee(o.CustomerID, o.MerchantID) {
		return nil, errOrderNotFound
	}
	return o, nil
}

// OrderEvent is one entry of an order's history.
type OrderEvent struct {
	Version    int             `json:"version"`
	Type       string          `json:"type"`
	Data       json.RawMessage `json:"data"`
	RecordedAt time.Time       `json:"recorded_at"`
	// Hash is the event's link in its stream's chain (encoded as base64).
	Hash []byte `json:"hash"`
}

// OrderEvents returns an order's full history, oldest first.
func (s *Store) OrderEvents(ctx context.Context, id uuid.UUID, access Access) ([]OrderEvent, error) {
	o, err := s.GetOrder(ctx, id, access)
	if err != nil {
		return nil, err
	}
	stored, err := s.ReadStream(ctx, o.MerchantID, id)
	if err != nil {
		return nil, err
	}
	out := make([]OrderEvent, len(stored))
	for i, e := range stored {
		out[i] = OrderEvent{Version: e.Version, Type: e.Type, Data: e.Data, RecordedAt: e.RecordedAt, Hash: e.Hash}
	}
	return out, nil
}
