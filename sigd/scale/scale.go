package scale

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// Schema names these results and their version in the JSON ("schema"),
// so a reader handed another report (the fleet's) says so instead of
// reading zeros. The version changes when a field changes meaning or
// unit, or goes; adding a field does not change it (readers ignore fields
// they do not know, and a missing field reads as zero, which every field
// documents as "not measured").
const Schema = "sig.scale/v1"

// ErrSchema: the file is not scale results of this Schema.
var ErrSchema = errors.New("scale: not scale results of schema " + Schema)

// Results is one run of the scale curve: the machine, the settings, and
// one Point per cache size, smallest first. Its JSON is the contract with
// its readers (`sigctl report`): the fields named in Point's first block
// keep their names and units.
type Results struct {
	Schema string `json:"schema"` // Schema
	// Machine says where it ran, in one line (CPUs, memory, Go, OS);
	// MachineDetail is the same as fields.
	Machine       string    `json:"machine"`
	MachineDetail Machine   `json:"machine_detail"`
	Started       time.Time `json:"started"`
	// Seconds is the whole run's wall time, fills included.
	Seconds float64 `json:"seconds"`
	Commit  string  `json:"commit,omitempty"`
	Config  Config  `json:"config"`
	Points  []Point `json:"points"`
	// Notes say where the curve stops scaling and why: the run adds those
	// its figures decide (the target, what grew with the cache), the
	// bench script those its profiles explain.
	Notes []string `json:"notes,omitempty"`
}

// Machine is where the run ran. The load averages (Point.LoadAvg) show how
// much of the machine other processes took: the figures are wall-clock
// latencies.
type Machine struct {
	CPUs      int    `json:"cpus"`
	GoVersion string `json:"go"`
	OS        string `json:"os"`
	// MemoryBytes is the machine's memory (MemTotal).
	MemoryBytes int64 `json:"memory_bytes"`
}

// String is the one-line Results.Machine.
func (m Machine) String() string {
	return fmt.Sprintf("%d CPUs, %.1f GiB, %s, %s", m.CPUs, float64(m.MemoryBytes)/(1<<30), m.GoVersion, m.OS)
}

// Config are the run's settings (the benchmark's knobs, bench/scale.sh).
type Config struct {
	Sizes []int `json:"sizes"` // cached components at each point
	// Blocks is the raw blocks of the measured range; every cached
	// component is memoized over all of them (a memo entry each).
	Blocks int `json:"blocks"`
	// FillInputs is the components per pipeline of the fill.
	FillInputs int `json:"fill_inputs"`
	// BacklogEvery: one fill pipeline in BacklogEvery is left pending,
	// its tasks queued: the queue's backlog grows with the cache.
	BacklogEvery int `json:"backlog_every"`
	// Submits, Reads, Searches are the measured calls per point, each
	// over gRPC and again in process.
	Submits  int `json:"submits"`
	Reads    int `json:"reads"`
	Searches int `json:"searches"`
	// MinNodes and MaxNodes bound a measured submit's graph, in nodes as
	// written: a size is drawn uniformly, then model inputs (5 to 9 nodes
	// each) are added while they fit.
	MinNodes int `json:"min_nodes"`
	MaxNodes int `json:"max_nodes"`
	// MissFraction of a measured submit's inputs are components never
	// seen; the others are drawn from the cached ones, Zipf(ZipfS).
	MissFraction float64 `json:"miss_fraction"`
	ZipfS        float64 `json:"zipf_s"`
	// QueueCycles per point.
	QueueCycles int `json:"queue_cycles"`
	// EvictShare is the share of the cached components the evicted
	// subgraph is part of.
	EvictShare float64 `json:"evict_share"`
	// GCPercent the in-process figures ran with (sigd's default).
	GCPercent int `json:"gc_percent"`
	// MinIODir is where MinIO kept its data ("" a temporary directory on
	// disk; /dev/shm is tmpfs).
	MinIODir string `json:"minio_dir,omitempty"`
	Seed     uint64 `json:"seed"`
}

