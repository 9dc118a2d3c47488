package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// AuditChecks names the views of the audit schema, one per invariant.
var AuditChecks = []string{
	"oversold_products",
	"over_purchase_limit",
	"stream_version_gaps",
	"projection_drift",
	"merchant_load_drift",
	"merchant_lane_drift",
	"decisions_over_capacity",
	"queued_with_free_capacity",
	"unpaid_past_deadline",
	"queued_past_max_wait",
	"undelivered_outbox",
	"stock_drift",
	"fifo_violations",
	"duplicate_pickup_codes",
	"accepted_at_backwards",
	"order_clock_backwards",
	"drop_draw_mismatch",
	"drop_rank_mismatch",
	"drop_invitation_order",
	"drop_oversold",
	"orders_without_merchant",
	"slots_over_capacity",
	"scheduled_released_early",
	"orders_placed_while_closed",
}

// AuditCheck is one invariant's result.
type AuditCheck struct {
	Name       string           `json:"name"`
	OK         bool             `json:"ok"`
	Violations int              `json:"violations"`
	Sample     []map[string]any `json:"sample"`
}

// AuditReport is every check's result.
type AuditReport struct {
	OK     bool         `json:"ok"`
	Checks []AuditCheck `json:"checks"`
}

const auditSample = 5

// Audit runs every check: the count of violating rows and a few of them.
// The checks read one snapshot, so they agree with each other.
func (s *Store) Audit(ctx context.Context) (*AuditReport, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, mapErr(fmt.Errorf("begin audit: %w", err))
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only
	// The views scan whole tables: the serving pool's statement timeout is
	// sized for requests, JIT compiling costs more than it saves here, and
	// sorts and hashes of a million orders spill with the default work_mem.
	if _, err := tx.Exec(ctx, `SELECT set_config('statement_timeout', '300s', true), set_config('jit', 'off', true),
		set_config('work_mem', '128MB', true)`); err != nil {
		return nil, mapErr(fmt.Errorf("configure audit: %w", err))
	}
	report := &AuditReport{OK: true}
	for _, name := range AuditChecks {
		check := AuditCheck{Name: name, Sample: []map[string]any{}}
		view := `audit.` + pgx.Identifier{name}.Sanitize()
		// Count first: a clean check then costs one pass over its view.
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+view).Scan(&check.Violations); err != nil {
			return nil, mapErr(fmt.Errorf("audit %s: %w", name, err))
		}
		if check.Violations > 0 {
			rows, err := tx.Query(ctx, `SELECT row_to_json(v) FROM `+view+` v LIMIT $1`, auditSample)
			if err != nil {
				return nil, mapErr(fmt.Errorf("audit %s: %w", name, err))
			}
			// Through JSON, so that a uuid reads as text and not as 16 bytes.
			raw, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
			if err != nil {
				return nil, mapErr(fmt.Errorf("audit %s: %w", name, err))
			}
			for _, r := range raw {
				var row map[string]any
				if err := json.Unmarshal(r, &row); err != nil {
					return nil, fmt.Errorf("audit %s: decode sample: %w", name, err)
				}
				check.Sample = append(check.Sample, row)
			}
		}
		check.OK = check.Violations == 0
		report.OK = report.OK && check.OK
		report.Checks = append(report.Checks, check)
	}
	return report, nil
}
