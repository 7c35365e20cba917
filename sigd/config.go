package sigd

import (
	"fmt"
	"time"

	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/ingest"
	"github.com/sigdata/sig/workers"
)

// DefaultGCPercent is the garbage collector setting cmd/sigd runs with (its
// --gc-percent; GOGC overrides it). sigd's live heap is long-lived (decoded
// component records, indexes) while a request's allocations die with it;
// letting the heap grow to five times the live heap before a collection
// (Go's default: twice) makes collections a quarter as frequent and keeps
// their assists out of the submit latency tail.
const DefaultGCPercent = 400

// DefaultBlockBytes and DefaultCompactQuiet are --block-bytes' and
// --compact-quiet's defaults: ingestion's (warehouse/ingest, issue 28).
const (
	DefaultBlockBytes   = ingest.DefaultBlockBytes
	DefaultCompactQuiet = ingest.DefaultCompactQuiet
)

// DefaultWorkerCacheBytes is --worker-cache-bytes' default: the raw columns
// of about 25 blocks (the Ads fleet's 13 components read 10 MB of distinct
// columns of a 100,000-row block, --rows-per-block's default before blocks
// were cut by bytes, issue 28; bench/sigd.sh's notes), so that the tasks of
// a block, scheduled together, find its columns still there.
const DefaultWorkerCacheBytes = 256 << 20

// DefaultMaxQueuedPerClient is --max-queued-per-client's default. Fairness
// between clients does not need a bound (each has its own queue, served in
// turn), but every queued task is kept in memory and on disk, so one
// client's runaway submissions must not grow them without end. 100,000 is
// a year of hourly blocks for 11 components, some tens of MB, more than
// any backfill the fleet submits at once: a client past it submits its
// range in parts.
const DefaultMaxQueuedPerClient = 100_000

// DefaultWorkerBatchTasks is --worker-batch-tasks' default (and `sigd
// worker --batch-tasks`'): the most tasks of one raw block a worker leases
// at once (issue 28). A bigger batch reads a block's raw columns once for
// more components, shares more subexpressions and packs more memo columns
// into one object; but a batch runs on one worker, so a block whose tasks
// are all in one batch is made ready by one worker alone, and the first
// task's wait grows with the batch. On the fleet generator's graphs
// (bench/fleet-full: pipelines of 6-14 inputs out of 144 components) a raw
// block ends with about 123 components (5,670 memo blocks over 46 raw
// blocks), and a block sealed in a caught-up stream gets all of its
// pipelines' tasks at once. 32 keeps a pipeline's inputs of a block, with
// room for covers' memo nodes, in one batch, and splits a block's ~123
// tasks into 4 batches, so that 4 workers (--workers-max' default) share a
// fresh block. A batch of 32 is about 0.1 s of worker CPU at 10,000-row
// blocks (3.5 ms a task: 20.1 s over 5,670 tasks in bench/fleet-full).
const DefaultWorkerBatchTasks = 32

// DefaultRepackBelow is --repack-below's default (with --repack), 2 MiB:
// a size tier, so that a block's columns are rewritten a bounded number of
// times. bench/repack.sh runs the 30-pipeline fleet with repack off, at
// this tier and merging every pack, side by side (bench/repack.txt).
const DefaultRepackBelow = 2 << 20

// WorkerCacheBytes is the segment cache size a worker process uses for the
// setting n (--worker-cache-bytes of sigd serve, --cache-bytes of sigd
// worker): 0 means DefaultWorkerCacheBytes, negative means none (what
// block.NewSegmentCache makes of it).
func WorkerCacheBytes(n int64) int64 {
	if n == 0 {
		return DefaultWorkerCacheBytes
	}
	return n
}

