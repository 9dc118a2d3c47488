package bench

import "bytes"

// orderFields is what a watcher checks of an order message.
type orderFields struct {
	Version  int
	Status   string
	Position int
	Placed   bool // Position is set: queue_position was not null
}

// scanOrder reads an order message's version, status and place in line in
// one pass over msg, without allocating: twenty thousand watchers in a
// process or two decode millions of messages, and encoding/json's
// validation and decoding of each whole message were most of the watcher
// processes' CPU, which the servers share two cores with. It reports false
// for anything but a well-formed {"type":"order","order":{…}} message; the
// caller then decodes it with encoding/json.
func scanOrder(msg []byte) (f orderFields, ok bool) {
	const (
		wantValue = iota
		wantKey   // or the object's end, right after its '{'
		wantColon
		wantNext // ',' or the container's end
	)
	var (
		stack   [32]byte // '{' or '[' per depth
		depth   int
		want    = wantValue
		key     []byte // the key of the value that comes next, in an object
		inOrder bool   // depth 2 is the top object's "order"
		isOrder bool   // the top object's "type" is "order"
		seen    int    // of the order's version, status and queue_position
		opened  bool   // the last token opened a container
	)
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		if depth == 0 && want == wantNext {
			return f, false // something after the top value
		}
		justOpened := opened
		opened = c == '{' || c == '['
		switch {
		case c == '{' || c == '[':
			if want != wantValue || depth == len(stack) {
				return f, false
			}
			inOrder = inOrder || (depth == 1 && c == '{' && string(key) == "order")
			stack[depth] = c
			depth++
			want = wantValue
			if c == '{' {
				want = wantKey
			}
		case c == '}' || c == ']':
			empty := justOpened && (want == wantKey && c == '}' || want == wantValue && c == ']')
			if depth == 0 || !(want == wantNext || empty) || (c == '}') != (stack[depth-1] == '{') {
				return f, false
			}
			depth--
			if depth == 1 {
				inOrder = false
			}
			want = wantNext
		case c == ',':
			if want != wantNext || depth == 0 {
				return f, false
			}
			want = wantValue
			if stack[depth-1] == '{' {
				want = wantKey
			}
		case c == ':':
			if want != wantColon {
				return f, false
			}
			want = wantValue
		case c == '"':
			end, escaped := i+1, false
			for ; end < len(msg) && msg[end] != '"'; end++ {
				if msg[end] == '\\' {
					if !validEscape(msg[end+1:]) {
						return f, false
					}
					end++
					escaped = true
				} else if msg[end] < 0x20 {
					return f, false
				}
			}
			if end >= len(msg) {
				return f, false
			}
			str := msg[i+1 : end]
			i = end
			// Keys and values read here are compared as they are written:
			// the server escapes none of them.
			if escaped && depth <= 2 {
				return f, false
			}
			switch want {
			case wantKey:
				key, want = str, wantColon
				continue
			case wantValue:
			default:
				return f, false
			}
			switch {
			case depth == 1 && string(key) == "type":
				isOrder = string(str) == "order"
			case depth == 2 && inOrder && string(key) == "status":
				f.Status = statusString(str)
				seen++
			}
			want = wantNext
		default:
			end := i
			for end < len(msg) && bytes.IndexByte([]byte(" \t\n\r,:}]"), msg[end]) < 0 {
				end++
			}
			lit := msg[i:end]
			i = end - 1
			if want != wantValue {
				return f, false
			}
			number := string(lit) != "null" && string(lit) != "true" && string(lit) != "false"
			if number && !isNumber(lit) {
				return f, false
			}
			if depth == 2 && inOrder {
				switch string(key) {
				case "version":
					v, isInt := atoi(lit)
					if !isInt {
						return f, false
					}
					f.Version = v
					seen++
				case "queue_position":
					if number {
						p, isInt := atoi(lit)
						if !isInt {
							return f, false
						}
						f.Position, f.Placed = p, true
					} else if string(lit) != "null" {
						return f, false
					}
					seen++
				}
			}
			want = wantNext
		}
	}
	return f, depth == 0 && want == wantNext && isOrder && seen == 3
}

// validEscape reports whether rest, what follows a backslash in a string,
// starts as a JSON escape does.
func validEscape(rest []byte) bool {
	if len(rest) == 0 {
		return false
	}
	switch rest[0] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return true
	case 'u':
		if len(rest) < 5 {
			return false
		}
		for _, c := range rest[1:5] {
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
		return true
	}
	return false
}

// isNumber reports whether lit is a JSON number.
func isNumber(lit []byte) bool {
	if len(lit) > 0 && lit[0] == '-' {
		lit = lit[1:]
	}
	if len(lit) > 1 && lit[0] == '0' && lit[1] >= '0' && lit[1] <= '9' {
		return false // a leading zero
	}
	digits := 0
	for len(lit) > 0 && lit[0] >= '0' && lit[0] <= '9' {
		lit, digits = lit[1:], digits+1
	}
	if digits == 0 {
		return false
	}
	if len(lit) > 0 && lit[0] == '.' {
		lit, digits = lit[1:], 0
		for len(lit) > 0 && lit[0] >= '0' && lit[0] <= '9' {
			lit, digits = lit[1:], digits+1
		}
		if digits == 0 {
			return false
		}
	}
	if len(lit) > 0 && (lit[0] == 'e' || lit[0] == 'E') {
		lit, digits = lit[1:], 0
		if len(lit) > 0 && (lit[0] == '+' || lit[0] == '-') {
			lit = lit[1:]
		}
		for len(lit) > 0 && lit[0] >= '0' && lit[0] <= '9' {
			lit, digits = lit[1:], digits+1
		}
		if digits == 0 {
			return false
		}
	}
	return len(lit) == 0
}

// atoi reads a JSON integer that fits an int32.
func atoi(lit []byte) (int, bool) {
	neg := len(lit) > 0 && lit[0] == '-'
	if neg {
		lit = lit[1:]
	}
	if len(lit) == 0 || len(lit) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range lit {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// statusString is s as one of the order statuses' constant strings when it
// is one.
func statusString(s []byte) string {
	for _, known := range []string{"awaiting_payment", "scheduled", "queued", "accepted", "completed", "closed", "cancelled", "expired"} {
		if string(s) == known {
			return known
		}
	}
	return string(s)
}
