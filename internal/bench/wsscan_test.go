package bench

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// decodedOrder is what a watcher reads of a message with encoding/json.
type decodedOrder struct {
	Type  string `json:"type"`
	Order struct {
		Version       *int            `json:"version"`
		Status        *string         `json:"status"`
		QueuePosition json.RawMessage `json:"queue_position"` // absent: nil

	} `json:"order"`
}

// TestScanOrderReadsWhatEncodingJSONDoes: for order messages shaped as the
// server sends them, with nested objects holding the same keys, escaped
// strings and every status, scanOrder reads what encoding/json does; for
// anything else (other types, malformed JSON, fields missing) it declines,
// and the watcher decodes the message with encoding/json.
func TestScanOrderReadsWhatEncodingJSONDoes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	statuses := []string{"queued", "accepted", "completed", "cancelled", `we"ird\status`}
	var msgs []string
	for range 2000 {
		var pos any
		if r.IntN(2) == 0 {
			pos = r.IntN(20000)
		}
		items := []map[string]any{}
		for range r.IntN(3) {
			items = append(items, map[string]any{"status": "x", "version": 99, "queue_position": 7, "name": "t\u00e9a \"hot\"\n", "nested": []any{map[string]any{}, []any{}, nil, 1.5e3}})
		}
		order := map[string]any{"id": "01a2", "items": items, "status": statuses[r.IntN(len(statuses))],
			"version": r.IntN(1000), "queue_position": pos, "eta_seconds": nil, "paid": true, "total_cents": -12}
		b, err := json.Marshal(map[string]any{"type": "order", "order": order})
		require.NoError(t, err)
		msgs = append(msgs, string(b))
		// The same message indented, and broken.
		indented, err := json.MarshalIndent(map[string]any{"type": "order", "order": order}, "", "  ")
		require.NoError(t, err)
		msgs = append(msgs, string(indented))
		cut := r.IntN(len(b))
		msgs = append(msgs, string(b[:cut]), string(b[:cut])+string(b[cut+1:]), string(b)+"}", string(b)+" x")
	}
	msgs = append(msgs, `{"type":"error","code":"unavailable"}`, `{"type":"merchant_status","order":{"version":1,"status":"queued","queue_position":null}}`,
		`{"type":"order","order":{"version":1,"status":"queued"}}`, `{"type":"order","order":{"version":1.5,"status":"queued","queue_position":null}}`,
		`{"type":"order","order":{"version":1,"status":"queued","queue_position":01}}`, `{"type":"order","order":{"version":1 "status":"queued","queue_position":null}}`,
		`{"type":"order","order":{"version":1,"status":"queued","queue_position":null,}}`, `{"type":"order","order":{"version":1,"status":"queued","queue_position":[]}}`,
		`{"type":"order","order":{"version":2,"status":"queued","queue_position":3,"x":[ ],"y":{ }}}`, `[]`, `"order"`, ``)

	for _, msg := range msgs {
		got, ok := scanOrder([]byte(msg))
		var want decodedOrder
		var pos *int
		err := json.Unmarshal([]byte(msg), &want)
		complete := err == nil && want.Type == "order" && want.Order.Version != nil && want.Order.Status != nil && want.Order.QueuePosition != nil &&
			json.Unmarshal(want.Order.QueuePosition, &pos) == nil
		if !complete {
			require.False(t, ok, "scanOrder read %q as %+v", msg, got)
			continue
		}
		if !ok {
			// Declining is always safe, and left to escaped strings,
			// which the server does not send where the scan reads.
			require.Contains(t, *want.Order.Status, `"`, "scanOrder declined %q", msg)
			continue
		}
		wantFields := orderFields{Version: *want.Order.Version, Status: *want.Order.Status}
		if pos != nil {
			wantFields.Position, wantFields.Placed = *pos, true
		}
		require.Equal(t, wantFields, got, msg)
	}
}

func BenchmarkScanOrder(b *testing.B) {
	msg := []byte(`{"type":"order","order":{"id":"01a21d0a-a066-7e7f-a367-14a33584105e","merchant_id":"01a21d0a-a066-7e7f-a367-14a33584105f","customer_id":"ws-01a21d0a-c123","items":[{"product_id":"01a21d0a-a066-7e7f-a367-14a335841060","name":"tea","quantity":1,"unit_price_cents":100,"units":1}],"total_cents":100,"status":"queued","version":2,"placed_at":"2026-11-27T12:36:56.123456Z","payment_deadline":"2026-11-27T12:51:56.123456Z","paid_at":"2026-11-27T12:36:56.123456Z","accepted_at":null,"completed_at":null,"ended_at":null,"status_reason":null,"queue_position":12345,"eta_seconds":4321,"load":1,"lane":"normal","pickup_code":null,"pickup_at":null,"picked_up_at":null}}`)
	b.Run("scan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := scanOrder(msg); !ok {
				b.Fatal("declined")
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var m decodedOrder
			if err := json.Unmarshal(msg, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}
