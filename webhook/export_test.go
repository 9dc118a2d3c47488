package webhook

import (
	"crypto/tls"
	"net/http"
)

// TrustTLS makes s trust what cfg trusts, so tests can reach an
// httptest.NewTLSServer through the real transport and redirect policy.
func TrustTLS(s *Sender, cfg *tls.Config) {
	s.client.Transport.(*http.Transport).TLSClientConfig = cfg.Clone()
}
