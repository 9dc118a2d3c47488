package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

// The ws scenario's clients run in processes of their own, each holding as
// many websockets as its open-file limit allows: tens of thousands of
// connections do not fit in one process under common limits, and a
// client's CPU is then not the bench's. The parent and each watcher process
// speak JSON lines: the parent sends a watcherSpec, the process answers one
// watcherReport with Subscribed set once every watcher heard its first
// message, then Accepted counts as they grow, and when the parent closes
// its input, a final one with Done set.

// watcher is one client: the order it watches, through which server, as whom.
type watcher struct {
	URL   string `json:"url"` // ws://…/v1/ws
	Token string `json:"token"`
	Order string `json:"order"`
}

type watcherSpec struct {
	Watchers []watcher `json:"watchers"`
}

type heardAt struct {
	Order string `json:"order"`
	At    int64  `json:"at"` // Unix nanoseconds
}

type watcherReport struct {
	Subscribed bool   `json:"subscribed,omitempty"`
	DialError  string `json:"dial_error,omitempty"`
	Accepted   int64  `json:"accepted"`
	Done       bool   `json:"done,omitempty"`
	// With Done: when each client heard its order accepted (or later),
	// updates that went backwards, connections that ended early, and what
	// the clients that never heard of it heard last.
	Heard      []heardAt      `json:"heard,omitempty"`
	Violations int64          `json:"violations,omitempty"`
	Lost       int64          `json:"lost,omitempty"`
	LastSeen   map[string]int `json:"last_seen,omitempty"`
}

// pongWriteWait bounds a watcher's wait for its pong to be written: the
// server's own limit on silence (60 s), not gorilla's second.
const pongWriteWait = time.Minute

// dialsAtOnce bounds a watcher process's handshakes in flight, so that the
// servers' listen queues are not what is measured.
const dialsAtOnce = 64

// RunWatchers is a watcher process's body: it reads a spec from in, runs
// its clients, and reports to out until in ends.
func RunWatchers(ctx context.Context, in io.Reader, out io.Writer) error {
	raiseFileLimit()
	rd := bufio.NewReader(in)
	line, err := rd.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("read watchers: %w", err)
	}
	var spec watcherSpec
	if err := json.Unmarshal(line, &spec); err != nil {
		return fmt.Errorf("read watchers: %w", err)
	}
	var outMu sync.Mutex
	enc := json.NewEncoder(out)
	report := func(r watcherReport) {
		outMu.Lock()
		defer outMu.Unlock()
		_ = enc.Encode(r)
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		mu                        sync.Mutex
		heard                     []heardAt
		violations, accepted      atomic.Int64
		lost                      atomic.Int64
		lastSeen                  sync.Map // order id → what its client heard last
		dialErr                   atomic.Value
		subscribed, wg            sync.WaitGroup
		dials                     = make(chan struct{}, dialsAtOnce)
		stopped                   = runCtx.Done()
		progressDone, progressEnd = make(chan struct{}), make(chan struct{})
	)
	subscribed.Add(len(spec.Watchers))
	for _, w := range spec.Watchers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dialWatcher(runCtx, w, dials)
			if err != nil {
				dialErr.Store(err.Error())
				subscribed.Done()
				return
			}
			defer c.Close()
			go func() { <-stopped; c.Close() }()
			// gorilla's own answer to a ping gives its pong a second to
			// be written and then fails the read with that write's
			// timeout: a watcher process busy with thousands of clients
			// ended connections of its own so, each counted lost. A
			// browser's pong waits as long as its socket makes it.
			c.SetPingHandler(func(data string) error {
				_ = c.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(pongWriteWait))
				return nil
			})
			_ = c.WriteJSON(map[string]string{"op": "subscribe", "order_id": w.Order})
			lastPos, lastVersion, first, retries := 1<<30, 0, true, 0
			// What the client heard last, kept where the final report
			// reads it once the client is done.
			last := "<nil>" // as a client that heard nothing was always reported
			defer func() { lastSeen.Store(w.Order, last) }()
			for {
				var m struct {
					Type  string `json:"type"`
					Code  string `json:"code"`
					Order struct {
						Version       int    `json:"version"`
						Status        string `json:"status"`
						QueuePosition *int   `json:"queue_position"`
					} `json:"order"`
				}
				// Order messages are scanned for the three fields read
				// here (scanOrder), anything else decoded with
				// Unmarshal rather than ReadJSON's decoder, which
				// allocates seven times the bytes.
				_, msg, err := c.ReadMessage()
				if err == nil {
					if f, ok := scanOrder(msg); ok {
						m.Type, m.Order.Version, m.Order.Status = "order", f.Version, f.Status
						if f.Placed {
							m.Order.QueuePosition = &f.Position
						}
					} else {
						err = json.Unmarshal(msg, &m)
					}
				}
				if err != nil {
					if first {
						subscribed.Done()
					}
					if runCtx.Err() == nil {
						lost.Add(1)
						// Why it ended, beside what it heard last: a
						// close frame says which limit the server
						// applied.
						last = fmt.Sprintf("%s, then lost: %v", last, err)
					}
					return
				}
				at := time.Now()
				// A busy server may answer a subscription "unavailable";
				// like any client, this one subscribes again, backing off
				// so as not to add to what keeps it busy. The client
				// is subscribed once it hears its order (or another error).
				retry := m.Type == "error" && m.Code == "unavailable"
				if first && !retry {
					subscribed.Done()
					first = false
				}
				if m.Type == "error" {
					last = "error " + m.Code
					if retry {
						retries++
						time.Sleep(min(time.Duration(retries)*time.Second, 5*time.Second))
						_ = c.WriteJSON(map[string]string{"op": "subscribe", "order_id": w.Order})
					}
					continue
				}
				if m.Type != "order" {
					continue
				}
				if m.Order.Version < lastVersion {
					violations.Add(1)
				}
				lastVersion = m.Order.Version
				last = m.Order.Status
				// The merchant may complete an order before its watcher
				// hears of the acceptance; then the newer state is what
				// reaches the client, and it carries the acceptance too.
				if m.Order.Status == "accepted" || m.Order.Status == "completed" {
					mu.Lock()
					heard = append(heard, heardAt{Order: w.Order, At: at.UnixNano()})
					mu.Unlock()
					accepted.Add(1)
					return
				}
				if m.Order.QueuePosition != nil {
					if *m.Order.QueuePosition >= lastPos {
						violations.Add(1)
					}
					lastPos = *m.Order.QueuePosition
				}
			}
		}()
	}
	subscribed.Wait()
	first := watcherReport{Subscribed: true}
	if err, ok := dialErr.Load().(string); ok {
		first.DialError = err
	}
	report(first)
	go func() {
		defer close(progressDone)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		var sent int64 = -1
		for {
			select {
			case <-progressEnd:
				return
			case <-tick.C:
			}
			if n := accepted.Load(); n != sent {
				report(watcherReport{Accepted: n})
				sent = n
			}
		}
	}()
	// The parent closes our input when the run is over.
	_, _ = io.Copy(io.Discard, rd)
	stop()
	wg.Wait()
	close(progressEnd)
	<-progressDone
	final := watcherReport{Done: true, Accepted: accepted.Load(), Heard: heard, Violations: violations.Load(), Lost: lost.Load(),
		LastSeen: map[string]int{}}
	got := map[string]bool{}
	for _, h := range heard {
		got[h.Order] = true
	}
	for _, w := range spec.Watchers {
		if !got[w.Order] {
			last, _ := lastSeen.Load(w.Order)
			final.LastSeen[fmt.Sprint(last)]++
		}
	}
	report(final)
	return nil
}

