package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/store"
)

// addOutbox writes n messages of one order, versions 1..n, due now.
func addOutbox(t *testing.T, b *testBundle, merchantID, orderID uuid.UUID, n int) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = uuid.New()
		_, err := b.pool.Exec(context.Background(), `
			INSERT INTO outbox (id, merchant_id, order_id, order_version, event_type, payload, next_attempt_at)
			VALUES ($1, $2, $3, $4, 'order.accepted', '{}', now() - interval '1 second')`,
			ids[i], merchantID, orderID, i+1)
		require.NoError(t, err)
	}
	return ids
}

func claimedIDs(ds []store.Delivery) []uuid.UUID {
	out := make([]uuid.UUID, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

func failed(d store.Delivery) store.AttemptResult {
	return store.AttemptResult{Delivery: d, StartedAt: time.Now(), StatusCode: 500, Error: "answered 500"}
}

var fastPolicy = store.RetryPolicy{First: time.Millisecond, Max: time.Millisecond, MaxAttempts: 2}

// forEachClaim runs a claim test with the claim of one PostgreSQL and with
// Citus's claim, merchant by merchant, which any database can run.
func forEachClaim(t *testing.T, test func(t *testing.T, st *store.Store, b *testBundle)) {
	for _, byMerchant := range []bool{false, true} {
		t.Run(fmt.Sprintf("by merchant %v", byMerchant), func(t *testing.T) {
			t.Parallel()
			st, b := setup(t)
			if byMerchant {
				store.ClaimByMerchant(t, st)
			}
			test(t, st, b)
		})
	}
}

func TestClaimWebhooksKeepsOrderAndLeases(t *testing.T) {
	t.Parallel()
	forEachClaim(t, func(t *testing.T, st *store.Store, b *testBundle) {
		ctx := context.Background()
		m := createMerchant(t, st, &merchantOpts{Capacity: 5, WebhookURL: "http://example.com/hook"})
		ids := addOutbox(t, b, m.ID, uuid.New(), 3)

		claimed, err := st.ClaimWebhooks(ctx, store.ClaimParams{Limit: 10, Lease: time.Minute})
		require.NoError(t, err)
		require.Equal(t, ids[:1], claimedIDs(claimed), "a later message waits for the earlier one")
		require.Equal(t, 1, claimed[0].Attempt)
		require.Equal(t, "http://example.com/hook", claimed[0].URL)
		require.Equal(t, m.WebhookSecret, claimed[0].Secret)

		again, err := st.ClaimWebhooks(ctx, store.ClaimParams{Limit: 10, Lease: time.Minute})
		require.NoError(t, err)
		require.Empty(t, again, "a leased message is nobody else's, and blocks its order")

		// A failure keeps the order blocked; the retry comes first.
		require.NoError(t, st.RecordWebhookAttempts(ctx, []store.AttemptResult{failed(claimed[0])}, store.RetryPolicy{First: time.Millisecond, Max: time.Millisecond, MaxAttempts: 5}))
		time.Sleep(10 * time.Millisecond)
		retry, err := st.ClaimWebhooks(ctx, store.ClaimParams{Limit: 10, Lease: time.Minute})
		require.NoError(t, err)
		require.Equal(t, ids[:1], claimedIDs(retry))
		require.Equal(t, 2, retry[0].Attempt)

		require.NoError(t, st.RecordWebhookAttempts(ctx, []store.AttemptResult{{Delivery: retry[0], StartedAt: time.Now(), StatusCode: 200, OK: true}}, fastPolicy))
		next, err := st.ClaimWebhooks(ctx, store.ClaimParams{Limit: 10, Lease: time.Minute})
		require.NoError(t, err)
		require.Equal(t, ids[1:2], claimedIDs(next), "delivered: the next one of the order is due")

		attempts, err := st.ListWebhookAttempts(ctx, ids[0], uuid.Nil, 10)
		require.NoError(t, err)
		require.Len(t, attempts, 2)
		require.Equal(t, 2, attempts[0].Attempt, "newest first")
		require.Equal(t, 200, *attempts[0].StatusCode)
		require.Equal(t, "answered 500", *attempts[1].Error)
	})
}

func TestClaimWebhooksIsFairAcrossMerchants(t *testing.T) {
	t.Parallel()
	forEachClaim(t, func(t *testing.T, st *store.Store, b *testBundle) {
		ctx := context.Background()
		busy := createMerchant(t, st, &merchantOpts{Capacity: 5, WebhookURL: "http://example.com/busy"})
		quiet := createMerchant(t, st, &merchantOpts{Capacity: 5, WebhookURL: "http://example.com/quiet"})
		for range 50 {
			addOutbox(t, b, busy.ID, uuid.New(), 1)
		}
		quietIDs := addOutbox(t, b, quiet.ID, uuid.New(), 1)

		// The busy merchant's 50 messages are older, yet one claim of two
		// takes one of each merchant: round robin, not oldest first.
		two, err := st.ClaimWebhooks(ctx, store.ClaimParams{Limit: 2, Lease: time.Minute, PerMerchant: 5})
		require.NoError(t, err)
		require.Len(t, two, 2)
		require.ElementsMatch(t, []uuid.UUID{busy.ID, quiet.ID}, []uuid.UUID{two[0].MerchantID, two[1].MerchantID})
		_, err = b.pool.Exec(ctx, `UPDATE outbox SET attempts = 0, next_attempt_at = now() - interval '1 second'`)
		require.NoError(t, err)

		claimed, err := st.ClaimWebhooks(ctx, store.ClaimParams{Limit: 10, Lease: time.Minute, PerMerchant: 5})
		require.NoError(t, err)
		require.Len(t, claimed, 6, "five of the busy merchant, and the quiet one's")
		require.Contains(t, claimedIDs(claimed), quietIDs[0])

		skipped, err := st.ClaimWebhooks(ctx, store.ClaimParams{Limit: 10, Lease: time.Minute, PerMerchant: 5, SkipMerchants: []uuid.UUID{busy.ID}})
		require.NoError(t, err)
		require.Empty(t, skipped, "a merchant at its limit is skipped")

		probed, err := st.ClaimWebhooks(ctx, store.ClaimParams{Limit: 10, Lease: time.Minute, PerMerchant: 5, Probing: []uuid.UUID{busy.ID}})
		require.NoError(t, err)
		require.Len(t, probed, 1, "a failing merchant is probed with one message")
	})
}

func TestRecordWebhookAttemptsDeadLettersAndRetries(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 5, WebhookURL: "http://example.com/hook"})
	ids := addOutbox(t, b, m.ID, uuid.New(), 2)
	for attempt := 1; attempt <= fastPolicy.MaxAttempts; attempt++ {
		time.Sleep(5 * time.Millisecond)
		claimed, err := st.ClaimWebhooks(ctx, store.ClaimParams{Limit: 10, Lease: time.Minute})
		require.NoError(t, err)
		require.Equal(t, ids[:1], claimedIDs(claimed))
		require.NoError(t, st.RecordWebhookAttempts(ctx, []store.AttemptResult{failed(claimed[0])}, fastPolicy))
	}
	var status, lastError string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT status, last_error FROM outbox WHERE id = $1`, ids[0]).Scan(&status, &lastError))
	require.Equal(t, "dead", status)
	require.Equal(t, "answered 500", lastError)
	dls, _, err := st.ListDeadLetters(ctx, store.ListDeadLettersParams{Kind: store.DeadLetterWebhook})
	require.NoError(t, err)
	require.Len(t, dls, 1)
	require.Equal(t, ids[0], dls[0].RefID)
	require.Contains(t, dls[0].Reason, "answered 500")

	// Dead-lettered, the message no longer holds back the rest of its order.
	next, err := st.ClaimWebhooks(ctx, store.ClaimParams{Limit: 10, Lease: time.Minute})
	require.NoError(t, err)
	require.Equal(t, ids[1:], claimedIDs(next))

	n, err := st.RetryMerchantWebhooks(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	all, _, err := st.ListDeadLetters(ctx, store.ListDeadLettersParams{Kind: store.DeadLetterWebhook})
	require.NoError(t, err)
	require.Len(t, all, 1)
	require.NotNil(t, all[0].ResolvedAt, "the bulk retry closes the dead letters it reopens")
	var attempts int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT status, attempts FROM outbox WHERE id = $1`, ids[0]).Scan(&status, &attempts))
	require.Equal(t, "pending", status)
	require.Zero(t, attempts)
	n, err = st.RetryMerchantWebhooks(ctx, m.ID)
	require.NoError(t, err)
	require.Zero(t, n)
}

