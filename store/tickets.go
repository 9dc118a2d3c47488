package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// TicketHolder is who a websocket ticket or a sign-in code was issued to.
type TicketHolder struct {
	Subject    string
	Role       string
	MerchantID uuid.UUID // uuid.Nil unless the holder is a merchant
}

// IssueTicketParams describe a ticket to keep until it is used or expires.
type IssueTicketParams struct {
	Hash   [32]byte
	Holder TicketHolder
	TTL    time.Duration
}

// expiredTicketsPerIssue bounds the clean-up each issue does. Every issue
// removes more expired rows than it adds, so a table of single-use secrets
// holds little more than those of the last TTL, without a sweeper job.
const expiredTicketsPerIssue = 4

// IssueTicket keeps a ticket's hash and holder, and returns when it expires.
func (s *Store) IssueTicket(ctx context.Context, p *IssueTicketParams) (time.Time, error) {
	expires, err := s.issueSingleUse(ctx, "ws_tickets", p.Hash, p.Holder, p.TTL, "")
	if err != nil {
		return time.Time{}, fmt.Errorf("issue ticket: %w", err)
	}
	return expires, nil
}

// ErrTicketNotFound is returned for a ticket or sign-in code that is unknown,
// used or expired: the three are one answer to the caller.
var ErrTicketNotFound = errors.New("ticket unknown, used or expired")

// ConsumeTicket returns the holder of an unexpired ticket and removes it, in
// one statement: of two connections racing with the same ticket, on one
// instance or two, exactly one gets the holder.
func (s *Store) ConsumeTicket(ctx context.Context, hash [32]byte) (TicketHolder, error) {
	var h TicketHolder
	if err := s.consumeSingleUse(ctx, "ws_tickets", hash, &h, ""); err != nil {
		return TicketHolder{}, fmt.Errorf("consume ticket: %w", err)
	}
	return h, nil
}

// IssueSignInCodeParams describe a sign-in code: who it signs in, how long
// it may wait to be used, and how long the token it buys lasts.
type IssueSignInCodeParams struct {
	Hash   [32]byte
	Holder TicketHolder
	// Lane is the customer's queue lane ("" for normal).
	Lane     string
	TTL      time.Duration
	TokenTTL time.Duration
}

// SignInCode is what a redeemed sign-in code buys: a token for Holder in
// Lane, valid for TokenTTL.
type SignInCode struct {
	Holder   TicketHolder
	Lane     string
	TokenTTL time.Duration
}

// IssueSignInCode keeps a sign-in code's hash and holder, and returns when
// it expires.
func (s *Store) IssueSignInCode(ctx context.Context, p *IssueSignInCodeParams) (time.Time, error) {
	expires, err := s.issueSingleUse(ctx, "sign_in_codes", p.Hash, p.Holder, p.TTL, ", token_ttl_seconds, lane", int(p.TokenTTL.Seconds()), p.Lane)
	if err != nil {
		return time.Time{}, fmt.Errorf("issue sign-in code: %w", err)
	}
	return expires, nil
}

// RedeemSignInCode returns what an unexpired sign-in code buys and removes
// it in the same statement, so a code signs in once, whichever instances
// race for it.
func (s *Store) RedeemSignInCode(ctx context.Context, hash [32]byte) (SignInCode, error) {
	var c SignInCode
	var tokenSeconds int
	if err := s.consumeSingleUse(ctx, "sign_in_codes", hash, &c.Holder, ", token_ttl_seconds, lane", &tokenSeconds, &c.Lane); err != nil {
		return SignInCode{}, fmt.Errorf("redeem sign-in code: %w", err)
	}
	c.TokenTTL = time.Duration(tokenSeconds) * time.Second
	return c, nil
}

// issueSingleUse inserts a secret's hash into table (ws_tickets or
// sign_in_codes, which share their shape) with the table's further columns
// (", a, b") set to extra, and removes a few expired ones.
func (s *Store) issueSingleUse(ctx context.Context, table string, hash [32]byte, h TicketHolder, ttl time.Duration, extraColumns string, extra ...any) (time.Time, error) {
	now := s.now()
	expires := now.Add(ttl)
	var merchant *uuid.UUID
	if h.MerchantID != uuid.Nil {
		merchant = &h.MerchantID
	}
	values := "$1, $2, $3, $4, $7"
	args := []any{hash[:], h.Subject, h.Role, merchant, now, expiredTicketsPerIssue, expires}
	for _, v := range extra {
		args = append(args, v)
		values += fmt.Sprintf(", $%d", len(args))
	}
	// SKIP LOCKED: concurrent issues clean up different rows instead of
	// queueing behind each other.
	_, err := s.pool.Exec(ctx, `
		WITH expired AS (
			DELETE FROM `+table+` WHERE hash IN (
				SELECT hash FROM `+table+` WHERE expires_at <= $5
				ORDER BY expires_at LIMIT $6 FOR UPDATE SKIP LOCKED))
		INSERT INTO `+table+` (hash, subject, role, merchant_id, expires_at`+extraColumns+`) VALUES (`+values+`)`, args...)
	if err != nil {
		return time.Time{}, mapErr(err)
	}
	return expires, nil
}

// consumeSingleUse deletes a secret's row and reads its holder, and the
// table's further columns (", a, b") into extra, in one statement. An
// expired secret is removed all the same: it can never be used.
func (s *Store) consumeSingleUse(ctx context.Context, table string, hash [32]byte, h *TicketHolder, extraColumns string, extra ...any) error {
	var merchant *uuid.UUID
	var live bool
	returning := "subject, role, merchant_id, expires_at > $2" + extraColumns
	dest := append([]any{&h.Subject, &h.Role, &merchant, &live}, extra...)
	err := s.pool.QueryRow(ctx, `DELETE FROM `+table+` WHERE hash = $1 RETURNING `+returning, hash[:], s.now()).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && !live) {
		return ErrTicketNotFound
	}
	if err != nil {
		return mapErr(err)
	}
	if merchant != nil {
		h.MerchantID = *merchant
	}
	return nil
}
