package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// ClusterRun is a run's Citus half: every scenario run again on a Citus
// cluster, after the same scenario on one PostgreSQL in the same run, and
// what each deployment spent per unit of work, node by node.
type ClusterRun struct {
	// Settings are the Citus settings in force on the coordinator.
	Settings    map[string]string      `json:"settings"`
	Scenarios   map[string]*Result     `json:"scenarios"`
	Comparisons map[string]*Comparison `json:"comparisons"`
	Idle        *IdleComparison        `json:"idle,omitempty"`
}

// Comparison sets a scenario's cost on the cluster beside its cost on one
// PostgreSQL, and judges the goals from them.
type Comparison struct {
	Unit        string `json:"unit"`
	OnePostgres *Cost  `json:"one_postgres"`
	Citus       *Cost  `json:"citus"`
	// Ratio is the cluster's CPU per unit, every node and orderd, over one
	// PostgreSQL's and its orderd's.
	Ratio float64 `json:"ratio"`
	// CoordinatorShare is the coordinator's part of the nodes' CPU.
	CoordinatorShare float64 `json:"coordinator_share"`
	// TwoPhaseCommits counts the distinct prepared transactions seen on any
	// node during the scenario (pg_dist_transaction on the coordinator,
	// pg_prepared_xacts on every node), set-up included.
	TwoPhaseCommits int `json:"two_phase_commits"`
	// Projection is orders (units) per second for N workers from the
	// measured CPU per unit.
	Projection []ProjectionPoint `json:"projection"`
	Goals      []Goal            `json:"goals"`
}

// ProjectionPoint is the throughput N workers would reach if every node
// had Cores cores kept busy and each unit cost what it cost here.
type ProjectionPoint struct {
	Workers int     `json:"workers"`
	PerS    float64 `json:"per_s"`
	// Bound is what limits it: "workers" or "coordinator".
	Bound string `json:"bound"`
}

// Goal is one of the goals, judged from this run's figures.
type Goal struct {
	Text string `json:"text"`
	Met  bool   `json:"met"`
	// Measured is the figure it was judged by.
	Measured string `json:"measured"`
}

// projectedWorkers are the cluster sizes the projection is printed for.
var projectedWorkers = []int{1, 2, 4, 8, 16, 32, 64}

// maxSessionsPerUnit is how many backends the nodes may fork per unit of
// work (an order) for connections to count as kept: one in a hundred
// leaves room for pools that grow at the start, none per transaction.
const maxSessionsPerUnit = 0.01

// CompareDeployments sets one scenario's cluster figures beside one PostgreSQL's.
// cores is each node's core count for the projection.
func CompareDeployments(one, citus *Result, twoPC, cores int) *Comparison {
	unit := primaryUnit(one, citus)
	if unit == "" {
		return nil
	}
	a, b := one.Costs[unit], citus.Costs[unit]
	c := &Comparison{Unit: unit, OnePostgres: a, Citus: b, TwoPhaseCommits: twoPC,
		Ratio: round3(ratio(b.TotalUS(), a.TotalUS()))}
	var coord, workers float64
	for _, n := range b.Nodes {
		if n.Worker {
			workers += n.CPUus
		} else {
			coord += n.CPUus
		}
	}
	c.CoordinatorShare = round3(ratio(coord, coord+workers))
	perCore := 1e6 * float64(cores)
	for _, w := range projectedWorkers {
		p := ProjectionPoint{Workers: w, Bound: "workers"}
		if workers > 0 {
			p.PerS = float64(w) * perCore / workers
		}
		if coord > 0 && (workers == 0 || perCore/coord < p.PerS) {
			p.PerS, p.Bound = perCore/coord, "coordinator"
		}
		p.PerS = float64(int64(p.PerS))
		c.Projection = append(c.Projection, p)
	}
	complete := a.Complete() && b.Complete()
	c.Goals = []Goal{
		{Text: "CPU per " + unit + ", every node and orderd, ≤ 2× one PostgreSQL's", Met: complete && c.Ratio <= 2,
			Measured: fmt.Sprintf("%.0f against %.0f µs (%.2f×)%s", b.TotalUS(), a.TotalUS(), c.Ratio, incomplete(complete))},
		{Text: "no backend forked per transaction on any node", Met: float64(b.Sessions()) <= maxSessionsPerUnit*float64(b.Units),
			Measured: fmt.Sprintf("%d sessions started for %d %ss", b.Sessions(), b.Units, unit)},
		{Text: "no two-phase commit", Met: twoPC == 0, Measured: fmt.Sprintf("%d prepared transactions", twoPC)},
		{Text: "the coordinator ≤ 10 % of the cluster's CPU", Met: complete && c.CoordinatorShare <= 0.10,
			Measured: fmt.Sprintf("%.1f %%%s", 100*c.CoordinatorShare, incomplete(complete))},
	}
	return c
}

