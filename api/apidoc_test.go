package api

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var updateDocs = flag.Bool("update", false, "rewrite the generated documentation instead of comparing it")

// TestAPIReferenceIsCurrent holds docs/api-reference.md to the OpenAPI
// document: the reference is generated from it, never edited by hand.
func TestAPIReferenceIsCurrent(t *testing.T) {
	want, err := apiReference(OpenAPI())
	require.NoError(t, err)
	path := filepath.Join("..", "docs", "api-reference.md")
	if *updateDocs {
		require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, want, string(got), "docs/api-reference.md is stale: go test ./api -run TestAPIReferenceIsCurrent -update")
}

type oaDoc struct {
	Info struct {
		Title, Version, Description string
	}
	Tags       []struct{ Name string }
	Paths      map[string]map[string]json.RawMessage
	Components struct {
		Schemas   map[string]oaSchema
		Responses map[string]oaResponse
	}
}

type oaOperation struct {
	OperationID string `json:"operationId"`
	Summary     string
	Description string
	Tags        []string
	Security    *[]map[string][]string
	Parameters  []oaParameter
	RequestBody *struct {
		Required bool
		Content  map[string]struct{ Schema oaSchema }
	} `json:"requestBody"`
	Responses map[string]oaResponse
}

type oaParameter struct {
	Ref         string `json:"$ref"`
	Name, In    string
	Required    bool
	Description string
	Schema      oaSchema
}

type oaResponse struct {
	Ref         string `json:"$ref"`
	Description string
	Content     map[string]struct{ Schema oaSchema }
}

type oaSchema struct {
	Ref         string `json:"$ref"`
	Type        any
	Format      string
	Description string
	Enum        []any
	Items       *oaSchema
	Properties  map[string]oaSchema
	Required    []string
	AllOf       []oaSchema `json:"allOf"`
	OneOf       []oaSchema `json:"oneOf"`
	AnyOf       []oaSchema `json:"anyOf"`
	Minimum     *float64
	Maximum     *float64
}

var httpMethods = []string{"get", "post", "put", "patch", "delete"}

// apiReference renders the OpenAPI document as Markdown: operations by tag,
// then the schemas, then every problem code with its status.
func apiReference(doc []byte) (string, error) {
	var d oaDoc
	if err := json.Unmarshal(doc, &d); err != nil {
		return "", err
	}
	type op struct {
		method, path string
		o            oaOperation
		pathParams   []oaParameter
	}
	byTag := map[string][]op{}
	paths := make([]string, 0, len(d.Paths))
	for p := range d.Paths {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		item := d.Paths[p]
		var shared []oaParameter
		if raw, ok := item["parameters"]; ok {
			if err := json.Unmarshal(raw, &shared); err != nil {
				return "", fmt.Errorf("%s parameters: %w", p, err)
			}
		}
		for _, m := range httpMethods {
			raw, ok := item[m]
			if !ok {
				continue
			}
			var o oaOperation
			if err := json.Unmarshal(raw, &o); err != nil {
				return "", fmt.Errorf("%s %s: %w", m, p, err)
			}
			tag := "other"
			if len(o.Tags) > 0 {
				tag = o.Tags[0]
			}
			byTag[tag] = append(byTag[tag], op{strings.ToUpper(m), p, o, shared})
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# HTTP API reference\n\n<!-- Generated from api/openapi.json by `go test ./api -run TestAPIReferenceIsCurrent -update`; do not edit. -->\n\n")
	fmt.Fprintf(&b, "%s %s. %s\n\n", d.Info.Title, d.Info.Version, d.Info.Description)
	b.WriteString("The same document is served at `GET /openapi.json`. [The HTTP API](http-api.md) explains authentication, idempotency, errors and lists in prose.\n\n")
	b.WriteString("## Operations\n\n")
	var tags []string
	for _, tg := range d.Tags {
		if len(byTag[tg.Name]) > 0 {
			tags = append(tags, tg.Name)
		}
	}
	for tg := range byTag {
		if !slices.Contains(tags, tg) {
			tags = append(tags, tg)
		}
	}
	for _, tg := range tags {
		fmt.Fprintf(&b, "- **%s**:", tg)
		for i, o := range byTag[tg] {
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(&b, "%s [`%s %s`](#%s)", sep, o.method, o.path, strings.ToLower(o.o.OperationID))
		}
		b.WriteString("\n")
	}
	for _, tg := range tags {
		fmt.Fprintf(&b, "\n## %s\n", tg)
		for _, o := range byTag[tg] {
			fmt.Fprintf(&b, "\n### %s\n\n`%s %s`", o.o.OperationID, o.method, o.path)
			if o.o.Summary != "" {
				fmt.Fprintf(&b, ": %s.", strings.TrimSuffix(o.o.Summary, "."))
			}
			b.WriteString("\n\n")
			if o.o.Security != nil && len(*o.o.Security) == 0 {
				b.WriteString("No token.\n\n")
			}
			if o.o.Description != "" {
				b.WriteString(o.o.Description + "\n\n")
			}
			params := append(append([]oaParameter(nil), o.pathParams...), o.o.Parameters...)
			if len(params) > 0 {
				b.WriteString("| parameter | in | type | required | description |\n|---|---|---|---|---|\n")
				for _, p := range params {
					fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", p.Name, p.In, schemaType(p.Schema), yes(p.Required), cell(p.Description))
				}
				b.WriteString("\n")
			}
			if rb := o.o.RequestBody; rb != nil {
				for ct, c := range rb.Content {
					fmt.Fprintf(&b, "Body (`%s`): %s.\n\n", ct, schemaType(c.Schema))
				}
			}
			b.WriteString("| status | answer |\n|---|---|\n")
			statuses := make([]string, 0, len(o.o.Responses))
			for s := range o.o.Responses {
				statuses = append(statuses, s)
			}
			sort.Strings(statuses)
			for _, s := range statuses {
				r := o.o.Responses[s]
				if r.Ref != "" {
					name := refName(r.Ref)
					r = d.Components.Responses[name]
				}
				fmt.Fprintf(&b, "| %s | %s |\n", s, cell(responseText(r)))
			}
		}
	}
	b.WriteString("\n## Schemas\n")
	names := make([]string, 0, len(d.Components.Schemas))
	for n := range d.Components.Schemas {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := d.Components.Schemas[n]
		fmt.Fprintf(&b, "\n### %s (schema)\n\n", n)
		if s.Description != "" {
			b.WriteString(s.Description + "\n\n")
		}
		if len(s.Properties) == 0 {
			fmt.Fprintf(&b, "%s\n", schemaType(s))
			continue
		}
		b.WriteString("| field | type | required | description |\n|---|---|---|---|\n")
		props := make([]string, 0, len(s.Properties))
		for p := range s.Properties {
			props = append(props, p)
		}
		sort.Strings(props)
		for _, p := range props {
			ps := s.Properties[p]
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", p, cell(schemaType(ps)), yes(slices.Contains(s.Required, p)), cell(ps.Description))
		}
	}
	b.WriteString("\n## Problem codes\n\nEvery error is `application/problem+json` with `type`, `title`, `status`, `detail` and a stable `code`:\n\n| status | codes | when |\n|---|---|---|\n")
	type resp struct {
		status string
		r      oaResponse
	}
	var rs []resp
	for name, r := range d.Components.Responses {
		rs = append(rs, resp{sharedResponseStatus(d, name), r})
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].status < rs[j].status })
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", r.status, strings.Join(problemCodes(r.r), ", "), cell(r.r.Description))
	}
	return b.String(), nil
}

