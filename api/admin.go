package api

import (
	"net/http"
	"strconv"

	"github.com/orderd/orderd/store"
)

func (s *Server) listDeadLetters(w http.ResponseWriter, r *http.Request) {
	if !principalOf(r).IsAdmin() {
		writeProblem(w, r, errAdminOnly)
		return
	}
	limit, err := parsePageLimit(r)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	merchantID, err := queryUUID(r, "merchant_id")
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	q := r.URL.Query()
	params := store.ListDeadLettersParams{
		Kind: q.Get("kind"), MerchantID: merchantID, Unresolved: q.Get("unresolved") == "true", Limit: limit,
	}
	scope := listScope("dead letters", params.Kind, merchantID.String(), strconv.FormatBool(params.Unresolved))
	if params.After, err = s.cursors.open(r, scope); err != nil {
		writeProblem(w, r, err)
		return
	}
	dls, next, err := s.store.ListDeadLetters(r.Context(), params)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"dead_letters": dls, "next_cursor": s.cursors.seal(scope, next)})
}

func (s *Server) retryDeadLetter(w http.ResponseWriter, r *http.Request) {
	if !principalOf(r).IsAdmin() {
		writeProblem(w, r, errAdminOnly)
		return
	}
	id, err := pathUUID(r, "id")
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	dl, err := s.store.RetryDeadLetter(r.Context(), id, accessOf(principalOf(r)), requestIDFrom(r.Context()))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, dl)
}

type resolveRequest struct {
	Note string `json:"note"`
}

func (s *Server) resolveDeadLetter(w http.ResponseWriter, r *http.Request) {
	if !principalOf(r).IsAdmin() {
		writeProblem(w, r, errAdminOnly)
		return
	}
	id, err := pathUUID(r, "id")
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	var req resolveRequest
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, &req); err != nil {
			writeProblem(w, r, err)
			return
		}
	}
	dl, err := s.store.ResolveDeadLetter(r.Context(), id, req.Note)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, dl)
}
