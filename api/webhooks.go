package api

import (
	"net/http"

	"github.com/google/uuid"

	"github.com/orderd/orderd/domain"
)

// retryWebhookDeadLetters hands every dead-lettered webhook of one merchant
// back to the relay, after the merchant's outage ends.
func (s *Server) retryWebhookDeadLetters(w http.ResponseWriter, r *http.Request) error {
	if !principalOf(r).Party().MayAdminister() {
		return errAdminOnly
	}
	merchantID, err := queryUUID(r, "merchant_id")
	if err != nil {
		return err
	}
	if merchantID == uuid.Nil {
		return domain.Errorf(domain.CodeValidation, "merchant_id is required")
	}
	if _, err := s.store.GetMerchant(r.Context(), merchantID); err != nil {
		return err
	}
	n, err := s.store.RetryMerchantWebhooks(r.Context(), merchantID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]int{"retried": n})
	return nil
}

// listWebhookAttempts shows every recorded attempt of one message or merchant.
func (s *Server) listWebhookAttempts(w http.ResponseWriter, r *http.Request) error {
	if !principalOf(r).Party().MayAdminister() {
		return errAdminOnly
	}
	outboxID, err := queryUUID(r, "outbox_id")
	if err != nil {
		return err
	}
	merchantID, err := queryUUID(r, "merchant_id")
	if err != nil {
		return err
	}
	limit, err := parseLimit(r)
	if err != nil {
		return err
	}
	attempts, err := s.store.ListWebhookAttempts(r.Context(), outboxID, merchantID, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"attempts": attempts})
	return nil
}
