package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store/pgkit"
)

// Delivery is one claimed outbox message with what sending it needs.
type Delivery struct {
	ID         uuid.UUID
	MerchantID uuid.UUID
	OrderID    uuid.UUID
	EventType  string
	Payload    []byte
	Attempt    int
	URL        string
	Secret     string
}

// ClaimParams says which deliveries to claim.
type ClaimParams struct {
	Limit int
	// Lease is how long a claimed row stays invisible to other relays; a
	// relay that dies mid-delivery leaves it to be claimed again after that.
	Lease time.Duration
	// SkipMerchants are merchants with enough deliveries in flight already,
	// and PerMerchant caps what one claim takes of each merchant, so one
	// merchant's slow endpoint or backlog cannot take every worker.
	SkipMerchants []uuid.UUID
	PerMerchant   int
	// Probing are merchants whose endpoint keeps failing: a claim takes at
	// most one of their messages, so that a dead endpoint holds one worker
	// per timeout instead of PerMerchant.
	Probing []uuid.UUID
}

// ClaimWebhooks takes due pending messages with SKIP LOCKED, a few of each
// merchant's at a time, counts the attempt and leases them. A message is only due once every earlier message
// of its order is delivered or dead-lettered: deliveries of one order go out
// in event order.
func (s *Store) ClaimWebhooks(ctx context.Context, p ClaimParams) ([]Delivery, error) {
	distributed, err := s.onCitus(ctx)
	if err != nil {
		return nil, err
	}
	if distributed {
		return s.claimWebhooksByMerchant(ctx, p)
	}
	rows, err := s.pool.Query(ctx, claimSQL, claimArgs(p)...)
	if err != nil {
		return nil, mapErr(fmt.Errorf("claim webhooks: %w", err))
	}
	out, err := pgx.CollectRows(rows, scanDelivery)
	if err != nil {
		return nil, mapErr(fmt.Errorf("claim webhooks: %w", err))
	}
	return out, nil
}

// scanDelivery reads a claimed row as both claims return it: id, merchant,
// order, event type, payload as text, attempt, URL and secret.
func scanDelivery(row pgx.CollectableRow) (Delivery, error) {
	var d Delivery
	var payload string
	err := row.Scan(&d.ID, &d.MerchantID, &d.OrderID, &d.EventType, &payload, &d.Attempt, &d.URL, &d.Secret)
	d.Payload = []byte(payload)
	return d, err
}

// claimArgs are claimSQL's arguments for p, after the mode that has the
// statement planned anew each time (QueryExecModeExec), never from a cached
// generic plan: the outbox swings from empty to a burst's backlog, and a
// plan made for the empty table reads all of it on every claim while
// pinning the pages that autovacuum's ANALYZE waits on to replace it.
func claimArgs(p ClaimParams) []any {
	// Text, for QueryExecModeExec sends its arguments in text format.
	skip, probing := uuidStrings(p.SkipMerchants), uuidStrings(p.Probing)
	perMerchant := p.PerMerchant
	if perMerchant <= 0 || perMerchant > p.Limit {
		perMerchant = p.Limit
	}
	return []any{pgx.QueryExecModeExec, p.Limit, p.Lease.Milliseconds(), skip, perMerchant, probing}
}

