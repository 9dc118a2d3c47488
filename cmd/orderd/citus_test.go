//go:build citus

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/internal/citustest"
)

// citusOrder is what the Citus suite reads of an order.
type citusOrder struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// TestCitusServesEveryPath runs two `orderd serve` processes on a database
// laid out by `orderd migrate citus` on a coordinator and two workers, and
// takes every path through them, merchants spread over both workers:
// placement, payment, completion with the drain of the line, cancellation,
// payment deadlines closing unpaid orders, queue expiry and its dead letter,
// an unpaid order closed by its own row on its worker, with no timer job,
// flash stock under concurrent buyers on both processes, webhooks delivered
// and dead-lettered, drops of several merchants joined at once, drawn and
// bought, a websocket watching a queued order through to its
// completion, and at the end every audit view, through the API, clean.
func TestCitusServesEveryPath(t *testing.T) {
	dbURL := citustest.URL(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	var delivered atomic.Int64
	receiver := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		delivered.Add(1)
	}))
	t.Cleanup(receiver.Close)
	refusing := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rw.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(refusing.Close)
	env := []string{"ORDERD_WEBHOOK_ALLOW_LOOPBACK=true", "ORDERD_WEBHOOK_BACKOFF=100ms", "ORDERD_WEBHOOK_MAX_ATTEMPTS=2"}
	servers := []*server{newServer(t, dbURL, env...), newServer(t, dbURL, env...)}
	bases := []string{servers[0].base(), servers[1].base()}
	hc := &http.Client{Timeout: 20 * time.Second}

	// Six merchants, on both workers: with two workers, six random ids all
	// land on one about once in thirty runs, so the last is made again until
	// it lives on the other worker.
	newCitusWorld := func(i int) *world {
		return newWorld(t, bases[i%2], map[string]any{"name": fmt.Sprintf("citus-%d", i), "capacity": 1,
			"payment_timeout_seconds": 2, "max_queue_wait_seconds": 3, "prep_seconds": 30, "webhook_url": receiver.URL + "/hooks"})
	}
	nodesOf := func(worlds []*world) int {
		t.Helper()
		ids := make([]string, len(worlds))
		for i, w := range worlds {
			ids[i] = w.merchantID
		}
		var nodes int
		require.NoError(t, pool.QueryRow(context.Background(), `
			SELECT count(DISTINCT (nodename, nodeport)) FROM citus_shards
			WHERE table_name = 'merchants'::regclass
			  AND shardid IN (SELECT get_shard_id_for_distribution_column('merchants', m) FROM unnest($1::uuid[]) m)`,
			ids).Scan(&nodes))
		return nodes
	}
	worlds := make([]*world, 6)
	for i := range worlds {
		worlds[i] = newCitusWorld(i)
	}
	nodes := nodesOf(worlds)
	for try := 0; nodes < 2 && try < 30; try++ {
		worlds[5] = newCitusWorld(5)
		nodes = nodesOf(worlds)
	}
	require.Equal(t, 2, nodes, "the merchants live on both workers")

	place := func(w *world, base, customer, ref string) citusOrder {
		t.Helper()
		a := send(hc, "POST", base+"/v1/orders", customer, fmt.Sprintf("k-%d", time.Now().UnixNano()), w.placement(ref))
		require.Equal(t, 201, a.status, string(a.body))
		var o citusOrder
		a.decode(t, &o)
		return o
	}
	status := func(w *world, base, id string) string {
		t.Helper()
		a := send(hc, "GET", base+"/v1/orders/"+id, w.admin, "", nil)
		require.Equal(t, 200, a.status, string(a.body))
		var o citusOrder
		a.decode(t, &o)
		return o.Status
	}
	eventually := func(what string, within time.Duration, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(within)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s", what, within)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	t.Run("placement, payment, completion with drain, live updates", func(t *testing.T) {
		for i, w := range worlds {
			base, other := bases[i%2], bases[(i+1)%2]
			customer := w.token(t, auth.Principal{Subject: fmt.Sprintf("buyer-%d", i), Role: auth.RoleCustomer})
			first := place(w, base, customer, "pay-first")
			require.Equal(t, "accepted", first.Status)
			unpaid := place(w, other, customer, "")
			require.Equal(t, "awaiting_payment", unpaid.Status)
			a := send(hc, "POST", base+"/v1/orders/"+unpaid.ID+"/pay", customer, "", map[string]any{"payment_ref": "pay-later"})
			require.Equal(t, 200, a.status, string(a.body))
			var paid citusOrder
			a.decode(t, &paid)
			require.Equal(t, "queued", paid.Status, "capacity 1 is taken")
			// Watched on one process, with a ticket of the other.
			watcher := watch(t, other, base, customer, paid.ID)
			a = send(hc, "POST", base+"/v1/orders/"+first.ID+"/complete", w.merchant, "", nil)
			require.Equal(t, 200, a.status, string(a.body))
			eventually("the line drains", 5*time.Second, func() bool { return status(w, other, paid.ID) == "accepted" })
			a = send(hc, "POST", other+"/v1/orders/"+paid.ID+"/complete", w.merchant, "", nil)
			require.Equal(t, 200, a.status, string(a.body))
			select {
			case <-watcher.ended:
			case <-time.After(10 * time.Second):
				t.Fatalf("the watcher of %s never saw it completed", paid.ID)
			}
			watcher.mu.Lock()
			require.Equal(t, "completed", watcher.status, "%v", watcher.err)
			watcher.mu.Unlock()
		}
	})

	t.Run("cancel, closes and queue expiry with its dead letter", func(t *testing.T) {
		w := worlds[0]
		customer := w.token(t, auth.Principal{Subject: "canceller", Role: auth.RoleCustomer})
		o := place(w, bases[0], customer, "")
		a := send(hc, "POST", bases[1]+"/v1/orders/"+o.ID+"/cancel", customer, "", map[string]any{"reason": "changed my mind"})
		require.Equal(t, 200, a.status, string(a.body))
		require.Equal(t, "cancelled", status(w, bases[0], o.ID))

		var unpaid []string
		for i := range 4 {
			unpaid = append(unpaid, place(worlds[i], bases[i%2], customer, "").ID)
		}
		closed := waitClosed(t, pool, unpaid, 10*time.Second)
		for _, c := range closed {
			require.Equal(t, "closed", c.status, "order %s", c.id)
		}

		// One accepted holds the capacity; the next waits past its
		// merchant's longest wait and expires into a dead letter.
		holder := place(w, bases[0], customer, "pay-hold")
		require.Equal(t, "accepted", holder.Status)
		waiting := place(w, bases[1], customer, "pay-wait")
		require.Equal(t, "queued", waiting.Status)
		eventually("the queued order expires", 10*time.Second, func() bool { return status(w, bases[0], waiting.ID) == "expired" })
		var letters int
		require.NoError(t, pool.QueryRow(context.Background(),
			`SELECT count(*) FROM dead_letters WHERE kind = 'order' AND ref_id = $1 AND merchant_id = $2`, waiting.ID, w.merchantID).Scan(&letters))
		require.Equal(t, 1, letters)
		a = send(hc, "POST", bases[0]+"/v1/orders/"+holder.ID+"/complete", w.merchant, "", nil)
		require.Equal(t, 200, a.status, string(a.body))
	})

	// An unpaid order's row is its payment timer on Citus too, committed
	// with it on its worker: no River job is set for it (one on the
	// coordinator was outside the worker's commit, and a coordinator crash
	// in between lost it), and the process holding the worker's timer lock
	// closes it there.
	t.Run("a payment timer is its order's row", func(t *testing.T) {
		w := worlds[3]
		customer := w.token(t, auth.Principal{Subject: "orphan", Role: auth.RoleCustomer})
		o := place(w, bases[0], customer, "")
		var jobs int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE kind = 'close_unpaid_order'`).Scan(&jobs))
		require.Zero(t, jobs, "no timer job")
		closed := waitClosed(t, pool, []string{o.ID}, 10*time.Second)
		require.Equal(t, "closed", closed[0].status)
	})

	t.Run("flash stock on both processes", func(t *testing.T) {
		w := worlds[1]
		a := send(hc, "POST", bases[0]+"/v1/merchants/"+w.merchantID+"/products", w.admin, "", map[string]any{"name": "flash", "price_cents": 500, "stock": 5})
		require.Equal(t, 201, a.status, string(a.body))
		var p struct {
			ID string `json:"id"`
		}
		a.decode(t, &p)
		var sold, soldOut atomic.Int64
		var wg sync.WaitGroup
		for i := range 30 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				customer := w.token(t, auth.Principal{Subject: fmt.Sprintf("flash-%d", i), Role: auth.RoleCustomer})
				body := map[string]any{"merchant_id": w.merchantID, "items": []map[string]any{{"product_id": p.ID, "quantity": 1}}}
				a := send(hc, "POST", bases[i%2]+"/v1/orders", customer, fmt.Sprintf("flash-%d", i), body)
				switch {
				case a.status == 201:
					sold.Add(1)
				case a.status == 409 && a.code() == "sold_out":
					soldOut.Add(1)
				default:
					t.Errorf("flash placement answered %d: %s", a.status, a.body)
				}
			}()
		}
		wg.Wait()
		require.EqualValues(t, 5, sold.Load())
		require.EqualValues(t, 25, soldOut.Load())
	})

	t.Run("webhooks delivered and dead-lettered", func(t *testing.T) {
		eventually("every webhook is delivered", 20*time.Second, func() bool {
			var pending int
			require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE status = 'pending'`).Scan(&pending))
			return pending == 0
		})
		var sent int64
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE status = 'delivered'`).Scan(&sent))
		require.Positive(t, sent)
		require.GreaterOrEqual(t, delivered.Load(), sent)

		w := worlds[2]
		a := send(hc, "PATCH", bases[0]+"/v1/merchants/"+w.merchantID, w.admin, "", map[string]any{"webhook_url": refusing.URL + "/hooks"})
		require.Equal(t, 200, a.status, string(a.body))
		customer := w.token(t, auth.Principal{Subject: "hooked", Role: auth.RoleCustomer})
		o := place(w, bases[1], customer, "pay-hook")
		eventually("the refused webhook is dead-lettered", 20*time.Second, func() bool {
			var n int
			require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM dead_letters d JOIN outbox x ON x.merchant_id = d.merchant_id AND x.id = d.ref_id
				WHERE d.kind = 'webhook' AND d.merchant_id = $1 AND x.order_id = $2`, w.merchantID, o.ID).Scan(&n))
			return n > 0
		})
	})

	// Five merchants' drops at once: joins through both processes, which
	// the join batches group across merchants, the draw at the start,
	// invitations and purchases. Merchant 2's capacity is taken by the
	// webhook test's order, so a purchase there would wait in line.
	t.Run("drops: joins, the draw, purchases", func(t *testing.T) {
		const customers = 4
		type dropRun struct {
			w       *world
			product string
			drop    dropView
			tokens  []string
		}
		var runs []*dropRun
		// Each request on Citus takes a while: the drops open once all are made.
		opens := time.Now().Add(10 * time.Second)
		starts := opens.Add(3 * time.Second)
		for i, w := range worlds {
			if i == 2 {
				continue
			}
			r := &dropRun{w: w}
			a := send(hc, "POST", bases[0]+"/v1/merchants/"+w.merchantID+"/products", w.admin, "", map[string]any{"name": "drop", "price_cents": 900, "stock": 1})
			require.Equal(t, 201, a.status, string(a.body))
			var p struct {
				ID string `json:"id"`
			}
			a.decode(t, &p)
			r.product = p.ID
			a = send(hc, "POST", bases[1]+"/v1/products/"+p.ID+"/drops", w.admin, "", map[string]any{
				"opens_at": opens.UTC().Format(time.RFC3339Nano), "starts_at": starts.UTC().Format(time.RFC3339Nano),
				"mode": "lottery", "units": 1, "purchase_window_seconds": 30,
			})
			require.Equal(t, 201, a.status, string(a.body))
			a.decode(t, &r.drop)
			for c := range customers {
				r.tokens = append(r.tokens, w.token(t, auth.Principal{Subject: fmt.Sprintf("drop-%d-%d", i, c), Role: auth.RoleCustomer}))
			}
			runs = append(runs, r)
		}
		time.Sleep(time.Until(opens) + 200*time.Millisecond)
		var wg sync.WaitGroup
		for _, r := range runs {
			for c, token := range r.tokens {
				wg.Add(1)
				go func() {
					defer wg.Done()
					a := send(hc, "POST", bases[c%2]+"/v1/drops/"+r.drop.ID+"/entries", token, "", nil)
					if a.status != 201 {
						t.Errorf("join answered %d: %s", a.status, a.body)
					}
				}()
			}
		}
		wg.Wait()
		time.Sleep(time.Until(starts))
		deadline := time.Now().Add(30 * time.Second)
		for _, r := range runs {
			for c, token := range r.tokens {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for time.Now().Before(deadline) {
						a := send(hc, "GET", bases[c%2]+"/v1/drops/"+r.drop.ID+"/entries/me", token, "", nil)
						var e dropEntryView
						a.decode(t, &e)
						switch e.Status {
						case "invited":
							body := r.w.placement("pay-drop")
							body["items"] = []map[string]any{{"product_id": r.product, "quantity": 1}}
							a := send(hc, "POST", bases[c%2]+"/v1/orders", token, fmt.Sprintf("drop-%s-%d", r.drop.ID, c), body)
							if a.status != 201 {
								t.Errorf("invited placement answered %d: %s", a.status, a.body)
							}
						case "purchased", "lapsed", "sold_out":
							return
						}
						time.Sleep(100 * time.Millisecond)
					}
					t.Errorf("entry of drop %s still not settled", r.drop.ID)
				}()
			}
		}
		wg.Wait()
		for _, r := range runs {
			a := send(hc, "GET", bases[0]+"/v1/drops/"+r.drop.ID, r.w.admin, "", nil)
			require.Equal(t, 200, a.status, string(a.body))
			var d dropView
			a.decode(t, &d)
			require.Equal(t, "sold_out", d.State)
			require.Equal(t, 1, d.Purchased)
			require.Equal(t, customers, d.Entries)
		}
	})

	t.Run("every audit view is clean", func(t *testing.T) {
		a := send(hc, "GET", bases[1]+"/v1/admin/audit", worlds[0].admin, "", nil)
		require.Equal(t, 200, a.status, string(a.body))
		var report struct {
			OK     bool `json:"ok"`
			Checks []struct {
				Name string `json:"name"`
				OK   bool   `json:"ok"`
			} `json:"checks"`
		}
		a.decode(t, &report)
		require.NotEmpty(t, report.Checks)
		require.True(t, report.OK, string(a.body))
		// And every view of the audit schema, read directly: empty.
		rows, err := pool.Query(context.Background(), `SELECT viewname FROM pg_views WHERE schemaname = 'audit'`)
		require.NoError(t, err)
		views, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(views), len(report.Checks))
		for _, v := range views {
			var n int
			require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM audit.`+pgx.Identifier{v}.Sanitize()).Scan(&n), v)
			require.Zero(t, n, "audit.%s", v)
		}
	})
}
