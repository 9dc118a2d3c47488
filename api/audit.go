package api

import "net/http"

// audit answers the checks of `orderd audit`. Only admins: each check scans
// whole tables, and the samples name customers and orders of every merchant.
func (s *Server) audit(w http.ResponseWriter, r *http.Request) {
	if !principalOf(r).IsAdmin() {
		writeProblem(w, r, errAdminOnly)
		return
	}
	report, err := s.store.Audit(r.Context())
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, report)
}
