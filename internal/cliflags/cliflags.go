// Package cliflags holds the flags that orderd and orderd-bench both take:
// secrets whose values never appear in --help, and the claims every token
// must carry.
package cliflags

import (
	"cmp"
	"flag"
	"os"
)

// SecretValue is a flag whose value never appears in --help: the flag
// package prints a flag's default, and ours come from the environment.
type SecretValue struct{ P *string }

func (v SecretValue) String() string {
	return "" // what the flag package prints as the default
}

func (v SecretValue) Set(s string) error {
	*v.P = s
	return nil
}

// Secret binds a secret to a flag, its default taken from env but never
// shown.
func Secret(fs *flag.FlagSet, p *string, name, env, usage string) {
	*p = cmp.Or(os.Getenv(env), *p)
	fs.Var(SecretValue{p}, name, usage+" ("+env+"; never shown)")
}

// JWTClaims binds the issuer and audience every token must carry.
func JWTClaims(fs *flag.FlagSet, issuer, audience *string) {
	fs.StringVar(issuer, "jwt-issuer", cmp.Or(os.Getenv("ORDERD_JWT_ISSUER"), *issuer), "when set, the iss every token must carry (ORDERD_JWT_ISSUER)")
	fs.StringVar(audience, "jwt-audience", cmp.Or(os.Getenv("ORDERD_JWT_AUDIENCE"), *audience), "when set, an aud every token must carry (ORDERD_JWT_AUDIENCE)")
}
