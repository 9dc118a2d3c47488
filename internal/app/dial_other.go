//go:build !linux

package app

import "syscall"

// setUserTimeout has no portable equivalent off Linux; keepalives and each
// statement's context bound a vanished host there.
func setUserTimeout(_, _ string, _ syscall.RawConn) error { return nil }
