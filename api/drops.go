package api

import (
	"net/http"
	"time"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

type createDropRequest struct {
	OpensAt               *time.Time      `json:"opens_at"`
	StartsAt              *time.Time      `json:"starts_at"`
	Mode                  domain.DropMode `json:"mode"`
	PurchaseWindowSeconds *int            `json:"purchase_window_seconds"`
	Units                 *int            `json:"units"`
}

var errCustomersJoin = domain.Errorf(domain.CodeForbidden, "only customers join drops")

func (s *Server) createDrop(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	var req createDropRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.OpensAt == nil || req.StartsAt == nil {
		return domain.Errorf(domain.CodeValidation, "opens_at and starts_at are required")
	}
	d, err := s.store.CreateDrop(r.Context(), store.CreateDropParams{
		ProductID: id, OpensAt: *req.OpensAt, StartsAt: *req.StartsAt, Mode: req.Mode,
		PurchaseWindowSeconds: req.PurchaseWindowSeconds, Units: req.Units,
		Access: accessOf(principalOf(r)), RequestID: requestIDFrom(r.Context()),
	})
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/drops/"+d.ID.String())
	writeJSON(w, http.StatusCreated, d)
	return nil
}

func (s *Server) getDrop(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	d, err := s.store.GetDrop(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

func (s *Server) joinDrop(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r)
	if !p.Party().MayBuy() {
		return errCustomersJoin
	}
	if err := allow(r, s.limits.dropEntries); err != nil {
		return err
	}
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	res, err := s.store.JoinDrop(r.Context(), id, p.Subject, requestIDFrom(r.Context()))
	if err != nil {
		return err
	}
	status := http.StatusOK
	if res.Created {
		status = http.StatusCreated
	}
	writeJSON(w, status, res.Entry)
	return nil
}

func (s *Server) myEntry(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r)
	if !p.Party().MayBuy() {
		return errCustomersJoin
	}
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	e, err := s.store.MyEntry(r.Context(), id, p.Subject)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, e)
	return nil
}

func (s *Server) dropDraw(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	d, err := s.store.GetDraw(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}
