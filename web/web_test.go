package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
	qrcode "github.com/skip2/go-qrcode"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/web"
)

// TestPagesAreServedWithTheirPolicy: both pages and their assets come from
// the binary, each with a policy that lets only this origin's scripts and
// styles run, so no text that reached the markup could run a script.
func TestPagesAreServedWithTheirPolicy(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	for pattern, h := range web.Routes() {
		mux.Handle(pattern, h)
	}
	for path, contentType := range map[string]string{
		"/":                        "text/html",
		"/kitchen":                 "text/html",
		"/assets/common.js":        "text/javascript",
		"/assets/customer.js":      "text/javascript",
		"/assets/kitchen.js":       "text/javascript",
		"/assets/orderd-client.js": "text/javascript",
		"/assets/style.css":        "text/css",
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		require.Equal(t, http.StatusOK, rec.Code, path)
		require.True(t, strings.HasPrefix(rec.Header().Get("Content-Type"), contentType), "%s: %s", path, rec.Header().Get("Content-Type"))
		csp := rec.Header().Get("Content-Security-Policy")
		require.Contains(t, csp, "default-src 'self'", path)
		require.NotContains(t, csp, "unsafe-inline", path)
		require.NotContains(t, csp, "unsafe-eval", path)
		require.Equal(t, "no-referrer", rec.Header().Get("Referrer-Policy"), path)
		require.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"), path)
		body, err := io.ReadAll(rec.Body)
		require.NoError(t, err)
		if contentType == "text/html" {
			require.NotContains(t, string(body), "<script>", "%s: no inline script", path)
			require.NotContains(t, string(body), "style=", "%s: no inline style", path)
		}
		// No asset ever parses text as markup.
		require.NotContains(t, string(body), "innerHTML", path)
		require.NotContains(t, string(body), "insertAdjacentHTML", path)
		require.NotContains(t, string(body), "document.write", path)
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/assets/nope.js", nil))
	require.Equal(t, http.StatusNotFound, rec.Code)
}

// TestPagesLoadThePackagesBuild: the pages' copy of @orderd/client is the
// package's committed build, byte for byte, so the pages run the code the
// package's tests ran (npm test in clients/js checks that build against
// its sources).
func TestPagesLoadThePackagesBuild(t *testing.T) {
	t.Parallel()
	pkg, err := os.ReadFile("../clients/js/dist/index.js")
	require.NoError(t, err)
	page, err := os.ReadFile("static/assets/orderd-client.js")
	require.NoError(t, err)
	require.True(t, string(pkg) == string(page), "web/static/assets/orderd-client.js differs from clients/js/dist/index.js: run npm run build in clients/js")
}

// TestOrderHereQR: the QR code is the PNG of this host's customer page of
// the merchant, and nothing else can be made into one.
func TestOrderHereQR(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	for pattern, h := range web.Routes() {
		mux.Handle(pattern, h)
	}
	id := uuid.NewString()
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/qr.png?merchant="+id, nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "image/png", rec.Header().Get("Content-Type"))
	want, err := qrcode.Encode("http://example.com/?merchant="+id, qrcode.Medium, 512)
	require.NoError(t, err)
	require.Equal(t, want, rec.Body.Bytes(), "the code of the merchant's page on the host asked")

	for _, bad := range []string{"", "?merchant=", "?merchant=https://evil.example/", "?merchant=" + id + "x"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", "/qr.png"+bad, nil))
		require.Equal(t, http.StatusBadRequest, rec.Code, bad)
	}
}
