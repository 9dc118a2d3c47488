// Package openapitest holds the API's answers to its OpenAPI document: an
// http.RoundTripper for tests that fails the test on any answer the
// document does not describe.
package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/orderd/orderd/api"
)

var load = sync.OnceValues(func() (*Spec, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI())
	if err != nil {
		return nil, fmt.Errorf("load api/openapi.json: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("api/openapi.json is not a valid OpenAPI document: %w", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route api/openapi.json: %w", err)
	}
	return &Spec{Doc: doc, router: router}, nil
})

// Spec is the parsed, validated document.
type Spec struct {
	Doc    *openapi3.T
	router routers.Router
}

// Load parses and validates api/openapi.json once per process.
func Load(t testing.TB) *Spec {
	t.Helper()
	s, err := load()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Check validates one answer to req: its status must be documented for the
// operation, and its headers and body must match the document. An unknown
// path may only be answered 404 not_found, and a known path asked with a
// method it does not serve only 405 method_not_allowed with an Allow header.
func (s *Spec) Check(req *http.Request, status int, header http.Header, body []byte) error {
	if status == http.StatusSwitchingProtocols {
		return nil
	}
	route, params, err := s.router.FindRoute(req)
	switch {
	case errors.Is(err, routers.ErrPathNotFound):
		return s.checkProblem(status, header, body, http.StatusNotFound, "NotFound")
	case errors.Is(err, routers.ErrMethodNotAllowed):
		if header.Get("Allow") == "" {
			return errors.New("405 without an Allow header")
		}
		return s.checkProblem(status, header, body, http.StatusMethodNotAllowed, "MethodNotAllowed")
	case err != nil:
		return fmt.Errorf("find route: %w", err)
	}
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	input.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), input); err != nil {
		return fmt.Errorf("%s %s answered %d: %w", req.Method, route.Path, status, err)
	}
	return nil
}

func (s *Spec) checkProblem(status int, header http.Header, body []byte, want int, response string) error {
	if status != want {
		return fmt.Errorf("an undocumented route answered %d, not %d", status, want)
	}
	if ct := header.Get("Content-Type"); ct != "application/problem+json" {
		return fmt.Errorf("%d answered as %q, not application/problem+json", status, ct)
	}
	resp := s.Doc.Components.Responses[response]
	if resp == nil || resp.Value == nil {
		return fmt.Errorf("components.responses.%s is missing", response)
	}
	schema := resp.Value.Content.Get("application/problem+json").Schema.Value
	var value any
	if err := json.Unmarshal(body, &value); err != nil {
		return fmt.Errorf("the problem is not JSON: %w", err)
	}
	if err := schema.VisitJSON(value, openapi3.EnableJSONSchema2020()); err != nil {
		return fmt.Errorf("%d problem does not match components.responses.%s: %w", status, response, err)
	}
	return nil
}

// Transport validates every answer that passes through it. A failure marks
// t failed; the answer still reaches the caller, so the test's own
// assertions say what else went wrong.
type Transport struct {
	T    testing.TB
	Spec *Spec
	// Next sends the requests; http.DefaultTransport when nil.
	Next http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (tr *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	next := tr.Next
	if next == nil {
		next = http.DefaultTransport
	}
	resp, err := next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err := tr.Spec.Check(req, resp.StatusCode, resp.Header, body); err != nil {
		tr.T.Errorf("answer does not match api/openapi.json: %v\nbody: %.2000s", err, body)
	}
	return resp, nil
}

// Client is an HTTP client whose every answer is checked against the
// document.
func Client(t testing.TB) *http.Client {
	return &http.Client{Transport: &Transport{T: t, Spec: Load(t)}}
}
