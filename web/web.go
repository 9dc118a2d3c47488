// Package web serves orderd's two pages: the customer's ordering page at /
// and the kitchen display at /kitchen. They are plain HTML, CSS and
// JavaScript modules, embedded in the binary: no build step.
package web

import (
	"embed"
	"io/fs"
	"net/http"
	"strconv"

	"github.com/google/uuid"
	qrcode "github.com/skip2/go-qrcode"
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
		"GET /qr.png":        http.HandlerFunc(orderHereQR),
	}
}

// qrSize is the QR code's side in pixels: sharp on a printed page.
const qrSize = 512

// orderHereQR draws, as a PNG, the QR code of a merchant's customer page
// on this server (/?merchant=<id>), for the counter. It encodes a link to
// this host only, and only for a merchant id, so it can be made to say
// nothing else; whether the merchant takes guests is the page's to tell.
func orderHereQR(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.URL.Query().Get("merchant"))
	if err != nil {
		http.Error(w, "merchant must be a merchant's id", http.StatusBadRequest)
		return
	}
	scheme := "http"
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	png, err := qrcode.Encode(scheme+"://"+r.Host+"/?merchant="+id.String(), qrcode.Medium, qrSize)
	if err != nil {
		http.Error(w, "the QR code could not be drawn", http.StatusInternalServerError)
		return
	}
	setHeaders(w)
	w.Header().Set("Content-Type", "image/png")
	w.Header().Set("Content-Length", strconv.Itoa(len(png)))
	_, _ = w.Write(png)
}

func setHeaders(w http.ResponseWriter) {
	for k, v := range securityHeaders {
		w.Header().Set(k, v)
	}
}
