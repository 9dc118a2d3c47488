package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/store/storetest"
)

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// TestSecretsAppearNowhere runs the binary with known secrets (the JWT
// secret, the database password, the operator listener's password, a
// merchant's webhook secret, a drop's seed before its start), exercises it
// with successes and failures, a database that disappears included, and
// greps every --help text, every log line, every answer and every /readyz
// answer for them. It also holds serve to its secret rules: a short secret
// is refused in one line, and with ORDERD_JWT_ISSUER and ORDERD_JWT_AUDIENCE
// set, only tokens carrying both (as `orderd token` makes them) get in.
func TestSecretsAppearNowhere(t *testing.T) {
	t.Parallel()
	bin, err := buildOnce()
	require.NoError(t, err)
	jwtSecret := "jwt-" + randomHex(t, 24)
	dbPassword := "dbpw-" + randomHex(t, 12)
	dbURL, err := url.Parse(storetest.URL(t))
	require.NoError(t, err)
	dbName := strings.TrimPrefix(dbURL.Path, "/")
	// The test server trusts local connections, so the password is carried
	// everywhere a real one would be and checked nowhere.
	dbURL.User = url.UserPassword(dbURL.User.Username(), dbPassword)
	opsPassword := "ops-" + randomHex(t, 12)
	env := append(os.Environ(), "DATABASE_URL="+dbURL.String(), "ORDERD_JWT_SECRET="+jwtSecret,
		"ORDERD_OPS_ADDR=127.0.0.1:0", "ORDERD_OPS_USER=operator", "ORDERD_OPS_PASSWORD="+opsPassword,
		"ORDERD_JWT_ISSUER=orderd-secrets-test", "ORDERD_JWT_AUDIENCE=orderd-api", "ORDERD_ADDR=127.0.0.1:0",
		"ORDERD_WEBHOOK_ALLOW_LOOPBACK=true", "ORDERD_WEBHOOK_BACKOFF=50ms", "ORDERD_MAX_CONNS=10")
	secrets := map[string]string{"JWT secret": jwtSecret, "database password": dbPassword, "operator password": opsPassword}
	requireNoSecret := func(where, text string) {
		t.Helper()
		for name, s := range secrets {
			require.NotContains(t, text, s, "the %s appears in %s", name, where)
		}
	}
	run := func(env []string, args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	// Every subcommand's help exits 0 and shows no secret.
	for _, sub := range subcommands {
		for _, flag := range []string{"--help", "-h"} {
			out, err := run(env, sub, flag)
			require.NoError(t, err, "orderd %s %s: %s", sub, flag, out)
			require.Contains(t, strings.ToLower(out), "usage", "orderd %s %s", sub, flag)
			requireNoSecret("orderd "+sub+" "+flag, out)
		}
	}
	out, err := run(env, "--help")
	require.NoError(t, err)
	requireNoSecret("orderd --help", out)

	// A short secret: one line, no start, and the secret not repeated.
	short := "short-" + randomHex(t, 8)
	out, err = run(append(env, "ORDERD_JWT_SECRET="+short), "serve")
	require.Error(t, err)
	require.Equal(t, "orderd: ORDERD_JWT_SECRET is 22 bytes; at least 32 are required (make one with: openssl rand -hex 32)\n", out)
	require.NotContains(t, out, short)

	// orderd token makes tokens that carry the configured issuer and audience.
	adminTok, err := run(env, "token", "--role", "admin", "--sub", "root")
	require.NoError(t, err, adminTok)
	adminTok = strings.TrimSpace(adminTok)

	var hooks atomic.Int32
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if hooks.Add(1) == 1 {
			w.WriteHeader(500) // one failed attempt, logged
			return
		}
		w.WriteHeader(204)
	}))
	t.Cleanup(receiver.Close)

	logs := &lockedBuffer{}
	cmd := exec.Command(bin, "serve")
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	addr, _, err := awaitServing(logs, 0, exited, 30*time.Second)
	require.NoError(t, err, logs.String())
	base := "http://" + addr
	require.NoError(t, waitReady(base, 30*time.Second), logs.String())

	var answers strings.Builder
	call := func(method, path, token string, body any) (int, map[string]any) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, err := json.Marshal(body)
			require.NoError(t, err)
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequest(method, base+path, rd)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", uuid.NewString())
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		for k, v := range resp.Header {
			answers.WriteString(k + ": " + strings.Join(v, ",") + "\n")
		}
		answers.Write(raw)
		answers.WriteString("\n")
		return resp.StatusCode, m
	}

	status, merchant := call("POST", "/v1/merchants", adminTok, map[string]any{"name": "Secretive", "capacity": 5, "webhook_url": receiver.URL})
	require.Equal(t, 201, status, "%v", merchant)
	secrets["webhook secret"] = merchant["webhook_secret"].(string)
	answers.Reset() // the one answer that must show it
	merchantID := merchant["id"].(string)
	status, product := call("POST", "/v1/merchants/"+merchantID+"/products", adminTok, map[string]any{"name": "Tea", "price_cents": 100})
	require.Equal(t, 201, status, "%v", product)

	// A drop that starts after the test: its seed is secret all along.
	status, limited := call("POST", "/v1/merchants/"+merchantID+"/products", adminTok, map[string]any{"name": "Cup", "price_cents": 100, "stock": 5})
	require.Equal(t, 201, status, "%v", limited)
	status, drop := call("POST", "/v1/products/"+limited["id"].(string)+"/drops", adminTok, map[string]any{
		"opens_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "starts_at": time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339), "mode": "lottery"})
	require.Equal(t, 201, status, "%v", drop)
	conn, err := pgx.Connect(context.Background(), dbURL.String())
	require.NoError(t, err)
	var seed []byte
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT seed FROM drop_seeds WHERE drop_id = $1`, drop["id"]).Scan(&seed))
	require.NoError(t, conn.Close(context.Background()))
	secrets["drop seed"] = hex.EncodeToString(seed)
	for _, path := range []string{"", "/draw"} {
		status, _ := call("GET", "/v1/drops/"+drop["id"].(string)+path, adminTok, nil)
		require.Equal(t, 200, status)
	}

	customer := func(a *auth.Authenticator) string {
		tok, err := a.Issue(auth.Principal{Subject: "alice", Role: auth.RoleCustomer}, time.Hour)
		require.NoError(t, err)
		return tok
	}
	alice := customer(auth.NewWith(auth.Options{Secret: []byte(jwtSecret), Issuer: "orderd-secrets-test", Audience: "orderd-api"}))
	status, order := call("POST", "/v1/orders", alice, map[string]any{"merchant_id": merchantID,
		"items": []map[string]any{{"product_id": product["id"], "quantity": 1}}, "payment_ref": "pay-1"})
	require.Equal(t, 201, status, "%v", order)
	require.Eventually(t, func() bool { return hooks.Load() >= 2 }, 20*time.Second, 50*time.Millisecond, "the webhook, retried once")

	// Failures of every kind.
	for _, c := range []struct {
		method, path, token string
		body                any
		want                int
	}{
		{"GET", "/v1/orders/" + order["id"].(string), customer(auth.New([]byte(jwtSecret), nil)), nil, 401}, // no issuer or audience
		{"GET", "/v1/orders/" + order["id"].(string), customer(auth.NewWith(auth.Options{Secret: []byte(jwtSecret), Issuer: "orderd-secrets-test", Audience: "billing"})), nil, 401},
		{"GET", "/v1/orders/" + order["id"].(string), customer(auth.New([]byte(jwtSecret+"x"), nil)), nil, 401}, // forged
		{"GET", "/v1/merchants/" + merchantID + "?access_token=" + adminTok, "", nil, 401},
		{"POST", "/v1/merchants", alice, map[string]any{"name": "x", "capacity": 1}, 403},
		{"GET", "/v1/orders/" + uuid.NewString(), alice, nil, 404},
		{"POST", "/v1/orders", alice, map[string]any{"merchant_id": "nope"}, 422},
		{"POST", "/v1/merchants/" + merchantID + "/webhook-secret", alice, nil, 403},
		{"POST", "/v1/drops/" + drop["id"].(string) + "/entries", alice, nil, 409},
	} {
		status, body := call(c.method, c.path, c.token, c.body)
		require.Equal(t, c.want, status, "%s %s: %v", c.method, c.path, body)
	}
	status, ready := call("GET", "/readyz", "", nil)
	require.Equal(t, 200, status, "%v", ready)

	// The database disappears: /readyz says only that it is unavailable.
	admin, err := pgx.Connect(context.Background(), storetest.AdminURL(t))
	require.NoError(t, err)
	_, err = admin.Exec(context.Background(), `DROP DATABASE `+pgx.Identifier{dbName}.Sanitize()+` WITH (FORCE)`)
	require.NoError(t, err)
	require.NoError(t, admin.Close(context.Background()))
	require.Eventually(t, func() bool {
		status, ready := call("GET", "/readyz", "", nil)
		return status == 503 && len(ready) == 1 && ready["status"] == "unavailable"
	}, 15*time.Second, 100*time.Millisecond, "readyz answers only {\"status\":\"unavailable\"}")
	status, _ = call("GET", "/v1/orders/"+order["id"].(string), alice, nil)
	require.GreaterOrEqual(t, status, 500)
	require.NotContains(t, answers.String(), dbName, "no database error text in any answer")

	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	requireNoSecret("the logs", logs.String())
	requireNoSecret("the answers", answers.String())
	require.Contains(t, logs.String(), "not ready", "the cause went to the log instead")
}
