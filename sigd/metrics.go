package sigd

import (
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sigdata/sig/matching"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/versions"
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
	// Versioned blocks (package versions): versions followed, the memo tasks
	// they made, and what version GC removed.
	blockVersions, versionTasks      prometheus.Counter
	gcVersions, gcEntries, gcObjects prometheus.Counter
	// Compacted blocks' memo entries (versions.Concatenator, issue 28):
	// concatenated from the parts' or left to recompute, and the packs.
	compactedEntries *prometheus.CounterVec
	compactedPacks   prometheus.Counter

	// walkMu: one walk of the cache for the reuse figures at a time (with
	// its wait). reuseMu guards the figures and the rest, never held
	// during a walk or a wait: submits and completions take it.
	walkMu  sync.Mutex
	reuseMu sync.Mutex
	reuse   matching.Reuse
	reuseAt time.Time // by the server's clock; zero before the first walk
	// reuseDirty: a submit or a completion since the last walk began.
	// walkEnd and walkTook are the last walk's, in real time: the walk's
	// cost is the machine's.
	reuseDirty  bool
	walkEnd     time.Time
	walkTook    time.Duration
	walks       prometheus.Counter
	walkSeconds prometheus.Counter
	// repacked counts memo columns switched to the pack a worker copied
	// them into (issue 28).
	repacked  prometheus.Counter
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
		blockVersions: prometheus.NewCounter(prometheus.CounterOpts{Name: "sig_block_versions_total",
			Help: "New versions of raw blocks (late rows, updates, deletions) sigd invalidated memo entries for."}),
		versionTasks: prometheus.NewCounter(prometheus.CounterOpts{Name: "sig_version_memo_tasks_total",
			Help: "Memo entries new block versions made pending: components reading a changed column, memoized over the block."}),
		gcVersions: prometheus.NewCounter(prometheus.CounterOpts{Name: "sig_version_gc_versions_total",
			Help: "Raw block versions version GC removed (no pin and not now saw them)."}),
		gcEntries: prometheus.NewCounter(prometheus.CounterOpts{Name: "sig_version_gc_memo_entries_total",
			Help: "Memo entries version GC removed (no kept version reads them)."}),
		gcObjects: prometheus.NewCounter(prometheus.CounterOpts{Name: "sig_version_gc_objects_total",
			Help: "Raw and memo objects version GC deleted."}),
		compactedEntries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sig_compacted_memo_entries_total",
			Help: "Memo entries of compacted blocks' memoized components, by outcome: concatenated from the parts' columns into a pack, or left to recompute (not row-wise, a part not ready, ...)."},
			[]string{"outcome"}),
		compactedPacks: prometheus.NewCounter(prometheus.CounterOpts{Name: "sig_compacted_memo_packs_total",
			Help: "Packs written for compacted blocks from their parts' memo columns."}),
		walks: prometheus.NewCounter(prometheus.CounterOpts{Name: "sig_reuse_walks_total",
			Help: "Walks of the matching cache for the reuse figures (Stats, /metrics)."}),
		walkSeconds: prometheus.NewCounter(prometheus.CounterOpts{Name: "sig_reuse_walk_seconds_total",
			Help: "Time spent walking the matching cache for the reuse figures."}),
		repacked: prometheus.NewCounter(prometheus.CounterOpts{Name: "sig_memo_repacked_total",
			Help: "Memo columns switched to the pack a worker copied them into with a batch of their block (issue 28)."}),
	}
}

// kept are the metrics m keeps (the others it computes when collected).
func (m *metrics) kept() []prometheus.Collector {
	return []prometheus.Collector{m.submits, m.components, m.componentHits, m.blockRequests, m.blockHits, m.taskLatency,
		m.phases, m.trainerGoodput, m.walks, m.walkSeconds, m.blockVersions, m.versionTasks, m.gcVersions, m.gcEntries, m.gcObjects,
		m.repacked, m.compactedEntries, m.compactedPacks}
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
		if c == m.walks || c == m.walkSeconds {
			continue // below, after this scrape's own walk
		}
		c.Collect(ch)
	}
	// The walk counters are sent after reuseStats: the registry reads a
	// counter's value when it takes it from ch, so sent before the walk
	// they would or would not count this scrape's walk, by a race.
	defer m.walkSeconds.Collect(ch)
	defer m.walks.Collect(ch)
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

// reuseWalkSpacing: after a walk of the cache for the reuse figures, the
// next one begins no sooner than this many of its durations after it. A
// walk is linear in the cache (seconds at a million components,
// bench/scale.txt), every submit and completion changes the figures, and
// Stats and /metrics are asked often (the web UI's sampler, a fleet's
// autoscaler every second, Prometheus): a busy sigd with a large cache
// used to walk it on nearly every call. With the spacing, walks take at
// most 1/(1+reuseWalkSpacing) of the time whatever the cache's size.
const reuseWalkSpacing = 10

