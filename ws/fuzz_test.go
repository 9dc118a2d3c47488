package ws_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/jobs"
	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/store/storetest"
	"github.com/orderd/orderd/ws"
)

// maxFrame is the hub's read limit; a larger message is closed with 1009.
const maxFrame = 4 << 10

// FuzzClientMessage sends arbitrary bytes to a real hub as one text frame,
// then as one binary frame on a fresh connection, from a customer who owns
// no order. Whatever arrives, the hub answers it with at most one message,
// an error (nothing only for a well-formed unsubscribe, which the protocol
// leaves unanswered), or closes the connection for a message over 4 KiB;
// it never drops the connection otherwise, and every goroutine of the
// connection ends once the client leaves.
//
// After the fuzzed frame the client sends two probes whose answers arrive
// in that order, forbidden and then malformed_json: what comes before them
// is the answer to the fuzzed frame, and a frame that gets no answer at all
// is told apart from one whose answer is slow.
func FuzzClientMessage(f *testing.F) {
	unknown := uuid.NewString()
	long := strings.Repeat("x", maxFrame-64)
	nested := strings.Repeat(`{"a":`, 200) + "1" + strings.Repeat("}", 200)
	for _, seed := range []string{
		``,
		`not json`,
		`{`,
		`null`,
		`[]`,
		`42`,
		`"subscribe"`,
		`{"op":"dance"}`,
		`{"op":"subscribe"}`,
		`{"op":"unsubscribe"}`,
		`{"op":"subscribe","order_id":"` + unknown + `","merchant_id":"` + unknown + `"}`,
		`{"op":"subscribe","order_id":"nope"}`,
		`{"op":"subscribe","order_id":"` + strings.ToUpper(unknown) + `x"}`,
		`{"op":"subscribe","merchant_id":"'; DROP TABLE orders; --"}`,
		`{"op":"subscribe","order_id":"` + long + `"}`,
		`{"op":"subscribe","order_id":` + nested + `}`,
		`{"op":` + nested + `}`,
		`{"op":"subscribe","order_id":"` + unknown + `"}`,
		`{"OP":"Subscribe","Order_ID":"` + unknown + `"}`,
		`{"op":"unsubscribe","order_id":"` + unknown + `"}`,
		`{"op":"subscribe","merchant_id":"` + unknown + `"}`,
		`{"op":"subscribe","order_id":"` + unknown + `"}{"op":"dance"}`,
		`{"op":"subscribe","order_id":null,"merchant_id":12}`,
		"{\"op\":\"subscribe\\u0000\",\"order_id\":\"\xff\xfe\"}",
		`{"op":"subscribe","order_id":"` + strings.Repeat("y", maxFrame) + `"}`,
	} {
		f.Add([]byte(seed))
	}

	// One database, hub and server for the whole run: inputs only read, and
	// building them per input would make fuzzing crawl.
	pool := storetest.Pool(f)
	ins, err := jobs.NewInserter(pool)
	require.NoError(f, err)
	st := store.New(store.Config{Pool: pool, Jobs: ins})
	hub := ws.New(st, authn, ws.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); hub.Run(ctx) }()
	srv := httptest.NewServer(hub)
	f.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		hub.Shutdown(sctx)
		srv.Close()
		cancel()
		<-ran
	})
	tok, err := authn.Issue(auth.Principal{Subject: "fuzzer", Role: auth.RoleCustomer}, 24*time.Hour)
	require.NoError(f, err)
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/?access_token=" + tok
	probeForbidden := []byte(`{"op":"subscribe","merchant_id":"` + unknown + `"}`)
	probeMalformed := []byte(`probe`)
	dialer := websocket.Dialer{HandshakeTimeout: 10 * time.Second}

	f.Fuzz(func(t *testing.T, data []byte) {
		for _, kind := range []int{websocket.TextMessage, websocket.BinaryMessage} {
			c, _, err := dialer.Dial(url, nil)
			require.NoError(t, err)
			require.NoError(t, c.SetWriteDeadline(time.Now().Add(10*time.Second)))
			require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
			require.NoError(t, c.WriteMessage(kind, data))
			// Over the limit the hub may close before the probes are
			// written; what it answered is read below either way.
			_ = c.WriteMessage(websocket.TextMessage, probeForbidden)
			_ = c.WriteMessage(websocket.TextMessage, probeMalformed)

			var codes []string
			var closed error
			for {
				_, msg, err := c.ReadMessage()
				if err != nil {
					closed = err
					break
				}
				var m message
				require.NoError(t, json.Unmarshal(msg, &m), "the hub sent non-JSON: %q", msg)
				require.Equal(t, "error", m.Type, "a customer who owns nothing was sent %s", msg)
				require.NotEmpty(t, m.Code, "error without a code: %s", msg)
				codes = append(codes, m.Code)
				if n := len(codes); n >= 2 && codes[n-2] == "forbidden" && codes[n-1] == "malformed_json" {
					break
				}
			}

			if len(data) > maxFrame {
				var ce *websocket.CloseError
				require.Error(t, closed, "a %d-byte message was not refused", len(data))
				if errors.As(closed, &ce) {
					require.Equal(t, websocket.CloseMessageTooBig, ce.Code)
				}
				require.Empty(t, codes, "a message over the limit was answered")
			} else {
				require.NoError(t, closed, "the hub dropped the connection after %.200q (answers %v)", data, codes)
				answers := codes[:len(codes)-2]
				require.LessOrEqual(t, len(answers), 1, "one frame, several answers: %v", answers)
				if len(answers) == 0 {
					var m struct {
						Op string `json:"op"`
					}
					require.True(t, json.Unmarshal(data, &m) == nil && m.Op == "unsubscribe",
						"no answer to %.200q", data)
				}
				_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""),
					time.Now().Add(time.Second))
			}
			c.Close()
			requireConnGoroutinesEnd(t)
		}
	})
}

// requireConnGoroutinesEnd waits until no goroutine of a hub connection
// (reader, writer, closer) is left.
func requireConnGoroutinesEnd(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		left := 0
		for _, g := range bytes.Split(buf[:n], []byte("\n\n")) {
			if bytes.Contains(g, []byte("orderd/ws.(*conn)")) {
				left++
			}
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connection goroutines still running:\n%s", left, buf[:n])
		}
		time.Sleep(time.Millisecond)
	}
}