// Point is every figure at one cache size. The first block is the
// summary a report plots; the rest are the details behind it.
type Point struct {
	// Components is the cached components when the point was measured
	// (the fill's; the measured submits' misses add a few more).
	Components int `json:"components"`
	// SubmitP50Ms, SubmitP99Ms: SubmitGraph over gRPC to the sigd process
	// (Submit), Submits of them.
	SubmitP50Ms float64 `json:"submit_p50_ms"`
	SubmitP99Ms float64 `json:"submit_p99_ms"`
	Submits     int     `json:"submits"`
	// QueueOpsPerS is the work queue's durable operations per second with
	// the point's backlog (Queue.OpsPerSecond).
	QueueOpsPerS float64 `json:"queue_ops_per_s"`
	// PebbleBytes is the size on disk of sigd's three Pebble stores
	// (cache, queue, catalog: Store's sum).
	PebbleBytes int64 `json:"pebble_bytes"`
	// SigdRSSBytes is the sigd process's resident memory after the
	// measured calls (Sigd.RSSBytes).
	SigdRSSBytes int64 `json:"sigd_rss_bytes"`
	// EvictPerS is memo blocks evicted per second by the Evict RPC of a
	// subgraph (each block a memo entry and its object in MinIO:
	// Evict.BlocksPerSecond; Evict.ComponentsPerSecond is per component).
	EvictPerS float64 `json:"evict_per_s"`

	// ReadyBlocks and Pipelines are sigd's own count (the Stats RPC) at
	// the end of the point: ready memo entries, registered pipelines.
	ReadyBlocks int64 `json:"ready_blocks"`
	Pipelines   int   `json:"pipelines"`
	// LoadAvg is /proc/loadavg's 1-minute figure when the point started
	// and ended.
	LoadAvg [2]float64 `json:"load_avg"`

	// FillSeconds grew the cache from the previous point (through
	// matching.Frontend.Submit and Cache.SetMemo, in the benchmark's
	// process); CompactSeconds then compacted it (a settled cache, as a
	// long-running sigd has, not one still compacting a bulk load).
	FillSeconds    float64 `json:"fill_seconds"`
	CompactSeconds float64 `json:"compact_seconds"`

	// Submit is SubmitGraph over gRPC to the sigd process, as a client
	// sees it; SubmitFrontend is the same workload into
	// matching.Frontend.Submit in the benchmark's process (parse
	// included), on the same stores: the difference is gRPC,
	// authentication and the conversion of the answer.
	Submit         Latency     `json:"submit"`
	SubmitFrontend Latency     `json:"submit_frontend"`
	SubmitShape    SubmitShape `json:"submit_shape"`
	// ReadSolution is GetReadSolution of earlier measured pipelines over
	// gRPC; ReadSolutionFrontend is Frontend.ReadSolution in process.
	ReadSolution         Latency `json:"read_solution"`
	ReadSolutionFrontend Latency `json:"read_solution_frontend"`
	// Search is SearchComponents (subgraph queries, some with a client
	// filter; first page of 100) over gRPC as an operator;
	// SearchFrontend is Frontend.Search in process.
	Search         Latency `json:"search"`
	SearchFrontend Latency `json:"search_frontend"`
	// SearchByQuery splits Search by query.
	SearchByQuery []QueryLatency `json:"search_by_query"`
	// Stats is the Stats RPC just after a submit (its reuse figures scan
	// the whole cache; the web UI asks every 5 s).
	Stats Latency `json:"stats"`
	// Reuse is matching.Frontend.Reuse in the benchmark's process, what
	// Stats and every /metrics scrape recompute after any submit: a walk
	// of every pipeline's inputs and every memo entry.
	Reuse Latency `json:"reuse"`

	Queue Queue `json:"queue"`
	Store Store `json:"store"`
	Sigd  Sigd  `json:"sigd"`
	Evict Evict `json:"evict"`
}