// reuseWalkFree: a walk shorter than this is redone whenever the figures
// are stale, without the spacing (a small cache; at most this per call).
const reuseWalkFree = 5 * time.Millisecond

// reuseWalkMaxWait: a call waits for the spacing to pass, then walks, when
// that is at most this long: the figures after a change stay exact (a fleet
// run checks them against its own count as soon as its last block is
// ready) for walks up to reuseWalkMaxWait/reuseWalkSpacing (200 ms: tens of
// thousands of components). A longer wait answers the last walk's figures.
const reuseWalkMaxWait = 2 * time.Second

// reuseStats returns the reuse figures, walking the cache when they are
// older than two seconds or changed since the last walk began, within the
// spacing above.
func (m *metrics) reuseStats() (matching.Reuse, error) {
	m.walkMu.Lock()
	defer m.walkMu.Unlock()
	m.reuseMu.Lock()
	r, at, dirty, end, took := m.reuse, m.reuseAt, m.reuseDirty, m.walkEnd, m.walkTook
	m.reuseMu.Unlock()
	if !at.IsZero() {
		if !dirty && m.s.clock.Now().Sub(at) < 2*time.Second {
			return r, nil
		}
		if took >= reuseWalkFree {
			wait := reuseWalkSpacing*took - time.Since(end)
			if wait > reuseWalkMaxWait {
				return r, nil
			}
			if wait > 0 {
				time.Sleep(wait)
			}
		}
	}
	// Changes from here on are not in this walk's view.
	m.reuseMu.Lock()
	m.reuseDirty = false
	m.reuseMu.Unlock()
	now, t0 := m.s.clock.Now(), time.Now()
	r, err := m.s.frontend.Reuse()
	if err != nil {
		m.reuseMu.Lock()
		m.reuseDirty = true
		m.reuseMu.Unlock()
		return r, err
	}
	end = time.Now()
	m.walks.Inc()
	m.walkSeconds.Add(end.Sub(t0).Seconds())
	m.reuseMu.Lock()
	m.reuse, m.reuseAt, m.walkEnd, m.walkTook = r, now, end, end.Sub(t0)
	m.reuseMu.Unlock()
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

// reuseChanged marks the reuse figures stale: a submit registered a range,
// or a memo block became ready. The next Stats or scrape walks the cache
// again, within reuseWalkSpacing (reuseStats); between changes the figures
// spare rescans (scrapes, the autoscaler's Stats every second).
func (m *metrics) reuseChanged() {
	m.reuseMu.Lock()
	m.reuseDirty = true
	m.reuseMu.Unlock()
}

func (m *metrics) phase(name string, d time.Duration) {
	m.phases.WithLabelValues(name).Observe(d.Seconds())
}

func (m *metrics) versionChanged(inv matching.Invalidation) {
	m.blockVersions.Inc()
	m.versionTasks.Add(float64(len(inv.Tasks)))
	if len(inv.Tasks) > 0 {
		m.reuseChanged()
	}
}

func (m *metrics) versionGC(r versions.GCResult) {
	m.gcVersions.Add(float64(r.Versions))
	m.gcEntries.Add(float64(r.MemoEntries))
	m.gcObjects.Add(float64(r.Objects))
	if r.MemoEntries > 0 {
		m.reuseChanged()
	}
}

func (m *metrics) concatenated(r versions.ConcatResult) {
	m.compactedEntries.WithLabelValues("concatenated").Add(float64(r.Concatenated))
	m.compactedEntries.WithLabelValues("recompute").Add(float64(r.LeftTotal()))
	m.compactedPacks.Add(float64(r.Packs))
	if r.Concatenated > 0 {
		m.reuseChanged()
	}
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
func (s *Server) StatsSnapshot() (*sigv1.StatsResponse, error) { return s.statsSnapshot(true) }

// statsSnapshot is StatsSnapshot, without the figures of the reuse walk
// (components, pipelines, memo blocks and their reuse, all zero) unless
// reuse: the web UI's charts sample it every 5 s and plot none of those,
// and at a million components the walk they caused took one of the
// machine's two cores for seconds while submits waited (bench/scale.txt).
func (s *Server) statsSnapshot(reuse bool) (*sigv1.StatsResponse, error) {
	fs := s.frontend.Stats()
	var r matching.Reuse
	if reuse {
		var err error
		if r, err = s.metrics.reuseStats(); err != nil {
			return nil, err
		}
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
