package ops

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderd/orderd/store"
)

// BusiestMerchants bounds the merchants labelled in the per-merchant queue
// series: a label per merchant of a platform would be thousands of series.
const BusiestMerchants = 20

// scrapeTimeout bounds the queries of one scrape.
const scrapeTimeout = 3 * time.Second

// readEvery is how often at most the database is read for a scrape: however
// many scrapers and however often they ask, the queries run at this pace.
const readEvery = 5 * time.Second

// QueueCollector reads the lines of the busiest merchants and River's
// unfinished jobs, at most every readEvery; scrapes in between answer the
// last reading.
type QueueCollector struct {
	store *store.Store

	mu       sync.Mutex
	readAt   time.Time
	readings []prometheus.Metric

	depth      *prometheus.Desc
	oldest     *prometheus.Desc
	totalDepth *prometheus.Desc
	lines      *prometheus.Desc
	jobs       *prometheus.Desc
}

// NewQueueCollector reads from st.
func NewQueueCollector(st *store.Store) *QueueCollector {
	return &QueueCollector{
		store: st,
		depth: prometheus.NewDesc("orderd_merchant_queue_depth",
			"Queued orders of each of the busiest merchants (at most 20, by queue depth).", []string{"merchant_id"}, nil),
		oldest: prometheus.NewDesc("orderd_merchant_queue_oldest_wait_seconds",
			"How long the longest-waiting queued order of each of the busiest merchants has waited.", []string{"merchant_id"}, nil),
		totalDepth: prometheus.NewDesc("orderd_queued_orders", "Queued orders of every merchant.", nil, nil),
		lines:      prometheus.NewDesc("orderd_merchants_with_queue", "Merchants with at least one queued order.", nil, nil),
		jobs: prometheus.NewDesc("orderd_river_jobs",
			"River jobs not yet finished, by queue and state (available, pending, retryable, running, scheduled).", []string{"queue", "state"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *QueueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.depth, c.oldest, c.totalDepth, c.lines, c.jobs} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *QueueCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.readAt) >= readEvery {
		c.readings = c.read()
		c.readAt = time.Now()
	}
	for _, m := range c.readings {
		ch <- m
	}
}

func (c *QueueCollector) read() []prometheus.Metric {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	var out []prometheus.Metric
	add := func(m prometheus.Metric) { out = append(out, m) }
	if busiest, err := c.store.BusiestQueues(ctx, BusiestMerchants); err != nil {
		add(prometheus.NewInvalidMetric(c.depth, err))
	} else {
		for _, q := range busiest {
			id := q.MerchantID.String()
			add(prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(q.Queued), id))
			add(prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, q.OldestWait.Seconds(), id))
		}
	}
	if all, err := c.store.AllQueues(ctx); err != nil {
		add(prometheus.NewInvalidMetric(c.totalDepth, err))
	} else {
		add(prometheus.MustNewConstMetric(c.totalDepth, prometheus.GaugeValue, float64(all.Queued)))
		add(prometheus.MustNewConstMetric(c.lines, prometheus.GaugeValue, float64(all.Merchants)))
	}
	if counts, err := c.store.UnfinishedJobs(ctx); err != nil {
		add(prometheus.NewInvalidMetric(c.jobs, err))
	} else {
		for _, n := range counts {
			add(prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(n.Count), n.Queue, n.State))
		}
	}
	return out
}

// PoolCollector exports a pgx pool's statistics.
type PoolCollector struct {
	pool                                     *pgxpool.Pool
	acquired, idle, total, max, constructing *prometheus.Desc
	acquires, emptyAcquires, cancelled       *prometheus.Desc
	acquireSeconds, emptyWaitSeconds         *prometheus.Desc
}

// NewPoolCollector reads pool's Stat at each scrape.
func NewPoolCollector(pool *pgxpool.Pool) *PoolCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("orderd_db_pool_"+name, help, nil, nil)
	}
	return &PoolCollector{
		pool:             pool,
		acquired:         d("acquired_conns", "Connections in use."),
		idle:             d("idle_conns", "Idle connections."),
		total:            d("total_conns", "Open connections, in use, idle and being opened."),
		max:              d("max_conns", "The pool's connection limit (ORDERD_MAX_CONNS)."),
		constructing:     d("constructing_conns", "Connections being opened."),
		acquires:         d("acquires_total", "Connections acquired from the pool."),
		emptyAcquires:    d("empty_acquires_total", "Acquisitions that had to wait because no connection was idle."),
		cancelled:        d("canceled_acquires_total", "Acquisitions abandoned because their context ended."),
		acquireSeconds:   d("acquire_seconds_total", "Time spent acquiring connections."),
		emptyWaitSeconds: d("empty_acquire_wait_seconds_total", "Time spent waiting for a connection when none was idle."),
	}
}

// Describe implements prometheus.Collector.
func (c *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.acquired, c.idle, c.total, c.max, c.constructing,
		c.acquires, c.emptyAcquires, c.cancelled, c.acquireSeconds, c.emptyWaitSeconds} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stat()
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(c.acquired, float64(s.AcquiredConns()))
	gauge(c.idle, float64(s.IdleConns()))
	gauge(c.total, float64(s.TotalConns()))
	gauge(c.max, float64(s.MaxConns()))
	gauge(c.constructing, float64(s.ConstructingConns()))
	counter(c.acquires, float64(s.AcquireCount()))
	counter(c.emptyAcquires, float64(s.EmptyAcquireCount()))
	counter(c.cancelled, float64(s.CanceledAcquireCount()))
	counter(c.acquireSeconds, s.AcquireDuration().Seconds())
	counter(c.emptyWaitSeconds, s.EmptyAcquireWaitTime().Seconds())
}
