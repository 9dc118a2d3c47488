package api

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/orderd/orderd/store"
)

// A placement's body, its idempotency hash and its answer are the JSON of
// every order a client places. They are read and written here without
// encoding/json's reflection, for the shapes clients send and the views we
// answer; whatever these do not handle goes through encoding/json as before,
// and each produces exactly what encoding/json would (the tests compare them).

// decodePlaceOrder reads body as encoding/json (with unknown fields
// disallowed) would into a zero placeOrderRequest, for bodies whose keys are
// spelled as the tags are, each once, whose strings hold printable ASCII
// without escapes and whose quantities are plain integers. It reports false,
// having changed nothing, for any other body, which decodeJSON then reads
// and judges as it reads every body.
func decodePlaceOrder(body []byte, req *placeOrderRequest) bool {
	d := jsonScanner{b: body}
	var r placeOrderRequest
	var seen [4]bool
	ok := d.object(func(key string) bool {
		switch key {
		case "merchant_id":
			if seen[0] {
				return false
			}
			seen[0] = true
			s, ok := d.str()
			r.MerchantID = s
			return ok
		case "items":
			if seen[1] {
				return false
			}
			seen[1] = true
			r.Items = []orderLine{}
			return d.array(func() bool {
				var l orderLine
				var seenLine [3]bool
				ok := d.object(func(key string) bool {
					switch key {
					case "product_id":
						if seenLine[0] {
							return false
						}
						seenLine[0] = true
						s, ok := d.str()
						l.ProductID = s
						return ok
					case "quantity":
						if seenLine[1] {
							return false
						}
						seenLine[1] = true
						n, ok := d.integer()
						l.Quantity = n
						return ok
					case "options":
						if seenLine[2] {
							return false
						}
						seenLine[2] = true
						if d.null() {
							return true
						}
						l.Options = []string{}
						return d.array(func() bool {
							s, ok := d.str()
							l.Options = append(l.Options, s)
							return ok
						})
					}
					return false
				})
				r.Items = append(r.Items, l)
				return ok
			})
		case "payment_ref", "pickup_at":
			i, dst := 2, &r.PaymentRef
			if key == "pickup_at" {
				i, dst = 3, &r.PickupAt
			}
			if seen[i] {
				return false
			}
			seen[i] = true
			if d.null() {
				return true
			}
			s, ok := d.str()
			*dst = &s
			return ok
		}
		return false
	})
	d.space()
	if !ok || d.i != len(d.b) {
		return false
	}
	*req = r
	return true
}

func (req *placeOrderRequest) decodeFast(body []byte) bool { return decodePlaceOrder(body, req) }

// jsonScanner reads the plain subset of JSON decodePlaceOrder accepts;
// every method reports false on anything outside it.
type jsonScanner struct {
	b []byte
	i int
}

