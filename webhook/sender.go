// Package webhook sends signed webhook requests to merchants' endpoints,
// refusing addresses a merchant must not be able to reach through us.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"syscall"
	"time"

	"github.com/orderd/orderd/webhook/verify"
)

// Options configure a Sender.
type Options struct {
	Timeout time.Duration
	// AllowLoopback permits 127.0.0.0/8 and ::1, for tests and local receivers.
	AllowLoopback bool
	// Now stamps each attempt; nil means time.Now.
	Now func() time.Time
}

// Sender delivers one message per call. It is safe for concurrent use.
type Sender struct {
	client *http.Client
	now    func() time.Time
}

// maxResponseBody bounds what is read of an answer: only its status matters.
const maxResponseBody = 64 << 10

// ErrForbiddenAddress is returned for endpoints on addresses orderd refuses.
var ErrForbiddenAddress = errors.New("webhook address not allowed")

// NewSender builds a Sender.
func NewSender(o Options) *Sender {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	dialer := &net.Dialer{
		Timeout: o.Timeout,
		// Checked at connect time, on the resolved address, so a DNS answer
		// that changes after validation cannot steer us elsewhere.
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: %s", ErrForbiddenAddress, address)
			}
			return checkAddr(ap.Addr(), o.AllowLoopback)
		},
	}
	transport := &http.Transport{
		DialContext:           dialer.DialContext,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   o.Timeout,
		ResponseHeaderTimeout: o.Timeout,
		ForceAttemptHTTP2:     true,
	}
	return &Sender{now: o.Now, client: &http.Client{
		Transport:     transport,
		Timeout:       o.Timeout,
		CheckRedirect: checkRedirect,
	}}
}

// checkRedirect follows redirects only on the same host, at most three times,
// and never from https to http: the signature and the order would then cross
// the network in clear text.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > 3 {
		return errors.New("too many redirects")
	}
	if req.URL.Host != via[0].URL.Host {
		return fmt.Errorf("redirect to another host (%s) refused", req.URL.Host)
	}
	for _, prev := range via {
		if prev.URL.Scheme == "https" && req.URL.Scheme != "https" {
			return fmt.Errorf("redirect from https to %s refused", req.URL.Scheme)
		}
	}
	return nil
}

// metadataAddrs are cloud instance-metadata endpoints outside link-local.
var metadataAddrs = map[netip.Addr]bool{
	netip.MustParseAddr("100.100.100.200"): true, // Alibaba Cloud
	netip.MustParseAddr("fd00:ec2::254"):   true, // AWS, over IPv6
}

var (
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")    // Linux connects 0.0.0.0 to the host itself
	nat64       = netip.MustParsePrefix("64:ff9b::/96") // reaches the IPv4 address in its last 4 bytes
	broadcast   = netip.AddrFrom4([4]byte{255, 255, 255, 255})
)

// checkAddr refuses link-local (cloud metadata lives there) and other
// metadata addresses, unspecified, multicast, broadcast and, unless allowed,
// loopback addresses. Private ranges (10/8, 172.16/12, 192.168/16, fc00::/7)
// stay allowed on purpose: merchants run receivers on their own networks,
// and a deployment that must not reach its private network puts the relay
// behind an egress firewall, which no check here can replace.
func checkAddr(a netip.Addr, allowLoopback bool) error {
	a = a.Unmap()
	if nat64.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte(b[12:]))
	}
	switch {
	case a.IsLoopback() && !allowLoopback,
		a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast(),
		a.IsMulticast(), a.IsUnspecified(), thisNetwork.Contains(a), a == broadcast, metadataAddrs[a]:
		return fmt.Errorf("%w: %s", ErrForbiddenAddress, a)
	}
	return nil
}

// Message is one delivery.
type Message struct {
	ID     string // X-Orderd-Delivery: the same on every attempt, so receivers dedupe
	URL    string
	Secret string
	Body   []byte
}

// Result is what one attempt came to.
type Result struct {
	StatusCode int // 0 when no answer came
	Latency    time.Duration
	Err        error
}

// OK reports an acknowledged delivery (a 2xx answer).
func (r Result) OK() bool { return r.Err == nil && r.StatusCode >= 200 && r.StatusCode < 300 }

// Sign returns the X-Orderd-Signature value of body: the deprecated
// signature, which carries no time and so can be replayed forever.
func Sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Send makes one attempt.
func (s *Sender) Send(ctx context.Context, m Message) Result {
	start := time.Now()
	u, err := url.Parse(m.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return Result{Err: fmt.Errorf("webhook URL must be http or https")}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.URL, bytes.NewReader(m.Body))
	if err != nil {
		return Result{Err: fmt.Errorf("build request: %w", err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "orderd-webhooks/1")
	req.Header.Set("X-Orderd-Delivery", m.ID)
	req.Header.Set("X-Orderd-Signature", Sign(m.Secret, m.Body))
	// Stamped per attempt: a retry an hour later still verifies within
	// the receiver's window.
	now := s.now()
	req.Header.Set(verify.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(verify.HeaderSignature, verify.Sign(m.Secret, now, m.Body))
	resp, err := s.client.Do(req)
	if err != nil {
		return Result{Latency: time.Since(start), Err: err}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBody))
	resp.Body.Close()
	res := Result{StatusCode: resp.StatusCode, Latency: time.Since(start)}
	if !res.OK() {
		res.Err = fmt.Errorf("answered %s", resp.Status)
	}
	return res
}
