package ws_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/ws"
)

// idleClientsEnv makes the test binary a process of idle clients (see
// runIdleClients) instead of running the tests.
const idleClientsEnv = "ORDERD_WS_IDLE_CLIENTS"

// idleConnBudget is what an idle connection watching one order may cost a
// bare hub, in live heap and goroutine stacks: its socket, the websocket's
// state and read buffer, and its subscription, but no goroutine, whose
// stack alone would take most of it. The bench's goal, 10 KiB, is for a
// whole server, whose middleware and pools add to this.
const idleConnBudget = 6 << 10

// TestAnIdleConnectionCostsAtMostItsBudget holds a few thousand idle
// connections, each watching its own queued order as a customer's page
// does, and weighs what the server's live heap and stacks grew by, after
// collections, per connection. The clients run in another process, so that
// only the server's side is weighed. Not parallel: other tests' allocations
// would be counted.
func TestAnIdleConnectionCostsAtMostItsBudget(t *testing.T) {
	if os.Getenv("HEAPPROF") != "" {
		runtime.MemProfileRate = 1
	}
	const conns = 2000
	b := setup(t)
	h, url := serveHub(t, b, ws.Options{Poll: 20 * time.Millisecond})
	s := newShop(t, b.store, 1)
	orders := make([]*store.OrderView, conns)
	var g errgroup.Group
	g.SetLimit(8)
	for i := range orders {
		g.Go(func() error {
			orders[i] = s.place(t, b.store, fmt.Sprintf("c%d", i))
			return nil
		})
	}
	require.NoError(t, g.Wait())

	var spec strings.Builder
	for i, o := range orders {
		fmt.Fprintf(&spec, "%s %s\n", token(t, auth.Principal{Subject: fmt.Sprintf("c%d", i), Role: auth.RoleCustomer}), o.ID)
	}
	before := weigh()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), idleClientsEnv+"="+url)
	cmd.Stdin = strings.NewReader(spec.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	// The clients end when their input closes; they hold it open by
	// reading a pipe that the test closes.
	hold, release, err := os.Pipe()
	require.NoError(t, err)
	cmd.ExtraFiles = []*os.File{hold}
	require.NoError(t, cmd.Start())
	hold.Close()
	t.Cleanup(func() { release.Close(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready\n", line, "the clients connected and heard their orders")
	require.Equal(t, conns, h.Connections())
	after := weigh()
	perConn := float64(after-before) / conns
	t.Logf("%.0f bytes per idle connection", perConn)
	require.LessOrEqual(t, perConn, float64(idleConnBudget))
}

// weigh is the live heap and the goroutine stacks in use once the
// goroutines that are ending have ended and two collections have run: the
// first shrinks stacks that grew, the second marks the heap as it is.
func weigh() uint64 {
	for last := -1; runtime.NumGoroutine() != last; {
		last = runtime.NumGoroutine()
		time.Sleep(200 * time.Millisecond)
	}
	runtime.GC()
	runtime.GC()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(sample)
	return sample[0].Value.Uint64() + sample[1].Value.Uint64()
}

// runIdleClients dials the server at url once for each line of standard
// input (a bearer token and an order id), subscribes to the order, reads
// its first message, prints "ready" once all did, and holds the
// connections until file descriptor 3 closes.
func runIdleClients(url string) error {
	type client struct{ token, order string }
	var clients []client
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		tok, order, _ := strings.Cut(sc.Text(), " ")
		clients = append(clients, client{tok, order})
	}
	conns := make([]*websocket.Conn, len(clients))
	var g errgroup.Group
	var readers sync.WaitGroup
	// As many at once as the test placed orders with, so that the
	// server's database pool does not grow on their account.
	g.SetLimit(8)
	for i, c := range clients {
		g.Go(func() error {
			conn, _, err := websocket.DefaultDialer.Dial(url+"/?access_token="+c.token, nil)
			if err != nil {
				return fmt.Errorf("client %d: %w", i, err)
			}
			conns[i] = conn
			if err := conn.WriteJSON(map[string]string{"op": "subscribe", "order_id": c.order}); err != nil {
				return err
			}
			_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
			_, msg, err := conn.ReadMessage()
			if err != nil {
				return fmt.Errorf("client %d: %w", i, err)
			}
			if !strings.Contains(string(msg), `"type":"order"`) {
				return fmt.Errorf("client %d heard %s", i, msg)
			}
			// Answer pings from now on: on a busy machine the last
			// clients may connect minutes after the first.
			_ = conn.SetReadDeadline(time.Time{})
			readers.Add(1)
			go func() {
				defer readers.Done()
				for {
					if _, _, err := conn.ReadMessage(); err != nil {
						return
					}
				}
			}()
			return nil
		})
	}
	err := g.Wait()
	if err == nil {
		fmt.Println("ready")
		_, _ = os.NewFile(3, "hold").Read(make([]byte, 1))
	}
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
	readers.Wait()
	return err
}
