package sigd

import (
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sigdata/sig/matching"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
)

// metrics exports sigd's own series (the queue and autoscaler register
// theirs): hit rates, reuse, task latency, trainer goodput.
type metrics struct {
	s *Server

	submits, components, componentHits *prometheus.CounterVec
	blockRequests, blockHits           prometheus.Counter
	taskLatency                        prometheus.Histogram
	phases                             *prometheus.HistogramVec
	trainerGoodput                     *prometheus.GaugeVec

	reuseMu   sync.Mutex
	reuse     matching.Reuse
	reuseAt   time.Time
	latencyMu sync.Mutex
	latencies []float64 // recent task latencies, for p50/p99 in Stats
}

var (
	descReuseMean = prometheus.NewDesc("sig_pipelines_per_memo_block_mean", "Mean number of pipelines using each ready memoized block.", nil, nil)
	descReuseMax  = prometheus.NewDesc("sig_pipelines_per_memo_block_max", "Largest number of pipelines using one ready memoized block.", nil, nil)
	descMemo      = prometheus.NewDesc("sig_memo_blocks", "Memoized blocks by state.", []string{"state"}, nil)
	descMemoBytes = prometheus.NewDesc("sig_memo_bytes", "Bytes of ready memoized blocks.", nil, nil)
	descComps     = prometheus.NewDesc("sig_components", "Components in the matching cache.", nil, nil)
	descPipelines = prometheus.NewDesc("sig_pipelines", "Registered pipelines.", nil, nil)
	descSegBytes  = prometheus.NewDesc("sig_worker_segment_cache_bytes_total",
		"Raw column bytes in-process workers asked their segment cache for, by outcome (hit: served without a GET).", []string{"outcome"}, nil)
	descSegResident = prometheus.NewDesc("sig_worker_segment_cache_resident_bytes", "Raw column bytes the workers' segment cache holds.", nil, nil)
)

func newMetrics(s *Server) *metrics {
	return &metrics{
		s:             s,
		submits:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sig_submits_total", Help: "Graph submits."}, []string{"client"}),
		components:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sig_submit_components_total", Help: "Components in submitted graphs."}, []string{"client"}),
		componentHits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sig_submit_component_hits_total", Help: "Submitted components already in the matching cache."}, []string{"client"}),
		blockRequests: prometheus.NewCounter(prometheus.CounterOpts{Name: "sig_block_requests_total", Help: "(component, block) pairs requested by submits."}),
		blockHits:     prometheus.NewCounter(prometheus.CounterOpts{Name: "sig_block_hits_total", Help: "Requested (component, block) pairs already memoized."}),
		taskLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sig_task_latency_seconds",
			Help: "Time from a task's enqueue (or last state change) to its memo block being ready.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 16)}),
		phases: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sig_worker_phase_seconds",
			Help:    "Time in-process memoization runs spend reading raw columns, transforming and writing memo objects.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"phase"}),
		trainerGoodput: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sig_trainer_reported_goodput_ratio",
			Help: "Goodput reported by trainer jobs."}, []string{"client", "training_job", "kind"}),
	}
}

// kept are the metrics m keeps (the others it computes when collected).
func (m *metrics) kept() []prometheus.Collector {
	return []prometheus.Collector{m.submits, m.components, m.componentHits, m.blockRequests, m.blockHits, m.taskLatency,
		m.phases, m.trainerGoodput}
}

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.kept() {
		c.Describe(ch)
	}
	for _, d := range []*prometheus.Desc{descReuseMean, descReuseMax, descMemo, descMemoBytes, descComps, descPipelines, descSegBytes, descSegResident} {
		ch <- d
	}
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.kept() {
		c.Collect(ch)
	}
	seg := m.s.segments.Stats() // zero without in-process workers
	ch <- prometheus.MustNewConstMetric(descSegBytes, prometheus.CounterValue, float64(seg.HitBytes), "hit")
	ch <- prometheus.MustNewConstMetric(descSegBytes, prometheus.CounterValue, float64(seg.MissBytes), "miss")
	ch <- prometheus.MustNewConstMetric(descSegResident, prometheus.GaugeValue, float64(seg.ResidentBytes))
	r, err := m.reuseStats()
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(descReuseMean, prometheus.GaugeValue, r.PipelinesPerBlockMean)
	ch <- prometheus.MustNewConstMetric(descReuseMax, prometheus.GaugeValue, float64(r.PipelinesPerBlockMax))
	ch <- prometheus.MustNewConstMetric(descMemo, prometheus.GaugeValue, float64(r.ReadyBlocks), "ready")
	ch <- prometheus.MustNewConstMetric(descMemo, prometheus.GaugeValue, float64(r.PendingBlocks), "pending")
	ch <- prometheus.MustNewConstMetric(descMemo, prometheus.GaugeValue, float64(r.FailedBlocks), "failed")
	ch <- prometheus.MustNewConstMetric(descMemoBytes, prometheus.GaugeValue, float64(r.ReadyBytes))
	ch <- prometheus.MustNewConstMetric(descComps, prometheus.GaugeValue, float64(r.Components))
	ch <- prometheus.MustNewConstMetric(descPipelines, prometheus.GaugeValue, float64(r.Pipelines))
}

