package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// TestDockerComposeIsSafeByDefault: PostgreSQL is not published, every
// service says when it is healthy, orderd refuses to start without a JWT
// secret, and the build context leaves out history and dev secrets.
func TestDockerComposeIsSafeByDefault(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../docker-compose.yml")
	require.NoError(t, err)
	var compose struct {
		Services map[string]struct {
			Ports       []string          `yaml:"ports"`
			Environment map[string]string `yaml:"environment"`
			Healthcheck struct {
				Test []string `yaml:"test"`
			} `yaml:"healthcheck"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &compose))
	require.Contains(t, compose.Services, "postgres")
	require.Contains(t, compose.Services, "orderd")
	for name, svc := range compose.Services {
		require.NotEmpty(t, svc.Healthcheck.Test, "%s has a healthcheck", name)
		for _, p := range svc.Ports {
			require.NotContains(t, p, "5432", "%s publishes PostgreSQL", name)
		}
	}
	require.Empty(t, compose.Services["postgres"].Ports)
	secret := compose.Services["orderd"].Environment["ORDERD_JWT_SECRET"]
	require.True(t, strings.HasPrefix(secret, "${ORDERD_JWT_SECRET:?"), "compose must refuse to start without a secret: %q", secret)

	ignore, err := os.ReadFile("../../.dockerignore")
	require.NoError(t, err)
	lines := strings.Split(string(ignore), "\n")
	require.Contains(t, lines, ".git")
	require.Contains(t, lines, ".orderd")
}
