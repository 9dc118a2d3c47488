package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/store/storetest"
)

// skewedStores returns two stores on one new database, as two processes
// would have, the first with a clock 3 s ahead of the second's.
func skewedStores(t *testing.T) (fast, slow *store.Store, b *testBundle) {
	t.Helper()
	fast, b = setup(t)
	slow = newStore(store.Config{Pool: b.pool, Jobs: fast.Config().Jobs})
	setClock(fast, func() time.Time { return time.Now().Add(3 * time.Second) })
	return fast, slow, b
}

// TestSkewedClocksNeverRunBackwards: two processes (stores) decide for one
// merchant, one with a clock 3 s ahead of the other's. An order the fast
// one placed and the slow one paid is not paid before it was placed; an
// order the slow one admits after the fast one admitted another is not
// accepted before it; and, with both placing, paying and completing at
// once from several goroutines each, the audit finds no admission and no
// order whose times run backwards.
func TestSkewedClocksNeverRunBackwards(t *testing.T) {
	t.Parallel()
	fast, slow, b := skewedStores(t)
	ctx := context.Background()
	m, p, first := acceptedOrder(t, fast, 1, "first")
	second := mustPlace(t, slow, m.ID, p.ID, placeOpts{Customer: "second", PaymentRef: "r"})
	require.Equal(t, domain.StatusQueued, second.Status)
	require.False(t, second.PaidAt.Before(*first.AcceptedAt), "paid under the merchant's lock after the first's admission")
	_, err := slow.CompleteOrder(ctx, first.ID, admin, "")
	require.NoError(t, err)
	admitted, err := slow.GetOrder(ctx, second.ID, admin)
	require.NoError(t, err)
	require.Equal(t, domain.StatusAccepted, admitted.Status)
	require.False(t, admitted.AcceptedAt.Before(*first.AcceptedAt), "admitted after the first, so not accepted before it")

	unpaid := mustPlace(t, fast, m.ID, p.ID, placeOpts{Customer: "late-payer"})
	paid, err := slow.PayOrder(ctx, unpaid.ID, "r", customer("late-payer"), "")
	require.NoError(t, err)
	require.False(t, paid.PaidAt.Before(paid.PlacedAt), "paid %s, placed %s", paid.PaidAt, paid.PlacedAt)
	require.Empty(t, violations(t, fast))

	// Both at once: each store places paid and unpaid orders, pays the
	// unpaid ones the other placed and completes what is accepted.
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w, st := range []*store.Store{fast, slow, fast, slow} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			other := slow
			if st == slow {
				other = fast
			}
			for i := range 15 {
				c := fmt.Sprintf("w%d-%d", w, i)
				o, err := place(ctx, st, m.ID, p.ID, placeOpts{Customer: c})
				if err == nil {
					_, err = other.PayOrder(ctx, o.Order.ID, "r", customer(c), "")
				}
				if err == nil {
					_, err = place(ctx, st, m.ID, p.ID, placeOpts{Customer: c + "-paid", PaymentRef: "r"})
				}
				if err != nil {
					errs <- err
					return
				}
				accepted, err := st.ListMerchantOrders(ctx, m.ID, domain.StatusAccepted, 5)
				if err != nil {
					errs <- err
					return
				}
				for _, a := range accepted {
					if _, err := other.CompleteOrder(ctx, a.ID, admin, ""); err != nil &&
						domain.ErrorCode(err) != domain.CodeInvalidTransition {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var admissions int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE merchant_id = $1 AND accepted_at IS NOT NULL`, m.ID).Scan(&admissions))
	require.Greater(t, admissions, 20, "orders were admitted by both stores")
	require.Empty(t, violations(t, fast))
}

// TestSkewedClocksNeverRunBackwards runs in one process; this variant runs
// the test binary again as OS processes whose clocks differ, so that each
// has its own pool, lanes, batches and parked lines.
const (
	skewHelperDB       = "ORDERD_SKEW_HELPER_DB"
	skewHelperMerchant = "ORDERD_SKEW_HELPER_MERCHANT"
	skewHelperProduct  = "ORDERD_SKEW_HELPER_PRODUCT"
	skewHelperOffset   = "ORDERD_SKEW_HELPER_OFFSET_NS"
	skewHelperName     = "ORDERD_SKEW_HELPER_NAME"
)

// skewPlan is one process's part: skewWorkers goroutines, each skewRounds
// times placing an unpaid order, paying an unpaid order of any process,
// placing a paid order and completing an accepted order of any process,
// all for one merchant, with a clock offset from the machine's by offset.
type skewPlan struct {
	helperTarget
	name string
}

const (
	skewWorkers = 3
	skewRounds  = 8
)

func (p skewPlan) run(ctx context.Context, st *store.Store, pool *pgxpool.Pool) error {
	setClock(st, func() time.Time { return time.Now().Add(p.offset) })
	errs := make(chan error, skewWorkers)
	var wg sync.WaitGroup
	for w := range skewWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.work(ctx, st, pool, w); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func (p skewPlan) work(ctx context.Context, st *store.Store, pool *pgxpool.Pool, w int) error {
	// Another process may have paid, completed or closed the order first.
	raced := func(err error) error {
		if domain.ErrorCode(err) == domain.CodeInvalidTransition {
			return nil
		}
		return err
	}
	for i := range skewRounds {
		c := fmt.Sprintf("%s-w%d-%d", p.name, w, i)
		if _, err := place(ctx, st, p.merchant, p.product, placeOpts{Customer: c}); err != nil {
			return fmt.Errorf("place unpaid: %w", err)
		}
		var unpaid uuid.UUID
		var payer string
		err := pool.QueryRow(ctx, `SELECT id, customer_id FROM orders WHERE merchant_id = $1 AND status = 'awaiting_payment'
			ORDER BY random() LIMIT 1`, p.merchant).Scan(&unpaid, &payer)
		switch {
		case errors.Is(err, pgx.ErrNoRows): // the others paid them all
		case err != nil:
			return fmt.Errorf("find an unpaid order: %w", err)
		default:
			if _, err := st.PayOrder(ctx, unpaid, "r", customer(payer), ""); raced(err) != nil {
				return fmt.Errorf("pay: %w", err)
			}
		}
		if _, err := place(ctx, st, p.merchant, p.product, placeOpts{Customer: c + "-paid", PaymentRef: "r"}); err != nil {
			return fmt.Errorf("place paid: %w", err)
		}
		accepted, err := st.ListMerchantOrders(ctx, p.merchant, domain.StatusAccepted, 5)
		if err != nil {
			return err
		}
		if len(accepted) > 0 {
			if _, err := st.CompleteOrder(ctx, accepted[(w+i)%len(accepted)].ID, admin, ""); raced(err) != nil {
				return fmt.Errorf("complete: %w", err)
			}
		}
	}
	return nil
}

func skewHelper() error {
	ctx := context.Background()
	p := skewPlan{name: os.Getenv(skewHelperName)}
	if err := p.readEnv(skewHelperMerchant, skewHelperProduct, skewHelperOffset); err != nil {
		return err
	}
	// The workers, the merchant's parked line and a lane may all wait for
	// the merchant's lock at once.
	return runInHelperProcess(ctx, os.Getenv(skewHelperDB), 8, p.run)
}

// TestSkewedClocksNeverRunBackwardsAcrossProcesses: three OS processes
// whose clocks run 2 s behind, 1 s ahead of and 3 s ahead of the machine's
// place, pay and complete at one merchant of capacity 2, each paying and
// completing the others' orders too, while this process takes the
// merchant's row lock on a connection of its own for 200 ms at a time, so
// that every process's requests wait for it (paid placements in parked
// lines, payments and completions on the lock) and then race for it. For
// the merchant, accepted_at never decreases in admission order and no
// order's times run backwards (audit.accepted_at_backwards,
// audit.order_clock_backwards).
func TestSkewedClocksNeverRunBackwardsAcrossProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.URL(t)
	pool, err := smallPool(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := newStore(store.Config{Pool: pool})
	m := createMerchant(t, st, &merchantOpts{Capacity: 2})
	p := createProduct(t, st, m.ID, nil)

	offsets := []time.Duration{-2 * time.Second, time.Second, 3 * time.Second}
	done := make(chan struct{})
	var wg sync.WaitGroup
	outs := make([][]byte, len(offsets))
	errs := make([]error, len(offsets))
	for i, offset := range offsets {
		cmd := osexec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), skewHelperDB+"="+url, skewHelperMerchant+"="+m.ID.String(), skewHelperProduct+"="+p.ID.String(),
			skewHelperOffset+"="+strconv.FormatInt(int64(offset), 10), skewHelperName+"="+fmt.Sprintf("p%d", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = cmd.CombinedOutput()
		}()
	}
	go func() {
		wg.Wait()
		close(done)
	}()

	holds := 0
	for running := true; running; {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `SELECT 1 FROM merchants WHERE id = $1 FOR NO KEY UPDATE`, m.ID)
		require.NoError(t, err)
		time.Sleep(200 * time.Millisecond)
		require.NoError(t, tx.Commit(ctx))
		holds++
		select {
		case <-done:
			running = false
		case <-time.After(150 * time.Millisecond):
		}
	}
	for i, err := range errs {
		require.NoError(t, err, "helper process %d: %s", i, outs[i])
	}
	require.Greater(t, holds, 2, "the merchant's lock was held while the processes decided")

	var placed, admitted, queued int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(accepted_at),
			(SELECT count(*) FROM events e WHERE e.merchant_id = $1 AND e.type = 'order.queued')
		FROM orders WHERE merchant_id = $1`, m.ID).Scan(&placed, &admitted, &queued))
	require.Equal(t, 2*len(offsets)*skewWorkers*skewRounds, placed)
	require.Greater(t, admitted, 20, "orders were admitted by the processes")
	require.Positive(t, queued, "paid orders waited in the queue")
	for _, view := range []string{"accepted_at_backwards", "order_clock_backwards"} {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM audit.`+view+` WHERE merchant_id = $1`, m.ID).Scan(&n))
		require.Zero(t, n, view)
	}
	require.Empty(t, violations(t, st))
}

// TestSkewedClocksMerchantChangesFloorLaterDecisions: a merchant's changes
// that save no load (creation, secret rotation, a settings change that
// drains nothing, a pause) still floor its later decisions, so the process whose
// clock is behind records neither a merchant event nor an admission before
// them.
func TestSkewedClocksMerchantChangesFloorLaterDecisions(t *testing.T) {
	t.Parallel()
	fast, slow, b := skewedStores(t)
	ctx := context.Background()
	m := createMerchant(t, fast, &merchantOpts{Capacity: 1})
	p := createProduct(t, fast, m.ID, nil)

	_, err := fast.RotateWebhookSecret(ctx, m.ID, storeMeta())
	require.NoError(t, err)
	name := "renamed"
	_, err = fast.UpdateMerchant(ctx, m.ID, store.MerchantPatch{Name: &name}, storeMeta())
	require.NoError(t, err)
	_, err = slow.PauseMerchant(ctx, m.ID, domain.PauseRequest{Mode: domain.PauseQueue}, storeMeta())
	require.NoError(t, err)
	_, err = slow.ResumeMerchant(ctx, m.ID, storeMeta())
	require.NoError(t, err)
	_, err = fast.PauseMerchant(ctx, m.ID, domain.PauseRequest{Mode: domain.PauseQueue}, storeMeta())
	require.NoError(t, err)
	_, err = slow.ResumeMerchant(ctx, m.ID, storeMeta())
	require.NoError(t, err)
	o := mustPlace(t, slow, m.ID, p.ID, placeOpts{Customer: "c", PaymentRef: "r"})
	require.Equal(t, domain.StatusAccepted, o.Status)

	rows, err := b.pool.Query(ctx, `SELECT version, type, recorded_at FROM events WHERE stream_id = $1 ORDER BY version`, m.ID)
	require.NoError(t, err)
	type event struct {
		Version    int
		Type       string
		RecordedAt time.Time
	}
	events, err := pgx.CollectRows(rows, pgx.RowToStructByPos[event])
	require.NoError(t, err)
	require.Len(t, events, 7)
	for i := 1; i < len(events); i++ {
		require.False(t, events[i].RecordedAt.Before(events[i-1].RecordedAt),
			"%s (version %d) recorded at %s, before %s (version %d) at %s", events[i].Type, events[i].Version,
			events[i].RecordedAt, events[i-1].Type, events[i-1].Version, events[i-1].RecordedAt)
	}
	last := events[len(events)-1]
	require.False(t, o.AcceptedAt.Before(last.RecordedAt), "accepted at %s, before %s at %s", o.AcceptedAt, last.Type, last.RecordedAt)
}
