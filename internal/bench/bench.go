// Package bench is orderd's load generator: every performance claim of the
// docs is measured here, over real HTTP against a running orderd, next to a
// plain-SQL baseline measured in the same run on the same database.
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orderd/orderd/auth"
)

// Options are the command line's.
type Options struct {
	Clients  int           // 0 = the scenario's default
	Count    int           // orders or buyers; 0 = the scenario's default
	Duration time.Duration // for time-boxed scenarios; 0 = default
	// LedgerEvents is the size the ledger scenario grows the log to; 0 =
	// the million its goals are stated at.
	LedgerEvents int
	Seed         uint64
	Progress     bool
	Out          io.Writer
	// BaselineStep is how long each connection count of a baseline's sweep
	// runs; 0 = two seconds.
	BaselineStep time.Duration
	// SkipBaselines: no SQL baseline is measured, for a scenario that is
	// load for another one (memory) or a run on Citus, which is compared
	// with the same scenario on one PostgreSQL.
	SkipBaselines bool
}

// Result is one scenario's figures.
type Result struct {
	PerS float64 `json:"per_s"`
	// BaselinePerS is the best point of the first of Baselines (or, for
	// scenarios compared with something other than SQL, what that measured
	// in the same run); BaselineConns is the connection count it was
	// reached at.
	BaselinePerS  float64    `json:"baseline_per_s"`
	BaselineConns int        `json:"baseline_conns,omitempty"`
	Baselines     []Baseline `json:"baselines,omitempty"`
	Ratio         float64    `json:"ratio"`
	Goal          float64    `json:"goal_ratio,omitempty"`
	// GoalText states the scenario's goal; GoalMet says whether this run
	// reached it.
	GoalText     string         `json:"goal,omitempty"`
	GoalMet      *bool          `json:"goal_met,omitempty"`
	P50ms        float64        `json:"p50_ms"`
	P99ms        float64        `json:"p99_ms"`
	InvariantsOK bool           `json:"invariants_ok"`
	Violations   []string       `json:"violations,omitempty"`
	RSSBytes     int64          `json:"rss_bytes,omitempty"`
	Extra        map[string]any `json:"extra,omitempty"`
	Series       []Point        `json:"series,omitempty"`
	// Costs are the CPU and sessions per unit of work of every party, by
	// unit ("order", "join", "delivery").
	Costs map[string]*Cost `json:"costs,omitempty"`
}

// setCost records c (nil when nothing was done) under its unit.
func (r *Result) setCost(c *Cost) {
	if c == nil {
		return
	}
	if r.Costs == nil {
		r.Costs = map[string]*Cost{}
	}
	r.Costs[c.Unit] = c
}

func (r *Result) setGoalMet(met bool) { r.GoalMet = &met }

// GoalStated is the scenario's goal in words.
func (r *Result) GoalStated() string {
	if r.GoalText == "" && r.Goal > 0 {
		return fmt.Sprintf("≥ %.1f×", r.Goal)
	}
	return r.GoalText
}

// Met says whether this run met the goal: "yes", "no", or "—" for a
// scenario without one.
func (r *Result) Met() string {
	if r.GoalMet == nil {
		return "—"
	}
	return map[bool]string{true: "yes", false: "no"}[*r.GoalMet]
}

// Point is one second of a run, for charts.
type Point struct {
	Second int     `json:"second"`
	Done   int     `json:"done"`
	P50ms  float64 `json:"p50_ms"`
	P99ms  float64 `json:"p99_ms"`
	Queue  int     `json:"queue,omitempty"`
}

// Report is the whole run, as written by --json.
type Report struct {
	Machine   map[string]any     `json:"machine"`
	Settings  Settings           `json:"settings"`
	Scenarios map[string]*Result `json:"scenarios"`
	// Citus is the same scenarios on a Citus cluster (--citus-url).
	Citus *ClusterRun `json:"citus,omitempty"`
}