// reuseStats scans the cache at most every two seconds.
func (m *metrics) reuseStats() (matching.Reuse, error) {
	m.reuseMu.Lock()
	defer m.reuseMu.Unlock()
	now := m.s.clock.Now()
	if !m.reuseAt.IsZero() && now.Sub(m.reuseAt) < 2*time.Second {
		return m.reuse, nil
	}
	r, err := m.s.frontend.Reuse()
	if err != nil {
		return r, err
	}
	m.reuse, m.reuseAt = r, now
	return r, nil
}

func (m *metrics) observeSubmit(r *matching.SubmitResult) {
	c := r.Solution.Client
	m.submits.WithLabelValues(c).Inc()
	m.components.WithLabelValues(c).Add(float64(r.Components))
	m.componentHits.WithLabelValues(c).Add(float64(r.ComponentHits))
	m.blockRequests.Add(float64(r.BlockHits + r.BlockMisses))
	m.blockHits.Add(float64(r.BlockHits))
	m.reuseChanged()
}

// reuseChanged drops the cached reuse scan: a submit registered a range,
// or a memo block became ready. The cache only spares rescans between
// changes (scrapes, the autoscaler's Stats every second); a Stats after a
// change must see it (a fleet run checks its reuse against its own count
// as soon as its last block is ready).
func (m *metrics) reuseChanged() {
	m.reuseMu.Lock()
	m.reuseAt = time.Time{}
	m.reuseMu.Unlock()
}

func (m *metrics) phase(name string, d time.Duration) {
	m.phases.WithLabelValues(name).Observe(d.Seconds())
}

func (m *metrics) taskDone(d time.Duration) {
	m.reuseChanged() // a memo block is ready
	m.taskLatency.Observe(d.Seconds())
	m.latencyMu.Lock()
	m.latencies = append(m.latencies, d.Seconds())
	if len(m.latencies) > 4096 {
		m.latencies = append(m.latencies[:0], m.latencies[len(m.latencies)-2048:]...)
	}
	m.latencyMu.Unlock()
}

func (m *metrics) trainerReport(t *sigv1.TrainerStatus) {
	m.trainerGoodput.WithLabelValues(t.Client, t.Job, "scheduling").Set(t.SchedulingGoodput)
	m.trainerGoodput.WithLabelValues(t.Client, t.Job, "runtime").Set(t.RuntimeGoodput)
	m.trainerGoodput.WithLabelValues(t.Client, t.Job, "program").Set(t.ProgramGoodput)
	m.trainerGoodput.WithLabelValues(t.Client, t.Job, "mpg").Set(t.Mpg)
}

// trainerForget drops a forgotten job's series.
func (m *metrics) trainerForget(client, job string) {
	m.trainerGoodput.DeletePartialMatch(prometheus.Labels{"client": client, "training_job": job})
}

func (m *metrics) latencyQuantiles() (p50, p99 float64) {
	m.latencyMu.Lock()
	xs := append([]float64(nil), m.latencies...)
	m.latencyMu.Unlock()
	if len(xs) == 0 {
		return 0, 0
	}
	sort.Float64s(xs)
	q := func(p float64) float64 { return xs[min(len(xs)-1, int(p*float64(len(xs))))] }
	return q(0.5), q(0.99)
}

// StatsSnapshot gathers the Stats RPC's answer (paper IV.A's hit rate and
// reuse figures, queues and workers).
func (s *Server) StatsSnapshot() (*sigv1.StatsResponse, error) {
	fs := s.frontend.Stats()
	r, err := s.metrics.reuseStats()
	if err != nil {
		return nil, err
	}
	qs := s.queue.Stats()
	out := &sigv1.StatsResponse{
		Submits: fs.Submits, BlockRequests: fs.BlockRequests,
		PipelinesPerBlockMean: r.PipelinesPerBlockMean, PipelinesPerBlockMax: uint32(r.PipelinesPerBlockMax),
		Quarantined: uint32(qs.Quarantined), TasksCompleted: qs.Completed,
		Components: uint32(r.Components), MemoBlocks: uint64(r.ReadyBlocks), MemoBytes: r.ReadyBytes,
		Pipelines: uint32(r.Pipelines), Queues: depthsToProto(s.queue.Depths()),
	}
	for _, n := range r.BlocksByPipelines {
		out.MemoBlocksByPipelines = append(out.MemoBlocksByPipelines, uint64(n))
	}
	if fs.Components > 0 {
		out.ComponentHitRate = float64(fs.ComponentHits) / float64(fs.Components)
	}
	if fs.BlockRequests > 0 {
		out.BlockHitRate = float64(fs.BlockHits) / float64(fs.BlockRequests)
	}
	if s.scaler != nil {
		out.WorkersActual, out.WorkersDesired = uint32(s.scaler.Actual()), uint32(s.scaler.Desired())
	}
	out.TaskLatencyP50Seconds, out.TaskLatencyP99Seconds = s.metrics.latencyQuantiles()
	return out, nil
}