// claimSQL is ClaimWebhooks' statement on one PostgreSQL.
const claimSQL = `
		WITH RECURSIVE merchants_with_pending AS (
			-- A loose index scan: one probe per merchant with pending
			-- messages, instead of reading every pending row.
			(SELECT merchant_id FROM outbox WHERE status = 'pending' ORDER BY merchant_id LIMIT 1)
			UNION ALL
			SELECT (SELECT o2.merchant_id FROM outbox o2 WHERE o2.status = 'pending' AND o2.merchant_id > p.merchant_id
			        ORDER BY o2.merchant_id LIMIT 1)
			FROM merchants_with_pending p WHERE p.merchant_id IS NOT NULL
		), due AS (
			SELECT id FROM (
				SELECT x.id, x.merchant_id, x.next_attempt_at,
				       row_number() OVER (PARTITION BY x.merchant_id ORDER BY x.next_attempt_at) AS turn
				FROM merchants_with_pending mm,
				LATERAL (
					-- The row comparisons confine the scan to this merchant's due
					-- rows in outbox_pending_merchant_idx; with a plain equality
					-- the planner may walk every due row of every merchant in
					-- outbox_pending_idx instead, once per merchant. Locking here
					-- lets a concurrent claim move on to the next rows. The limit
					-- stays a plain parameter: one that depends on the merchant
					-- made claims cost twice as much. The probe for an earlier
					-- pending version names only the order (its messages are all
					-- its merchant's): naming the merchant too led the planner to
					-- read the merchant's backlog for every candidate. Versions
					-- in order within a time: an order's messages written
					-- together share it, and its later ones, which wait, then
					-- come after every order's first (migration 37).
					SELECT d.id, d.merchant_id, d.next_attempt_at FROM outbox d
					WHERE (d.merchant_id, d.next_attempt_at) >= (mm.merchant_id, '-infinity'::timestamptz)
					  AND (d.merchant_id, d.next_attempt_at) <= (mm.merchant_id, now()) AND d.status = 'pending'
					  AND NOT EXISTS (SELECT 1 FROM outbox e WHERE e.order_id = d.order_id AND e.order_version < d.order_version AND e.status = 'pending')
					ORDER BY d.merchant_id, d.next_attempt_at, d.order_version LIMIT $4
					FOR UPDATE OF d SKIP LOCKED
				) x
				WHERE mm.merchant_id IS NOT NULL AND mm.merchant_id <> ALL($3::uuid[])
			) ranked
			WHERE turn = 1 OR merchant_id <> ALL($5::uuid[])
			-- Round robin: every merchant's first message before anyone's second.
			ORDER BY turn, next_attempt_at
			LIMIT $1
		), claimed AS (
			UPDATE outbox o SET attempts = o.attempts + 1, next_attempt_at = now() + $2 * interval '1 millisecond'
			-- An array, so that the rows are fetched by primary key even when the
			-- planner guesses the outbox small and would hash all of it.
			WHERE o.id = ANY(ARRAY(SELECT id FROM due))
			RETURNING o.id, o.merchant_id, o.order_id, o.event_type, o.payload, o.attempts
		)
		-- The witness's messages (WitnessMerchant) have no merchant: the
		-- relay knows where they go.
		SELECT c.id, c.merchant_id, c.order_id, c.event_type, c.payload::text, c.attempts, coalesce(m.webhook_url, ''), coalesce(m.webhook_secret, '')
		FROM claimed c LEFT JOIN merchants m ON m.id = c.merchant_id`

func uuidStrings(ids []uuid.UUID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}

// AttemptResult is the outcome of one delivery attempt.
type AttemptResult struct {
	Delivery   Delivery
	StartedAt  time.Time
	Latency    time.Duration
	StatusCode int
	Error      string
	OK         bool
}

// RetryPolicy spaces attempts: First doubles after every failure up to Max,
// with up to 20 % jitter, for MaxAttempts attempts in all.
type RetryPolicy struct {
	First       time.Duration
	Max         time.Duration
	MaxAttempts int
}

func (p RetryPolicy) delay(attempt int) time.Duration {
	d := p.First
	for i := 1; i < attempt && d < p.Max; i++ {
		d *= 2
	}
	d = min(d, p.Max)
	return d + time.Duration(rand.Int64N(int64(d)/5+1))
}

