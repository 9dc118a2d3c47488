package api

import (
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

	"github.com/orderd/orderd/domain"
)

const maxBodyBytes = 1 << 20

// decodeJSON reads exactly one JSON value of dst's shape from the body:
// application/json only, at most 1 MiB, no unknown fields, nothing after the
// value, and no NUL bytes or invalid UTF-8 in any string.
func decodeJSON(w http.ResponseWriter, r *http.Request, dst any) error {
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != "application/json" {
		return domain.Errorf(domain.CodeUnsupportedMedia, "Content-Type must be application/json")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return domain.Errorf(domain.CodePayloadTooLarge, "the body must be at most %d bytes", maxBodyBytes)
		}
		return domain.Errorf(domain.CodeMalformedJSON, "the body could not be read")
	}
	// encoding/json replaces invalid UTF-8 silently; refuse it instead.
	if !utf8.Valid(body) {
		return domain.Errorf(domain.CodeValidation, "the body must be valid UTF-8")
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return malformed(err)
	}
	if dec.More() {
		return domain.Errorf(domain.CodeMalformedJSON, "the body must hold exactly one JSON value")
	}
	if _, err := dec.Token(); err != io.EOF {
		return domain.Errorf(domain.CodeMalformedJSON, "the body must hold exactly one JSON value")
	}
	return checkStrings(reflect.ValueOf(dst), "")
}

func malformed(err error) error {
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return domain.Errorf(domain.CodeMalformedJSON, "the body is empty; a JSON object is expected")
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
		return domain.Errorf(domain.CodeMalformedJSON, "the body is not valid JSON")
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return domain.Errorf(domain.CodeMalformedJSON, "the body must be a JSON object")
		}
		want := typeErr.Type.String()
		if strings.HasPrefix(want, "int") || strings.Contains(want, "int") {
			want = "an integer"
		}
		return domain.Errorf(domain.CodeMalformedJSON, "field %s must be %s, not %s", field, want, typeErr.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return domain.Errorf(domain.CodeMalformedJSON, "%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return domain.Errorf(domain.CodeMalformedJSON, "the body is not the JSON expected")
}

// checkStrings walks every string reachable from v.
func checkStrings(v reflect.Value, path string) error {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return checkStrings(v.Elem(), path)
		}
	case reflect.String:
		s := v.String()
		if strings.ContainsRune(s, 0) {
			return domain.Errorf(domain.CodeValidation, "field %s must not contain NUL bytes", orBody(path))
		}
		if !utf8.ValidString(s) {
			return domain.Errorf(domain.CodeValidation, "field %s must be valid UTF-8", orBody(path))
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				if err := checkStrings(v.Field(i), path); err != nil {
					return err
				}
				continue
			}
			name := strings.Split(f.Tag.Get("json"), ",")[0]
			if name == "" {
				name = f.Name
			}
			if err := checkStrings(v.Field(i), join(path, name)); err != nil {
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
			if err := checkStrings(iter.Value(), join(path, fmt.Sprint(iter.Key()))); err != nil {
				return err
			}
		}
	}
	return nil
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

// pathUUID reads a path id; a malformed one names nothing that can exist.
func pathUUID(r *http.Request, name string) (uuid.UUID, error) {
	id, err := uuid.Parse(r.PathValue(name))
	if err != nil {
		return uuid.Nil, domain.Errorf(domain.CodeNotFound, "no such resource: %s is not a valid id", name)
	}
	return id, nil
}