// dialWatcher connects w's client, trying again a few times with backoff,
// as any client does when a busy server does not answer its handshake.
func dialWatcher(ctx context.Context, w watcher, dials chan struct{}) (*websocket.Conn, error) {
	dialer := websocket.Dialer{HandshakeTimeout: 30 * time.Second}
	var err error
	for attempt := range 5 {
		if attempt > 0 && !sleepCtx(ctx, time.Duration(attempt)*time.Second) {
			break
		}
		dials <- struct{}{}
		var c *websocket.Conn
		c, _, err = dialer.DialContext(ctx, w.URL+"?access_token="+url.QueryEscape(w.Token), nil)
		<-dials
		if err == nil {
			return c, nil
		}
	}
	return nil, err
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// watcherProc is a running watcher process, or RunWatchers in this process.
type watcherProc struct {
	in       io.WriteCloser
	reports  chan watcherReport
	accepted atomic.Int64
	wait     func() error
}

// watchersPerProcess is how many websockets one process may hold: its
// open-file limit less room for everything else.
func watchersPerProcess() int {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil || l.Max > 1<<20 {
		return 1 << 16
	}
	return max(256, int(l.Max)-512)
}

// startWatchers starts a watcher process for ws (through t.WatcherCommand,
// else in this process) and waits until its clients are subscribed.
func (t *Target) startWatchers(ctx context.Context, ws []watcher) (*watcherProc, error) {
	p := &watcherProc{reports: make(chan watcherReport, 16)}
	var out io.ReadCloser
	if t.WatcherCommand != nil {
		cmd := t.WatcherCommand()
		var err error
		if p.in, err = cmd.StdinPipe(); err != nil {
			return nil, err
		}
		if out, err = cmd.StdoutPipe(); err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start watchers: %w", err)
		}
		p.wait = cmd.Wait
	} else {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		p.in, out = inW, outR
		done := make(chan error, 1)
		go func() {
			err := RunWatchers(ctx, inR, outW)
			outW.CloseWithError(err)
			done <- err
		}()
		p.wait = func() error { return <-done }
	}
	go func() {
		defer close(p.reports)
		dec := json.NewDecoder(out)
		for {
			var r watcherReport
			if err := dec.Decode(&r); err != nil {
				return
			}
			p.accepted.Store(r.Accepted)
			if r.Subscribed || r.Done {
				p.reports <- r
			}
		}
	}()
	if err := json.NewEncoder(p.in).Encode(watcherSpec{Watchers: ws}); err != nil {
		return nil, fmt.Errorf("send watchers: %w", err)
	}
	return p, nil
}

// subscribed waits for the process's clients to be subscribed.
func (p *watcherProc) subscribed(ctx context.Context) error {
	var r watcherReport
	var ok bool
	select {
	case r, ok = <-p.reports:
	case <-ctx.Done():
		return ctx.Err()
	}
	switch {
	case !ok:
		return errors.Join(errors.New("a watcher process ended before its clients subscribed"), p.wait())
	case r.DialError != "":
		return fmt.Errorf("ws dial: %s", r.DialError)
	}
	return nil
}

// finish ends the process's clients and returns its final report.
func (p *watcherProc) finish() (watcherReport, error) {
	_ = p.in.Close()
	r, ok := <-p.reports
	err := p.wait()
	if !ok || !r.Done {
		return r, errors.Join(errors.New("a watcher process ended without its report"), err)
	}
	return r, err
}
