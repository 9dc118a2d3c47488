package api

import (
	"net/http"
	"strings"

	"github.com/orderd/orderd/domain"
)

// routeMux is a ServeMux that remembers its patterns, so that a test can
// hold the OpenAPI document against every route, and so that a known path
// asked with another method can be told from an unknown one.
type routeMux struct {
	*http.ServeMux
	patterns []string
}

func newRouteMux() *routeMux { return &routeMux{ServeMux: http.NewServeMux()} }

func (m *routeMux) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, h)
}

func (m *routeMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(h))
}

// probedMethods are the methods a path is tried with to build an Allow header.
var probedMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// allowed lists the methods some route serves r's path with, in the form
// of an Allow header; "" when no route knows the path.
func (m *routeMux) allowed(r *http.Request) string {
	var methods []string
	probe := r.Clone(r.Context())
	for _, method := range probedMethods {
		probe.Method = method
		if _, pattern := m.Handler(probe); pattern != "" && pattern != fallbackPattern {
			methods = append(methods, method)
		}
	}
	return strings.Join(methods, ", ")
}

// fallbackPattern catches every request no route takes.
const fallbackPattern = "/"

var errNoRoute = domain.Errorf(domain.CodeNotFound, "no such resource")

// fallback answers 405 with Allow for a known path asked with a method it
// does not serve, and 404 for anything else. The standard mux would answer
// 405 by itself, but only as plain text, and not at all beside a catch-all.
func (m *routeMux) fallback(w http.ResponseWriter, r *http.Request) {
	if allow := m.allowed(r); allow != "" {
		w.Header().Set("Allow", allow)
		writeProblem(w, r, domain.Errorf(domain.CodeMethodNotAllowed, "%s is not served here; allowed: %s", r.Method, allow))
		return
	}
	writeProblem(w, r, errNoRoute)
}