// TestStaleFailureKeepsNewerLease: an attempt that outlived its lease, and
// fails after another relay claimed the row again, must not cut that
// relay's lease short nor dead-letter the row under it.
func TestStaleFailureKeepsNewerLease(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 5, WebhookURL: "http://example.com/hook"})
	ids := addOutbox(t, b, m.ID, uuid.New(), 1)
	first, err := st.ClaimWebhooks(ctx, store.ClaimParams{Limit: 1, Lease: time.Millisecond})
	require.NoError(t, err)
	require.Len(t, first, 1)
	time.Sleep(5 * time.Millisecond)
	second, err := st.ClaimWebhooks(ctx, store.ClaimParams{Limit: 1, Lease: time.Hour})
	require.NoError(t, err)
	require.Equal(t, ids, claimedIDs(second))

	require.NoError(t, st.RecordWebhookAttempts(ctx, []store.AttemptResult{failed(first[0])}, store.RetryPolicy{First: time.Millisecond, Max: time.Millisecond, MaxAttempts: 1}))
	var status string
	var leased bool
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT status, next_attempt_at > now() + interval '30 minutes' FROM outbox WHERE id = $1`, ids[0]).Scan(&status, &leased))
	require.Equal(t, "pending", status)
	require.True(t, leased, "the second claim's lease stands")

	// A late success still counts: the message did arrive.
	require.NoError(t, st.RecordWebhookAttempts(ctx, []store.AttemptResult{{Delivery: first[0], StartedAt: time.Now(), StatusCode: 204, OK: true}}, fastPolicy))
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT status FROM outbox WHERE id = $1`, ids[0]).Scan(&status))
	require.Equal(t, "delivered", status)
}

