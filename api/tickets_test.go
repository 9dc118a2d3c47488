package api_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/api"
	"github.com/orderd/orderd/auth"
)

func TestIssueTicket(t *testing.T) {
	t.Parallel()
	b := setup(t)
	alice := b.customer(t, "alice")
	r := b.do(t, req{method: "POST", path: "/v1/ws/tickets", token: alice})
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	require.Equal(t, "no-store", r.header.Get("Cache-Control"))
	ticket := r.body["ticket"].(string)
	_, err := auth.ParseTicket(ticket)
	require.NoError(t, err)
	expires, err := time.Parse(time.RFC3339Nano, r.body["expires_at"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(auth.TicketTTL), expires, 5*time.Second)

	again := b.do(t, req{method: "POST", path: "/v1/ws/tickets", token: alice})
	require.Equal(t, http.StatusCreated, again.status)
	require.NotEqual(t, ticket, again.body["ticket"], "every ticket is new")

	// A ticket is not a bearer token.
	requireProblem(t, b.do(t, req{method: "GET", path: "/v1/merchants/" + b.createMerchant(t, 1), token: ticket}), 401, "unauthorized")
}

// TestAccessTokenInURLIsRefused: on every authenticated REST route a token
// in the query string answers 401 whatever else the request carries, so
// that a client leaking its token into proxy logs finds out at once.
func TestAccessTokenInURLIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	merchantID := b.createMerchant(t, 1)
	for _, r := range []req{
		{method: "GET", path: "/v1/merchants/" + merchantID + "?access_token=" + b.admin},
		{method: "GET", path: "/v1/merchants/" + merchantID + "?access_token=" + b.admin, token: b.admin},
		{method: "GET", path: "/v1/merchants/" + merchantID + "?x=1&access_token=", token: b.admin},
		{method: "GET", path: "/v1/merchants/" + merchantID + "?access%5Ftoken=" + b.admin, token: b.admin},
		{method: "POST", path: "/v1/ws/tickets?access_token=" + b.admin},
	} {
		out := b.do(t, r)
		requireProblem(t, out, 401, "unauthorized")
		require.Contains(t, out.body["detail"], "access_token in a URL is refused")
		require.NotContains(t, string(out.raw), b.admin)
	}
	// Names that merely contain it are other parameters.
	ok := b.do(t, req{method: "GET", path: "/v1/merchants/" + merchantID + "?not_access_token=1", token: b.admin})
	require.Equal(t, http.StatusOK, ok.status, string(ok.raw))
	require.False(t, strings.Contains(ok.header.Get("WWW-Authenticate"), "error"))
}

// TestReadyzKeepsItsReasonToTheLog: /readyz answers anyone, so the database's
// error text (hosts, users, schemas) goes to the log, not the answer.
func TestReadyzKeepsItsReasonToTheLog(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	b := serveWith(t, func(c *api.Config) {
		c.Logger = logger
		c.Ready = func(context.Context) error {
			return errors.New(`database: failed to connect to host=db.internal user=orderd: password authentication failed`)
		}
	})
	r := b.do(t, req{method: "GET", path: "/readyz"})
	require.Equal(t, http.StatusServiceUnavailable, r.status)
	require.JSONEq(t, `{"status":"unavailable"}`, string(r.raw))
	require.Equal(t, "1", r.header.Get("Retry-After"))
	require.Contains(t, logs.String(), "db.internal", "the operator still learns why")
}
