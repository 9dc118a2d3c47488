package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/webhook"
	"github.com/orderd/orderd/webhook/verify"
)

func TestSendSignsAndAcknowledges(t *testing.T) {
	t.Parallel()
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.WriteHeader(204)
	}))
	defer srv.Close()
	sentAt := time.Unix(1_900_000_000, 0)
	s := webhook.NewSender(webhook.Options{Timeout: time.Second, AllowLoopback: true, Now: func() time.Time { return sentAt }})
	body := []byte(`{"a":1}`)
	res := s.Send(context.Background(), webhook.Message{ID: "d1", URL: srv.URL, Secret: "k", Body: body})
	require.True(t, res.OK(), "%v", res.Err)
	require.Equal(t, "d1", got.Get("X-Orderd-Delivery"))
	require.Equal(t, webhook.Sign("k", body), got.Get("X-Orderd-Signature"))
	require.True(t, strings.HasPrefix(got.Get("X-Orderd-Signature"), "sha256="))
	require.Equal(t, "1900000000", got.Get("X-Orderd-Timestamp"))
	require.Equal(t, "t=1900000000,v1="+hmacHex("k", "1900000000."+string(body)), got.Get("X-Orderd-Signature-V2"))
	require.NoError(t, verify.Verify("k", got.Get("X-Orderd-Signature-V2"), body, sentAt.Add(time.Minute)))
}

func hmacHex(key, msg string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

// TestSendNeverDowngradesOnRedirect: an https endpoint may redirect within
// https, but a redirect to http on the same host is refused before anything
// is sent there.
func TestSendNeverDowngradesOnRedirect(t *testing.T) {
	t.Parallel()
	var plainHits atomic.Int32
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		plainHits.Add(1)
		w.WriteHeader(200)
	}))
	defer plain.Close()
	var tlsSrv *httptest.Server
	tlsSrv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/same-scheme":
			http.Redirect(w, r, "/final", http.StatusTemporaryRedirect)
		case "/downgrade":
			// The same host and port, another scheme.
			http.Redirect(w, r, "http://"+tlsSrv.Listener.Addr().String()+"/final", http.StatusPermanentRedirect)
		case "/final":
			w.WriteHeader(200)
		}
	}))
	defer tlsSrv.Close()
	// Generous: TLS handshakes on a loaded machine; nothing here is timed.
	s := webhook.NewSender(webhook.Options{Timeout: 10 * time.Second, AllowLoopback: true})
	webhook.TrustTLS(s, tlsSrv.Client().Transport.(*http.Transport).TLSClientConfig)

	res := s.Send(context.Background(), webhook.Message{ID: "d", URL: tlsSrv.URL + "/same-scheme", Body: []byte("{}")})
	require.True(t, res.OK(), "https to https on the same host: %v", res.Err)

	res = s.Send(context.Background(), webhook.Message{ID: "d", URL: tlsSrv.URL + "/downgrade", Body: []byte("{}")})
	require.False(t, res.OK())
	require.ErrorContains(t, res.Err, "redirect from https to http refused")

	// And http to http stays allowed, as before.
	res = s.Send(context.Background(), webhook.Message{ID: "d", URL: plain.URL, Body: []byte("{}")})
	require.True(t, res.OK(), "%v", res.Err)
	require.Equal(t, int32(1), plainHits.Load())
}

func TestSendRefusesForbiddenAddresses(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
	defer srv.Close()
	strict := webhook.NewSender(webhook.Options{Timeout: time.Second})
	for _, url := range []string{srv.URL, "http://169.254.169.254/latest/meta-data", "http://[::1]:1/", "http://0.0.0.0:1/"} {
		res := strict.Send(context.Background(), webhook.Message{ID: "d", URL: url, Body: []byte("{}")})
		require.False(t, res.OK(), url)
		require.True(t, errors.Is(res.Err, webhook.ErrForbiddenAddress), "%s: %v", url, res.Err)
	}
	res := strict.Send(context.Background(), webhook.Message{ID: "d", URL: "ftp://example.com/x", Body: []byte("{}")})
	require.False(t, res.OK())
}