// Latency summarizes measured calls, in milliseconds.
type Latency struct {
	N      int     `json:"n"`
	P50Ms  float64 `json:"p50_ms"`
	P90Ms  float64 `json:"p90_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
	MeanMs float64 `json:"mean_ms"`
}

// QueryLatency is the latency of one kind of call (a search query).
type QueryLatency struct {
	Query string `json:"query"`
	Latency
}

// Summarize returns the latency summary of durations (reordered).
func Summarize(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	q := func(p float64) float64 { return ms(ds[min(len(ds)-1, int(p*float64(len(ds))))]) }
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return Latency{N: len(ds), P50Ms: q(0.50), P90Ms: q(0.90), P99Ms: q(0.99), MaxMs: ms(ds[len(ds)-1]),
		MeanMs: ms(sum) / float64(len(ds))}
}

// SubmitShape is what the measured gRPC submits asked for, per submit on
// average, and their block hit rate.
type SubmitShape struct {
	Nodes         float64 `json:"nodes"` // as written
	Components    float64 `json:"components"`
	ComponentHits float64 `json:"component_hits"`
	BlockHits     float64 `json:"block_hits"`
	BlockMisses   float64 `json:"block_misses"`
	TasksEnqueued float64 `json:"tasks_enqueued"`
	BlockHitRate  float64 `json:"block_hit_rate"`
}

// Queue is workers.Queue on sigd's queue store, in the benchmark's process
// while sigd is stopped, with the backlog the fill left.
type Queue struct {
	// Backlog is the tasks queued when the cycles ran.
	Backlog int `json:"backlog"`
	// OpenSeconds is workers.Open: reading the store and rebuilding the
	// queues in memory.
	OpenSeconds float64 `json:"open_seconds"`
	// CyclesPerSecond: Enqueue, Lease (TryLease) and Complete of one task,
	// one after the other, each a durable change (3 queue operations per
	// cycle), at a priority above the backlog's.
	CyclesPerSecond float64 `json:"cycles_per_second"`
	OpsPerSecond    float64 `json:"ops_per_second"`
}

// Store is the on-disk size of sigd's Pebble stores (every file of their
// directories: tables, WAL, manifest), measured after the fill's
// compaction.
type Store struct {
	CacheBytes   int64 `json:"cache_bytes"`
	QueueBytes   int64 `json:"queue_bytes"`
	CatalogBytes int64 `json:"catalog_bytes"`
}

// Sigd is the sigd process (`sigd serve`, a subprocess of the benchmark),
// from /proc/<pid>: RSS after the measured calls and its peak, the CPU it
// used, and how long it took to start serving on the point's stores.
type Sigd struct {
	RSSBytes     int64 `json:"rss_bytes"`      // VmRSS after the measured calls
	PeakRSSBytes int64 `json:"peak_rss_bytes"` // VmHWM: since start
	// GoHeapBytes is go_memstats_heap_inuse_bytes of its /metrics then
	// (the rest of RSS is Pebble's block cache and memtables, stacks,
	// freed pages not yet returned).
	GoHeapBytes int64 `json:"go_heap_bytes"`
	// StartSeconds from exec to serving: opening the stores, rebuilding
	// the queues, rescheduling every pending memo entry (Reconcile).
	StartSeconds float64 `json:"start_seconds"`
	// CPUMsPerSubmit is its user+system CPU over the measured gRPC
	// submits, per submit (background work during them included).
	CPUMsPerSubmit float64 `json:"cpu_ms_per_submit"`
}

// Evict is the eviction, through the Evict RPC as an operator, of a
// subgraph that EvictShare of the cached components contain; each is
// memoized over every block, with a small object per block in MinIO.
type Evict struct {
	Components int     `json:"components"`
	Blocks     int     `json:"blocks"`
	Objects    int     `json:"objects"`
	Seconds    float64 `json:"seconds"`
	// ComponentsPerSecond, BlocksPerSecond: evicted over Seconds.
	ComponentsPerSecond float64 `json:"components_per_second"`
	BlocksPerSecond     float64 `json:"blocks_per_second"`
}

// Summarize fills p's summary (the contract fields) from its details.
func (p *Point) Summarize() {
	p.SubmitP50Ms, p.SubmitP99Ms, p.Submits = p.Submit.P50Ms, p.Submit.P99Ms, p.Submit.N
	p.QueueOpsPerS = p.Queue.OpsPerSecond
	p.PebbleBytes = p.Store.CacheBytes + p.Store.QueueBytes + p.Store.CatalogBytes
	p.SigdRSSBytes = p.Sigd.RSSBytes
	p.EvictPerS = p.Evict.BlocksPerSecond
}

// Write writes r as indented JSON.
func (r *Results) Write(w io.Writer) error {
	r.Schema = Schema
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Read reads results written by Write, refusing another kind or version.
func Read(rd io.Reader) (*Results, error) {
	var r Results
	if err := json.NewDecoder(rd).Decode(&r); err != nil {
		return nil, fmt.Errorf("scale: %w", err)
	}
	if r.Schema != Schema {
		return nil, fmt.Errorf("%w (schema %q)", ErrSchema, r.Schema)
	}
	return &r, nil
}

// ReadFile reads results from a file.
func ReadFile(path string) (*Results, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// WriteText writes the curve as tables for people (bench/scale.txt).
func (r *Results) WriteText(w io.Writer) error {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "# SIG control plane at scale (schema %s), %s, %.0f s, commit %s\n", Schema,
		r.Started.UTC().Format(time.RFC3339), r.Seconds, r.Commit)
	fmt.Fprintf(&b, "# %s; load average (1 min) at each point's start and end in the last table: other processes share the CPUs\n", r.Machine)
	fmt.Fprintf(&b, "# each component memoized over %d blocks; fill pipelines of %d inputs, 1 in %d left pending (the queue's backlog)\n",
		c.Blocks, c.FillInputs, c.BacklogEvery)
	fmt.Fprintf(&b, "# measured submits: %d per point, %d-%d nodes each, %.0f%% never-seen components, the rest Zipf(s=%.2f) over the cache; %d reads, %d searches\n",
		c.Submits, c.MinNodes, c.MaxNodes, 100*c.MissFraction, c.ZipfS, c.Reads, c.Searches)
	fmt.Fprintf(&b, "# latencies in ms; grpc = SubmitGraph etc. to the sigd process; inproc = matching.Frontend in the benchmark's process\n\n")

	table := func(title string, head []string, row func(p *Point) []string) {
		fmt.Fprintf(&b, "## %s\n", title)
		rows := [][]string{append([]string{"components"}, head...)}
		for i := range r.Points {
			p := &r.Points[i]
			rows = append(rows, append([]string{fmt.Sprint(p.Components)}, row(p)...))
		}
		widths := make([]int, len(rows[0]))
		for _, row := range rows {
			for i, cell := range row {
				widths[i] = max(widths[i], len(cell))
			}
		}
		for _, row := range rows {
			for i, cell := range row {
				if i > 0 {
					b.WriteString("  ")
				}
				fmt.Fprintf(&b, "%*s", widths[i], cell)
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	f := func(format string, v float64) string { return fmt.Sprintf(format, v) }
	lat := func(l Latency) []string { return []string{f("%.2f", l.P50Ms), f("%.2f", l.P99Ms)} }
	table("Summary (bench/scale.json's points; target: submit p99 < 5 ms at 1M components)",
		[]string{"submit-p50", "submit-p99", "submits", "queue-ops/s", "pebble-MiB", "sigd-rss-MiB", "evict-blocks/s"},
		func(p *Point) []string {
			return []string{f("%.2f", p.SubmitP50Ms), f("%.2f", p.SubmitP99Ms), fmt.Sprint(p.Submits), f("%.0f", p.QueueOpsPerS),
				f("%.1f", float64(p.PebbleBytes)/(1<<20)), f("%.1f", float64(p.SigdRSSBytes)/(1<<20)), f("%.0f", p.EvictPerS)}
		})
	table("SubmitGraph", []string{"grpc-p50", "grpc-p99", "grpc-max", "inproc-p50", "inproc-p99", "comps/submit", "block-hit", "tasks/submit"},
		func(p *Point) []string {
			return append(append(lat(p.Submit), f("%.2f", p.Submit.MaxMs)), append(lat(p.SubmitFrontend),
				f("%.1f", p.SubmitShape.Components), f("%.3f", p.SubmitShape.BlockHitRate), f("%.1f", p.SubmitShape.TasksEnqueued))...)
		})
	table("GetReadSolution, SearchComponents, Stats; reuse = the cache walk Stats and /metrics redo after a submit", []string{"read-p50", "read-p99", "inproc-read-p99", "search-p50", "search-p99", "inproc-search-p99", "stats-p50", "inproc-reuse-p50"},
		func(p *Point) []string {
			return []string{f("%.2f", p.ReadSolution.P50Ms), f("%.2f", p.ReadSolution.P99Ms), f("%.2f", p.ReadSolutionFrontend.P99Ms),
				f("%.2f", p.Search.P50Ms), f("%.2f", p.Search.P99Ms), f("%.2f", p.SearchFrontend.P99Ms), f("%.1f", p.Stats.P50Ms), f("%.1f", p.Reuse.P50Ms)}
		})
	mib := func(n int64) string { return f("%.1f", float64(n)/(1<<20)) }
	table("Stores and the sigd process", []string{"ready-blocks", "cache-MiB", "queue-MiB", "backlog", "queue-open-s", "cycles/s", "rss-MiB", "peak-rss-MiB", "heap-MiB", "start-s", "cpu-ms/submit"},
		func(p *Point) []string {
			return []string{fmt.Sprint(p.ReadyBlocks), mib(p.Store.CacheBytes), mib(p.Store.QueueBytes), fmt.Sprint(p.Queue.Backlog),
				f("%.2f", p.Queue.OpenSeconds), f("%.0f", p.Queue.CyclesPerSecond), mib(p.Sigd.RSSBytes), mib(p.Sigd.PeakRSSBytes),
				mib(p.Sigd.GoHeapBytes), f("%.2f", p.Sigd.StartSeconds), f("%.2f", p.Sigd.CPUMsPerSubmit)}
		})
	table("Eviction of a subgraph (Evict RPC)", []string{"evicted", "blocks", "objects", "seconds", "comps/s", "blocks/s"},
		func(p *Point) []string {
			e := p.Evict
			return []string{fmt.Sprint(e.Components), fmt.Sprint(e.Blocks), fmt.Sprint(e.Objects), f("%.2f", e.Seconds),
				f("%.0f", e.ComponentsPerSecond), f("%.0f", e.BlocksPerSecond)}
		})
	table("Building the point", []string{"fill-s", "compact-s", "load-start", "load-end"},
		func(p *Point) []string {
			return []string{f("%.1f", p.FillSeconds), f("%.1f", p.CompactSeconds), f("%.2f", p.LoadAvg[0]), f("%.2f", p.LoadAvg[1])}
		})
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "# %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