// RecordWebhookAttempts stores a batch of outcomes: every attempt row;
// delivered messages; failed ones rescheduled with backoff, or, after the
// last attempt, dead and given a dead letter with the last error. Every
// statement names the merchants of its rows, and all of them travel in one
// round trip: on one PostgreSQL one set of statements writes every
// merchant's rows in one transaction; on Citus each merchant's rows are
// written and committed on their own, in a transaction of their shard (one
// over several shards commits in two phases). A failure there may leave the
// merchants before it recorded; the others' rows stay leased and are sent
// again.
func (s *Store) RecordWebhookAttempts(ctx context.Context, results []AttemptResult, policy RetryPolicy) error {
	if len(results) == 0 {
		return nil
	}
	distributed, err := s.onCitus(ctx)
	if err != nil {
		return err
	}
	// The retry times are computed here from the database's clock, now():
	// Citus refuses a stable function (now(), or adding an interval)
	// applied to a column in an UPDATE.
	var now time.Time
	if slices.ContainsFunc(results, func(r AttemptResult) bool { return !r.OK && r.Delivery.Attempt < policy.MaxAttempts }) {
		if err := s.pool.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
			return mapErr(fmt.Errorf("reschedule: %w", err))
		}
	}
	b := &pgx.Batch{}
	if distributed {
		for _, group := range pgkit.GroupBy(results, func(r AttemptResult) uuid.UUID { return r.Delivery.MerchantID }) {
			b.Queue("begin")
			addAttempts(b, group, policy, now, true)
			b.Queue("commit")
		}
	} else {
		addAttempts(b, results, policy, now, false)
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return mapErr(fmt.Errorf("record attempts: %w", err))
	}
	return nil
}

