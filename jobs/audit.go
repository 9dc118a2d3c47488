package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"github.com/orderd/orderd/store"
)

// NewAuditGauge registers orderd_audit_violations{check} on reg.
func NewAuditGauge(reg prometheus.Registerer) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "orderd_audit_violations",
		Help: "Rows violating each audit check at the last periodic audit.",
	}, []string{"check"})
	reg.MustRegister(g)
	return g
}

// AuditArgs runs every audit check.
type AuditArgs struct{}

func (AuditArgs) Kind() string { return "audit" }

func (AuditArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 2, UniqueOpts: river.UniqueOpts{ByPeriod: 30 * time.Second}}
}

// AuditWorker runs the checks and exports their counts, so that a broken
// invariant pages someone instead of waiting for an auditor.
type AuditWorker struct {
	river.WorkerDefaults[AuditArgs]
	store *store.Store
	gauge *prometheus.GaugeVec
}

func (w *AuditWorker) Work(ctx context.Context, _ *river.Job[AuditArgs]) error {
	report, err := w.store.Audit(ctx)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	for _, c := range report.Checks {
		w.gauge.WithLabelValues(c.Name).Set(float64(c.Violations))
	}
	return nil
}

func (w *AuditWorker) Timeout(*river.Job[AuditArgs]) time.Duration { return 55 * time.Second }
