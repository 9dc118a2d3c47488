package app

import (
	"context"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestDialGivesUpOnAVanishedHost reads back, from a socket the pool's dialer
// made, the options that notice a database machine gone without a reset:
// keepalives on an idle connection and a user timeout on unacknowledged
// data. Neither can be watched working without a network that drops
// packets, so the test holds the socket to what configureFailover promises.
func TestDialGivesUpOnAVanishedHost(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	pcfg, err := pgxpool.ParseConfig("postgres://u@" + ln.Addr().String() + "/db")
	require.NoError(t, err)
	configureFailover(pcfg)
	require.Equal(t, connectTimeout, pcfg.ConnConfig.ConnectTimeout)

	conn, err := pcfg.ConnConfig.DialFunc(context.Background(), "tcp", ln.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	raw, err := conn.(*net.TCPConn).SyscallConn()
	require.NoError(t, err)
	got := map[string]int{}
	require.NoError(t, raw.Control(func(fd uintptr) {
		for name, opt := range map[string][2]int{
			"SO_KEEPALIVE":     {unix.SOL_SOCKET, unix.SO_KEEPALIVE},
			"TCP_KEEPIDLE":     {unix.IPPROTO_TCP, unix.TCP_KEEPIDLE},
			"TCP_KEEPINTVL":    {unix.IPPROTO_TCP, unix.TCP_KEEPINTVL},
			"TCP_KEEPCNT":      {unix.IPPROTO_TCP, unix.TCP_KEEPCNT},
			"TCP_USER_TIMEOUT": {unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT},
		} {
			v, err := unix.GetsockoptInt(int(fd), opt[0], opt[1])
			require.NoError(t, err, name)
			got[name] = v
		}
	}))
	require.Equal(t, map[string]int{
		"SO_KEEPALIVE":     1,
		"TCP_KEEPIDLE":     int(keepAliveIdle.Seconds()),
		"TCP_KEEPINTVL":    int(keepAliveInterval.Seconds()),
		"TCP_KEEPCNT":      keepAliveCount,
		"TCP_USER_TIMEOUT": int(userTimeout.Milliseconds()),
	}, got)
}