func incomplete(complete bool) string {
	if complete {
		return ""
	}
	return " (a party's CPU could not be read)"
}

// primaryUnit is the unit both runs measured; the first by name when there
// are several.
func primaryUnit(one, citus *Result) string {
	if one == nil || citus == nil {
		return ""
	}
	var units []string
	for u := range one.Costs {
		if citus.Costs[u] != nil {
			units = append(units, u)
		}
	}
	sort.Strings(units)
	if len(units) == 0 {
		return ""
	}
	return units[0]
}

// IdleComparison is each node's CPU per second while orderd serves nothing,
// on the cluster and on one PostgreSQL.
type IdleComparison struct {
	OnePostgres *Cost `json:"one_postgres"`
	Citus       *Cost `json:"citus"`
	Goal        Goal  `json:"goal"`
}

// idleSpan is how long an idle deployment is watched.
const idleSpan = 10 * time.Second

// Idle measures what each node of t spends per second while its orderd is
// idle.
func Idle(ctx context.Context, t *Target) (*Cost, error) {
	// Let the server's start-up work settle first.
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(2 * time.Second):
	}
	from := t.readCPU()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(idleSpan):
	}
	return t.cost("idle second", from, t.readCPU(), int64(idleSpan/time.Second)), nil
}

// CompareIdle judges the idle cluster: every node ≤ 1.5× the one
// PostgreSQL's CPU per second.
func CompareIdle(one, citus *Cost) *IdleComparison {
	var pg, most float64
	for _, n := range one.Nodes {
		pg += n.CPUus
	}
	for _, n := range citus.Nodes {
		most = max(most, n.CPUus)
	}
	return &IdleComparison{OnePostgres: one, Citus: citus, Goal: Goal{
		Text: "an idle cluster ≤ 1.5× an idle PostgreSQL's CPU per node", Met: one.Complete() && citus.Complete() && most <= 1.5*pg,
		Measured: fmt.Sprintf("busiest node %.0f against %.0f µs/s", most, pg)}}
}

// TwoPhaseWatch collects, while it runs, every prepared transaction that
// any node of a Citus target shows: the coordinator's record of the ones
// it prepared (pg_dist_transaction, until its recovery clears them) and
// every node's prepared transactions on the database. Both are read
// several times a second, so that a two-phase commit is seen while it is
// recorded.
type TwoPhaseWatch struct {
	t    *Target
	mu   sync.Mutex
	gids map[string]struct{}
	// before are the ones seen as the watch started.
	before map[string]struct{}
	stop   chan struct{}
	done   chan struct{}
}

// twoPhaseEvery is how often the watch reads the nodes.
const twoPhaseEvery = 200 * time.Millisecond

