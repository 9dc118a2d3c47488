package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// LogChannel is the PostgreSQL notification channel on which processes hint
// that the event log has grown.
//
// Readers of the log poll it; the hint only lets them read sooner. A NOTIFY
// inside every order transaction would take PostgreSQL's global notification
// lock at each commit and serialize commits, so instead each process sends
// at most one NOTIFY per hintInterval, after its commits and outside them. A
// hint carries nothing and may be lost (a reconnect drops it), which costs
// one poll interval, never an event: the log stays the source of truth.
const LogChannel = "orderd_log"

// hintInterval is half the live-update tailer's shortest gap between reads
// (ws.Options.MinInterval): more hints would wake no more reads, only cost
// PostgreSQL a notification transaction each.
const hintInterval = 25 * time.Millisecond

// noteEvents marks tx as one that appends to the log, so its commit hints.
func noteEvents(tx pgx.Tx) {
	if t, ok := tx.(*txn); ok {
		t.wroteEvents = true
	}
}

// logWritten is called after a commit that appended events.
func (s *Store) logWritten() {
	select {
	case s.hints <- struct{}{}:
	default:
	}
}

// RunLogHints sends the NOTIFY hints for this process's commits until ctx
// ends: one per hintInterval at most, however many commits fall in it.
func (s *Store) RunLogHints(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.hints:
		}
		pause := hintInterval
		if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, '')`, LogChannel); err != nil {
			// The database is away; readers fall back to polling and
			// resynchronize when it is back.
			pause = time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
	}
}

// ListenLog calls wake for every hint from any process until ctx ends or
// the connection fails, and returns why. It holds a connection of its own,
// taken out of the pool, and calls wake once listening, since hints sent
// before that are lost: callers that loop on it miss nothing.
func (s *Store) ListenLog(ctx context.Context, wake func()) error {
	pooled, err := s.pool.Acquire(ctx)
	if err != nil {
		return mapErr(fmt.Errorf("acquire listener: %w", err))
	}
	// A LISTEN must not stay on a connection that others borrow next.
	conn := pooled.Hijack()
	defer conn.Close(context.WithoutCancel(ctx)) //nolint:errcheck // a dedicated connection
	if _, err := conn.Exec(ctx, `LISTEN `+LogChannel); err != nil {
		return mapErr(fmt.Errorf("listen: %w", err))
	}
	wake()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return mapErr(fmt.Errorf("wait for log hint: %w", err))
		}
		wake()
	}
}
