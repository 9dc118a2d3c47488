package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

var (
	errAdminOnly        = domain.Errorf(domain.CodeForbidden, "only an admin may do this")
	errAuditOnly        = domain.Errorf(domain.CodeForbidden, "only an admin or an auditor may do this")
	errAuditorReadsOnly = domain.Errorf(domain.CodeForbidden, "an auditor reads and changes nothing")
	errNotYourShop      = domain.Errorf(domain.CodeForbidden, "only that merchant or an admin may do this")
	errCustomersOnly    = domain.Errorf(domain.CodeForbidden, "only customers place and pay orders")
	errOwnOrdersOnly    = domain.Errorf(domain.CodeForbidden, "this is a customer's list of its own orders; merchants and admins list a merchant's orders at /v1/merchants/{id}/orders")
	errOwnCapacityOnly  = domain.Errorf(domain.CodeForbidden, "a merchant may change its own capacity only; everything else is for an admin")
)

// principalOf is the caller requireAuth authenticated: in the request's
// info when an outer middleware made one, else in its context.
func principalOf(r *http.Request) auth.Principal {
	if info := infoFrom(r.Context()); info != nil && info.authed {
		return info.principal
	}
	p, _ := auth.PrincipalFrom(r.Context())
	return p
}

func accessOf(p auth.Principal) domain.Party { return p.Party() }

func metaOf(r *http.Request) store.Meta {
	p := principalOf(r)
	return store.Meta{Actor: p.Actor(), Subject: p.Subject, RequestID: requestIDFrom(r.Context())}
}

type createMerchantRequest struct {
	Name                  string              `json:"name"`
	Capacity              *int                `json:"capacity"`
	PrepSeconds           *int                `json:"prep_seconds"`
	MaxQueueWaitSeconds   *int                `json:"max_queue_wait_seconds"`
	PaymentTimeoutSeconds *int                `json:"payment_timeout_seconds"`
	WebhookURL            *string             `json:"webhook_url"`
	CapacityUnit          domain.CapacityUnit `json:"capacity_unit"`
	Timezone              string              `json:"timezone"`
	PickupPrefix          string              `json:"pickup_prefix"`
	GuestCheckout         bool                `json:"guest_checkout"`
}

func orDefault(v *int, def int) int {
	if v == nil {
		return def
	}
	return *v
}

func (s *Server) createMerchant(w http.ResponseWriter, r *http.Request) error {
	if !principalOf(r).Party().MayAdminister() {
		return errAdminOnly
	}
	var req createMerchantRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Capacity == nil {
		return domain.Errorf(domain.CodeValidation, "capacity is required")
	}
	settings := domain.MerchantSettings{
		Name: req.Name, Capacity: *req.Capacity,
		PrepSeconds:           orDefault(req.PrepSeconds, domain.DefaultPrepSeconds),
		MaxQueueWaitSeconds:   orDefault(req.MaxQueueWaitSeconds, domain.DefaultMaxQueueWaitSeconds),
		PaymentTimeoutSeconds: orDefault(req.PaymentTimeoutSeconds, domain.DefaultPaymentTimeoutSeconds),
		CapacityUnit:          req.CapacityUnit, Timezone: req.Timezone, PickupPrefix: req.PickupPrefix,
		GuestCheckout: req.GuestCheckout,
	}
	if req.WebhookURL != nil {
		settings.WebhookURL = *req.WebhookURL
	}
	m, err := s.store.CreateMerchant(r.Context(), settings, metaOf(r))
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/merchants/"+m.ID.String())
	writeJSON(w, http.StatusCreated, m)
	return nil
}

func (s *Server) getMerchant(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	m, err := s.store.GetMerchant(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

// optionalString tells an absent field (nil *optionalString) from an explicit
// null (set, value nil), which PATCH needs to clear a webhook URL.
type optionalString struct {
	value *string
}

func (o *optionalString) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		o.value = nil
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	o.value = &s
	return nil
}

type patchMerchantRequest struct {
	Name                  *string              `json:"name"`
	Capacity              *int                 `json:"capacity"`
	PrepSeconds           *int                 `json:"prep_seconds"`
	MaxQueueWaitSeconds   *int                 `json:"max_queue_wait_seconds"`
	PaymentTimeoutSeconds *int                 `json:"payment_timeout_seconds"`
	WebhookURL            *optionalString      `json:"webhook_url"`
	CapacityUnit          *domain.CapacityUnit `json:"capacity_unit"`
	Timezone              *string              `json:"timezone"`
	PickupPrefix          *string              `json:"pickup_prefix"`
	Slots                 *optionalSlots       `json:"slots"`
	Hours                 *[]domain.Period     `json:"hours"`
	GuestCheckout         *bool                `json:"guest_checkout"`
}

// optionalSlots tells absent slot settings (nil *optionalSlots) from an
// explicit null (set, value nil), which stops publishing slots.
type optionalSlots struct {
	value *domain.SlotSettings
}

func (o *optionalSlots) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		o.value = nil
		return nil
	}
	var s domain.SlotSettings
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	o.value = &s
	return nil
}