// addAttempts adds to b the writes of outcomes, each statement filtered by
// the merchants of its rows, rendered for Citus when citus is set: failures
// are rescheduled from now.
func addAttempts(b *pgx.Batch, results []AttemptResult, policy RetryPolicy, now time.Time, citus bool) {
	// [16]byte is pgx's native uuid; uuid.UUID goes through its text form,
	// which costs the relay more than the rest of recording.
	var outbox, merchants [][16]byte
	var attempt, latency []int32
	var started []time.Time
	var status []pgtype.Int4
	var errText []pgtype.Text
	var failed, failedMerchants, dead, deadMerchants, deadLetters [][16]byte
	delivered := map[[16]byte][][16]byte{} // ids by merchant
	var deliveredMerchants [][16]byte
	var at []time.Time
	var failedAttempts, deadAttempts []int32
	var errs, deadErrs []string
	for _, r := range results {
		id, merchant := [16]byte(r.Delivery.ID), [16]byte(r.Delivery.MerchantID)
		outbox, merchants, attempt, started = append(outbox, id), append(merchants, merchant), append(attempt, int32(r.Delivery.Attempt)), append(started, r.StartedAt)
		latency = append(latency, int32(r.Latency.Milliseconds()))
		status = append(status, pgtype.Int4{Int32: int32(r.StatusCode), Valid: r.StatusCode != 0})
		errText = append(errText, pgtype.Text{String: r.Error, Valid: r.Error != ""})
		switch {
		case r.OK:
			if delivered[merchant] == nil {
				deliveredMerchants = append(deliveredMerchants, merchant)
			}
			delivered[merchant] = append(delivered[merchant], id)
		case r.Delivery.Attempt >= policy.MaxAttempts:
			dead, deadMerchants, deadLetters = append(dead, id), append(deadMerchants, merchant), append(deadLetters, uuid.New())
			deadErrs, deadAttempts = append(deadErrs, r.Error), append(deadAttempts, int32(r.Delivery.Attempt))
		default:
			failed, failedMerchants = append(failed, id), append(failedMerchants, merchant)
			errs, failedAttempts = append(errs, r.Error), append(failedAttempts, int32(r.Delivery.Attempt))
			at = append(at, now.Add(policy.delay(r.Delivery.Attempt)))
		}
	}
	attempts := insertRows{
		Into: `INSERT INTO webhook_attempts (outbox_id, merchant_id, attempt, started_at, latency_ms, status_code, error)`,
		Columns: []column{col("uuid", outbox), col("uuid", merchants), col("int", attempt), col("timestamptz", started),
			col("int", latency), col("int", status), col("text", errText)},
	}
	for _, st := range attempts.statements(citus) {
		b.Queue(st.sql, st.args...)
	}
	// A statement per merchant that only the primary key, (id, merchant_id),
	// can serve: a probe a message. Over several merchants' arrays
	// PostgreSQL 15 probes it for every id with every merchant; by (id,
	// merchant) pairs the join was planned, on the statistics of the empty
	// outbox a burst arrives in, as a hash of every pending row; and where
	// status = 'pending' lets the partial indexes of pending rows match,
	// such statistics had the merchant's whole backlog read for its few
	// ids. Pending is neither delivered nor dead (the status's check).
	for _, m := range deliveredMerchants {
		b.Queue(`UPDATE outbox SET status = 'delivered', delivered_at = now(), last_error = NULL
			WHERE id = ANY($1) AND merchant_id = $2 AND status NOT IN ('delivered', 'dead')`, delivered[m], m)
	}
	if len(failed) > 0 {
		// A failure only reschedules the row if no later claim took it
		// over (a lease that ran out while this attempt hung): the newer
		// attempt's lease must not be cut short.
		b.Queue(`UPDATE outbox o SET next_attempt_at = t.at, last_error = t.e
			FROM unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::int[], $5::uuid[]) AS t(id, at, e, a, m)
			WHERE o.id = t.id AND o.merchant_id = t.m AND o.merchant_id = ANY($5::uuid[]) AND o.status = 'pending' AND o.attempts = t.a`,
			failed, at, errs, failedAttempts, failedMerchants)
	}
	if len(dead) > 0 {
		b.Queue(`UPDATE outbox o SET status = 'dead', last_error = t.e
			FROM unnest($1::uuid[], $2::text[], $3::int[], $4::uuid[]) AS t(id, e, a, m)
			WHERE o.id = t.id AND o.merchant_id = t.m AND o.merchant_id = ANY($4::uuid[]) AND o.status = 'pending' AND o.attempts = t.a`,
			dead, deadErrs, deadAttempts, deadMerchants)
		// The dead letters of the rows the update made dead, by a statement
		// of their own that reads them back: an insert of the rows a
		// data-modifying CTE returns is an INSERT … SELECT that Citus plans
		// through the coordinator and commits in two phases, while this one
		// it sends whole to the merchant's shard. Their ids come from here:
		// a volatile function in it would send it through the coordinator
		// too. A row it did not change is dead at that attempt only if the
		// same outcome was recorded before, whose letter is in the way.
		b.Queue(`INSERT INTO dead_letters (id, kind, ref_id, merchant_id, reason, attempts)
			SELECT t.dl, 'webhook', o.id, o.merchant_id, 'undeliverable after ' || t.a || ' attempts: ' || t.e, t.a
			FROM outbox o JOIN unnest($1::uuid[], $2::uuid[], $3::text[], $4::int[], $5::uuid[]) AS t(id, dl, e, a, m)
				ON o.id = t.id AND o.merchant_id = t.m
			WHERE o.merchant_id = ANY($5::uuid[]) AND o.status = 'dead' AND o.attempts = t.a
			ON CONFLICT (kind, ref_id, merchant_id) WHERE resolved_at IS NULL DO NOTHING`,
			dead, deadLetters, deadErrs, deadAttempts, deadMerchants)
	}
}

// Abandoned is a claimed delivery that a stopping relay did not finish.
type Abandoned struct {
	Delivery Delivery
	// Sent is false when it never left the relay: that attempt is given back.
	Sent bool
}

