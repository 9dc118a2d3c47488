package bench

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOrderCPUCountsEveryPartyOrNone(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra map[string]any
		want  float64
		ok    bool
	}{
		{"separate processes", map[string]any{"order_orderd_cpu_us": 90.0, "order_generator_cpu_us": 50.0, "order_postgres_cpu_us": 110.0}, 250, true},
		{"in process", map[string]any{"order_orderd_and_generator_cpu_us": 140.0, "order_postgres_cpu_us": 110.0}, 250, true},
		{"a server elsewhere", map[string]any{"order_generator_cpu_us": 50.0, "order_postgres_cpu_us": 110.0}, 160, false},
		{"a database elsewhere", map[string]any{"order_orderd_cpu_us": 90.0, "order_generator_cpu_us": 50.0}, 140, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := orderCPU(tc.extra)
			require.Equal(t, tc.ok, ok)
			require.InDelta(t, tc.want, got, 0.001)
		})
	}
}

func TestPlacementGoalsAreAgainstOrderdsTables(t *testing.T) {
	res := &Result{PerS: 3000, Extra: map[string]any{}}
	setBaselines(res, Baseline{Name: "plain", BestPerS: 6000}, Baseline{Name: "orderd_tables", BestPerS: 2500})
	judgeAgainstOwnTables(res)
	require.InDelta(t, 0.5, res.Ratio, 0.001, "the table's ratio stays against the first baseline")
	require.InDelta(t, 1.2, res.Extra["ratio_orderd_tables"], 0.001)
}
