package api

import (
	"crypto/sha256"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	fastjson "github.com/segmentio/encoding/json"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

type orderLine struct {
	ProductID string `json:"product_id"`
	Quantity  int    `json:"quantity"`
	// Options is left out of the idempotency hash when empty, so that a
	// request without options hashes as it did before options existed.
	Options []string `json:"options,omitempty"`
}

type placeOrderRequest struct {
	MerchantID string      `json:"merchant_id"`
	Items      []orderLine `json:"items"`
	PaymentRef *string     `json:"payment_ref"`
	// PickupAt is a published pickup slot's starts_at; absent or null is
	// as soon as possible.
	PickupAt *string `json:"pickup_at"`
}

const maxIdempotencyKey = 255

func idempotencyKey(r *http.Request) (string, error) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		return "", domain.Errorf(domain.CodeIdempotencyRequired, "the Idempotency-Key header is required")
	}
	if len(key) > maxIdempotencyKey || !utf8.ValidString(key) {
		return "", domain.Errorf(domain.CodeValidation, "Idempotency-Key must be 1-%d characters", maxIdempotencyKey)
	}
	for _, c := range key {
		if c < 0x20 || c == 0x7f {
			return "", domain.Errorf(domain.CodeValidation, "Idempotency-Key must not contain control characters")
		}
	}
	return key, nil
}

// listOwnOrders answers a customer's own orders, newest first.
func (s *Server) listOwnOrders(w http.ResponseWriter, r *http.Request) error {
	customerID, ok := principalOf(r).Party().OwnOrderList()
	if !ok {
		return errOwnOrdersOnly
	}
	status := domain.OrderStatus(r.URL.Query().Get("status"))
	limit, err := parsePageLimit(r)
	if err != nil {
		return err
	}
	scope := listScope("own orders", customerID, string(status))
	after, err := s.cursors.open(r, scope)
	if err != nil {
		return err
	}
	orders, next, err := s.store.ListOrders(r.Context(), store.OrderList{CustomerID: customerID, Status: status, Limit: limit, After: after})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"orders": orders, "next_cursor": s.cursors.seal(scope, next)})
	return nil
}

func (s *Server) placeOrder(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r)
	if !p.Party().MayBuy() {
		return errCustomersOnly
	}
	if err := allow(r, s.limits.place); err != nil {
		return err
	}
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	var req placeOrderRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	merchantID, err := uuid.Parse(req.MerchantID)
	if err != nil {
		return domain.Errorf(domain.CodeValidation, "merchant_id must be a UUID")
	}
	lines := make([]domain.LineRequest, len(req.Items))
	for i, it := range req.Items {
		id, err := uuid.Parse(it.ProductID)
		if err != nil {
			return domain.Errorf(domain.CodeValidation, "items[%d].product_id must be a UUID", i)
		}
		lines[i] = domain.LineRequest{ProductID: id, Quantity: it.Quantity, Options: it.Options}
	}
	paymentRef := ""
	if req.PaymentRef != nil {
		paymentRef = *req.PaymentRef
		if paymentRef == "" || len(paymentRef) > domain.MaxIDLength {
			return domain.Errorf(domain.CodeValidation, "payment_ref must be 1-%d characters", domain.MaxIDLength)
		}
	}
	var pickupAt *time.Time
	if req.PickupAt != nil {
		at, err := time.Parse(time.RFC3339, *req.PickupAt)
		if err != nil {
			return domain.Errorf(domain.CodeValidation, "pickup_at must be an RFC 3339 time, a pickup slot's starts_at")
		}
		at = at.UTC()
		pickupAt = &at
	}
	// The hash covers the decoded request, so formatting differences in the
	// same body still replay.
	canonical, err := fastjson.Marshal(req)
	if err != nil {
		return err
	}
	hash := sha256.Sum256(canonical)
	res, err := s.store.PlaceOrder(r.Context(), store.PlaceRequest{
		MerchantID: merchantID, CustomerID: p.Subject, Lines: lines, PaymentRef: paymentRef,
		IdempotencyKey: key, RequestHash: hash[:], RequestID: requestIDFrom(r.Context()), Lane: p.Lane,
		PickupAt: pickupAt,
	})
	if err != nil {
		return err
	}
	if res.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
		writeJSON(w, http.StatusOK, res.Order)
		return nil
	}
	w.Header().Set("Location", "/v1/orders/"+res.Order.ID.String())
	writeJSON(w, http.StatusCreated, res.Order)
	return nil
}

func (s *Server) getOrder(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	o, err := s.store.GetOrder(r.Context(), id, accessOf(principalOf(r)))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, o)
	return nil
}

func (s *Server) orderEvents(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	events, err := s.store.OrderEvents(r.Context(), id, accessOf(principalOf(r)))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": events})
	return nil
}

type payRequest struct {
	PaymentRef string `json:"payment_ref"`
}

func (s *Server) payOrder(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	p := principalOf(r)
	if !p.Party().MayBuy() {
		return errCustomersOnly
	}
	if err := allow(r, s.limits.pay); err != nil {
		return err
	}
	var req payRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	o, err := s.store.PayOrder(r.Context(), id, req.PaymentRef, accessOf(p), requestIDFrom(r.Context()))
	return respondOrder(w, o, err)
}

type cancelRequest struct {
	Reason string `json:"reason"`
}

func (s *Server) cancelOrder(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	// Merchants and admins cancel on behalf of their shops and are not
	// limited; customers are.
	if principalOf(r).Role == auth.RoleCustomer {
		if err := allow(r, s.limits.cancel); err != nil {
			return err
		}
	}
	var req cancelRequest
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, &req); err != nil {
			return err
		}
	}
	o, err := s.store.CancelOrder(r.Context(), id, req.Reason, accessOf(principalOf(r)), requestIDFrom(r.Context()))
	return respondOrder(w, o, err)
}

func (s *Server) completeOrder(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	o, err := s.store.CompleteOrder(r.Context(), id, accessOf(principalOf(r)), requestIDFrom(r.Context()))
	return respondOrder(w, o, err)
}

type prioritizeRequest struct {
	Reason string `json:"reason"`
}

func (s *Server) prioritizeOrder(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	if err := allow(r, s.limits.merchantOps); err != nil {
		return err
	}
	var req prioritizeRequest
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, &req); err != nil {
			return err
		}
	}
	o, err := s.store.PrioritizeOrder(r.Context(), id, req.Reason, accessOf(principalOf(r)), requestIDFrom(r.Context()))
	return respondOrder(w, o, err)
}

func respondOrder(w http.ResponseWriter, o *store.OrderView, err error) error {
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, o)
	return nil
}

// pickUpOrder and reopenOrder are the kitchen's counter: the order's
// merchant or an admin; the owner customer is refused, anyone else finds
// no order.
func (s *Server) pickUpOrder(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	o, err := s.store.PickUpOrder(r.Context(), id, accessOf(principalOf(r)), requestIDFrom(r.Context()))
	return respondOrder(w, o, err)
}

func (s *Server) reopenOrder(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	o, err := s.store.ReopenOrder(r.Context(), id, accessOf(principalOf(r)), requestIDFrom(r.Context()))
	return respondOrder(w, o, err)
}