// ReleaseWebhooks ends the leases of abandoned deliveries, making them due
// now. A row claimed again since (its lease ran out) is left alone.
func (s *Store) ReleaseWebhooks(ctx context.Context, abandoned []Abandoned) error {
	ids, merchants := make([][16]byte, len(abandoned)), make([][16]byte, len(abandoned))
	attempts := make([]int32, len(abandoned))
	unsent := make([]bool, len(abandoned))
	for i, a := range abandoned {
		ids[i], merchants[i], attempts[i], unsent[i] = a.Delivery.ID, a.Delivery.MerchantID, int32(a.Delivery.Attempt), !a.Sent
	}
	_, err := s.pool.Exec(ctx, `
		UPDATE outbox o SET next_attempt_at = now(), attempts = o.attempts - CASE WHEN t.unsent THEN 1 ELSE 0 END
		FROM unnest($1::uuid[], $2::int[], $3::bool[], $4::uuid[]) AS t(id, a, unsent, m)
		WHERE o.id = t.id AND o.merchant_id = t.m AND o.merchant_id = ANY($4::uuid[]) AND o.status = 'pending' AND o.attempts = t.a`,
		ids, attempts, unsent, merchants)
	if err != nil {
		return mapErr(fmt.Errorf("release webhooks: %w", err))
	}
	return nil
}

// RetryMerchantWebhooks hands every dead-lettered webhook of a merchant back
// to the relay, after an outage; it returns how many.
func (s *Store) RetryMerchantWebhooks(ctx context.Context, merchantID uuid.UUID) (int, error) {
	var n int
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `
			WITH dl AS (
				UPDATE dead_letters SET resolved_at = now(), resolution = 'retried'
				WHERE kind = 'webhook' AND merchant_id = $1 AND resolved_at IS NULL
				RETURNING ref_id
			), o AS (
				UPDATE outbox SET status = 'pending', attempts = 0, next_attempt_at = now(), last_error = NULL
				WHERE merchant_id = $1 AND id IN (SELECT ref_id FROM dl) AND status = 'dead'
				RETURNING 1
			)
			SELECT count(*) FROM o`, merchantID).Scan(&n)
	})
	return n, err
}

// WebhookAttempt is one recorded attempt.
type WebhookAttempt struct {
	OutboxID   uuid.UUID `json:"outbox_id"`
	MerchantID uuid.UUID `json:"merchant_id"`
	Attempt    int       `json:"attempt"`
	StartedAt  time.Time `json:"started_at"`
	LatencyMS  int       `json:"latency_ms"`
	StatusCode *int      `json:"status_code"`
	Error      *string   `json:"error"`
}

