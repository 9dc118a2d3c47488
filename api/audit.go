package api

import "net/http"

// audit answers the checks of `orderd audit`. Only admins: each check scans
// whole tables, and the samples name customers and orders of every merchant.
func (s *Server) audit(w http.ResponseWriter, r *http.Request) error {
	if !principalOf(r).Party().MayAdminister() {
		return errAdminOnly
	}
	report, err := s.store.Audit(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, report)
	return nil
}
