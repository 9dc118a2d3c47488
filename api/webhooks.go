package api

import (
	"net/http"

	"github.com/google/uuid"

	"github.com/orderd/orderd/domain"
)

// retryWebhookDeadLetters hands every dead-lettered webhook of one merchant
// back to the relay, after the merchant's outage ends.
func (s *Server) retryWebhookDeadLetters(w http.ResponseWriter, r *http.Request) {
	if !principalOf(r).IsAdmin() {
		writeProblem(w, r, errAdminOnly)
		return
	}
	merchantID, err := queryUUID(r, "merchant_id")
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	if merchantID == uuid.Nil {
		writeProblem(w, r, domain.Errorf(domain.CodeValidation, "merchant_id is required"))
		return
	}
	if _, err := s.store.GetMerchant(r.Context(), merchantID); err != nil {
		writeProblem(w, r, err)
		return
	}
	n, err := s.store.RetryMerchantWebhooks(r.Context(), merchantID)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"retried": n})
}

// listWebhookAttempts shows every recorded attempt of one message or merchant.
func (s *Server) listWebhookAttempts(w http.ResponseWriter, r *http.Request) {
	if !principalOf(r).IsAdmin() {
		writeProblem(w, r, errAdminOnly)
		return
	}
	outboxID, err := queryUUID(r, "outbox_id")
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	merchantID, err := queryUUID(r, "merchant_id")
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	limit, err := parseLimit(r)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	attempts, err := s.store.ListWebhookAttempts(r.Context(), outboxID, merchantID, limit)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"attempts": attempts})
}