func TestSendFollowsNoRedirectToAnotherHost(t *testing.T) {
	t.Parallel()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
	defer other.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL, http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	s := webhook.NewSender(webhook.Options{Timeout: time.Second, AllowLoopback: true})
	res := s.Send(context.Background(), webhook.Message{ID: "d", URL: redirect.URL, Body: []byte("{}")})
	require.False(t, res.OK())
	require.ErrorContains(t, res.Err, "another host")
}

func TestSendTimesOutAndReadsLittle(t *testing.T) {
	t.Parallel()
	// The receiver answers after a minute, or when the sender hangs up (the
	// body read, the server notices): a send that did not time out would
	// wait for the minute, so a bound far above the timeout still tells
	// them apart on a loaded machine.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-time.After(time.Minute):
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	s := webhook.NewSender(webhook.Options{Timeout: 200 * time.Millisecond, AllowLoopback: true})
	start := time.Now()
	res := s.Send(context.Background(), webhook.Message{ID: "d", URL: slow.URL, Body: []byte("{}")})
	require.False(t, res.OK())
	require.Less(t, time.Since(start), 10*time.Second)

	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		_, _ = w.Write([]byte(strings.Repeat("x", 1<<20)))
	}))
	defer big.Close()
	res = s.Send(context.Background(), webhook.Message{ID: "d", URL: big.URL, Body: []byte("{}")})
	require.Equal(t, 500, res.StatusCode)
}

func TestSendRefusesAtDialTime(t *testing.T) {
	t.Parallel()
	strict := webhook.NewSender(webhook.Options{Timeout: time.Second})
	for _, url := range []string{
		"http://localhost:1/",                    // a name: refused on the address it resolves to
		"http://100.100.100.200/",                // metadata outside link-local
		"http://[fd00:ec2::254]/",                // metadata over IPv6
		"http://[fe80::1]:1/",                    // link-local IPv6
		"http://[::ffff:169.254.169.254]/",       // mapped IPv4
		"http://[64:ff9b::a9fe:a9fe]/",           // NAT64 of 169.254.169.254
		"http://0.0.0.1:1/", "http://224.0.0.1/", // this network, multicast
	} {
		res := strict.Send(context.Background(), webhook.Message{ID: "d", URL: url, Body: []byte("{}")})
		require.ErrorIs(t, res.Err, webhook.ErrForbiddenAddress, url)
	}
}

func TestSendAllowsLoopbackWhenConfigured(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
	defer srv.Close()
	s := webhook.NewSender(webhook.Options{Timeout: time.Second, AllowLoopback: true})
	res := s.Send(context.Background(), webhook.Message{ID: "d", URL: strings.Replace(srv.URL, "127.0.0.1", "localhost", 1), Body: []byte("{}")})
	require.True(t, res.OK(), "%v", res.Err)
	res = s.Send(context.Background(), webhook.Message{ID: "d", URL: "http://169.254.169.254/", Body: []byte("{}")})
	require.ErrorIs(t, res.Err, webhook.ErrForbiddenAddress, "loopback allowed does not open link-local")
}

func TestSendFollowsAtMostThreeRedirectsOnTheSameHost(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	var gotBody []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := hits.Add(1)
		body, _ := io.ReadAll(r.Body)
		gotBody = append(gotBody, string(body))
		if r.URL.Path == "/loop" || n < 3 {
			http.Redirect(w, r, r.URL.Path, http.StatusTemporaryRedirect)
			return
		}
		w.WriteHeader(200)
	}))
	defer srv.Close()
	s := webhook.NewSender(webhook.Options{Timeout: time.Second, AllowLoopback: true})
	res := s.Send(context.Background(), webhook.Message{ID: "d", URL: srv.URL + "/ok", Body: []byte(`{"a":1}`)})
	require.True(t, res.OK(), "%v", res.Err)
	require.Equal(t, []string{`{"a":1}`, `{"a":1}`, `{"a":1}`}, gotBody, "a 307 re-sends the body")

	hits.Store(10)
	gotBody = nil
	res = s.Send(context.Background(), webhook.Message{ID: "d", URL: srv.URL + "/loop", Body: []byte("{}")})
	require.False(t, res.OK())
	require.ErrorContains(t, res.Err, "too many redirects")
	require.Len(t, gotBody, 4, "the first request and three redirects")
}