// TestWebhookBackoffDoublesWithJitter: the delay after attempt n is the first
// delay doubled n-1 times, at most the maximum, plus up to a fifth of jitter.
func TestWebhookBackoffDoublesWithJitter(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 5, WebhookURL: "http://example.com/hook"})
	policy := store.RetryPolicy{First: 10 * time.Second, Max: time.Hour, MaxAttempts: 100}
	for _, c := range []struct {
		attempt int
		want    time.Duration
	}{{1, 10 * time.Second}, {2, 20 * time.Second}, {4, 80 * time.Second}, {10, time.Hour}, {50, time.Hour}} {
		id := addOutbox(t, b, m.ID, uuid.New(), 1)[0]
		_, err := b.pool.Exec(ctx, `UPDATE outbox SET attempts = $2 - 1 WHERE id = $1`, id, c.attempt)
		require.NoError(t, err)
		claimed, err := st.ClaimWebhooks(ctx, store.ClaimParams{Limit: 1, Lease: time.Minute})
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		require.Equal(t, c.attempt, claimed[0].Attempt)
		require.NoError(t, st.RecordWebhookAttempts(ctx, []store.AttemptResult{failed(claimed[0])}, policy))
		var delayMS float64
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT extract(epoch FROM next_attempt_at - now()) * 1000 FROM outbox WHERE id = $1`, id).Scan(&delayMS))
		delay := time.Duration(delayMS) * time.Millisecond
		require.GreaterOrEqual(t, delay, c.want-time.Second, "attempt %d", c.attempt)
		require.LessOrEqual(t, delay, c.want+c.want/5+time.Second, "attempt %d", c.attempt)
	}
}

// TestClaimPlanFollowsTheBacklog: the relay polls an empty outbox for a
// while, then a burst fills it. A claim planned once for the empty table and
// kept (a cached generic plan) read the whole outbox on every claim, seconds
// each under a backlog of 50,000, pinning pages so that autovacuum's ANALYZE,
// which would have replaced the plan, waited behind it. Each claim must be
// planned for the outbox as it is: index scans only.
func TestClaimPlanFollowsTheBacklog(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 5, WebhookURL: "http://example.com/hook"})
	for range 20 {
		claimed, err := st.ClaimWebhooks(ctx, store.ClaimParams{Limit: 256, Lease: time.Minute, PerMerchant: 32})
		require.NoError(t, err)
		require.Empty(t, claimed)
	}
	_, err := b.pool.Exec(ctx, `
		INSERT INTO outbox (id, merchant_id, order_id, order_version, event_type, payload, next_attempt_at)
		SELECT gen_random_uuid(), $1, o, v, 'order.accepted', '{}', now() - interval '1 second'
		FROM generate_series(1, 5000) n, LATERAL (SELECT gen_random_uuid() AS o, n) g, generate_series(1, 4) v`, m.ID)
	require.NoError(t, err)

	scans := func() (seq, idx, fetched int64) {
		_, err := b.pool.Exec(ctx, `SELECT pg_stat_clear_snapshot()`)
		require.NoError(t, err)
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT seq_scan, coalesce(idx_scan, 0), coalesce(idx_tup_fetch, 0)
			FROM pg_stat_user_tables WHERE relname = 'outbox'`).Scan(&seq, &idx, &fetched))
		return seq, idx, fetched
	}
	seqBefore, idxBefore, fetchedBefore := scans()
	for range 5 {
		claimed, err := st.ClaimWebhooks(ctx, store.ClaimParams{Limit: 256, Lease: time.Minute, PerMerchant: 32})
		require.NoError(t, err)
		require.Len(t, claimed, 32)
	}
	// A backend reports its table statistics when idle, within seconds.
	var seq, idx, fetched int64
	require.Eventually(t, func() bool {
		seq, idx, fetched = scans()
		return idx > idxBefore
	}, 30*time.Second, 100*time.Millisecond, "the claims' index scans were never reported")
	require.Equal(t, seqBefore, seq, "a claim read the whole outbox")
	// Whether an earlier version of a candidate's order is pending is a
	// probe of that order's few rows, not a read of the merchant's backlog
	// per candidate (where naming the merchant in the probe led the plan):
	// the claims fetch fewer rows than one backlog per message claimed.
	const backlog, claimedInAll = 20000, 5 * 32
	require.Less(t, fetched-fetchedBefore, int64(backlog*claimedInAll), "the claims read the merchant's backlog per candidate")
}