// Settings say how the run was made: where the server ran, with what
// configuration, and every setting that was not its default.
type Settings struct {
	// Mode is "separate processes" (orderd serve started as its own
	// process), "in-process" (the quick mode: server and load generator
	// share one process) or "url" (a server the bench did not start).
	Mode string `json:"mode"`
	// Server is the server configuration the run used, secrets left out.
	Server map[string]any `json:"server"`
	// Bench is the load generator's options.
	Bench map[string]any `json:"bench"`
	// NonDefault lists every setting, of the server or the bench, that is
	// not its default, with the reason.
	NonDefault []string `json:"non_default"`
}

// Target is the orderd under test and its database.
type Target struct {
	BaseURL string
	// OpsURL is its operator listener, which serves /metrics.
	OpsURL string
	Pool   *pgxpool.Pool
	Auth   *auth.Authenticator
	// RSS reports the server's resident memory, when it runs in this process
	// or is otherwise observable; nil when unknown.
	RSS func() int64
	// Spawn starts one more orderd process on the target's database; nil
	// when the bench cannot (a deployment given by URL).
	Spawn func(ctx context.Context) (*Instance, error)
	// SpawnUntimed starts one more orderd process whose placements insert
	// no payment timer, for the timers scenario's baseline; nil when the
	// bench cannot.
	SpawnUntimed func(ctx context.Context) (*Instance, error)
	// WatcherCommand starts a process that runs the ws scenario's clients
	// (RunWatchers on its standard input and output); nil runs them in
	// this process.
	WatcherCommand func() *exec.Cmd
	// AuditCommand is `orderd audit` on the target's database; nil when
	// the bench cannot run it.
	AuditCommand func(ctx context.Context) *exec.Cmd
	// InProcess: the server runs in the load generator's process, so their
	// CPU cannot be told apart.
	InProcess bool
	// ServerPIDs are the orderd processes behind BaseURL, for their CPU
	// time; nil when unknown.
	ServerPIDs func() []int
	// Nodes are the database servers behind the target, for their CPU
	// and sessions; empty for the one PostgreSQL that Pool reaches.
	Nodes []*Node
	// Citus: the target's database is laid out on a Citus cluster, whose
	// two-phase commits a run counts.
	Citus  bool
	http   *http.Client
	tokens sync.Map

	nodesOnce sync.Once
}

// Instance is an orderd process started by Target.Spawn.
type Instance struct {
	BaseURL string
	OpsURL  string
	PID     int
	Stop    func()
	// Kill ends the process with SIGKILL and waits for it.
	Kill func()
	// Ready is when the process first answered ready.
	Ready time.Time
}

// NewTarget prepares a client for baseURL.
func NewTarget(baseURL string, pool *pgxpool.Pool, a *auth.Authenticator) *Target {
	return &Target{
		BaseURL: baseURL, Pool: pool, Auth: a,
		http: &http.Client{
			Timeout: 30 * time.Second,
			Transport: &http.Transport{
				MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, MaxConnsPerHost: 0,
				IdleConnTimeout: 90 * time.Second,
			},
		},
	}
}

// via is the same target reached through another orderd process, whose
// operator listener and CPU are that process's.
func (t *Target) via(inst *Instance) *Target {
	return &Target{BaseURL: inst.BaseURL, OpsURL: inst.OpsURL, Pool: t.Pool, Auth: t.Auth, http: t.http,
		ServerPIDs: func() []int { return []int{inst.PID} }, Nodes: t.nodes(), Citus: t.Citus, WatcherCommand: t.WatcherCommand}
}

// token returns a signed token for p, signing each principal once: clients
// reuse their token as real ones do, and signing is not what is measured.
func (t *Target) token(p auth.Principal) string {
	key := string(p.Role) + "/" + p.Subject + "/" + p.MerchantID.String()
	if tok, ok := t.tokens.Load(key); ok {
		return tok.(string)
	}
	tok, err := t.Auth.Issue(p, 24*time.Hour)
	if err != nil {
		panic(fmt.Sprintf("issue bench token: %v", err))
	}
	t.tokens.Store(key, tok)
	return tok
}