func (d *jsonScanner) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *jsonScanner) next(c byte) bool {
	d.space()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// str reads a string of printable ASCII with no escapes.
func (d *jsonScanner) str() (string, bool) {
	if !d.next('"') {
		return "", false
	}
	start := d.i
	for ; d.i < len(d.b); d.i++ {
		switch c := d.b[d.i]; {
		case c == '"':
			s := string(d.b[start:d.i])
			d.i++
			return s, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return "", false
		}
	}
	return "", false
}

// integer reads -?(0|[1-9][0-9]*) of at most 18 digits, which every int
// holds.
func (d *jsonScanner) integer() (int, bool) {
	d.space()
	neg := d.i < len(d.b) && d.b[d.i] == '-'
	if neg {
		d.i++
	}
	start, n := d.i, 0
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		n = n*10 + int(d.b[d.i]-'0')
		d.i++
	}
	digits := d.i - start
	if digits == 0 || digits > 18 || (digits > 1 && d.b[start] == '0') {
		return 0, false
	}
	if d.i < len(d.b) {
		// A fraction or an exponent makes it no integer to encoding/json.
		switch d.b[d.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	if neg {
		n = -n
	}
	return n, true
}

func (d *jsonScanner) null() bool {
	d.space()
	if len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

// object reads {"key": value, ...}, value by value(key).
func (d *jsonScanner) object(value func(key string) bool) bool {
	if !d.next('{') {
		return false
	}
	if d.next('}') {
		return true
	}
	for {
		key, ok := d.str()
		if !ok || !d.next(':') || !value(key) {
			return false
		}
		if d.next('}') {
			return true
		}
		if !d.next(',') {
			return false
		}
	}
}

// array reads [value, ...], each by value().
func (d *jsonScanner) array(value func() bool) bool {
	if !d.next('[') {
		return false
	}
	if d.next(']') {
		return true
	}
	for {
		if !value() {
			return false
		}
		if d.next(']') {
			return true
		}
		if !d.next(',') {
			return false
		}
	}
}

// appendPlaceOrderRequest appends req as json.Marshal writes it: the text
// whose hash keys a placement's idempotency, so it must not change.
func appendPlaceOrderRequest(dst []byte, req placeOrderRequest) []byte {
	dst = append(dst, `{"merchant_id":`...)
	dst = appendJSONString(dst, req.MerchantID)
	dst = append(dst, `,"items":`...)
	if req.Items == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i, l := range req.Items {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"product_id":`...)
			dst = appendJSONString(dst, l.ProductID)
			dst = append(dst, `,"quantity":`...)
			dst = strconv.AppendInt(dst, int64(l.Quantity), 10)
			if len(l.Options) > 0 {
				dst = append(dst, `,"options":[`...)
				for j, o := range l.Options {
					if j > 0 {
						dst = append(dst, ',')
					}
					dst = appendJSONString(dst, o)
				}
				dst = append(dst, ']')
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"payment_ref":`...)
	dst = appendJSONStringPtr(dst, req.PaymentRef)
	dst = append(dst, `,"pickup_at":`...)
	dst = appendJSONStringPtr(dst, req.PickupAt)
	return append(dst, '}')
}

// appendJSONString appends s quoted as encoding/json quotes it: printable
// ASCII that needs no escape as it is, anything else by encoding/json.
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

func appendJSONStringPtr(dst []byte, s *string) []byte {
	if s == nil {
		return append(dst, "null"...)
	}
	return appendJSONString(dst, *s)
}

// appendOrderView appends o as json.Marshal writes it, or reports false
// (for a time encoding/json would refuse) having appended nothing.
func appendOrderView(dst []byte, o *store.OrderView) ([]byte, bool) {
	start := len(dst)
	ok := true
	appendTime := func(t time.Time) {
		dst = append(dst, '"')
		if b, err := t.AppendText(dst); err == nil {
			dst = b
		} else {
			ok = false
		}
		dst = append(dst, '"')
	}
	appendTimePtr := func(t *time.Time) {
		if t == nil {
			dst = append(dst, "null"...)
			return
		}
		appendTime(*t)
	}
	appendIntPtr := func(n *int) {
		if n == nil {
			dst = append(dst, "null"...)
			return
		}
		dst = strconv.AppendInt(dst, int64(*n), 10)
	}
	dst = append(dst, `{"id":`...)
	dst = appendUUID(dst, o.ID)
	dst = append(dst, `,"merchant_id":`...)
	dst = appendUUID(dst, o.MerchantID)
	dst = append(dst, `,"customer_id":`...)
	dst = appendJSONString(dst, o.CustomerID)
	dst = append(dst, `,"items":`...)
	if o.Items == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i, it := range o.Items {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"product_id":`...)
			dst = appendUUID(dst, it.ProductID)
			if it.Name != "" {
				dst = append(dst, `,"name":`...)
				dst = appendJSONString(dst, it.Name)
			}
			dst = append(dst, `,"quantity":`...)
			dst = strconv.AppendInt(dst, int64(it.Quantity), 10)
			dst = append(dst, `,"price_cents":`...)
			dst = strconv.AppendInt(dst, it.PriceCents, 10)
			if len(it.Options) > 0 {
				dst = append(dst, `,"options":[`...)
				for j, c := range it.Options {
					if j > 0 {
						dst = append(dst, ',')
					}
					dst = append(dst, `{"id":`...)
					dst = appendJSONString(dst, c.ID)
					dst = append(dst, `,"name":`...)
					dst = appendJSONString(dst, c.Name)
					dst = append(dst, `,"price_delta_cents":`...)
					dst = strconv.AppendInt(dst, c.PriceDeltaCents, 10)
					dst = append(dst, '}')
				}
				dst = append(dst, ']')
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"total_cents":`...)
	dst = strconv.AppendInt(dst, o.TotalCents, 10)
	dst = append(dst, `,"status":`...)
	dst = appendJSONString(dst, string(o.Status))
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, int64(o.Version), 10)
	dst = append(dst, `,"placed_at":`...)
	appendTime(o.PlacedAt)
	dst = append(dst, `,"payment_deadline":`...)
	appendTime(o.PaymentDeadline)
	dst = append(dst, `,"paid_at":`...)
	appendTimePtr(o.PaidAt)
	dst = append(dst, `,"accepted_at":`...)
	appendTimePtr(o.AcceptedAt)
	dst = append(dst, `,"completed_at":`...)
	appendTimePtr(o.CompletedAt)
	dst = append(dst, `,"ended_at":`...)
	appendTimePtr(o.EndedAt)
	dst = append(dst, `,"status_reason":`...)
	dst = appendJSONStringPtr(dst, o.StatusReason)
	dst = append(dst, `,"queue_position":`...)
	appendIntPtr(o.QueuePosition)
	dst = append(dst, `,"eta_seconds":`...)
	appendIntPtr(o.EtaSeconds)
	dst = append(dst, `,"load":`...)
	dst = strconv.AppendInt(dst, int64(o.Load), 10)
	dst = append(dst, `,"lane":`...)
	dst = appendJSONString(dst, string(o.Lane))
	dst = append(dst, `,"pickup_code":`...)
	dst = appendJSONStringPtr(dst, o.PickupCode)
	dst = append(dst, `,"pickup_at":`...)
	appendTimePtr(o.PickupAt)
	dst = append(dst, `,"picked_up_at":`...)
	appendTimePtr(o.PickedUpAt)
	dst = append(dst, '}')
	if !ok {
		return dst[:start], false
	}
	return dst, true
}

func appendUUID(dst []byte, id uuid.UUID) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	for i, b := range id {
		switch i {
		case 4, 6, 8, 10:
			dst = append(dst, '-')
		}
		dst = append(dst, hexDigits[b>>4], hexDigits[b&0x0f])
	}
	return append(dst, '"')
}