// TestClaimSkipsLaterMessagesOfOrdersInFlight: a merchant's orders each
// wrote four messages in one transaction (one due time), and earlier claims
// leased the first messages of some of them. A claim reads about the
// messages it takes, not the later messages of every order in flight, which
// must wait for their first and which it used to meet first.
func TestClaimSkipsLaterMessagesOfOrdersInFlight(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 5, WebhookURL: "http://example.com/hook"})
	_, err := b.pool.Exec(ctx, `
		INSERT INTO outbox (id, merchant_id, order_id, order_version, event_type, payload, next_attempt_at)
		SELECT gen_random_uuid(), $1, o, v, 'order.accepted', '{}', now() - interval '1 second'
		FROM (SELECT gen_random_uuid() AS o FROM generate_series(1, 2000)) g, generate_series(1, 4) v
		ORDER BY o, v`, m.ID)
	require.NoError(t, err)
	// As autovacuum would soon: a claim planned for an outbox the planner
	// knows nothing of reads every due message of the merchant instead.
	_, err = b.pool.Exec(ctx, `ANALYZE outbox`)
	require.NoError(t, err)
	params := store.ClaimParams{Limit: 32, Lease: time.Minute, PerMerchant: 32}
	for range 9 {
		claimed, err := st.ClaimWebhooks(ctx, params)
		require.NoError(t, err)
		require.Len(t, claimed, 32)
		for _, d := range claimed {
			require.Equal(t, 1, versionOf(t, b, d.ID), "a later message was claimed before its order's first")
		}
	}
	read, err := st.ClaimRowsRead(ctx, params)
	require.NoError(t, err)
	// The messages taken, read and updated, and the merchants' walk; not
	// the 864 later messages of the orders in flight.
	require.LessOrEqual(t, read, 4*params.Limit, "the claim read the later messages of the orders in flight")
}

// TestDeliveredUpdateReadsOnlyItsMessages: a flush records deliveries of
// many merchants, each with a backlog of pending messages in an outbox the
// planner has no statistics of (a burst's, before autovacuum's ANALYZE).
// Marking them delivered reads those messages, by primary key: not every
// merchant's backlog through an index of pending rows.
func TestDeliveredUpdateReadsOnlyItsMessages(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	const merchants, delivered, backlog = 20, 30, 250
	for range merchants {
		m := createMerchant(t, st, &merchantOpts{Capacity: 5, WebhookURL: "http://example.com/hook"})
		_, err := b.pool.Exec(ctx, `
			INSERT INTO outbox (id, merchant_id, order_id, order_version, event_type, payload, next_attempt_at)
			SELECT gen_random_uuid(), $1, gen_random_uuid(), 1, 'order.accepted', '{}',
			       now() + CASE WHEN n <= $2::int THEN interval '-1 second' ELSE interval '1 hour' END
			FROM generate_series(1, $2::int + $3::int) n`, m.ID, delivered, backlog)
		require.NoError(t, err)
	}
	claimed, err := st.ClaimWebhooks(ctx, store.ClaimParams{Limit: merchants * delivered, Lease: time.Minute})
	require.NoError(t, err)
	require.Len(t, claimed, merchants*delivered)
	var results []store.AttemptResult
	for _, d := range claimed {
		results = append(results, store.AttemptResult{Delivery: d, StartedAt: time.Now(), StatusCode: 200, OK: true})
	}
	read, err := st.DeliveredRowsRead(ctx, results)
	require.NoError(t, err)
	require.LessOrEqual(t, read, 2*len(results), "marking messages delivered read the merchants' backlog")
}

