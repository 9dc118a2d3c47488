package app

import (
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// How soon a database host that vanished (its machine gone, so no reset
// arrives) is given up: an idle connection after keepAliveIdle plus
// keepAliveCount probes keepAliveInterval apart; one with unacknowledged
// data after userTimeout (Linux). A primary killed on a machine that stays
// up resets its connections at once and needs none of this.
const (
	connectTimeout    = 3 * time.Second
	keepAliveIdle     = 5 * time.Second
	keepAliveInterval = 2 * time.Second
	keepAliveCount    = 3
	userTimeout       = 10 * time.Second
)

// configureFailover makes a pool follow the primary among the URL's hosts.
//
// A URL that names several hosts names a primary and its standbys, and
// orderd writes: without a target_session_attrs of its own it gets
// read-write, so that a new connection never lands on a standby still in
// recovery. A connection already made that the server reports read-only
// (default_transaction_read_only turned on, as a failover manager fencing a
// demoted primary does, or in_hot_standby) is closed when released rather
// than handed out again, so the next one looks for the primary.
func configureFailover(pcfg *pgxpool.Config) {
	cc := pcfg.ConnConfig
	cc.ConnectTimeout = connectTimeout
	dialer := &net.Dialer{
		Timeout: connectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount,
		},
		Control: setUserTimeout,
	}
	// Every host of the URL is dialled and validated through these.
	cc.DialFunc = dialer.DialContext
	if cc.ValidateConnect == nil && len(cc.Fallbacks) > 0 {
		cc.ValidateConnect = pgconn.ValidateConnectTargetSessionAttrsReadWrite
	}
	pcfg.AfterRelease = func(c *pgx.Conn) bool { return !readOnly(c.PgConn()) }
}

// readOnly reports what the server last said of the session: PostgreSQL 14
// and later report both settings whenever they change.
func readOnly(c *pgconn.PgConn) bool {
	return c.ParameterStatus("in_hot_standby") == "on" || c.ParameterStatus("default_transaction_read_only") == "on"
}
