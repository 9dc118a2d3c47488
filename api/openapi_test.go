package api

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOpenAPIListsEveryProblemCode holds the document's problem codes to
// the one table that answers them, both ways.
func TestOpenAPIListsEveryProblemCode(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas struct {
				Problem struct {
					Properties struct {
						Code struct {
							Enum []string `json:"enum"`
						} `json:"code"`
					} `json:"properties"`
				} `json:"Problem"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(OpenAPI(), &doc))
	var codes []string
	for code := range problems {
		codes = append(codes, string(code))
	}
	documented := doc.Components.Schemas.Problem.Properties.Code.Enum
	slices.Sort(codes)
	slices.Sort(documented)
	require.Equal(t, codes, documented, "components.schemas.Problem.properties.code.enum in api/openapi.json")
}