func versionOf(t *testing.T, b *testBundle, id uuid.UUID) int {
	t.Helper()
	var v int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT order_version FROM outbox WHERE id = $1`, id).Scan(&v))
	return v
}

// TestConcurrentClaimsDeliverEachOrderInVersionOrder: four claimers, as
// relays of several processes, work a backlog of three messages for each of
// 600 orders of five merchants, the messages' due times shuffled so that a
// later version is often due first, deliveries taking random time and one
// in five failing to be retried. Every attempt of a message comes after the
// delivery of its order's previous message is recorded, and every message
// is delivered once.
func TestConcurrentClaimsDeliverEachOrderInVersionOrder(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	type msg struct {
		order   uuid.UUID
		version int
	}
	msgs := map[uuid.UUID]msg{}
	for range 5 {
		m := createMerchant(t, st, &merchantOpts{Capacity: 5, WebhookURL: "http://example.com/hook"})
		rows, err := b.pool.Query(ctx, `
			INSERT INTO outbox (id, merchant_id, order_id, order_version, event_type, payload, next_attempt_at)
			SELECT gen_random_uuid(), $1::uuid, md5($1::uuid::text || n::text)::uuid, v, 'order.accepted', '{}',
				now() - interval '1 minute' * random()
			FROM generate_series(1, 120) n, generate_series(2, 4) v
			RETURNING id, order_id, order_version`, m.ID)
		require.NoError(t, err)
		for rows.Next() {
			var id, order uuid.UUID
			var version int
			require.NoError(t, rows.Scan(&id, &order, &version))
			msgs[id] = msg{order, version}
		}
		require.NoError(t, rows.Err())
	}

	var mu sync.Mutex
	// order → the last version whose delivery is recorded, or being
	// recorded: the record commits inside RecordWebhookAttempts, and a
	// claimer may see the next version from that commit on, before the
	// call returns.
	recorded := map[uuid.UUID]int{}
	deliveries := map[uuid.UUID]int{}
	policy := store.RetryPolicy{First: time.Millisecond, Max: 5 * time.Millisecond, MaxAttempts: 100}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	deadline := time.Now().Add(time.Minute)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			idle := 0
			for time.Now().Before(deadline) && idle < 20 {
				claimed, err := st.ClaimWebhooks(ctx, store.ClaimParams{Limit: 64, Lease: time.Minute, PerMerchant: 8})
				if err != nil {
					errs <- err
					return
				}
				if len(claimed) == 0 {
					idle++
					time.Sleep(5 * time.Millisecond)
					continue
				}
				idle = 0
				results := make([]store.AttemptResult, len(claimed))
				for i, d := range claimed {
					m := msgs[d.ID]
					mu.Lock()
					if last := max(recorded[m.order], 1); last != m.version-1 {
						mu.Unlock()
						errs <- fmt.Errorf("order %s: version %d attempted while the last delivered is %d", m.order, m.version, last)
						return
					}
					mu.Unlock()
					time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
					results[i] = store.AttemptResult{Delivery: d, StartedAt: time.Now(), StatusCode: 200, OK: rand.IntN(5) > 0}
					if !results[i].OK {
						results[i].StatusCode, results[i].Error = 500, "answered 500"
					}
				}
				mu.Lock()
				for _, r := range results {
					if r.OK {
						m := msgs[r.Delivery.ID]
						recorded[m.order] = m.version
						deliveries[r.Delivery.ID]++
					}
				}
				mu.Unlock()
				if err := st.RecordWebhookAttempts(ctx, results, policy); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, deliveries, len(msgs), "every message delivered")
	for id, n := range deliveries {
		require.Equal(t, 1, n, "message %s delivered once", id)
	}
	require.Zero(t, countRows(t, b.pool, "outbox WHERE status <> 'delivered'"))
}
