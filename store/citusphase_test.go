//go:build citus

package store_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/internal/citustest"
	"github.com/orderd/orderd/jobs"
	"github.com/orderd/orderd/store"
)

// remoteCommands hears what the coordinator sends the workers, as Citus
// reports it to a session with citus.log_remote_commands on.
type remoteCommands struct {
	mu sync.Mutex
	// current is, per coordinator connection, its distributed transaction.
	current map[*pgconn.PgConn]*remoteTx
	// twoPhase holds the transactions that prepared on a worker.
	twoPhase []*remoteTx
	commits  int
	// all is every distributed transaction heard.
	all []*remoteTx
}

// remoteTx is one distributed transaction: what it wrote on the workers
// and whether it prepared there.
type remoteTx struct {
	id       string
	writes   []string
	prepared bool
	// text is every write whole, for what it names.
	text strings.Builder
}

func (r *remoteTx) String() string { return strings.Join(r.writes, "\n") }

func (r *remoteCommands) notice(c *pgconn.PgConn, n *pgconn.Notice) {
	cmd, ok := strings.CutPrefix(n.Message, "issuing ")
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	tx := r.current[c]
	// Every connection to a worker begins with the coordinator
	// transaction's distributed id.
	if begin, ok := strings.CutPrefix(cmd, "BEGIN"); ok {
		_, id, _ := strings.Cut(begin, "assign_distributed_transaction_id(")
		id, _, _ = strings.Cut(id, ",'")
		if tx == nil || tx.id != id {
			tx = &remoteTx{id: id}
			r.current[c] = tx
			r.all = append(r.all, tx)
		}
		return
	}
	if tx == nil {
		return
	}
	switch {
	case strings.HasPrefix(cmd, "PREPARE TRANSACTION"):
		if !tx.prepared {
			tx.prepared = true
			r.twoPhase = append(r.twoPhase, tx)
		}
	case cmd == "COMMIT":
		r.commits++
	case strings.HasPrefix(cmd, "COPY"), strings.HasPrefix(cmd, "INSERT"), strings.HasPrefix(cmd, "UPDATE"), strings.HasPrefix(cmd, "DELETE"):
		tx.writes = append(tx.writes, cmd[:min(len(cmd), 120)])
		tx.text.WriteString(cmd)
	}
}

// TestCitusWritesCommitInOnePhase takes an order through every write of
// its life on a Citus cluster and sees every transaction commit on its
// worker in one phase: the log reader relies on a transaction that
// appends events committing on its worker before the coordinator, which a
// two-phase commit reverses. Citus plans an INSERT that takes its rows from
// unnest through the coordinator and commits it in two phases even when
// every row goes to one shard.
func TestCitusWritesCommitInOnePhase(t *testing.T) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(citustest.URL(t))
	require.NoError(t, err)
	heard := &remoteCommands{current: map[*pgconn.PgConn]*remoteTx{}}
	cfg.ConnConfig.RuntimeParams["citus.log_remote_commands"] = "on"
	cfg.ConnConfig.OnNotice = heard.notice
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	ins, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	st := newStore(store.Config{Pool: pool, Jobs: ins})

	m := createMerchant(t, st, &merchantOpts{Capacity: 1})
	tea := createProduct(t, st, m.ID, nil)
	cake := createProduct(t, st, m.ID, &productOpts{Stock: intp(5)})

	// Paid at placement and accepted; a second one queued behind it,
	// admitted when the first completes.
	first := mustPlace(t, st, m.ID, cake.ID, placeOpts{Customer: "ann", PaymentRef: "pay-1"})
	second := mustPlace(t, st, m.ID, tea.ID, placeOpts{Customer: "bob", PaymentRef: "pay-2"})
	require.Equal(t, domain.StatusQueued, second.Status)
	_, err = st.CompleteOrder(ctx, first.ID, admin, "r1")
	require.NoError(t, err)
	// Placed unpaid, then paid; placed unpaid, then closed; cancelled.
	unpaid := mustPlace(t, st, m.ID, cake.ID, placeOpts{Customer: "cid"})
	_, err = st.PayOrder(ctx, unpaid.ID, "pay-3", customer("cid"), "r2")
	require.NoError(t, err)
	late := mustPlace(t, st, m.ID, cake.ID, placeOpts{Customer: "dan"})
	setClock(st, func() time.Time { return late.PaymentDeadline.Add(time.Second) })
	closed, err := st.CloseUnpaid(ctx, m.ID, late.ID)
	require.NoError(t, err)
	require.True(t, closed)
	_, err = st.CancelOrder(ctx, unpaid.ID, "sold out", admin, "r3")
	require.NoError(t, err)
	// A replayed placement reads its key.
	res, err := place(ctx, st, m.ID, tea.ID, placeOpts{Customer: "bob", PaymentRef: "pay-2", Key: "again"})
	require.NoError(t, err)
	res, err = place(ctx, st, m.ID, tea.ID, placeOpts{Customer: "bob", PaymentRef: "pay-2", Key: "again"})
	require.NoError(t, err)
	require.True(t, res.Replayed)

	// A drop: its creation, its opening, two customers' joins (new
	// entries with their first events) and a join again.
	clock := newFakeClock(st)
	drop := scheduledDrop(t, st, clock, m.ID)
	openDrops(t, st, clock, []*store.DropView{drop})
	for _, c := range []string{"eve", "fay", "eve"} {
		_, err := st.JoinDrop(ctx, drop.ID, c, "")
		require.NoError(t, err)
	}

	// Webhook outcomes: one delivered, one rescheduled, one dead with its
	// dead letter.
	b := &testBundle{pool: pool, store: st}
	var outbox []uuid.UUID
	for range 3 {
		outbox = append(outbox, addOutbox(t, b, m.ID, uuid.New(), 1)...)
	}
	_, err = pool.Exec(ctx, `UPDATE outbox SET attempts = 1 WHERE merchant_id = $1 AND id = $2`, m.ID, outbox[2])
	require.NoError(t, err)
	claimed, err := st.ClaimWebhooks(ctx, store.ClaimParams{Limit: 100, Lease: time.Minute})
	require.NoError(t, err)
	var results []store.AttemptResult
	for _, d := range claimed {
		if !slices.Contains(outbox, d.ID) {
			continue
		}
		if d.ID == outbox[0] {
			results = append(results, store.AttemptResult{Delivery: d, StartedAt: time.Now(), StatusCode: 200, OK: true})
		} else {
			results = append(results, failed(d))
		}
	}
	require.Len(t, results, len(outbox))
	require.NoError(t, st.RecordWebhookAttempts(ctx, results, fastPolicy))
	require.Equal(t, 1, countRows(t, pool, "dead_letters"))

	heard.mu.Lock()
	defer heard.mu.Unlock()
	require.NotZero(t, heard.commits, "the workers' commits are heard")
	for _, tx := range heard.twoPhase {
		t.Errorf("a transaction committed in two phases after writing:\n%s", tx)
	}
}
