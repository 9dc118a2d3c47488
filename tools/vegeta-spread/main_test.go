package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/auth"
)

// TestTokensPassTheServersClaimChecks: the tool's tokens are accepted by an
// orderd that requires an issuer and an audience when it is given the same,
// and refused when it is not, as a token of another service would be.
func TestTokensPassTheServersClaimChecks(t *testing.T) {
	t.Parallel()
	secret := []byte("a-secret-of-at-least-thirty-two-bytes")
	server := auth.NewWith(auth.Options{Secret: secret, Issuer: "orderd-test", Audience: "orderd-api"})

	tok, err := signer(secret, "orderd-test", "orderd-api", time.Now)("vegeta-c1", "customer")
	require.NoError(t, err)
	p, err := server.Parse(tok)
	require.NoError(t, err)
	require.Equal(t, "vegeta-c1", p.Subject)
	require.Equal(t, auth.RoleCustomer, p.Role)

	for name, sign := range map[string]func(sub, role string) (string, error){
		"no claims":      signer(secret, "", "", time.Now),
		"other issuer":   signer(secret, "someone-else", "orderd-api", time.Now),
		"other audience": signer(secret, "orderd-test", "another-api", time.Now),
	} {
		tok, err := sign("vegeta-admin", "admin")
		require.NoError(t, err)
		_, err = server.Parse(tok)
		require.Error(t, err, name)
	}
	// A server that requires neither takes the plain tokens.
	tok, err = signer(secret, "", "", time.Now)("vegeta-admin", "admin")
	require.NoError(t, err)
	_, err = auth.New(secret, nil).Parse(tok)
	require.NoError(t, err)
}
