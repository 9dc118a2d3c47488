package api

import (
	_ "embed"
	"net/http"
	"strconv"
)

// openAPIDocument describes every route of the public listener. Tests check
// both ways that it and the mux agree, and validate every answer the API
// tests receive against it, so it cannot drift from the code.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPI returns the OpenAPI 3.1 document served at /openapi.json.
func OpenAPI() []byte { return openAPIDocument }

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(openAPIDocument)))
	h.Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(openAPIDocument)
}
