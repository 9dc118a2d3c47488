package app

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// setUserTimeout bounds how long data sent to a database host may stay
// unacknowledged before the connection fails: keepalives probe only an idle
// connection, and a query sent to a vanished host is not idle.
func setUserTimeout(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(userTimeout.Milliseconds()))
	})
	if err != nil {
		return err
	}
	return serr
}
