//go:build !linux

package ws

import (
	"errors"
	"net"
	"time"
)

// poller is Linux's only: elsewhere each connection keeps a goroutine
// blocked in its read.
type poller struct{}

func newPoller() (*poller, error) { return nil, errors.New("no epoll on this system") }

func (p *poller) arm(*conn) error { return errors.New("no epoll on this system") }

func (p *poller) forget(*conn) {}

func (p *poller) close() {}

// sinceAcknowledged cannot be read here: a client is judged by its pongs
// alone.
func sinceAcknowledged(net.Conn) (time.Duration, bool) { return 0, false }
