package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestServeRefusesAnOpenOperatorListener: an operator address off loopback
// without ORDERD_OPS_PASSWORD stops `orderd serve` before it touches the
// database, with one line saying what to do.
func TestServeRefusesAnOpenOperatorListener(t *testing.T) {
	t.Setenv("ORDERD_OPS_PASSWORD", "")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"serve", "--database-url", "postgres://nobody@127.0.0.1:1/none",
		"--jwt-secret", "a-secret-of-at-least-thirty-two-bytes", "--ops-addr", "0.0.0.0:9090"}, &stdout, &stderr)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "\n")
	require.True(t, strings.HasPrefix(err.Error(), "ORDERD_OPS_ADDR"), err.Error())
	require.Contains(t, err.Error(), "ORDERD_OPS_PASSWORD")
}