// Config is every setting of sigd. cmd/sigd fills it from flags and SIG_*
// environment variables; each field's flag is named in its comment.
type Config struct {
	// --listen: gRPC address.
	Listen string
	// --http: address of /metrics, /healthz and the web UI.
	HTTPListen string
	// --data-dir: Pebble stores (matching cache, queues, catalog) live here.
	DataDir string
	// --version-gc-every: how often superseded raw block versions no
	// pinned snapshot sees are collected, with the memo entries and
	// objects only they had (package versions).
	VersionGCEvery time.Duration
	// --version-gc-grace: a superseded version is kept at least this long
	// after it was superseded, so that a reader that resolved a solution
	// just before, without a pin, still reads it. Negative: none.
	VersionGCGrace time.Duration

	// --s3-endpoint, --s3-access-key, --s3-secret-key, --s3-bucket,
	// --s3-secure: the object store. An empty endpoint starts an embedded
	// MinIO from bin/ (development mode).
	S3Endpoint, S3AccessKey, S3SecretKey, S3Bucket string
	S3Secure                                       bool

	// --kafka-brokers: comma-separated seed brokers. Empty starts an
	// embedded kfake cluster persisting under DataDir (development mode).
	KafkaBrokers []string

	// --tokens: the token file (auth.File). Empty in development mode
	// writes DataDir/tokens.json with fresh tokens.
	TokensFile string
	// --tls-cert, --tls-key: serve gRPC over TLS. They do not concern the
	// HTTP listener, which always serves plain HTTP.
	TLSCert, TLSKey string
	// --http-behind-tls-proxy: browsers reach the HTTP listener only
	// through a TLS-terminating proxy (https://), so the web UI marks its
	// cookies Secure. Without it they are not: over plain HTTP a browser
	// would drop Secure cookies and login would fail.
	HTTPBehindTLSProxy bool
	// --reports: a directory of bench reports the web UI shows under
	// /ui/reports (package report): the directory itself and each of its
	// subdirectories that holds bench JSON files. Empty: none.
	ReportsDir string

	// --workers-min, --workers-max: the autoscaler's bounds: the size of
	// the in-process pool, or with RemoteWorkers the desired replica count
	// it exports (sig_workers_desired). Both zero means 1 and 4.
	WorkersMin, WorkersMax int
	// --remote-workers: run no in-process workers; only remote workers
	// (`sigd worker --sigd ADDR`) drain the queues. The autoscaler still
	// decides and exports the desired count, for an orchestrator to apply.
	RemoteWorkers bool
	// --target-drain: the autoscaler sizes the pool to drain the backlog in
	// this time.
	TargetDrain time.Duration
	// --scale-down-cooldown: how long a lower size must hold before the
	// pool shrinks.
	ScaleDownCooldown time.Duration
	// --lease: lease duration; workers heartbeat at a third of it.
	Lease time.Duration
	// --max-attempts: a task failing this often is quarantined.
	MaxAttempts int
	// --max-queued-per-client: a submission that would take a client past
	// this many queued tasks is refused whole (ResourceExhausted naming the
	// quota); 0 means DefaultMaxQueuedPerClient, negative no bound.
	MaxQueuedPerClient int
	// --worker-cache-bytes: raw column segments the in-process workers
	// keep for the next tasks of the same block (block.SegmentCache); 0
	// means DefaultWorkerCacheBytes, negative keeps none.
	WorkerCacheBytes int64
	// --worker-batch-tasks: the most tasks of one raw block an in-process
	// worker leases at once (a batch, issue 28; 1: none), and what sigd
	// assumes of remote workers when it sizes them (their --batch-tasks,
	// of the same default); 0 means DefaultWorkerBatchTasks.
	WorkerBatchTasks int
	// Repack (--repack) makes tasks list the ready columns already in
	// packs of their raw block for workers to copy into the packs they
	// write (matching.Memos.Repack; issue 28), so that a block's columns
	// end up in fewer objects. Off by default: it trades the readers'
	// requests for the workers' CPU and the store's bytes (bench/repack.sh
	// measures both ways), and the packs it leaves unnamed wait for the
	// evictor's pack sweep. Off, each batch's columns stay in its pack.
	Repack bool
	// RepackBelow (--repack-below): only packs holding fewer live column
	// bytes than this are merged into the next pack of their block
	// (matching.Memos.RepackBelow); 0 means DefaultRepackBelow, negative
	// merges every pack.
	RepackBelow int64
	// --segment-compression: the Arrow IPC buffer compression of the
	// segments ingestion and the in-process workers write: none, lz4 or
	// zstd ("": block.DefaultCompression). Readers read every kind.
	SegmentCompression string

	// --ingest: sources ingested inside sigd ("ads"); empty ingests none.
	Ingest []string
	// --block-bytes, --rows-per-block, --seal-after: block sealing of
	// ingestion (0: ingest.Config's defaults; blocks are cut by bytes,
	// ingest.DefaultBlockBytes, with no row bound).
	BlockBytes   int64
	RowsPerBlock int
	SealAfter    time.Duration
	// --compact-bytes, --compact-quiet: compaction of the small blocks of
	// closed, quiet windows by ingestion (0: ingest.Config's defaults).
	CompactBytes int64
	CompactQuiet time.Duration
	// --window: event-time window of raw blocks.
	Window time.Duration
	// --max-event-time-ahead: ingestion dead-letters records whose event
	// time is further ahead of the clock (0: ingest.Config's default, 1h).
	MaxEventTimeAhead time.Duration

	// --schema: extra raw source schemas (JSON files); "ads" is built in.
	SchemaFiles []string

	// --max-message-bytes: gRPC receive limit.
	MaxMessageBytes int
	// --evict-ttl: last-requested eviction removes memo blocks of
	// components not requested for this long (0: never).
	EvictTTL time.Duration
	// --evict-budget-bytes: and, if positive, the least recently requested
	// until the memoized bytes fit.
	EvictBudgetBytes int64
	// --evict-interval: how often last-requested eviction runs.
	EvictInterval time.Duration

	// --sync: fsync every Pebble write (machine-crash durability) instead
	// of relying on the OS page cache (process-crash durability).
	Sync bool

	// --insertion: the insertion policy (matching/insertion). "all"
	// (the default) memoizes every model input's whole component, the
	// paper's SIG; "cost" decides per input which nodes to memoize and
	// leaves the rest to readers (issue 20). "all" stays the default until
	// bench/insertion.sh shows the cost-aware policy meets its targets on
	// a fleet; a cache serves pipelines registered under either.
	Insertion string
}

