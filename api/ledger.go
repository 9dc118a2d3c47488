package api

import (
	"net/http"
	"strconv"

	"github.com/orderd/orderd/domain"
)

// logParam is the log a request names, or "" for the store's default.
func logParam(r *http.Request) string { return r.URL.Query().Get("log") }

// sizeParam reads a tree size from the query: absent is 0, anything but a
// positive integer is refused.
func sizeParam(r *http.Request, name string, required bool) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" && !required {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, domain.Errorf(domain.CodeValidation, "%s must be a positive integer, a checkpoint's size", name)
	}
	return n, nil
}

func (s *Server) latestCheckpoint(w http.ResponseWriter, r *http.Request) error {
	if !principalOf(r).Party().MayAudit() {
		return errAuditOnly
	}
	c, err := s.store.LatestCheckpoint(r.Context(), logParam(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) checkpointConsistency(w http.ResponseWriter, r *http.Request) error {
	if !principalOf(r).Party().MayAudit() {
		return errAuditOnly
	}
	from, err := sizeParam(r, "from", true)
	if err != nil {
		return err
	}
	to, err := sizeParam(r, "to", true)
	if err != nil {
		return err
	}
	log, err := s.store.NamedLog(r.Context(), logParam(r))
	if err != nil {
		return err
	}
	proof, err := s.store.ConsistencyProof(r.Context(), log, from, to)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"log": log, "from": from, "to": to, "proof": proof})
	return nil
}

func (s *Server) orderProof(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	size, err := sizeParam(r, "size", false)
	if err != nil {
		return err
	}
	proof, err := s.store.OrderProof(r.Context(), id, accessOf(principalOf(r)), logParam(r), size)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, proof)
	return nil
}
