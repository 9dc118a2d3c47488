package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// poster places orders for one client goroutine of a measured run over a
// keep-alive connection of its own: it writes each request as one buffer and
// reads the answer with net/http's parser, without the Transport's
// connection pool, its per-connection reader and writer goroutines and the
// hand-offs between them, or a JSON encoder. The load generator's CPU counts
// in a scenario's CPU per order, and the server sees the same requests as
// from http.Client. A target that is not plain HTTP goes through Target.call.
type poster struct {
	t    *Target
	host string // host:port to dial; "" when t.call is used instead
	conn net.Conn
	br   *bufio.Reader
	req  []byte
	body []byte
}

// newPoster prepares one client's poster; it dials on its first request.
func (t *Target) newPoster() *poster {
	p := &poster{t: t}
	if u, err := url.Parse(t.BaseURL); err == nil && u.Scheme == "http" && u.Path == "" {
		p.host = u.Host
		if u.Port() == "" {
			p.host = net.JoinHostPort(u.Hostname(), "80")
		}
	}
	return p
}

// requestTimeout bounds one request, as Target's http.Client does.
const requestTimeout = 30 * time.Second

// placeOrder posts an order with a fresh idempotency key and returns the
// answer's status; an answer of 300 or more is an *httpError.
func (p *poster) placeOrder(ctx context.Context, token string, b placeBody) (int, error) {
	if p.host == "" {
		return p.t.call(ctx, "POST", "/v1/orders", token, b, map[string]string{"Idempotency-Key": uuid.NewString()}, nil)
	}
	p.body = appendPlaceBody(p.body[:0], b)
	p.req = append(p.req[:0], "POST /v1/orders HTTP/1.1\r\nHost: "...)
	p.req = append(p.req, p.host...)
	p.req = append(p.req, "\r\nAuthorization: Bearer "...)
	p.req = append(p.req, token...)
	p.req = append(p.req, "\r\nContent-Type: application/json\r\nIdempotency-Key: "...)
	key := uuid.New()
	p.req = append(p.req, key.String()...)
	p.req = append(p.req, "\r\nContent-Length: "...)
	p.req = strconv.AppendInt(p.req, int64(len(p.body)), 10)
	p.req = append(p.req, "\r\n\r\n"...)
	p.req = append(p.req, p.body...)
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	reused := p.conn != nil
	status, err := p.roundTrip()
	if err != nil && reused && !errors.As(err, new(*httpError)) {
		// The server may close an idle keep-alive connection at any time;
		// the idempotency key makes sending the request again safe, as
		// http.Client does for a request it knows to be idempotent.
		status, err = p.roundTrip()
	}
	return status, err
}

// roundTrip writes p.req on the connection, dialing one if it has none, and
// reads the whole answer; on any failure to do so it drops the connection.
func (p *poster) roundTrip() (status int, err error) {
	if p.conn == nil {
		c, err := net.DialTimeout("tcp", p.host, requestTimeout)
		if err != nil {
			return 0, fmt.Errorf("dial %s: %w", p.host, err)
		}
		p.conn = c
		if p.br == nil {
			p.br = bufio.NewReaderSize(c, 4096)
		} else {
			p.br.Reset(c)
		}
	}
	keep := false
	defer func() {
		if !keep {
			_ = p.conn.Close()
			p.conn = nil
		}
	}()
	if err := p.conn.SetDeadline(time.Now().Add(requestTimeout)); err != nil {
		return 0, err
	}
	if _, err := p.conn.Write(p.req); err != nil {
		return 0, fmt.Errorf("POST /v1/orders: %w", err)
	}
	resp, err := http.ReadResponse(p.br, nil)
	if err != nil {
		return 0, fmt.Errorf("POST /v1/orders: %w", err)
	}
	var raw bytes.Buffer
	if resp.StatusCode >= 300 {
		_, err = raw.ReadFrom(resp.Body)
	} else {
		_, err = io.Copy(io.Discard, resp.Body)
	}
	_ = resp.Body.Close()
	if err != nil {
		return resp.StatusCode, fmt.Errorf("POST /v1/orders: read the answer: %w", err)
	}
	keep = !resp.Close
	if resp.StatusCode >= 300 {
		return resp.StatusCode, problemOf(resp.StatusCode, raw.Bytes())
	}
	return resp.StatusCode, nil
}

// newPosters prepares one poster for each of n client goroutines.
func (t *Target) newPosters(n int) []*poster {
	ps := make([]*poster, n)
	for i := range ps {
		ps[i] = t.newPoster()
	}
	return ps
}

// closePosters drops the posters' connections.
func closePosters(ps []*poster) {
	for _, p := range ps {
		if p.conn != nil {
			_ = p.conn.Close()
			p.conn = nil
		}
	}
}

// appendPlaceBody appends b as encoding/json writes it.
func appendPlaceBody(dst []byte, b placeBody) []byte {
	dst = append(dst, `{"merchant_id":`...)
	dst = appendJSONString(dst, b.MerchantID)
	dst = append(dst, `,"items":[`...)
	for i, l := range b.Items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"product_id":`...)
		dst = appendJSONString(dst, l.ProductID)
		dst = append(dst, `,"quantity":`...)
		dst = strconv.AppendInt(dst, int64(l.Quantity), 10)
		dst = append(dst, '}')
	}
	dst = append(dst, ']')
	if b.PaymentRef != "" {
		dst = append(dst, `,"payment_ref":`...)
		dst = appendJSONString(dst, b.PaymentRef)
	}
	return append(dst, '}')
}

// appendJSONString appends s quoted; the ids and payment references the
// bench sends need no escapes, and anything else goes through encoding/json.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			enc, _ := json.Marshal(s) // a string always encodes
			return append(dst, enc...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
