package jobs

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// Metrics is River worker middleware that counts every job worked in this
// process and times how long it waited past its scheduled time and how long
// it ran, per queue. It sees each job as it runs, so nothing is sampled and
// nothing is dropped.
type Metrics struct {
	river.MiddlewareDefaults
	worked *prometheus.CounterVec
	wait   *prometheus.HistogramVec
	run    *prometheus.HistogramVec
}

var _ rivertype.WorkerMiddleware = (*Metrics)(nil)

// NewMetrics registers the job series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	buckets := []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	m := &Metrics{
		worked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderd_river_jobs_worked_total", Help: "River jobs worked by this process, by queue, kind and outcome (ok, error, panic).",
		}, []string{"queue", "kind", "outcome"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "orderd_river_job_wait_seconds", Help: "Time from a River job's scheduled time to the start of its attempt, by queue: how late timers fire.",
			Buckets: buckets,
		}, []string{"queue"}),
		run: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "orderd_river_job_run_seconds", Help: "Time a River job's attempt took, by queue.",
			Buckets: buckets,
		}, []string{"queue"}),
	}
	reg.MustRegister(m.worked, m.wait, m.run)
	return m
}

// Work implements rivertype.WorkerMiddleware.
func (m *Metrics) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) (err error) {
	start := time.Now()
	if job.AttemptedAt != nil {
		m.wait.WithLabelValues(job.Queue).Observe(max(0, job.AttemptedAt.Sub(job.ScheduledAt).Seconds()))
	}
	outcome := "panic"
	defer func() {
		m.run.WithLabelValues(job.Queue).Observe(time.Since(start).Seconds())
		m.worked.WithLabelValues(job.Queue, job.Kind, outcome).Inc()
	}()
	err = doInner(ctx)
	outcome = "ok"
	if err != nil {
		outcome = "error"
	}
	return err
}

// timerFired counts a timer this process fired itself (Backstop), outside
// River's workers, and how late: with River's jobs, so that the series say
// how late every timer fired.
func (m *Metrics) timerFired(queue, kind string, late time.Duration) {
	if m == nil {
		return
	}
	m.wait.WithLabelValues(queue).Observe(max(0, late.Seconds()))
	m.worked.WithLabelValues(queue, kind, "ok").Inc()
}
