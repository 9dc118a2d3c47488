package main

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// writes records each write its writer receives.
type writes []string

func (w *writes) Write(p []byte) (int, error) {
	*w = append(*w, string(p))
	return len(p), nil
}

// gatherTest is a logWriter on a clock the test moves, whose timer fires
// when the test says.
type gatherTest struct {
	*logWriter
	out    *writes
	clock  time.Time
	timers []func()
	waits  []time.Duration
}

func newGatherTest() *gatherTest {
	g := &gatherTest{out: &writes{}, clock: time.Date(2026, 11, 28, 20, 0, 0, 0, time.UTC)}
	g.logWriter = &logWriter{out: g.out, now: func() time.Time { return g.clock },
		after: func(d time.Duration, f func()) { g.waits = append(g.waits, d); g.timers = append(g.timers, f) }}
	return g
}

func (g *gatherTest) fire() {
	timers := g.timers
	g.timers = nil
	for _, f := range timers {
		f()
	}
}

func TestLogWriterWritesSlowLinesAtOnce(t *testing.T) {
	t.Parallel()
	g := newGatherTest()
	for i := range 3 {
		_, err := fmt.Fprintf(g, "line %d\n", i)
		require.NoError(t, err)
		require.Len(t, *g.out, i+1, "a line after a quiet spell is written at once")
		g.clock = g.clock.Add(logGather)
	}
	require.Empty(t, g.timers)
}

func TestLogWriterGathersLinesThatComeQuickly(t *testing.T) {
	t.Parallel()
	g := newGatherTest()
	var want strings.Builder
	for i := range 5 {
		line := fmt.Sprintf("line %d\n", i)
		want.WriteString(line)
		n, err := g.Write([]byte(line))
		require.NoError(t, err)
		require.Equal(t, len(line), n)
		g.clock = g.clock.Add(time.Millisecond)
	}
	require.Equal(t, []string{"line 0\n"}, []string(*g.out), "the lines after the first wait")
	require.Equal(t, []time.Duration{logGather - time.Millisecond}, g.waits,
		"one timer, up when logGather has passed since the write")
	g.fire()
	require.Equal(t, []string{"line 0\n", "line 1\nline 2\nline 3\nline 4\n"}, []string(*g.out))
	require.Equal(t, want.String(), strings.Join(*g.out, ""))

	// Right after that write, lines wait again.
	_, _ = g.Write([]byte("line 5\n"))
	require.Len(t, *g.out, 2)
	g.Flush()
	require.Equal(t, "line 5\n", (*g.out)[2], "Flush writes what is held")
	g.fire()
	require.Len(t, *g.out, 3, "a timer finding nothing held writes nothing")
}

func TestLogWriterWritesAFullBufferAtOnce(t *testing.T) {
	t.Parallel()
	g := newGatherTest()
	_, _ = g.Write([]byte("first\n"))
	line := strings.Repeat("x", 1023) + "\n"
	for range logGatherMax / len(line) {
		_, _ = g.Write([]byte(line))
	}
	require.Len(t, *g.out, 2, "the held lines reached logGatherMax")
	require.Len(t, (*g.out)[1], logGatherMax)
}

func TestLogWriterWritesAnErrorAtOnce(t *testing.T) {
	t.Parallel()
	g := newGatherTest()
	logger := slog.New(errorsAtOnce{slog.NewTextHandler(g, nil), g.logWriter}).With("request", "r1")
	logger.Info("first")
	logger.Info("held")
	require.Len(t, *g.out, 1, "the second line waits for the lines after it")
	logger.Error("failed")
	require.Len(t, *g.out, 2, "an error's line goes out before Error returns, with the line held before it")
	require.Contains(t, (*g.out)[1], "msg=held")
	require.Contains(t, (*g.out)[1], "msg=failed request=r1")
	logger.Warn("slow")
	require.Len(t, *g.out, 2, "a warning waits like any line")
}
