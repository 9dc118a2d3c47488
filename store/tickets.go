package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// TicketHolder is who a websocket ticket was issued to.
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
// removes more expired tickets than it adds, so the table holds little more
// than the tickets of the last TTL, without a sweeper job.
const expiredTicketsPerIssue = 4

// IssueTicket keeps a ticket's hash and holder, and returns when it expires.
func (s *Store) IssueTicket(ctx context.Context, p *IssueTicketParams) (time.Time, error) {
	now := s.now()
	expires := now.Add(p.TTL)
	var merchant *uuid.UUID
	if p.Holder.MerchantID != uuid.Nil {
		merchant = &p.Holder.MerchantID
	}
	// SKIP LOCKED: concurrent issues clean up different rows instead of
	// queueing behind each other.
	_, err := s.pool.Exec(ctx, `
		WITH expired AS (
			DELETE FROM ws_tickets WHERE hash IN (
				SELECT hash FROM ws_tickets WHERE expires_at <= $5
				ORDER BY expires_at LIMIT $6 FOR UPDATE SKIP LOCKED))
		INSERT INTO ws_tickets (hash, subject, role, merchant_id, expires_at) VALUES ($1, $2, $3, $4, $7)`,
		p.Hash[:], p.Holder.Subject, p.Holder.Role, merchant, now, expiredTicketsPerIssue, expires)
	if err != nil {
		return time.Time{}, fmt.Errorf("issue ticket: %w", mapErr(err))
	}
	return expires, nil
}

// ErrTicketNotFound is returned for a ticket that is unknown, used or
// expired: the three are one answer to the caller.
var ErrTicketNotFound = errors.New("ticket unknown, used or expired")

// ConsumeTicket returns the holder of an unexpired ticket and removes it, in
// one statement: of two connections racing with the same ticket, on one
// instance or two, exactly one gets the holder.
func (s *Store) ConsumeTicket(ctx context.Context, hash [32]byte) (TicketHolder, error) {
	var h TicketHolder
	var merchant *uuid.UUID
	var live bool
	// An expired ticket is removed all the same: it can never be used.
	err := s.pool.QueryRow(ctx, `DELETE FROM ws_tickets WHERE hash = $1 RETURNING subject, role, merchant_id, expires_at > $2`,
		hash[:], s.now()).Scan(&h.Subject, &h.Role, &merchant, &live)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && !live) {
		return TicketHolder{}, ErrTicketNotFound
	}
	if err != nil {
		return TicketHolder{}, fmt.Errorf("consume ticket: %w", mapErr(err))
	}
	if merchant != nil {
		h.MerchantID = *merchant
	}
	return h, nil
}
