package main

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// logGather is the longest a log line waits for the lines after it, and
// logGatherMax how many bytes may wait.
const (
	logGather    = 10 * time.Millisecond
	logGatherMax = 64 << 10
)

// logWriter passes the log's lines to out one write each while they come
// slowly, and gathers the lines that come within logGather of its last write
// into one write when that time is up: under load a server writes a line per
// request (the access log), and a write to a file per line costs a system
// call per request. A line waits at most logGather, so a process killed
// outright loses at most that much of its log; run flushes the rest before
// it returns.
type logWriter struct {
	out   io.Writer
	now   func() time.Time
	after func(time.Duration, func())

	mu        sync.Mutex
	held      []byte
	last      time.Time
	scheduled bool
}

func newLogWriter(out io.Writer) *logWriter {
	return &logWriter{out: out, now: time.Now, after: func(d time.Duration, f func()) { time.AfterFunc(d, f) }}
}

// Write takes one line, as slog's handlers write them. An error writing
// lines held for later is not reported to the writer of a later line.
func (l *logWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if len(l.held) == 0 && now.Sub(l.last) >= logGather {
		l.last = now
		return l.out.Write(p)
	}
	l.held = append(l.held, p...)
	if len(l.held) >= logGatherMax {
		l.flushLocked(now)
		return len(p), nil
	}
	if !l.scheduled {
		l.scheduled = true
		l.after(logGather-now.Sub(l.last), l.timeUp)
	}
	return len(p), nil
}

func (l *logWriter) timeUp() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.scheduled = false
	l.flushLocked(l.now())
}

// Flush writes the lines held.
func (l *logWriter) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushLocked(l.now())
}

func (l *logWriter) flushLocked(now time.Time) {
	if len(l.held) == 0 {
		return
	}
	l.last = now
	_, _ = l.out.Write(l.held)
	l.held = l.held[:0]
}

// errorsAtOnce writes an error's line out as soon as it is logged, with the
// lines held before it: the line most wanted from a process that is killed
// right after is the error that came before the kill.
type errorsAtOnce struct {
	slog.Handler
	logs *logWriter
}

func (h errorsAtOnce) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelError {
		h.logs.Flush()
	}
	return err
}

func (h errorsAtOnce) WithAttrs(attrs []slog.Attr) slog.Handler {
	return errorsAtOnce{h.Handler.WithAttrs(attrs), h.logs}
}

func (h errorsAtOnce) WithGroup(name string) slog.Handler {
	return errorsAtOnce{h.Handler.WithGroup(name), h.logs}
}
