package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/store/storetest"
)

type dropEntryView struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

type dropView struct {
	ID        string `json:"id"`
	State     string `json:"state"`
	Purchased int    `json:"purchased"`
	Entries   int    `json:"entries"`
}

// TestDropAcrossTwoProcessesAndASIGKILL runs a drop through two orderd
// processes on one database: 40 customers join through both, each twice at
// once; one process is killed with SIGKILL just before the start and
// restarted; invited customers buy at once or leave their order unpaid to
// close. The drop sells out on its timers alone: exactly units purchases,
// one entry per customer, every entry purchased, lapsed or sold_out, and
// `orderd audit` is clean (ranks recomputed in SQL, invitations in rank
// order).
func TestDropAcrossTwoProcessesAndASIGKILL(t *testing.T) {
	t.Parallel()
	dbURL := storetest.URL(t)
	servers := []*server{newServer(t, dbURL), newServer(t, dbURL)}
	bases := []string{servers[0].base(), servers[1].base()}
	w := newWorld(t, bases[0], map[string]any{"name": "drops", "capacity": 100, "payment_timeout_seconds": 2})
	hc := &http.Client{Timeout: 20 * time.Second}
	a := send(hc, "POST", bases[0]+"/v1/merchants/"+w.merchantID+"/products", w.admin, "", map[string]any{"name": "cup", "price_cents": 100, "stock": 20})
	require.Equal(t, 201, a.status, string(a.body))
	var product struct {
		ID string `json:"id"`
	}
	a.decode(t, &product)
	opens, starts := time.Now().Add(2*time.Second), time.Now().Add(5*time.Second)
	a = send(hc, "POST", bases[1]+"/v1/products/"+product.ID+"/drops", w.admin, "", map[string]any{
		"opens_at": opens.UTC().Format(time.RFC3339Nano), "starts_at": starts.UTC().Format(time.RFC3339Nano),
		"mode": "lottery", "units": 8, "purchase_window_seconds": 30,
	})
	require.Equal(t, 201, a.status, string(a.body))
	var drop dropView
	a.decode(t, &drop)

	time.Sleep(time.Until(opens) + 100*time.Millisecond)
	const customers = 40
	tokens := make([]string, customers)
	for i := range tokens {
		tokens[i] = w.token(t, auth.Principal{Subject: fmt.Sprintf("c%d", i), Role: auth.RoleCustomer})
	}
	var wg sync.WaitGroup
	entries := make([][2]string, customers)
	for i := range customers {
		for k := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a := retrying(t, hc, bases, "POST", "/v1/drops/"+drop.ID+"/entries", tokens[i], "", nil)
				if a.status != 201 && a.status != 200 {
					t.Errorf("join answered %d: %s", a.status, a.body)
					return
				}
				var e dropEntryView
				a.decode(t, &e)
				entries[i][k] = e.ID
			}()
		}
	}
	wg.Wait()
	for i, e := range entries {
		require.Equal(t, e[0], e[1], "customer %d joined twice at once: one entry", i)
	}

	// SIGKILL just before the start: the other process, and the restarted
	// one, must take the start, the invitations and the lapses.
	time.Sleep(time.Until(starts) - 300*time.Millisecond)
	servers[0].signal(syscall.SIGKILL)
	servers[0].wait()
	servers[0].start()

	deadline := time.Now().Add(90 * time.Second)
	for i := range customers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; time.Now().Before(deadline); n++ {
				a := retrying(t, hc, bases, "GET", "/v1/drops/"+drop.ID+"/entries/me", tokens[i], "", nil)
				var e dropEntryView
				a.decode(t, &e)
				switch e.Status {
				case "invited":
					body := w.placement("")
					body["items"] = []map[string]any{{"product_id": product.ID, "quantity": 1}}
					if i%4 != 0 {
						body["payment_ref"] = "pay"
					}
					a := retrying(t, hc, bases, "POST", "/v1/orders", tokens[i], uuid.NewString(), body)
					if a.status != 201 && a.code() != "not_invited" {
						t.Errorf("invited placement answered %d: %s", a.status, a.body)
					}
				case "purchased", "lapsed", "sold_out":
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}
	wg.Wait()

	a = send(hc, "GET", bases[1]+"/v1/drops/"+drop.ID, w.admin, "", nil)
	a.decode(t, &drop)
	require.Equal(t, "sold_out", drop.State)
	require.Equal(t, 8, drop.Purchased, "exactly units purchases")
	require.Equal(t, customers, drop.Entries, "one entry per customer")

	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	defer pool.Close()
	var unsettled int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM drop_entries
		WHERE drop_id = $1 AND status NOT IN ('purchased', 'lapsed', 'sold_out')`, drop.ID).Scan(&unsettled))
	require.Zero(t, unsettled, "every entry ends purchased, lapsed or sold_out")

	audit := exec.Command(mustBinary(t), "audit")
	audit.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
	out, err := audit.CombinedOutput()
	require.NoError(t, err, "orderd audit:\n%s", out)
}
