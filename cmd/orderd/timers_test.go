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

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/store/storetest"
)

// closedOrder is an unpaid order's deadline and when its close happened.
type closedOrder struct {
	id       string
	deadline time.Time
	endedAt  *time.Time
	status   string
}

// waitClosed waits until every order in ids has left awaiting_payment, or
// within has passed, and returns what the database holds for them.
func waitClosed(t *testing.T, pool *pgxpool.Pool, ids []string, within time.Duration) []closedOrder {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		rows, err := pool.Query(context.Background(),
			`SELECT id::text, payment_deadline, ended_at, status FROM orders WHERE id = ANY($1::uuid[])`, ids)
		require.NoError(t, err)
		var out []closedOrder
		open := 0
		for rows.Next() {
			var o closedOrder
			require.NoError(t, rows.Scan(&o.id, &o.deadline, &o.endedAt, &o.status))
			if o.status == "awaiting_payment" {
				open++
			}
			out = append(out, o)
		}
		require.NoError(t, rows.Err())
		require.Len(t, out, len(ids))
		if open == 0 || time.Now().After(deadline) {
			return out
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// placeUnpaidVia places n unpaid orders through base, one every spacing.
func placeUnpaidVia(t *testing.T, w *world, base string, n int, spacing time.Duration) []string {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	customer := w.token(t, auth.Principal{Subject: "unpaid", Role: auth.RoleCustomer})
	ids := make([]string, 0, n)
	for i := range n {
		a := send(hc, "POST", base+"/v1/orders", customer, fmt.Sprintf("unpaid-%d-%d", time.Now().UnixNano(), i), w.placement(""))
		require.Equal(t, 201, a.status, string(a.body))
		var o orderView
		a.decode(t, &o)
		ids = append(ids, o.ID)
		time.Sleep(spacing)
	}
	return ids
}

// TestTimersFireAfterEveryProcessRestarts places 30 unpaid orders with a 3 s
// window, kills the only orderd process with SIGKILL, leaves it down until
// half the deadlines have passed, and starts it again: the deadlines that passed
// while nothing ran take effect within 3 s of the restarted process being
// ready, the others within 2 s of their deadline. River's scheduler could do
// neither: the dead process's leadership lease had to run out first.
func TestTimersFireAfterEveryProcessRestarts(t *testing.T) {
	t.Parallel()
	dbURL := storetest.URL(t)
	s := newServer(t, dbURL)
	w := newWorld(t, s.base(), map[string]any{"name": "restart", "capacity": 100, "payment_timeout_seconds": 3})
	ids := placeUnpaidVia(t, w, s.base(), 30, 50*time.Millisecond)
	s.signal(syscall.SIGKILL)
	s.wait()
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	// Down until half the deadlines have passed.
	var middle time.Time
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT payment_deadline FROM orders WHERE id = $1`, ids[len(ids)/2]).Scan(&middle))
	time.Sleep(time.Until(middle))
	s.start()
	ready := time.Now()
	passed := 0
	for _, o := range waitClosed(t, pool, ids, 15*time.Second) {
		require.Equal(t, "closed", o.status, "order %s, deadline %s, restarted %s", o.id, o.deadline, ready)
		if o.deadline.Before(ready) {
			passed++
			require.WithinRange(t, *o.endedAt, o.deadline, ready.Add(3*time.Second), "order %s passed its deadline while every process was down", o.id)
		} else {
			require.WithinRange(t, *o.endedAt, o.deadline, o.deadline.Add(2*time.Second), "order %s", o.id)
		}
	}
	require.Greater(t, passed, len(ids)/2, "deadlines passed while no process ran")
}

// TestTimersSurviveLeaderKill runs three orderd processes, the first of them
// River's leader, places unpaid orders with 2 s windows through the other
// two, and kills the leader with SIGKILL while their deadlines fall due: no
// timer is more than 2 s late although no process can lead River until the
// dead leader's lease runs out, each order is closed once, and the audit is
// clean.
func TestTimersSurviveLeaderKill(t *testing.T) {
	t.Parallel()
	dbURL := storetest.URL(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	leader := newServer(t, dbURL)
	var leaderID string
	require.Eventually(t, func() bool {
		return pool.QueryRow(context.Background(), `SELECT leader_id FROM river_leader`).Scan(&leaderID) == nil
	}, 20*time.Second, 50*time.Millisecond, "the first process becomes River's leader")
	others := []*server{newServer(t, dbURL), newServer(t, dbURL)}
	w := newWorld(t, others[0].base(), map[string]any{"name": "failover", "capacity": 1000, "payment_timeout_seconds": 2})

	// Orders placed through the leader first: their deadlines fall due
	// just as it dies.
	ids := placeUnpaidVia(t, w, leader.base(), 15, 100*time.Millisecond)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := placeUnpaidVia(t, w, s.base(), 40, 100*time.Millisecond)
			mu.Lock()
			ids = append(ids, got...)
			mu.Unlock()
		}()
	}
	time.Sleep(500 * time.Millisecond)
	leader.signal(syscall.SIGKILL)
	leader.wait()
	wg.Wait()
	var stillLeader string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT coalesce((SELECT leader_id FROM river_leader), '')`).Scan(&stillLeader))

	for _, o := range waitClosed(t, pool, ids, 20*time.Second) {
		require.Equal(t, "closed", o.status, "order %s, deadline %s", o.id, o.deadline)
		require.WithinRange(t, *o.endedAt, o.deadline, o.deadline.Add(2*time.Second), "order %s", o.id)
	}
	var closes, orders int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT stream_id) FROM events
		WHERE type = 'order.closed' AND stream_id = ANY($1::uuid[])`, ids).Scan(&closes, &orders))
	require.Equal(t, len(ids), closes)
	require.Equal(t, len(ids), orders)
	audit := exec.Command(mustBinary(t), "audit")
	audit.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
	out, err := audit.CombinedOutput()
	require.NoError(t, err, "orderd audit:\n%s", out)
	t.Logf("leader %s killed; %q led when the last orders were placed", leaderID, stillLeader)
}