// Insertion policies (Config.Insertion).
const (
	InsertionAll  = "all"
	InsertionCost = "cost"
)

// EnsureDefaults fills zero fields.
func (c *Config) EnsureDefaults() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:7070"
	}
	if c.HTTPListen == "" {
		c.HTTPListen = "127.0.0.1:7080"
	}
	if c.DataDir == "" {
		c.DataDir = "sigd-data"
	}
	if c.S3Bucket == "" {
		c.S3Bucket = "sig"
	}
	if c.WorkersMax == 0 && c.WorkersMin == 0 {
		c.WorkersMin, c.WorkersMax = 1, 4
	}
	if c.TargetDrain == 0 {
		c.TargetDrain = 30 * time.Second
	}
	if c.ScaleDownCooldown == 0 {
		c.ScaleDownCooldown = 30 * time.Second
	}
	if c.Lease == 0 {
		c.Lease = 30 * time.Second
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 3
	}
	if c.VersionGCEvery <= 0 {
		c.VersionGCEvery = DefaultVersionGCEvery
	}
	if c.VersionGCGrace == 0 {
		c.VersionGCGrace = DefaultVersionGCGrace
	}
	if c.MaxQueuedPerClient == 0 {
		c.MaxQueuedPerClient = DefaultMaxQueuedPerClient
	}
	c.WorkerCacheBytes = WorkerCacheBytes(c.WorkerCacheBytes)
	if c.RepackBelow == 0 {
		c.RepackBelow = DefaultRepackBelow
	}
	if c.WorkerBatchTasks == 0 {
		c.WorkerBatchTasks = DefaultWorkerBatchTasks
	}
	if c.SegmentCompression == "" {
		c.SegmentCompression = block.DefaultCompression.Flag()
	}
	if c.SealAfter == 0 {
		c.SealAfter = 5 * time.Second
	}
	if c.Window == 0 {
		c.Window = time.Hour
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = 4 << 20
	}
	if c.Insertion == "" {
		c.Insertion = InsertionAll
	}
}

// Validate reports settings that cannot work, before anything is opened.
func (c *Config) Validate() error {
	if c.WorkersMin < 0 || c.WorkersMax < 1 || c.WorkersMax < c.WorkersMin {
		return fmt.Errorf("--workers-min %d, --workers-max %d: need 0 <= min <= max and max >= 1 (--remote-workers runs no in-process workers)",
			c.WorkersMin, c.WorkersMax)
	}
	if _, err := block.ParseCompression(c.SegmentCompression); err != nil {
		return fmt.Errorf("--segment-compression: %w", err)
	}
	if c.WorkerBatchTasks < 1 || c.WorkerBatchTasks > workers.MaxBatchTasks {
		return fmt.Errorf("--worker-batch-tasks %d: want 1 (no batches) to %d", c.WorkerBatchTasks, workers.MaxBatchTasks)
	}
	if c.Lease <= 0 || c.MaxAttempts < 1 {
		return fmt.Errorf("--lease %v, --max-attempts %d: both must be positive", c.Lease, c.MaxAttempts)
	}
	if c.Insertion != InsertionAll && c.Insertion != InsertionCost {
		return fmt.Errorf("--insertion %q: want %s (memoize every component whole) or %s (cost-aware covers)", c.Insertion, InsertionAll, InsertionCost)
	}
	return nil
}
