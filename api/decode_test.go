package api

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
)

type decodeLine struct {
	Label    string `json:"label"`
	Quantity int    `json:"quantity"`
}

type decodeBody struct {
	Name  string            `json:"name"`
	Count int               `json:"count"`
	Items []decodeLine      `json:"items"`
	Note  *string           `json:"note"`
	Tags  map[string]string `json:"tags"`
	ID    uuid.UUID         `json:"id"`
}

func decodeRequest(body, contentType string) (decodeBody, error) {
	r := httptest.NewRequest("POST", "/", strings.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	var dst decodeBody
	err := decodeJSON(httptest.NewRecorder(), r, &dst)
	return dst, err
}

func TestDecodeJSONAccepts(t *testing.T) {
	t.Parallel()
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON"} {
		got, err := decodeRequest(`{"name":"tea ☕","count":2,"items":[{"label":"a","quantity":1}],"note":"n","tags":{"k":"v"}}`+"\n", ct)
		require.NoError(t, err, ct)
		require.Equal(t, "tea ☕", got.Name)
		require.Equal(t, 2, got.Count)
		require.Equal(t, []decodeLine{{Label: "a", Quantity: 1}}, got.Items)
	}
}

// Strings are walked for NUL only when the body escapes one; these bodies
// hold none, or text that merely looks like the escape.
func TestDecodeJSONAcceptsWhatOnlyLooksLikeNUL(t *testing.T) {
	t.Parallel()
	got, err := decodeRequest(`{"name":"a\\u0000b","note":"\ud800"}`, "application/json")
	require.NoError(t, err)
	require.Equal(t, `a\u0000b`, got.Name, "an escaped backslash, then text")
	require.Equal(t, "\uFFFD", *got.Note, "a lone surrogate decodes to the replacement character")
	require.True(t, utf8.ValidString(*got.Note))
}

func TestDecodeJSONRejects(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		body, contentType string
		code              domain.Code
		detail            string
	}{
		"text/plain":         {body: `{}`, contentType: "text/plain", code: domain.CodeUnsupportedMedia},
		"no content type":    {body: `{}`, code: domain.CodeUnsupportedMedia},
		"json lookalike":     {body: `{}`, contentType: "application/jsonx", code: domain.CodeUnsupportedMedia},
		"2 MiB":              {body: `{"name":"` + strings.Repeat("a", 2<<20) + `"}`, code: domain.CodePayloadTooLarge},
		"two values":         {body: `{"name":"a"}{}`, code: domain.CodeMalformedJSON, detail: "exactly one"},
		"unknown then value": {body: `{"a":1}{}`, code: domain.CodeMalformedJSON},
		"trailing garbage":   {body: `{"name":"a"} x`, code: domain.CodeMalformedJSON},
		"trailing bracket":   {body: `{"name":"a"}]`, code: domain.CodeMalformedJSON},
		"unknown field":      {body: `{"name":"a","admin":true}`, code: domain.CodeMalformedJSON, detail: `unknown field "admin"`},
		"empty":              {body: ``, code: domain.CodeMalformedJSON, detail: "empty"},
		"blank":              {body: " \n", code: domain.CodeMalformedJSON, detail: "empty"},
		"syntax":             {body: `{"name":}`, code: domain.CodeMalformedJSON, detail: "not valid JSON"},
		"truncated":          {body: `{"name":"a"`, code: domain.CodeMalformedJSON, detail: "not valid JSON"},
		"array for object":   {body: `[1]`, code: domain.CodeMalformedJSON, detail: "the body must be an object"},
		"float for int":      {body: `{"count":1.5}`, code: domain.CodeMalformedJSON, detail: "field count must be an integer"},
		"string for int":     {body: `{"count":"5"}`, code: domain.CodeMalformedJSON, detail: "field count must be an integer"},
		"huge int":           {body: `{"count":1e20}`, code: domain.CodeMalformedJSON, detail: "field count must be an integer"},
		"nested type":        {body: `{"items":[{"quantity":"x"}]}`, code: domain.CodeMalformedJSON, detail: "items.quantity"},
		"number for string":  {body: `{"name":5}`, code: domain.CodeMalformedJSON, detail: "field name must be a string"},
		"number for uuid":    {body: `{"id":5}`, code: domain.CodeMalformedJSON, detail: "field id must be a string"},
		"NUL":                {body: `{"name":"a\u0000b"}`, code: domain.CodeValidation, detail: "field name must not contain NUL"},
		"nested NUL":         {body: `{"items":[{"label":"ok"},{"label":"\u0000"}]}`, code: domain.CodeValidation, detail: "items[1].label"},
		"NUL behind pointer": {body: `{"note":"\u0000"}`, code: domain.CodeValidation, detail: "field note"},
		"NUL in map value":   {body: `{"tags":{"k":"\u0000"}}`, code: domain.CodeValidation, detail: "tags.k"},
		"NUL in map key":     {body: `{"tags":{"\u0000":"v"}}`, code: domain.CodeValidation, detail: "field tags must not"},
		"invalid UTF-8":      {body: "{\"name\":\"a\xffb\"}", code: domain.CodeValidation, detail: "field name must be valid UTF-8"},
		"nested invalid UTF-8": {body: "{\"name\":\"ok\",\"items\":[{\"label\":\"x\"},{\"quantity\":1,\"label\":\"\xc3\"}]}",
			code: domain.CodeValidation, detail: "field items[1].label must be valid UTF-8"},
		"invalid UTF-8 in map": {body: "{\"tags\":{\"k\":\"\xfe\"}}", code: domain.CodeValidation, detail: "field tags.k must"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if tt.contentType == "" && !strings.HasPrefix(name, "no content") {
				tt.contentType = "application/json"
			}
			_, err := decodeRequest(tt.body, tt.contentType)
			require.Error(t, err)
			de, ok := err.(*domain.Error)
			require.True(t, ok, "%T is not a *domain.Error", err)
			require.Equal(t, tt.code, de.Code, de.Message)
			require.Contains(t, de.Message, tt.detail)
		})
	}
}