// WatchTwoPhase starts a watch on t; on a target that is not on Citus it
// finds nothing.
func WatchTwoPhase(t *Target) *TwoPhaseWatch {
	w := &TwoPhaseWatch{t: t, gids: map[string]struct{}{}, stop: make(chan struct{}), done: make(chan struct{})}
	// What the coordinator recorded before (the layout's DDL, committed in
	// two phases) is not the run's.
	w.read()
	w.before = w.gids
	w.gids = map[string]struct{}{}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(twoPhaseEvery)
		defer tick.Stop()
		for {
			w.read()
			select {
			case <-w.stop:
				w.read()
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *TwoPhaseWatch) read() {
	if !w.t.Citus {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, n := range w.t.nodes() {
		q := `SELECT gid FROM pg_prepared_xacts WHERE database = current_database()`
		if !n.Worker {
			q += ` UNION SELECT gid FROM pg_dist_transaction`
		}
		rows, err := n.Pool.Query(ctx, q)
		if err != nil {
			continue
		}
		for rows.Next() {
			var gid string
			if rows.Scan(&gid) != nil {
				continue
			}
			if _, old := w.before[gid]; !old {
				w.mu.Lock()
				w.gids[gid] = struct{}{}
				w.mu.Unlock()
			}
		}
		rows.Close()
	}
}

// Stop ends the watch and returns how many two-phase commits it saw.
func (w *TwoPhaseWatch) Stop() int {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.gids)
}

// Cores is each node's core count the projection assumes: this machine's.
func Cores() int { return runtime.NumCPU() }

// PrintCluster writes the cluster half of a run: per scenario, each
// node's CPU and sessions per unit on both deployments, the two-phase
// commits, the goals and the projection for N workers.
func PrintCluster(w io.Writer, names []string, r *ClusterRun) {
	if r == nil {
		return
	}
	var set []string
	for _, k := range sortedNames(r.Settings) {
		set = append(set, k+"="+r.Settings[k])
	}
	fmt.Fprintf(w, "\nCitus settings on the coordinator: %s\n", strings.Join(set, ", "))
	if r.Idle != nil {
		fmt.Fprintln(w, "\nidle, CPU µs per second:")
		printCosts(w, r.Idle.OnePostgres, r.Idle.Citus)
		printGoals(w, []Goal{r.Idle.Goal})
	}
	for _, n := range names {
		if res := r.Scenarios[n]; res != nil {
			ok := "ok"
			if !res.InvariantsOK {
				ok = "BROKEN"
			}
			fmt.Fprintf(w, "\n%s on Citus: %.0f/s, p50 %.1f ms, p99 %.1f ms, invariants %s\n", n, res.PerS, res.P50ms, res.P99ms, ok)
			for _, v := range res.Violations {
				fmt.Fprintf(w, "%s on Citus VIOLATION: %s\n", n, v)
			}
		}
		c := r.Comparisons[n]
		if c == nil {
			continue
		}
		fmt.Fprintf(w, "%s, CPU µs per %s (%d on one PostgreSQL, %d on Citus), sessions started:\n", n, c.Unit, c.OnePostgres.Units, c.Citus.Units)
		printCosts(w, c.OnePostgres, c.Citus)
		fmt.Fprintf(w, "two-phase commits: %d; the coordinator's share of the nodes' CPU: %.1f %%; Citus/one PostgreSQL: %.2f×\n",
			c.TwoPhaseCommits, 100*c.CoordinatorShare, c.Ratio)
		printGoals(w, c.Goals)
		fmt.Fprintf(w, "projection (nodes of %d cores, each %s costing what it cost here):", Cores(), c.Unit)
		for _, p := range c.Projection {
			fmt.Fprintf(w, " %d workers %.0f/s (%s);", p.Workers, p.PerS, p.Bound)
		}
		if one := c.OnePostgres.DatabaseUS(); one > 0 {
			fmt.Fprintf(w, " one PostgreSQL %.0f/s", 1e6*float64(Cores())/one)
		}
		fmt.Fprintln(w)
	}
}

func printCosts(w io.Writer, one, citus *Cost) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "deployment\tparty\tCPU µs\tsessions\t")
	for _, d := range []struct {
		name string
		c    *Cost
	}{{"one PostgreSQL", one}, {"Citus", citus}} {
		for _, n := range d.c.Nodes {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t\n", d.name, n.Name, known(n.CPUus, n.CPUKnown), n.Sessions)
		}
		fmt.Fprintf(tw, "%s\torderd\t%s\t\t\n", d.name, known(d.c.OrderdUS, d.c.OrderdKnown))
		fmt.Fprintf(tw, "%s\ttotal\t%.0f\t%d\t\n", d.name, d.c.TotalUS(), d.c.Sessions())
	}
	_ = tw.Flush()
}

func known(v float64, ok bool) string {
	if !ok {
		return "?"
	}
	return fmt.Sprintf("%.0f", v)
}

func printGoals(w io.Writer, goals []Goal) {
	for _, g := range goals {
		fmt.Fprintf(w, "goal %s: %s (%s)\n", g.Text, map[bool]string{true: "met", false: "NOT MET"}[g.Met], g.Measured)
	}
}

// CitusSettings are the settings of the coordinator that a cluster's cost
// depends on, and the shard count of its tables.
func CitusSettings(ctx context.Context, t *Target) map[string]string {
	out := map[string]string{}
	for _, name := range []string{"citus.node_conninfo", "citus.max_cached_conns_per_worker", "citus.max_cached_connection_lifetime",
		"citus.max_adaptive_executor_pool_size", "citus.recover_2pc_interval", "citus.enable_local_execution", "citus.max_shared_pool_size"} {
		var v string
		if err := t.Pool.QueryRow(ctx, `SELECT current_setting($1, true)`, name).Scan(&v); err == nil {
			out[name] = v
		}
	}
	var shards string
	if err := t.Pool.QueryRow(ctx, `SELECT count(*)::text FROM pg_dist_shard WHERE logicalrelid = 'merchants'::regclass`).Scan(&shards); err == nil {
		out["shards of merchants"] = shards
	}
	return out
}

// sortedNames lists m's keys in order.
func sortedNames[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
