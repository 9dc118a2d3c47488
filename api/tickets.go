package api

import (
	"net/http"
	"time"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/store"
)

type ticketResponse struct {
	Ticket    string    `json:"ticket"`
	ExpiresAt time.Time `json:"expires_at"`
}

// issueTicket gives the caller a single-use ticket that opens one websocket
// within a minute, so that browsers, which cannot set headers on a
// websocket, never put their bearer token in a URL.
func (s *Server) issueTicket(w http.ResponseWriter, r *http.Request) error {
	if err := allow(r, s.limits.tickets); err != nil {
		return err
	}
	p := principalOf(r)
	ticket, hash := auth.NewTicket()
	expires, err := s.store.IssueTicket(r.Context(), &store.IssueTicketParams{
		Hash:   hash,
		Holder: store.TicketHolder{Subject: p.Subject, Role: string(p.Role), MerchantID: p.MerchantID},
		TTL:    auth.TicketTTL,
	})
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, ticketResponse{Ticket: ticket, ExpiresAt: expires.UTC()})
	return nil
}
