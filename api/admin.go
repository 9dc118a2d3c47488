package api

import (
	"net/http"
	"strconv"

	"github.com/orderd/orderd/store"
)

func (s *Server) listDeadLetters(w http.ResponseWriter, r *http.Request) error {
	if !principalOf(r).Party().MayAdminister() {
		return errAdminOnly
	}
	limit, err := parsePageLimit(r)
	if err != nil {
		return err
	}
	merchantID, err := queryUUID(r, "merchant_id")
	if err != nil {
		return err
	}
	q := r.URL.Query()
	params := store.ListDeadLettersParams{
		Kind: q.Get("kind"), MerchantID: merchantID, Unresolved: q.Get("unresolved") == "true", Limit: limit,
	}
	scope := listScope("dead letters", params.Kind, merchantID.String(), strconv.FormatBool(params.Unresolved))
	if params.After, err = s.cursors.open(r, scope); err != nil {
		return err
	}
	dls, next, err := s.store.ListDeadLetters(r.Context(), params)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"dead_letters": dls, "next_cursor": s.cursors.seal(scope, next)})
	return nil
}

func (s *Server) retryDeadLetter(w http.ResponseWriter, r *http.Request) error {
	if !principalOf(r).Party().MayAdminister() {
		return errAdminOnly
	}
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	dl, err := s.store.RetryDeadLetter(r.Context(), id, accessOf(principalOf(r)), requestIDFrom(r.Context()))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, dl)
	return nil
}

type resolveRequest struct {
	Note string `json:"note"`
}

func (s *Server) resolveDeadLetter(w http.ResponseWriter, r *http.Request) error {
	if !principalOf(r).Party().MayAdminister() {
		return errAdminOnly
	}
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	var req resolveRequest
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, &req); err != nil {
			return err
		}
	}
	dl, err := s.store.ResolveDeadLetter(r.Context(), id, req.Note)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, dl)
	return nil
}
