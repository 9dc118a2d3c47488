package bench

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func orderCost(orderd float64, sessions int64, nodes ...NodeCost) *Result {
	for i := range nodes {
		nodes[i].CPUKnown = true
	}
	return &Result{Costs: map[string]*Cost{"order": {Unit: "order", Units: 10000, OrderdUS: orderd, OrderdKnown: true, Nodes: nodes}}}
}

// The comparison judges each goal of a cluster from the figures it was
// given, and projects N workers from the workers' summed CPU per order,
// bounded by the coordinator's.
func TestCompareDeploymentsJudgesTheClusterGoals(t *testing.T) {
	one := orderCost(100, 0, NodeCost{Name: "postgres", CPUus: 120})

	t.Run("a cluster that meets every goal", func(t *testing.T) {
		citus := orderCost(110, 0,
			NodeCost{Name: "coordinator", CPUus: 20},
			NodeCost{Name: "worker a", Worker: true, CPUus: 150, Sessions: 40},
			NodeCost{Name: "worker b", Worker: true, CPUus: 150, Sessions: 50})
		c := CompareDeployments(one, citus, 0, 2)
		require.Equal(t, "order", c.Unit)
		require.InDelta(t, 430.0/220, c.Ratio, 0.001)
		require.InDelta(t, 20.0/320, c.CoordinatorShare, 0.001)
		for _, g := range c.Goals {
			require.True(t, g.Met, "%s: %s", g.Text, g.Measured)
		}
		// Workers spend 300 µs per order together: one worker of 2 cores
		// places 6,666/s; the coordinator (20 µs) stops the line at
		// 100,000/s, past 15 workers.
		require.Equal(t, ProjectionPoint{Workers: 1, PerS: 6666, Bound: "workers"}, c.Projection[0])
		require.Equal(t, ProjectionPoint{Workers: 8, PerS: 53333, Bound: "workers"}, c.Projection[3])
		require.Equal(t, ProjectionPoint{Workers: 16, PerS: 100000, Bound: "coordinator"}, c.Projection[4])
	})

	t.Run("a cluster that meets none", func(t *testing.T) {
		citus := orderCost(900, 0,
			NodeCost{Name: "coordinator", CPUus: 2000},
			NodeCost{Name: "worker a", Worker: true, CPUus: 1500, Sessions: 300})
		c := CompareDeployments(one, citus, 7, 2)
		for _, g := range c.Goals {
			require.False(t, g.Met, "%s: %s", g.Text, g.Measured)
		}
		require.Equal(t, "coordinator", c.Projection[0].Bound)
	})

	t.Run("a party whose CPU was not read meets no CPU goal", func(t *testing.T) {
		citus := orderCost(110, 0, NodeCost{Name: "coordinator", CPUus: 1}, NodeCost{Name: "worker a", Worker: true, CPUus: 100})
		citus.Costs["order"].Nodes[1].CPUKnown = false
		c := CompareDeployments(one, citus, 0, 2)
		require.False(t, c.Goals[0].Met)
		require.False(t, c.Goals[3].Met)
	})
}

// Rounds measured apart add up weighed by their units, sessions summed.
func TestAddCostWeighsByUnits(t *testing.T) {
	a := &Cost{Unit: "order", Units: 100, OrderdUS: 10, OrderdKnown: true, Nodes: []NodeCost{{Name: "n", CPUus: 100, CPUKnown: true, Sessions: 2}}}
	b := &Cost{Unit: "order", Units: 300, OrderdUS: 30, OrderdKnown: true, Nodes: []NodeCost{{Name: "n", CPUus: 200, CPUKnown: true, Sessions: 3}}}
	s := addCost(addCost(nil, a), b)
	require.Equal(t, int64(400), s.Units)
	require.InDelta(t, 25.0, s.OrderdUS, 0.01)
	require.InDelta(t, 175.0, s.Nodes[0].CPUus, 0.01)
	require.Equal(t, int64(5), s.Nodes[0].Sessions)
	require.Equal(t, 100.0, a.Nodes[0].CPUus, "a sum leaves its parts as they were")
	require.Same(t, a, addCost(a, nil))
}