func (o optionalSlots) MarshalJSON() ([]byte, error) { return json.Marshal(o.value) }

// fields names the settings the request changes.
func (p patchMerchantRequest) fields() []string {
	var out []string
	for name, set := range map[string]bool{
		"name": p.Name != nil, "capacity": p.Capacity != nil, "prep_seconds": p.PrepSeconds != nil,
		"max_queue_wait_seconds": p.MaxQueueWaitSeconds != nil, "payment_timeout_seconds": p.PaymentTimeoutSeconds != nil,
		"webhook_url": p.WebhookURL != nil, "capacity_unit": p.CapacityUnit != nil, "timezone": p.Timezone != nil,
		"pickup_prefix": p.PickupPrefix != nil, "slots": p.Slots != nil, "hours": p.Hours != nil,
		"guest_checkout": p.GuestCheckout != nil,
	} {
		if set {
			out = append(out, name)
		}
	}
	return out
}

func (s *Server) patchMerchant(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r)
	if !p.Party().MayChangeSomeMerchantSettings() {
		return errAdminOnly
	}
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	var req patchMerchantRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if !p.Party().MayChangeMerchantSettings(id, req.fields()) {
		return errOwnCapacityOnly
	}
	if !p.IsAdmin() {
		if err := allow(r, s.limits.merchantOps); err != nil {
			return err
		}
	}
	patch := store.MerchantPatch{
		Name: req.Name, Capacity: req.Capacity, PrepSeconds: req.PrepSeconds,
		MaxQueueWaitSeconds: req.MaxQueueWaitSeconds, PaymentTimeoutSeconds: req.PaymentTimeoutSeconds,
		CapacityUnit: req.CapacityUnit, Timezone: req.Timezone, PickupPrefix: req.PickupPrefix,
		Hours: req.Hours, GuestCheckout: req.GuestCheckout,
	}
	if req.Slots != nil {
		patch.Slots, patch.ClearSlots = req.Slots.value, req.Slots.value == nil
	}
	if req.WebhookURL != nil {
		if req.WebhookURL.value == nil || *req.WebhookURL.value == "" {
			patch.ClearWebhook = true
		} else {
			patch.WebhookURL = req.WebhookURL.value
		}
	}
	m, err := s.store.UpdateMerchant(r.Context(), id, patch, metaOf(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

type pauseRequest struct {
	Mode       domain.PauseMode `json:"mode"`
	Until      *time.Time       `json:"until"`
	ForSeconds *int             `json:"for_seconds"`
	Reason     string           `json:"reason"`
}

// pauseTarget is the merchant a pause or resume names, once the caller is
// known to act for it (admin or the merchant itself) and within its rate.
func (s *Server) pauseTarget(r *http.Request) (uuid.UUID, error) {
	id, err := pathUUID(r, "id")
	if err != nil {
		return uuid.Nil, err
	}
	if !principalOf(r).Party().MayPauseMerchant(id) {
		return uuid.Nil, errNotYourShop
	}
	return id, allow(r, s.limits.merchantOps)
}

func (s *Server) pauseMerchant(w http.ResponseWriter, r *http.Request) error {
	id, err := s.pauseTarget(r)
	if err != nil {
		return err
	}
	var req pauseRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	m, err := s.store.PauseMerchant(r.Context(), id, domain.PauseRequest{
		Mode: req.Mode, Until: req.Until, ForSeconds: req.ForSeconds, Reason: req.Reason,
	}, metaOf(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

func (s *Server) resumeMerchant(w http.ResponseWriter, r *http.Request) error {
	id, err := s.pauseTarget(r)
	if err != nil {
		return err
	}
	m, err := s.store.ResumeMerchant(r.Context(), id, metaOf(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

func (s *Server) rotateWebhookSecret(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	if !principalOf(r).ActsForMerchant(id) {
		return errNotYourShop
	}
	m, err := s.store.RotateWebhookSecret(r.Context(), id, metaOf(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

type createProductRequest struct {
	Name         string `json:"name"`
	PriceCents   *int64 `json:"price_cents"`
	Stock        *int   `json:"stock"`
	PerUserLimit *int   `json:"per_user_limit"`
	LoadUnits    *int   `json:"load_units"`
	// OptionGroups' ids may be left out: the server gives them.
	OptionGroups []domain.OptionGroup `json:"option_groups"`
}

func (s *Server) createProduct(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	if !principalOf(r).ActsForMerchant(id) {
		return errNotYourShop
	}
	var req createProductRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.PriceCents == nil {
		return domain.Errorf(domain.CodeValidation, "price_cents is required")
	}
	loadUnits := orDefault(req.LoadUnits, domain.DefaultLoadUnits)
	if err := domain.ValidateLoadUnits(loadUnits); err != nil {
		return err
	}
	p, err := s.store.CreateProduct(r.Context(), store.CreateProductParams{
		MerchantID: id, Name: req.Name, PriceCents: *req.PriceCents, Stock: req.Stock,
		PerUserLimit: req.PerUserLimit, LoadUnits: loadUnits, OptionGroups: req.OptionGroups, Meta: metaOf(r),
	})
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/products/"+p.ID.String())
	writeJSON(w, http.StatusCreated, p)
	return nil
}

func (s *Server) listProducts(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	if _, err := s.store.GetMerchant(r.Context(), id); err != nil {
		return err
	}
	products, err := s.store.ListProducts(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"products": products})
	return nil
}

type patchProductRequest struct {
	Name         *string               `json:"name"`
	PriceCents   *int64                `json:"price_cents"`
	OptionGroups *[]domain.OptionGroup `json:"option_groups"`
	Available    *bool                 `json:"available"`
}

// menuTarget is the merchant and product a menu change names, once the
// caller is known to edit that merchant's menu.
func menuTarget(r *http.Request) (merchantID, productID uuid.UUID, err error) {
	merchantID, err = pathUUID(r, "mid")
	if err != nil {
		return uuid.Nil, uuid.Nil, err
	}
	productID, err = pathUUID(r, "pid")
	if err != nil {
		return uuid.Nil, uuid.Nil, err
	}
	if !principalOf(r).Party().MayEditMenu(merchantID) {
		return uuid.Nil, uuid.Nil, errNotYourShop
	}
	return merchantID, productID, nil
}

func (s *Server) patchProduct(w http.ResponseWriter, r *http.Request) error {
	merchantID, productID, err := menuTarget(r)
	if err != nil {
		return err
	}
	var req patchProductRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.OptionGroups != nil && *req.OptionGroups == nil {
		// "option_groups": null clears them, like [].
		req.OptionGroups = &[]domain.OptionGroup{}
	}
	p, err := s.store.UpdateProduct(r.Context(), store.UpdateProductParams{
		MerchantID: merchantID, ProductID: productID, Meta: metaOf(r),
		Patch: domain.ProductPatch{Name: req.Name, PriceCents: req.PriceCents, OptionGroups: req.OptionGroups, Available: req.Available},
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

func (s *Server) hideProduct(w http.ResponseWriter, r *http.Request) error {
	merchantID, productID, err := menuTarget(r)
	if err != nil {
		return err
	}
	if err := s.store.HideProduct(r.Context(), merchantID, productID, metaOf(r)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) getProduct(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	p, err := s.store.GetProduct(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

type restockRequest struct {
	Quantity *int `json:"quantity"`
}

func (s *Server) restock(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	p, err := s.store.GetProduct(r.Context(), id)
	if err != nil {
		return err
	}
	if !principalOf(r).ActsForMerchant(p.MerchantID) {
		return errNotYourShop
	}
	var req restockRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Quantity == nil {
		return domain.Errorf(domain.CodeValidation, "quantity is required")
	}
	p, err = s.store.Restock(r.Context(), id, *req.Quantity, metaOf(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

const (
	defaultListLimit = 100
	maxListLimit     = 1000
)

func (s *Server) listMerchantOrders(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	if !principalOf(r).ActsForMerchant(id) {
		return errNotYourShop
	}
	status := domain.OrderStatus(r.URL.Query().Get("status"))
	if status == "" {
		status = domain.StatusQueued
	}
	limit, err := parsePageLimit(r)
	if err != nil {
		return err
	}
	scope := listScope("merchant orders", id.String(), string(status))
	after, err := s.cursors.open(r, scope)
	if err != nil {
		return err
	}
	if _, err := s.store.GetMerchant(r.Context(), id); err != nil {
		return err
	}
	orders, next, err := s.store.ListOrders(r.Context(), store.OrderList{MerchantID: id, Status: status, Limit: limit, After: after})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"orders": orders, "next_cursor": s.cursors.seal(scope, next)})
	return nil
}

func parseLimit(r *http.Request) (int, error) {
	raw := r.URL.Query().Get("limit")
	if raw == "" {
		return defaultListLimit, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > maxListLimit {
		return 0, domain.Errorf(domain.CodeValidation, "limit must be an integer between 1 and %d", maxListLimit)
	}
	return n, nil
}

func queryUUID(r *http.Request, name string) (uuid.UUID, error) {
	raw := r.URL.Query().Get(name)
	if raw == "" {
		return uuid.Nil, nil
	}
	id, err := uuid.Parse(raw)
	if err != nil {
		return uuid.Nil, domain.Errorf(domain.CodeValidation, "%s must be a UUID", name)
	}
	return id, nil
}

// listSlots answers a merchant's pickup slots of a local date (?date=
// YYYY-MM-DD, default today in its time zone) with their room.
func (s *Server) listSlots(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	slots, err := s.store.ListSlots(r.Context(), id, r.URL.Query().Get("date"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"slots": slots})
	return nil
}