// issueTokens signs the tokens of principal(0) to principal(n-1) before a
// measured run: a scenario whose clients are thousands of customers each
// placing once would otherwise sign every token inside the run, and count
// the load generator's signing in the CPU per request. It returns them, so
// that a measured loop can index them instead of looking each one up.
func (t *Target) issueTokens(n int, principal func(i int) auth.Principal) []string {
	toks := make([]string, n)
	for i := range n {
		toks[i] = t.token(principal(i))
	}
	return toks
}

// call sends one request and decodes a JSON answer into out (when not nil).
func (t *Target) call(ctx context.Context, method, path, token string, body any, header map[string]string, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, t.BaseURL+path, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := t.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s %s: %w", method, path, err)
		}
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, problemOf(resp.StatusCode, raw)
	}
	return resp.StatusCode, nil
}

// problemOf is the error of an answer of status 300 or more with body raw.
func problemOf(status int, raw []byte) *httpError {
	var problem struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(raw, &problem)
	return &httpError{Status: status, Code: problem.Code, Body: string(raw)}
}

type httpError struct {
	Status int
	Code   string
	Body   string
}

func (e *httpError) Error() string { return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, e.Body) }

// recorder keeps latencies and per-second completions.
type recorder struct {
	mu     sync.Mutex
	start  time.Time
	lat    []time.Duration
	perSec map[int][]time.Duration
	queue  map[int]int
}

func newRecorder() *recorder {
	return &recorder{start: time.Now(), perSec: map[int][]time.Duration{}, queue: map[int]int{}}
}

func (r *recorder) add(d time.Duration) {
	r.mu.Lock()
	r.lat = append(r.lat, d)
	sec := int(time.Since(r.start).Seconds())
	r.perSec[sec] = append(r.perSec[sec], d)
	r.mu.Unlock()
}

func (r *recorder) setQueue(depth int) {
	r.mu.Lock()
	r.queue[int(time.Since(r.start).Seconds())] = depth
	r.mu.Unlock()
}

func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return float64(sorted[i].Microseconds()) / 1000
}

func (r *recorder) summarize(res *Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	all := slices.Clone(r.lat)
	slices.Sort(all)
	res.P50ms, res.P99ms = percentile(all, 0.50), percentile(all, 0.99)
	secs := make([]int, 0, len(r.perSec))
	for s := range r.perSec {
		secs = append(secs, s)
	}
	for s := range r.queue {
		if _, ok := r.perSec[s]; !ok {
			secs = append(secs, s)
		}
	}
	sort.Ints(secs)
	for _, s := range secs {
		l := slices.Clone(r.perSec[s])
		slices.Sort(l)
		res.Series = append(res.Series, Point{Second: s, Done: len(l), P50ms: percentile(l, 0.5), P99ms: percentile(l, 0.99), Queue: r.queue[s]})
	}
}

// Machine describes where the run happened.
func Machine() map[string]any {
	return map[string]any{
		"cpus": runtime.NumCPU(), "goos": runtime.GOOS, "goarch": runtime.GOARCH, "go": runtime.Version(),
		"when": time.Now().UTC().Format(time.RFC3339), "load_average": loadAverage(), "commit": commit(),
	}
}

// commit names the code that was measured: the revision the binary was
// built from, else the checkout's (go run stamps none), with "-dirty" when
// files differed from it; empty outside a checkout.
func commit() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		var rev string
		var modified bool
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if rev != "" {
			return shortRevision(rev, modified)
		}
	}
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	status, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output()
	return shortRevision(strings.TrimSpace(string(out)), err != nil || len(bytes.TrimSpace(status)) > 0)
}

func shortRevision(rev string, modified bool) string {
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified {
		rev += "-dirty"
	}
	return rev
}

// loadAverage is the machine's one-minute load average when the run starts
// (empty where /proc has none): a figure taken on a busy machine says so.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	fields := strings.Fields(string(raw))
	if len(fields) == 0 {
		return ""
	}
	return fields[0]
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
