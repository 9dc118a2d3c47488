package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/internal/pglocal"
	"github.com/orderd/orderd/migrations"
)

// acked is one placement as its client saw it.
type acked struct {
	id               string
	paid             bool
	sent, answeredAt time.Time
}

// TestPointInTimeRestore is the restore drill of docs/operations-failover.md:
// a primary archives its WAL (archive_command copying to a directory) and a
// base backup is taken with pg_basebackup; orderd serves paid and unpaid
// placements; the backup is restored with recovery_target_time set to a
// moment during the load. On the restored database every order answered
// before that moment exists with its payment, none sent after it does,
// `orderd rebuild` finds the projections equal to the events, the first
// `orderd serve` closes the unpaid orders whose deadlines passed while the
// database was down and delivers the webhooks still owed, and `orderd
// audit` is clean.
func TestPointInTimeRestore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	archive := filepath.Join(dir, "primary", "archive")
	// Made before the cluster, so that it is handed to the server's user
	// with the rest of the directory.
	require.NoError(t, os.MkdirAll(archive, 0o700))
	primary := startCluster(t, filepath.Join(dir, "primary"),
		"archive_mode=on", fmt.Sprintf("archive_command='cp %%p %s/%%f'", archive))
	require.NoError(t, pglocal.EnsureDatabase(ctx, primary.URL, "orderd"))
	dbURL := primary.DatabaseURL("orderd")
	require.NoError(t, migrations.Up(ctx, dbURL))
	require.NoError(t, primary.BaseBackup(ctx, filepath.Join(dir, "restored"), false))

	var hooks sync.Map // delivery id → true
	receiver := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hooks.Store(r.Header.Get("X-Orderd-Delivery"), true)
	}))
	t.Cleanup(receiver.Close)
	env := []string{"ORDERD_WEBHOOK_ALLOW_LOOPBACK=true", "ORDERD_WEBHOOK_BACKOFF=100ms", "ORDERD_MIGRATE=false"}
	s := newServer(t, dbURL, env...)
	w := newWorld(t, s.base(), map[string]any{"name": "restored", "capacity": 100000, "payment_timeout_seconds": 3,
		"webhook_url": receiver.URL + "/hooks"})
	hc := &http.Client{Timeout: 20 * time.Second}

	var mu sync.Mutex
	var placements []acked
	var target time.Time
	var wg sync.WaitGroup
	loadEnds := time.Now().Add(3 * time.Second)
	for c := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			customer := w.token(t, auth.Principal{Subject: fmt.Sprintf("c%d", c), Role: auth.RoleCustomer})
			for n := 0; time.Now().Before(loadEnds); n++ {
				key := uuid.NewString()
				ref := ""
				if n%2 == 0 {
					ref = "pay-" + key
				}
				sent := time.Now()
				a := send(hc, "POST", s.base()+"/v1/orders", customer, key, w.placement(ref))
				var o orderView
				if a.status != 201 || json.Unmarshal(a.body, &o) != nil {
					t.Errorf("placement answered %d: %v %s", a.status, a.err, a.body)
					return
				}
				mu.Lock()
				placements = append(placements, acked{id: o.ID, paid: ref != "", sent: sent, answeredAt: time.Now()})
				mu.Unlock()
			}
		}()
	}
	// The moment to restore to falls in the middle of the load; the unpaid
	// orders placed just before it fall due while the database is down.
	time.Sleep(1500 * time.Millisecond)
	mu.Lock()
	target = time.Now()
	mu.Unlock()
	wg.Wait()
	s.signal(syscall.SIGKILL)
	s.wait()

	// Every WAL segment up to the end of the load is archived before the
	// primary goes: the restore reads only the backup and the archive.
	admin, err := pgxpool.New(ctx, primary.URL)
	require.NoError(t, err)
	var lastSegment string
	require.NoError(t, admin.QueryRow(ctx, `SELECT pg_walfile_name(pg_switch_wal())`).Scan(&lastSegment))
	require.Eventually(t, func() bool {
		var archived string
		err := admin.QueryRow(ctx, `SELECT coalesce(last_archived_wal, '') FROM pg_stat_archiver`).Scan(&archived)
		return err == nil && archived >= lastSegment
	}, 30*time.Second, 50*time.Millisecond, "WAL segment %s never archived", lastSegment)
	admin.Close()
	require.NoError(t, primary.Stop(ctx))

	restoredDir := filepath.Join(dir, "restored")
	require.NoError(t, os.WriteFile(filepath.Join(restoredDir, "data", "recovery.signal"), nil, 0o600))
	restoreStart := time.Now()
	restored := startCluster(t, restoredDir,
		fmt.Sprintf("restore_command='cp %s/%%f %%p'", archive),
		fmt.Sprintf("recovery_target_time='%s'", target.UTC().Format("2006-01-02 15:04:05.999999-07:00")),
		"recovery_target_action=promote")
	restoredURL := restored.DatabaseURL("orderd")
	pool, err := pgxpool.New(ctx, restoredURL)
	require.NoError(t, err)
	defer pool.Close()
	require.Eventually(t, func() bool {
		var recovering bool
		err := pool.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&recovering)
		return err == nil && !recovering
	}, 60*time.Second, 50*time.Millisecond, "the restored cluster never left recovery")
	restoreTook := time.Since(restoreStart)

	mu.Lock()
	var before, after []string
	paidBefore := map[string]bool{}
	for _, p := range placements {
		switch {
		case p.answeredAt.Before(target):
			before = append(before, p.id)
			paidBefore[p.id] = p.paid
		case p.sent.After(target):
			after = append(after, p.id)
		}
	}
	mu.Unlock()
	require.NotEmpty(t, before)
	require.NotEmpty(t, after)
	rows, err := pool.Query(ctx, `SELECT id::text, paid_at IS NOT NULL FROM orders WHERE id = ANY($1::uuid[])`, before)
	require.NoError(t, err)
	found := 0
	for rows.Next() {
		var id string
		var paid bool
		require.NoError(t, rows.Scan(&id, &paid))
		require.Equal(t, paidBefore[id], paid, "order %s", id)
		found++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, len(before), found, "orders answered before the target time are missing from the restore")
	var later int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE id = ANY($1::uuid[])`, after).Scan(&later))
	require.Zero(t, later, "orders sent after the target time are in the restore")
	var overdue []string
	rows, err = pool.Query(ctx, `SELECT id::text FROM orders WHERE status = 'awaiting_payment' AND payment_deadline < now()`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		overdue = append(overdue, id)
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, overdue, "no unpaid order fell due while the database was down")

	rebuild := exec.Command(mustBinary(t), "rebuild")
	rebuild.Env = append(os.Environ(), "DATABASE_URL="+restoredURL)
	out, err := rebuild.CombinedOutput()
	require.NoError(t, err, "orderd rebuild on the restored database:\n%s", out)

	firstStart := time.Now()
	newServer(t, restoredURL, env...)
	require.Eventually(t, func() bool {
		var open int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE id = ANY($1::uuid[]) AND status = 'awaiting_payment'`, overdue).Scan(&open)
		return err == nil && open == 0
	}, 30*time.Second, 100*time.Millisecond, "timers that fell due while the database was down never fired")
	timersFired := time.Since(firstStart)
	require.Eventually(t, func() bool {
		var pending int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE status <> 'delivered'`).Scan(&pending)
		return err == nil && pending == 0
	}, 60*time.Second, 200*time.Millisecond, "webhooks owed by the restored database left undelivered")
	var undelivered []string
	rows, err = pool.Query(ctx, `SELECT id::text FROM outbox`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		if _, ok := hooks.Load(id); !ok {
			undelivered = append(undelivered, id)
		}
	}
	require.NoError(t, rows.Err())
	require.Empty(t, undelivered, "outbox messages marked delivered but never received")

	audit := exec.Command(mustBinary(t), "audit")
	audit.Env = append(os.Environ(), "DATABASE_URL="+restoredURL)
	out, err = audit.CombinedOutput()
	require.NoError(t, err, "orderd audit on the restored database:\n%s", out)
	t.Logf("restored to %d of %d orders in %s; %d overdue timers fired within %s of the first start",
		len(before), len(placements), restoreTook.Round(time.Millisecond), len(overdue), timersFired.Round(100*time.Millisecond))
}