func TestDecodeJSONOverHTTP(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var dst decodeBody
		if err := decodeJSON(w, r, &dst); err != nil {
			writeProblem(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, dst)
	})
	tests := map[string]struct {
		body        []byte
		contentType string
		status      int
	}{
		"ok":         {body: []byte(`{"name":"a"}`), contentType: "application/json", status: 200},
		"2 MiB":      {body: bytes.Repeat([]byte(" "), 2<<20), contentType: "application/json", status: 413},
		"text/plain": {body: []byte(`{}`), contentType: "text/plain", status: 415},
		"two values": {body: []byte(`{"a":1}{}`), contentType: "application/json", status: 400},
		"NUL":        {body: []byte(`{"name":"\u0000"}`), contentType: "application/json", status: 422},
		"bad UTF-8":  {body: []byte("{\"name\":\"\xff\"}"), contentType: "application/json", status: 422},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("POST", "/", bytes.NewReader(tt.body))
			r.Header.Set("Content-Type", tt.contentType)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			require.Equal(t, tt.status, rec.Code, rec.Body.String())
		})
	}
}

func TestParseUUID(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	got, err := parseUUID("merchant_id", id.String())
	require.NoError(t, err)
	require.Equal(t, id, got)

	_, err = parseUUID("merchant_id", "shop-1")
	require.Equal(t, domain.CodeValidation, domain.ErrorCode(err))
	require.Equal(t, "merchant_id must be a UUID", domain.ErrorMessage(err))
}

func TestPathUUID(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	r := httptest.NewRequest("GET", "/", nil)
	r.SetPathValue("id", id.String())
	got, err := pathUUID(r, "id")
	require.NoError(t, err)
	require.Equal(t, id, got)

	r.SetPathValue("id", "42")
	_, err = pathUUID(r, "id")
	require.Equal(t, domain.CodeNotFound, domain.ErrorCode(err))
}
