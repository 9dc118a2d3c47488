package ws

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// poller watches the sockets of idle connections with one epoll instance,
// so that an idle connection holds no goroutine: a goroutine blocked in a
// read keeps a stack of its own, the largest part of what an idle
// connection would cost. Each socket is armed once per idle spell
// (EPOLLONESHOT) and, once it has something to read, handed back to its
// connection, which reads on a goroutine until it is idle again.
type poller struct {
	epfd, wakefd int
	mu           sync.Mutex
	conns        map[uint64]*conn // the armed, by their pollID
	next         uint64
	done         chan struct{}
}

func newPoller() (*poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll: %w", err)
	}
	wakefd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	// Id 0 is the eventfd's, which stops the loop.
	ev := unix.EpollEvent{Events: unix.EPOLLIN}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wakefd, &ev); err != nil {
		unix.Close(epfd)
		unix.Close(wakefd)
		return nil, fmt.Errorf("epoll: %w", err)
	}
	p := &poller{epfd: epfd, wakefd: wakefd, conns: map[uint64]*conn{}, next: 1, done: make(chan struct{})}
	go p.loop()
	return p, nil
}

// arm hands c to the poller until its socket has something to read, or
// ends; c.frames must not be read until then. It fails when the socket is
// closed.
func (p *poller) arm(c *conn) error {
	sc, ok := c.frames.Conn.(syscall.Conn)
	if !ok {
		return errors.New("not a socket")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	// The socket may wake as soon as it is armed, and its next reader
	// arm it again: c is written before then.
	op := unix.EPOLL_CTL_MOD
	if !c.polled {
		op = unix.EPOLL_CTL_ADD
		c.polled = true
	}
	p.mu.Lock()
	if c.pollID == 0 {
		c.pollID = p.next
		p.next++
	}
	p.conns[c.pollID] = c
	p.mu.Unlock()
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT}
	ev.Fd, ev.Pad = int32(uint32(c.pollID)), int32(uint32(c.pollID>>32))
	var ctlErr error
	// Control keeps the descriptor open while it runs: a connection closed
	// meanwhile fails here rather than arming another socket that took
	// its number.
	if err := raw.Control(func(fd uintptr) { ctlErr = unix.EpollCtl(p.epfd, op, int(fd), &ev) }); err != nil {
		ctlErr = err
	}
	if ctlErr != nil {
		p.forget(c)
		return ctlErr
	}
	return nil
}

// forget drops c, which is closed; its socket left the epoll set when it
// was closed.
func (p *poller) forget(c *conn) {
	p.mu.Lock()
	delete(p.conns, c.pollID)
	p.mu.Unlock()
}

func (p *poller) loop() {
	defer close(p.done)
	events := make([]unix.EpollEvent, 128)
	for {
		n, err := unix.EpollWait(p.epfd, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		for _, ev := range events[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if id == 0 {
				return
			}
			p.mu.Lock()
			c := p.conns[id]
			delete(p.conns, id)
			p.mu.Unlock()
			if c != nil {
				c.wake()
			}
		}
	}
}

// close stops the loop; the hub's connections are closed by then.
func (p *poller) close() {
	_, _ = unix.Write(p.wakefd, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	<-p.done
	unix.Close(p.epfd)
	unix.Close(p.wakefd)
}

// sinceAcknowledged is how long ago the peer of nc, a TCP socket, last
// acknowledged anything sent to it; false when that cannot be read.
func sinceAcknowledged(nc net.Conn) (time.Duration, bool) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return 0, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var info *unix.TCPInfo
	var infoErr error
	if err := raw.Control(func(fd uintptr) { info, infoErr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil || infoErr != nil {
		return 0, false
	}
	return time.Duration(info.Last_ack_recv) * time.Millisecond, true
}
