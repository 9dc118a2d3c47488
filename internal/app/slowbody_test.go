package app_test

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/internal/app"
)

// TestTricklingBodyIsCutOff sends POST /v1/sign-in, which needs no token,
// a body one byte at a time: the server must answer and let go of the
// connection once the request timeout has passed, not wait for as long as
// the client keeps trickling.
func TestTricklingBodyIsCutOff(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	a := runApp(t, func(cfg *app.Config) { cfg.RequestTimeout = timeout })

	conn, err := net.Dial("tcp", a.Addr())
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte("POST /v1/sign-in HTTP/1.1\r\nHost: orderd\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{"))
	require.NoError(t, err)
	start := time.Now()
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopped:
				return
			case <-tick.C:
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()

	// Long past the timeout, for a busy machine; a trickle that is not cut
	// off goes on for all of it.
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(6*timeout)))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "no answer while the body trickled in for %s", time.Since(start))
	_ = res.Body.Close()
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Less(t, time.Since(start), 4*timeout)
	// And the connection is let go.
	_, err = bufio.NewReader(conn).ReadByte()
	require.Error(t, err)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server kept the connection open: %v", err)
}
