package bench

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Node is one database server behind a target: the one PostgreSQL, or a
// Citus coordinator or worker, reached through a small pool of its own on
// the target's database (its copy of it, on a worker).
type Node struct {
	// Name is "postgres" for one PostgreSQL, "coordinator" or
	// "worker host:port" on Citus.
	Name string
	Pool *pgxpool.Pool
	// Worker: a Citus worker, which holds shards; the coordinator and one
	// PostgreSQL are not.
	Worker bool

	once       sync.Once
	postmaster int
}

// postmasterPID finds the node's postmaster as the parent of one of its
// backends, once; 0 when the node is not on this machine.
func (n *Node) postmasterPID() int {
	n.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var backend int
		if err := n.Pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
			return
		}
		f, ok := procStat(backend)
		if !ok || !strings.HasPrefix(f.comm, "postgres") {
			return
		}
		if parent, ok := procStat(f.ppid); ok && strings.HasPrefix(parent.comm, "postgres") {
			n.postmaster = f.ppid
		}
	})
	return n.postmaster
}

// sessions is how many sessions the node has started on the target's
// database (pg_stat_database.sessions): each one a backend forked. -1 when
// it cannot be read.
func (n *Node) sessions(ctx context.Context) int64 {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var s int64
	if err := n.Pool.QueryRow(ctx, `SELECT sessions FROM pg_stat_database WHERE datname = current_database()`).Scan(&s); err != nil {
		return -1
	}
	return s
}

// nodes are the target's database servers: Nodes when set, else the one
// PostgreSQL its pool reaches.
func (t *Target) nodes() []*Node {
	t.nodesOnce.Do(func() {
		if len(t.Nodes) == 0 && t.Pool != nil {
			t.Nodes = []*Node{{Name: "postgres", Pool: t.Pool}}
		}
	})
	return t.Nodes
}

// nodeUse is one node's CPU time and sessions at a reading.
type nodeUse struct {
	cpu      time.Duration
	cpuOK    bool
	sessions int64
}

// NodeCost is what one node spent per unit of work between two readings.
type NodeCost struct {
	Name   string `json:"name"`
	Worker bool   `json:"worker,omitempty"`
	// CPUus is microseconds of CPU per unit, over the postmaster's process
	// tree (backends, background workers and exited backends); 0 when the
	// node is not on this machine (CPUKnown false).
	CPUus    float64 `json:"cpu_us"`
	CPUKnown bool    `json:"cpu_known"`
	// Sessions is how many backends the node started on the database
	// meanwhile (pg_stat_database.sessions).
	Sessions int64 `json:"sessions"`
}

// Cost is what a unit of work cost each party between two readings.
type Cost struct {
	Unit  string `json:"unit"`
	Units int64  `json:"units"`
	// Seconds is the wall time between the readings.
	Seconds float64 `json:"seconds"`
	// OrderdUS is the orderd server processes' CPU per unit; OrderdKnown
	// false when they could not be read (in-process, or a server given by
	// URL without its pid).
	OrderdUS    float64    `json:"orderd_cpu_us"`
	OrderdKnown bool       `json:"orderd_known"`
	GeneratorUS float64    `json:"generator_cpu_us"`
	Nodes       []NodeCost `json:"nodes"`
}

// DatabaseUS is the CPU per unit of every node.
func (c *Cost) DatabaseUS() float64 {
	var s float64
	for _, n := range c.Nodes {
		s += n.CPUus
	}
	return s
}

// TotalUS is the CPU per unit of every node and orderd: what the
// deployment spends on a unit, the load generator left out.
func (c *Cost) TotalUS() float64 { return c.DatabaseUS() + c.OrderdUS }

// Sessions is how many backends every node started meanwhile.
func (c *Cost) Sessions() int64 {
	var s int64
	for _, n := range c.Nodes {
		s += max(n.Sessions, 0)
	}
	return s
}

// Complete says whether every party's CPU was read.
func (c *Cost) Complete() bool {
	if !c.OrderdKnown {
		return false
	}
	for _, n := range c.Nodes {
		if !n.CPUKnown {
			return false
		}
	}
	return true
}

// cost is the cost per unit between from and to.
func (t *Target) cost(unit string, from, to cpuUse, units int64) *Cost {
	c := &Cost{Unit: unit, Units: units, Seconds: round3(to.at.Sub(from.at).Seconds())}
	if units <= 0 {
		return c
	}
	us := func(d time.Duration) float64 { return round1(float64(d.Microseconds()) / float64(units)) }
	c.GeneratorUS = us(to.generator - from.generator)
	if from.orderdOK && to.orderdOK {
		c.OrderdUS, c.OrderdKnown = us(to.orderd-from.orderd), true
	}
	for i, n := range t.nodes() {
		if i >= len(from.nodes) || i >= len(to.nodes) {
			break
		}
		a, b := from.nodes[i], to.nodes[i]
		nc := NodeCost{Name: n.Name, Worker: n.Worker, Sessions: -1}
		if a.cpuOK && b.cpuOK {
			nc.CPUus, nc.CPUKnown = us(b.cpu-a.cpu), true
		}
		if a.sessions >= 0 && b.sessions >= 0 {
			nc.Sessions = b.sessions - a.sessions
		}
		c.Nodes = append(c.Nodes, nc)
	}
	return c
}

// addCost sums costs of one unit measured over several spans (rounds of a
// scenario), weighing each by its units.
func addCost(a, b *Cost) *Cost {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	units := a.Units + b.Units
	if units == 0 {
		return a
	}
	w := func(x, y float64) float64 {
		return round1((x*float64(a.Units) + y*float64(b.Units)) / float64(units))
	}
	s := &Cost{Unit: a.Unit, Units: units, Seconds: round3(a.Seconds + b.Seconds),
		OrderdUS: w(a.OrderdUS, b.OrderdUS), OrderdKnown: a.OrderdKnown && b.OrderdKnown,
		GeneratorUS: w(a.GeneratorUS, b.GeneratorUS), Nodes: slices.Clone(a.Nodes)}
	for i := range s.Nodes {
		if i >= len(b.Nodes) {
			break
		}
		s.Nodes[i].CPUus = w(a.Nodes[i].CPUus, b.Nodes[i].CPUus)
		s.Nodes[i].CPUKnown = a.Nodes[i].CPUKnown && b.Nodes[i].CPUKnown
		s.Nodes[i].Sessions = a.Nodes[i].Sessions + b.Nodes[i].Sessions
	}
	return s
}
