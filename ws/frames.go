package ws

import (
	"encoding/binary"
	"io"
	"net"
	"sync/atomic"
	"time"
)

// frameConn stands between a websocket's reader and its socket so that an
// idle connection can hold no goroutine: it hands the reader one frame at a
// time, so that nothing the reader buffered is left unread when a message
// ends, and answers pings and takes pongs itself, so that a connection
// whose client only answers pings stays idle. Whether more waits is then
// its own to tell (ready), and a socket with nothing to read can be left to
// the poller. Only the goroutine reading the connection uses it, except
// heard.
type frameConn struct {
	net.Conn
	// stash holds bytes read from the socket and not handed out, from r
	// to w; nil while it holds none and the connection is idle.
	stash []byte
	r, w  int
	// left counts the bytes of the frame being handed out that the reader
	// has not had yet; 0 between frames.
	left int64
	err  error // the socket's, once a read failed
	// heard is when the client last sent a frame, in Unix nanoseconds.
	heard atomic.Int64
	// pong answers a ping with its payload.
	pong func(payload []byte)
}

const (
	opPing = 9
	opPong = 10
	// stashBytes holds the largest control frame a client sends: a header
	// with a mask and 125 bytes.
	stashBytes        = 256
	maxControlPayload = 125
	finalBit          = 0x80
	maskBit           = 0x80
)

func newFrameConn(c net.Conn) *frameConn {
	f := &frameConn{Conn: c}
	f.heard.Store(time.Now().UnixNano())
	return f
}

// Read hands out bytes of one frame at most.
func (f *frameConn) Read(p []byte) (int, error) {
	for f.left == 0 {
		if _, err := f.next(true); err != nil {
			return 0, err
		}
	}
	for f.r == f.w {
		if err := f.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p[:min(int64(len(p)), f.left)], f.stash[f.r:f.w])
	f.r += n
	f.left -= int64(n)
	return n, nil
}

// ready reports, without waiting, whether the reader has something to read:
// a frame other than a ping or a pong, or the socket's end. Pings and pongs
// read so far are taken care of.
func (f *frameConn) ready() bool {
	if f.left > 0 || f.err != nil {
		return true
	}
	ok, _ := f.next(false)
	return ok
}

// next takes the frame that starts the stash: pings and pongs are answered
// and dropped, anything else is left for the reader, which is then handed
// its bytes. Without wait, it reports false when the stash ends before
// such a frame does.
func (f *frameConn) next(wait bool) (bool, error) {
	for {
		head := f.stash[f.r:f.w]
		size, payload, complete := frameSize(head)
		switch {
		case !complete && !wait:
			return false, nil
		case !complete:
			if err := f.fill(); err != nil {
				return false, err
			}
			continue
		}
		f.heard.Store(time.Now().UnixNano())
		op := head[0] & 0x0f
		control := (op == opPing || op == opPong) && head[0]&finalBit != 0 && head[1]&maskBit != 0 && payload <= maxControlPayload
		if !control {
			f.left = size
			return true, nil
		}
		if int64(len(head)) < size {
			if !wait {
				return false, nil
			}
			if err := f.fill(); err != nil {
				return false, err
			}
			continue
		}
		if op == opPing && f.pong != nil {
			body := head[size-payload : size]
			mask := head[size-payload-4 : size-payload]
			for i := range body {
				body[i] ^= mask[i%4]
			}
			f.pong(body)
		}
		f.r += int(size)
	}
}

// frameSize reads a frame's header from head: the frame's size with its
// header, its payload's, and whether head holds the whole header.
func frameSize(head []byte) (size, payload int64, complete bool) {
	if len(head) < 2 {
		return 0, 0, false
	}
	n := 2
	payload = int64(head[1] & 0x7f)
	switch payload {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if head[1]&maskBit != 0 {
		n += 4
	}
	if len(head) < n {
		return 0, 0, false
	}
	switch payload {
	case 126:
		payload = int64(binary.BigEndian.Uint16(head[2:]))
	case 127:
		// The reader refuses what is over its limit; the size only has
		// to add up.
		payload = int64(min(binary.BigEndian.Uint64(head[2:]), 1<<62))
	}
	return int64(n) + payload, payload, true
}

// fill reads what the socket has into the stash, waiting for something.
func (f *frameConn) fill() error {
	if f.err != nil {
		return f.err
	}
	if f.stash == nil {
		f.stash = make([]byte, stashBytes)
	}
	if f.r == f.w {
		f.r, f.w = 0, 0
	} else if f.w == len(f.stash) {
		f.w = copy(f.stash, f.stash[f.r:f.w])
		f.r = 0
	}
	n, err := f.Conn.Read(f.stash[f.w:])
	f.w += n
	if n == 0 && err == nil {
		err = io.ErrNoProgress
	}
	if err != nil {
		f.err = err
		if n == 0 {
			return err
		}
	}
	return nil
}

// idle lets go of an empty stash.
func (f *frameConn) idle() {
	if f.r == f.w {
		f.stash, f.r, f.w = nil, 0, 0
	}
}
