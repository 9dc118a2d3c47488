package api

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	fastjson "github.com/segmentio/encoding/json"

	"github.com/orderd/orderd/domain"
)

const maxBodyBytes = 1 << 20

var errOneValue = domain.Errorf(domain.CodeMalformedJSON, "the body must hold exactly one JSON value")

// decodeJSON reads exactly one JSON value of dst's shape from the body:
// application/json only, at most 1 MiB, no unknown fields, nothing after the
// value, and no NUL bytes or invalid UTF-8 in any string. Every error it
// returns is a *domain.Error.
func decodeJSON(w http.ResponseWriter, r *http.Request, dst any) error {
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != "application/json" {
		return domain.Errorf(domain.CodeUnsupportedMedia, "Content-Type must be application/json")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return domain.Errorf(domain.CodePayloadTooLarge, "the body must be at most %d bytes", maxBodyBytes)
		}
		return domain.Errorf(domain.CodeMalformedJSON, "the body could not be read")
	}
	if !decodeCompiled(body, dst) {
		// What goccy/go-json refuses is read again by encoding/json, whose
		// errors malformed names, into a value that goccy's partial read
		// left nothing in.
		reflect.ValueOf(dst).Elem().SetZero()
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(dst); err != nil {
			return malformed(err)
		}
		if _, err := dec.Token(); err != io.EOF {
			return errOneValue
		}
	}
	// encoding/json silently replaces invalid UTF-8 with U+FFFD, so the
	// decoded value cannot tell; the raw body can.
	if !utf8.Valid(body) {
		return domain.Errorf(domain.CodeValidation, "field %s must be valid UTF-8", orBody(invalidUTF8Path(body)))
	}
	// A JSON string can hold NUL only escaped, and what a valid body decodes
	// to is valid UTF-8 (encoding/json replaces lone surrogates), so only a
	// body with the escape needs the walk that names the field.
	if !bytes.Contains(body, []byte(`\u0000`)) {
		return nil
	}
	return checkStrings(reflect.ValueOf(dst), "")
}

// decodeCompiled reads exactly one JSON value with no unknown fields into dst
// as encoding/json would, with segmentio/encoding: it compiles a decoder once
// a type instead of walking dst by reflection on every call, which made
// encoding/json a tenth of orderd's CPU under placements. It reports false
// for any body it refuses.
func decodeCompiled(body []byte, dst any) bool {
	rest, err := fastjson.Parse(body, dst, fastjson.DisallowUnknownFields)
	return err == nil && len(bytes.Trim(rest, " \t\r\n")) == 0
}

func malformed(err error) error {
	if errors.Is(err, io.EOF) {
		return domain.Errorf(domain.CodeMalformedJSON, "the body is empty; a JSON value is expected")
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return domain.Errorf(domain.CodeMalformedJSON, "the body is not valid JSON: it ends too early")
	}
	if syntax, ok := errors.AsType[*json.SyntaxError](err); ok {
		return domain.Errorf(domain.CodeMalformedJSON, "the body is not valid JSON at byte %d", syntax.Offset)
	}
	if typeErr, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		if typeErr.Field == "" {
			return domain.Errorf(domain.CodeMalformedJSON, "the body must be %s, not %s", jsonKind(typeErr.Type), typeErr.Value)
		}
		return domain.Errorf(domain.CodeMalformedJSON, "field %s must be %s, not %s", typeErr.Field, jsonKind(typeErr.Type), typeErr.Value)
	}
	// encoding/json has no typed error for unknown fields, only this text.
	if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return domain.Errorf(domain.CodeMalformedJSON, "unknown field %s", field)
	}
	return domain.Errorf(domain.CodeMalformedJSON, "the body is not the JSON expected")
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// jsonKind names what a Go type accepts in JSON's words, for clients who
// never see our Go types.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		return "a string"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "a " + t.String()
}

// checkStrings walks every string reachable from v; path is the JSON path.
func checkStrings(v reflect.Value, path string) error {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return checkStrings(v.Elem(), path)
		}
	case reflect.String:
		return checkString(v.String(), path)
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || (!f.IsExported() && !f.Anonymous) {
				continue
			}
			fieldPath := path
			// Untagged embedded structs are flattened by encoding/json.
			if !f.Anonymous || name != "" {
				if name == "" {
					name = f.Name
				}
				fieldPath = join(path, name)
			}
			if err := checkStrings(v.Field(i), fieldPath); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if err := checkStrings(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			key := fmt.Sprint(iter.Key())
			if err := checkString(key, path); err != nil {
				return err
			}
			if err := checkStrings(iter.Value(), join(path, key)); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkString(s, path string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return domain.Errorf(domain.CodeValidation, "field %s must not contain NUL bytes", orBody(path))
	}
	if !utf8.ValidString(s) {
		return domain.Errorf(domain.CodeValidation, "field %s must be valid UTF-8", orBody(path))
	}
	return nil
}

// invalidUTF8Path finds the JSON path of the first token whose raw bytes are
// not UTF-8. body must already be known to be one valid JSON value.
func invalidUTF8Path(body []byte) string {
	type frame struct {
		object  bool
		wantKey bool
		key     string
		index   int
		path    string
	}
	var stack []*frame
	here := func() string {
		if len(stack) == 0 {
			return ""
		}
		f := stack[len(stack)-1]
		if f.object {
			return join(f.path, f.key)
		}
		return fmt.Sprintf("%s[%d]", f.path, f.index)
	}
	// valueDone moves the enclosing container past the value just read.
	valueDone := func() {
		if len(stack) == 0 {
			return
		}
		f := stack[len(stack)-1]
		if f.object {
			f.wantKey = true
		} else {
			f.index++
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	start := dec.InputOffset()
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		end := dec.InputOffset()
		raw := body[start:end]
		start = end
		if len(stack) > 0 && stack[len(stack)-1].wantKey {
			f := stack[len(stack)-1]
			if key, ok := tok.(string); ok {
				f.key, f.wantKey = key, false
				if !utf8.Valid(raw) {
					return join(f.path, key)
				}
				continue
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			stack = append(stack, &frame{object: tok == json.Delim('{'), wantKey: tok == json.Delim('{'), path: here()})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		default:
			if !utf8.Valid(raw) {
				return here()
			}
		}
		valueDone()
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func orBody(path string) string {
	if path == "" {
		return "body"
	}
	return path
}

// parseUUID reads an id from a request body or query, where a malformed one
// is the client's validation error.
func parseUUID(field, s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, domain.Errorf(domain.CodeValidation, "%s must be a UUID", field)
	}
	return id, nil
}

// pathUUID reads a path id; a malformed one names nothing that can exist.
func pathUUID(r *http.Request, name string) (uuid.UUID, error) {
	id, err := uuid.Parse(r.PathValue(name))
	if err != nil {
		return uuid.Nil, domain.Errorf(domain.CodeNotFound, "no such resource: %s is not a valid id", name)
	}
	return id, nil
}