// ListWebhookAttempts returns attempts of one message or of one merchant, newest first.
func (s *Store) ListWebhookAttempts(ctx context.Context, outboxID, merchantID uuid.UUID, limit int) ([]WebhookAttempt, error) {
	if outboxID == uuid.Nil && merchantID == uuid.Nil {
		return nil, domain.Errorf(domain.CodeValidation, "outbox_id or merchant_id is required")
	}
	rows, err := s.pool.Query(ctx, `SELECT outbox_id, merchant_id, attempt, started_at, latency_ms, status_code, error
		FROM webhook_attempts WHERE ($1::uuid IS NULL OR outbox_id = $1) AND ($2::uuid IS NULL OR merchant_id = $2)
		ORDER BY started_at DESC, id DESC LIMIT $3`, nullUUID(outboxID), nullUUID(merchantID), limit)
	if err != nil {
		return nil, mapErr(fmt.Errorf("list attempts: %w", err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[WebhookAttempt])
	if out == nil {
		out = []WebhookAttempt{}
	}
	return out, mapErr(err)
}

// claimWebhooksByMerchant is the claim on Citus, where a row lock is only
// taken by a statement that stays on one shard and a recursive query only
// with the merchant fixed: one read, without locks, of which merchants have
// due messages, the oldest waiting first (each worker's shards on that
// worker: webhookMerchantsDue), then a claim of each merchant's share on its
// own shard, each its own transaction. Every merchant gets an equal share of
// the claim, not more than PerMerchant (one while probing).
func (s *Store) claimWebhooksByMerchant(ctx context.Context, p ClaimParams) ([]Delivery, error) {
	due, err := s.webhookMerchantsDue(ctx, p.SkipMerchants, p.Limit)
	if err != nil {
		return nil, mapErr(fmt.Errorf("claim webhooks: merchants due: %w", err))
	}
	if len(due) == 0 {
		return nil, nil
	}
	share := max(1, p.Limit/len(due))
	if p.PerMerchant > 0 {
		share = min(share, p.PerMerchant)
	}
	var out []Delivery
	for _, m := range due {
		n := min(share, p.Limit-len(out))
		if n <= 0 {
			break
		}
		if slices.Contains(p.Probing, m) {
			n = 1
		}
		// The witness's messages (WitnessMerchant) have no merchant: the
		// relay knows where they go.
		endpoint := `merchants m`
		if m == WitnessMerchant {
			endpoint = `(SELECT $1::uuid AS id, NULL::text AS webhook_url, '' AS webhook_secret) m`
		}
		rows, err := s.pool.Query(ctx, `
			UPDATE outbox o SET attempts = o.attempts + 1, next_attempt_at = now() + $3 * interval '1 millisecond'
			FROM `+endpoint+`
			WHERE o.merchant_id = $1 AND m.id = $1 AND o.id = ANY(ARRAY(
				SELECT d.id FROM outbox d
				WHERE d.merchant_id = $1 AND d.status = 'pending' AND d.next_attempt_at <= now()
				  AND NOT EXISTS (SELECT 1 FROM outbox e WHERE e.merchant_id = $1 AND e.order_id = d.order_id
				                  AND e.order_version < d.order_version AND e.status = 'pending')
				ORDER BY d.next_attempt_at, d.order_version LIMIT $2
				FOR UPDATE OF d SKIP LOCKED))
			RETURNING o.id, o.merchant_id, o.order_id, o.event_type, o.payload::text, o.attempts, coalesce(m.webhook_url, ''), m.webhook_secret`,
			m, n, p.Lease.Milliseconds())
		if err != nil {
			return out, mapErr(fmt.Errorf("claim webhooks of merchant %s: %w", m, err))
		}
		claimed, err := pgx.CollectRows(rows, scanDelivery)
		if err != nil {
			return out, mapErr(fmt.Errorf("claim webhooks of merchant %s: %w", m, err))
		}
		out = append(out, claimed...)
	}
	return out, nil
}

// webhookMerchantsDue are up to limit merchants, skip's left out, with
// messages due, the one whose oldest due message waits longest first: read
// on each worker from its own shards of outbox, then merged.
func (s *Store) webhookMerchantsDue(ctx context.Context, skip []uuid.UUID, limit int) ([]uuid.UUID, error) {
	shards, err := s.nodeShards(ctx, "outbox")
	if err != nil {
		return nil, err
	}
	type due struct {
		merchant uuid.UUID
		since    time.Time
	}
	var all []due
	skipped := uuidStrings(skip)
	err = s.onEachNode(ctx, shards, func(_ string, pool *pgxpool.Pool, ids []int64) error {
		rows, err := pool.Query(ctx, `SELECT merchant_id, min(next_attempt_at) FROM (`+shardsUnion(ids, func(id int64) string {
			return `SELECT merchant_id, next_attempt_at FROM ` + shardName("outbox", id) + `
			WHERE status = 'pending' AND next_attempt_at <= now() AND merchant_id <> ALL($1::uuid[])`
		})+`) d
			GROUP BY merchant_id ORDER BY 2 LIMIT $2`, skipped, limit)
		if err != nil {
			return err
		}
		found, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (due, error) {
			var d due
			return d, row.Scan(&d.merchant, &d.since)
		})
		all = append(all, found...)
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(all, func(a, b due) int { return a.since.Compare(b.since) })
	out := make([]uuid.UUID, 0, min(len(all), limit))
	for _, d := range all[:min(len(all), limit)] {
		out = append(out, d.merchant)
	}
	return out, nil
}