// sharedResponseStatus is the status under which operations refer to a shared response.
func sharedResponseStatus(d oaDoc, name string) string {
	for _, item := range d.Paths {
		for _, m := range httpMethods {
			var o oaOperation
			if raw, ok := item[m]; !ok || json.Unmarshal(raw, &o) != nil {
				continue
			}
			for s, r := range o.Responses {
				if refName(r.Ref) == name {
					return s
				}
			}
		}
	}
	for code := 400; code < 600; code++ {
		if strings.ReplaceAll(http.StatusText(code), " ", "") == name {
			return fmt.Sprint(code)
		}
	}
	return "—"
}

func responseText(r oaResponse) string {
	text := strings.TrimSpace(r.Description)
	for ct, c := range r.Content {
		if ct == "application/problem+json" {
			if codes := problemCodes(r); len(codes) > 0 {
				text += " Codes: " + strings.Join(codes, ", ") + "."
			}
			continue
		}
		text += " " + schemaType(c.Schema) + "."
	}
	return text
}

func problemCodes(r oaResponse) []string {
	var codes []string
	for _, c := range r.Content {
		for _, part := range c.Schema.AllOf {
			if code, ok := part.Properties["code"]; ok {
				for _, e := range code.Enum {
					codes = append(codes, fmt.Sprintf("`%v`", e))
				}
			}
		}
	}
	return codes
}

func schemaType(s oaSchema) string {
	switch {
	case s.Ref != "":
		n := refName(s.Ref)
		return fmt.Sprintf("[%s](#%s-schema)", n, strings.ToLower(n))
	case len(s.AllOf) == 1:
		return schemaType(s.AllOf[0])
	case len(s.OneOf) > 0 || len(s.AnyOf) > 0:
		var alts []string
		for _, a := range append(s.OneOf, s.AnyOf...) {
			alts = append(alts, schemaType(a))
		}
		return strings.Join(alts, " or ")
	}
	t := fmt.Sprint(s.Type)
	if ts, ok := s.Type.([]any); ok {
		var parts []string
		for _, x := range ts {
			parts = append(parts, fmt.Sprint(x))
		}
		t = strings.Join(parts, " or ")
	}
	if s.Type == nil {
		t = "any"
	}
	if s.Items != nil {
		t = "array of " + schemaType(*s.Items)
	}
	if s.Format != "" {
		t += " (" + s.Format + ")"
	}
	if len(s.Enum) > 0 {
		var es []string
		for _, e := range s.Enum {
			es = append(es, fmt.Sprintf("`%v`", e))
		}
		t += ": " + strings.Join(es, ", ")
	}
	if s.Minimum != nil || s.Maximum != nil {
		lo, hi := "", ""
		if s.Minimum != nil {
			lo = fmt.Sprint(*s.Minimum)
		}
		if s.Maximum != nil {
			hi = fmt.Sprint(*s.Maximum)
		}
		t += fmt.Sprintf(", %s–%s", lo, hi)
	}
	return t
}

func refName(ref string) string { return ref[strings.LastIndex(ref, "/")+1:] }

func yes(b bool) string {
	if b {
		return "yes"
	}
	return ""
}

func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(strings.TrimSpace(s), "|", `\|`), "\n", " ")
}
