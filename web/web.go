// Package web serves orderd's two pages: the customer's ordering page at /
// and the kitchen display at /kitchen. They are plain HTML, CSS and
// JavaScript modules, embedded in the binary: no build step.
package web

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// securityHeaders: scripts and styles come from this origin only, so even
// text that slipped into markup could run nothing; no page may frame these,
// and no URL leaks to another site in a Referer.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; " +
		"base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "no-referrer",
	// The pages change with the binary; a browser checks before reusing.
	"Cache-Control": "no-cache",
}

// Routes maps the mux patterns of the pages and their assets to handlers.
func Routes() map[string]http.Handler {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err)
	}
	page := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			setHeaders(w)
			http.ServeFileFS(w, r, files, name)
		})
	}
	assets := http.FileServerFS(files)
	return map[string]http.Handler{
		"GET /{$}":           page("index.html"),
		"GET /kitchen":       page("kitchen.html"),
		"GET /assets/{name}": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { setHeaders(w); assets.ServeHTTP(w, r) }),
	}
}

func setHeaders(w http.ResponseWriter) {
	for k, v := range securityHeaders {
		w.Header().Set(k, v)
	}
}
