package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/orderd/orderd/domain"
)

// This file is the one place where what PostgreSQL answers (SQLSTATEs,
// constraint names, broken connections) becomes what the store means.

// Constraint names the store turns into domain errors.
const (
	constraintStreamVersion = "events_stream_version_key"
	constraintClaimLimit    = "purchase_claims_within_limit"
	constraintBucketStock   = "stock_buckets_remaining_check"
	// constraintOrderKey is the unique index of orders' idempotency keys;
	// on a Citus shard its name carries the shard's id after it.
	constraintOrderKey = "orders_idempotency_key_idx"
)

// isRetryable reports a deadlock or serialization failure, which
// PostgreSQL may report under contention and which are always safe to retry
// because nothing was committed; and an order whose idempotency key another
// transaction committed after this one read the keys (a placement batch
// reads them without a lock: keyReads), which the batch's next attempt
// reads and answers as a replay.
func isRetryable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == pgerrcode.SerializationFailure || pgErr.Code == pgerrcode.DeadlockDetected ||
			(pgErr.Code == pgerrcode.UniqueViolation && strings.HasPrefix(pgErr.ConstraintName, constraintOrderKey))
	}
	return false
}

// mapErr turns database errors into domain errors, wrapping the original.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	var de *domain.Error
	if errors.As(err, &de) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.ConstraintName == constraintStreamVersion:
			return fmt.Errorf("%w: %w", ErrVersionConflict, err)
		case pgErr.ConstraintName == constraintClaimLimit:
			return fmt.Errorf("%w: %w", domain.Errorf(domain.CodePurchaseLimit, "the per-customer limit for this product is reached"), err)
		case pgErr.ConstraintName == constraintBucketStock:
			return fmt.Errorf("%w: %w", domain.Errorf(domain.CodeSoldOut, "not enough stock"), err)
		case pgErr.Code == pgerrcode.QueryCanceled: // statement_timeout
			return fmt.Errorf("%w: %w", domain.Errorf(domain.CodeUnavailable, "the database is busy; retry"), err)
		case pgErr.Code == pgerrcode.AdminShutdown, pgErr.Code == pgerrcode.CrashShutdown, pgErr.Code == pgerrcode.CannotConnectNow,
			pgErr.Code == pgerrcode.TooManyConnections, pgerrcode.IsConnectionException(pgErr.Code):
			return fmt.Errorf("%w: %w", domain.Errorf(domain.CodeUnavailable, "the database is unavailable; retry"), err)
		// A write reached a server that is, or has just become, read-only: a
		// standby, or a primary fenced during a failover. Nothing was
		// written, and the pool closes such connections as they come back
		// (app.configureFailover), so a retry finds the primary.
		case pgErr.Code == pgerrcode.ReadOnlySQLTransaction:
			return fmt.Errorf("%w: %w", domain.Errorf(domain.CodeUnavailable, "the database is read-only during a failover; retry"), err)
		}
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) || isConnError(err) {
		return fmt.Errorf("%w: %w", domain.Errorf(domain.CodeUnavailable, "the database is unavailable; retry"), err)
	}
	return err
}

func isConnError(err error) bool {
	var netErr net.Error
	var connectErr *pgconn.ConnectError
	return errors.As(err, &netErr) || errors.As(err, &connectErr) ||
		pgconn.SafeToRetry(err) || errors.Is(err, pgx.ErrTxClosed) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF)
}
