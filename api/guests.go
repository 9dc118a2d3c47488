package api

import (
	"net/http"
	"time"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/domain"
)

// DefaultGuestTTL is how long a guest session's token lasts unless the
// server is configured otherwise: a day's opening hours.
const DefaultGuestTTL = 12 * time.Hour

var errNoGuests = domain.Errorf(domain.CodeNotFound, "merchant not found, or it does not take guest orders")

type guestSessionResponse struct {
	Token     string    `json:"token"`
	TokenType string    `json:"token_type"`
	ExpiresAt time.Time `json:"expires_at"`
	Sub       string    `json:"sub"`
}

// startGuestSession gives a walk-in customer of a merchant that takes
// guests a customer token of its own. It takes no token, so it is limited
// per client address; a merchant that takes no guests answers as if it did
// not exist.
func (s *Server) startGuestSession(w http.ResponseWriter, r *http.Request) error {
	if ok, retry := s.guestLimit.Allow(clientKey(r.RemoteAddr)); !ok {
		return rateLimited(retry)
	}
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	m, err := s.store.GetMerchant(r.Context(), id)
	if domain.ErrorCode(err) == domain.CodeNotFound || (err == nil && !m.Settings().TakesGuests()) {
		err = errNoGuests
	}
	if err != nil {
		return err
	}
	p := auth.Principal{Subject: auth.NewGuestSubject(), Role: auth.RoleCustomer}
	token, expires, err := s.auth.IssueExpiring(p, s.cfg.GuestTTL)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, guestSessionResponse{Token: token, TokenType: "Bearer", ExpiresAt: expires.UTC(), Sub: p.Subject})
	return nil
}
