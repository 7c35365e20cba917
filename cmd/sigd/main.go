package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sigdata/sig/internal/cli"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/workers"
	"github.com/sigdata/sig/workers/memo"
)

var commands = cli.NewCommands("sigd")

func init() {
	commands.Default = "serve"
	commands.Register(cli.Command{Name: "serve", Usage: "[flags]: the service; every flag also reads SIG_<FLAG>",
		Run: func(ctx context.Context, args []string, _, stderr io.Writer) error {
			return serve(ctx, args, stderr, false)
		}})
	commands.Register(cli.Command{Name: "dev", Usage: "[flags]: the same with embedded MinIO and Kafka, ingesting \"ads\"",
		Run: func(ctx context.Context, args []string, _, stderr io.Writer) error {
			return serve(ctx, args, stderr, true)
		}})
	commands.Register(cli.Command{Name: "worker", Usage: "--sigd ADDR [...]: a remote memoization worker (lease protocol)",
		Run: func(ctx context.Context, args []string, _, stderr io.Writer) error { return worker(ctx, args, stderr) }})
}

func main() {
	os.Exit(commands.Main(os.Args[1:], os.Stdout, os.Stderr))
}

func serveFlags(fs *flag.FlagSet, cfg *sigd.Config, dev bool) {
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:7070", "gRPC listen address")
	fs.StringVar(&cfg.HTTPListen, "http", "127.0.0.1:7080", "HTTP listen address (/metrics, /healthz, web UI)")
	fs.StringVar(&cfg.DataDir, "data-dir", "sigd-data", "directory of the Pebble stores (and of embedded MinIO/Kafka in dev mode)")
	fs.StringVar(&cfg.S3Endpoint, "s3-endpoint", "", "S3 endpoint host:port (empty: start MinIO from bin/)")
	fs.StringVar(&cfg.S3AccessKey, "s3-access-key", "", "S3 access key")
	fs.StringVar(&cfg.S3SecretKey, "s3-secret-key", "", "S3 secret key")
	fs.StringVar(&cfg.S3Bucket, "s3-bucket", "sig", "bucket")
	fs.BoolVar(&cfg.S3Secure, "s3-secure", false, "use HTTPS for S3")
	fs.Var((*cli.List)(&cfg.KafkaBrokers), "kafka-brokers", "comma-separated Kafka brokers (empty: embedded kfake)")
	fs.StringVar(&cfg.TokensFile, "tokens", "", "token file (empty: DATA-DIR/tokens.json, created with development tokens)")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "TLS certificate file for gRPC")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "TLS key file for gRPC")
	fs.BoolVar(&cfg.HTTPBehindTLSProxy, "http-behind-tls-proxy", false, "browsers reach --http through a TLS-terminating proxy (https://): mark web UI cookies Secure")
	fs.StringVar(&cfg.ReportsDir, "reports", "", "directory of bench reports the web UI shows under /ui/reports: itself and each subdirectory holding bench JSON files (`sigctl report`'s inputs, e.g. bench/)")
	fs.IntVar(&cfg.WorkersMin, "workers-min", 1, "memoization workers, minimum (in-process, or desired remote replicas with --remote-workers)")
	fs.IntVar(&cfg.WorkersMax, "workers-max", 4, "memoization workers, maximum (at least 1)")
	fs.BoolVar(&cfg.RemoteWorkers, "remote-workers", false, "run no in-process workers: only `sigd worker` processes drain the queues; sig_workers_desired says how many to run")
	fs.DurationVar(&cfg.TargetDrain, "target-drain", 30*time.Second, "the autoscaler sizes the pool to drain the backlog in this time")
	fs.DurationVar(&cfg.ScaleDownCooldown, "scale-down-cooldown", 30*time.Second, "how long a smaller pool must be enough before shrinking")
	fs.DurationVar(&cfg.Lease, "lease", 30*time.Second, "task lease duration")
	fs.IntVar(&cfg.MaxAttempts, "max-attempts", 3, "failures before a task is quarantined")
	fs.IntVar(&cfg.MaxQueuedPerClient, "max-queued-per-client", sigd.DefaultMaxQueuedPerClient, "a submission that would take a client past this many queued tasks is refused (ResourceExhausted); negative: no bound")
	ingestDefault := ""
	if dev {
		ingestDefault = "ads"
	}
	cfg.Ingest = nil
	if ingestDefault != "" {
		cfg.Ingest = []string{ingestDefault}
	}
	fs.Var((*cli.List)(&cfg.Ingest), "ingest", "raw sources to ingest from Kafka raw.<source> (comma-separated)")
	fs.Int64Var(&cfg.BlockBytes, "block-bytes", sigd.DefaultBlockBytes, "ingestion seals a block when its rows would encode to about this many bytes (before segment compression; negative: no byte bound)")
	fs.IntVar(&cfg.RowsPerBlock, "rows-per-block", 0, "ingestion also seals a block at this many rows and changes (0: blocks are cut by --block-bytes alone)")
	fs.Int64Var(&cfg.CompactBytes, "compact-bytes", 0, "ingestion compacts the small blocks of a closed, quiet window into blocks of about this many bytes (0: --block-bytes)")
	fs.DurationVar(&cfg.CompactQuiet, "compact-quiet", sigd.DefaultCompactQuiet, "ingestion compacts a partition's window once it has had no new block or version this long (negative: never compact)")
	fs.DurationVar(&cfg.SealAfter, "seal-after", 5*time.Second, "ingestion seals a block this long after its first row")
	fs.DurationVar(&cfg.VersionGCEvery, "version-gc-every", sigd.DefaultVersionGCEvery, "collect superseded raw block versions no pinned snapshot sees, with their memo entries and objects, this often")
	fs.DurationVar(&cfg.VersionGCGrace, "version-gc-grace", sigd.DefaultVersionGCGrace, "keep a superseded raw block version at least this long (negative: no grace)")
	fs.DurationVar(&cfg.Window, "window", time.Hour, "event-time window of raw blocks")
	fs.DurationVar(&cfg.MaxEventTimeAhead, "max-event-time-ahead", time.Hour, "ingestion sends records whose event time is further ahead of the clock to the dead-letter topic")
	fs.Var((*cli.List)(&cfg.SchemaFiles), "schema", "extra raw source schema files (JSON, comma-separated)")
	fs.IntVar(&cfg.MaxMessageBytes, "max-message-bytes", 4<<20, "largest gRPC request accepted")
	fs.DurationVar(&cfg.EvictTTL, "evict-ttl", 0, "evict memo blocks of components not requested for this long (0: never)")
	fs.Int64Var(&cfg.EvictBudgetBytes, "evict-budget-bytes", 0, "evict least recently requested memo blocks beyond this many bytes (0: no budget)")
	fs.DurationVar(&cfg.EvictInterval, "evict-interval", time.Minute, "how often last-requested eviction runs")
	fs.Int64Var(&cfg.WorkerCacheBytes, "worker-cache-bytes", sigd.DefaultWorkerCacheBytes, "raw column bytes in-process workers keep for the next tasks of a block (0: the default; negative: none)")
	fs.BoolVar(&cfg.Repack, "repack", false, "tasks list the ready memo columns already in small packs of their raw block (below --repack-below), for workers to copy into the packs they write, so that a block's columns end up in fewer objects (issue 28)")
	fs.Int64Var(&cfg.RepackBelow, "repack-below", sigd.DefaultRepackBelow, "merge only the packs holding fewer live column bytes than this into the next pack of their block (negative: every pack)")
	fs.IntVar(&cfg.WorkerBatchTasks, "worker-batch-tasks", sigd.DefaultWorkerBatchTasks, fmt.Sprintf("the most tasks of one raw block a worker leases at once, run reading the block's raw columns once (1: no batches; at most %d); remote workers are sized as if they lease the same (their --batch-tasks)", workers.MaxBatchTasks))
	fs.StringVar(&cfg.SegmentCompression, "segment-compression", block.DefaultCompression.Flag(), "Arrow IPC buffer compression of the segments ingestion and workers write: none, lz4 or zstd")
	fs.BoolVar(&cfg.Sync, "sync", false, "fsync every store write (survive machine crashes, not just process crashes)")
	fs.StringVar(&cfg.Insertion, "insertion", sigd.InsertionAll, "insertion policy: all (memoize every model input's whole component) or cost (memoize the nodes worth it, readers compute the rest)")
}

func serve(ctx context.Context, args []string, stderr io.Writer, dev bool) error {
	var cfg sigd.Config
	name := "serve"
	if dev {
		name = "dev"
	}
	fs := commands.NewFlags(name, stderr)
	serveFlags(fs, &cfg, dev)
	logJSON := fs.Bool("log-json", false, "log JSON lines")
	applyRuntime := cli.RuntimeFlags(fs, sigd.DefaultGCPercent)
	if err := cli.ParseEnv(fs, args); err != nil {
		return err
	}
	applyRuntime()
	if !dev && (cfg.S3Endpoint == "" || len(cfg.KafkaBrokers) == 0) {
		fmt.Fprintln(stderr, "sigd serve: no --s3-endpoint or --kafka-brokers: starting embedded MinIO/kfake (development mode)")
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if *logJSON {
		log = slog.New(slog.NewJSONHandler(stderr, nil))
	}
	wrap, err := testTaskDelay()
	if err != nil {
		return err
	}
	srv, err := sigd.New(ctx, cfg, sigd.Options{Logger: log, WrapRunner: wrap, HoldConcat: testHoldConcat()})
	if err != nil {
		return err
	}
	defer srv.Close()
	ready := make(chan struct{})
	go func() {
		select {
		case <-ready:
			c := srv.Config()
			// The embedded store's keys are in dev.json, nowhere else: say
			// where, for S3 tools (README, "Looking at the data").
			creds := ""
			if d := srv.Dev(); d != nil && d.MinIO != nil {
				creds = " s3-credentials=" + d.StateFile
			}
			fmt.Fprintf(stderr, "sigd: listening grpc=%s http=%s s3=%s%s kafka=%v tokens=%s\n",
				srv.Addr(), srv.HTTPAddr(), c.S3Endpoint, creds, c.KafkaBrokers, c.TokensFile)
		case <-ctx.Done():
		}
	}()
	return srv.Serve(ctx, ready)
}

// worker runs memoization workers in this process against a remote sigd
// (paper IV.A: workers are "globally replicated and strategically positioned
// alongside the training data"); they speak the same lease protocol as
// sigd's in-process pool.
func worker(ctx context.Context, args []string, stderr io.Writer) error {
	fs := commands.NewFlags("worker", stderr)
	sigdConn := cli.ConnFlags(fs, "sigd", "127.0.0.1:7070", "sigd gRPC address", "worker token")
	n := fs.Int("concurrency", 2, fmt.Sprintf("workers; each leases a batch (--batch-tasks) and runs it whole (the block's raw columns read once, the union of the tasks' graphs run once, one pack written), holding its tasks until their pack is written; with --batch-tasks 1 each pipelines its tasks (read, transform, write): up to %d held", workers.DefaultPipelineDepth))
	batch := fs.Int("batch-tasks", sigd.DefaultWorkerBatchTasks, fmt.Sprintf("the most tasks of one raw block a worker leases at once, run reading the block's raw columns once (1: no batches; at most %d)", workers.MaxBatchTasks))
	name := fs.String("name", "", "worker name prefix (default: host-pid)")
	cacheBytes := fs.Int64("cache-bytes", sigd.DefaultWorkerCacheBytes, "raw column bytes kept for the next tasks of a block (0: the default; negative: none)")
	compression := fs.String("segment-compression", block.DefaultCompression.Flag(), "Arrow IPC buffer compression of the memo objects written: none, lz4 or zstd")
	sc := objstore.Flags(fs, "S3 endpoint host:port of the warehouse")
	if err := cli.ParseEnv(fs, args); err != nil {
		return err
	}
	comp, err := block.ParseCompression(*compression)
	if err != nil {
		return fmt.Errorf("%w: --segment-compression: %v", cli.ErrUsage, err)
	}
	if *batch < 1 || *batch > workers.MaxBatchTasks {
		return fmt.Errorf("%w: --batch-tasks %d: want 1 (no batches) to %d", cli.ErrUsage, *batch, workers.MaxBatchTasks)
	}
	if *name == "" {
		host, _ := os.Hostname()
		*name = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	wrap, err := testTaskDelay()
	if err != nil {
		return err
	}
	store, err := objstore.New(*sc)
	if err != nil {
		return err
	}
	conn, err := sigdConn.Dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	log := slog.New(slog.NewTextHandler(stderr, nil))
	// The build goes with every lease: sigd bans a build whose output it
	// found wrong (issue 27).
	build := workers.BuildID()
	var leaser workers.Leaser = workers.NewRemoteLeaser(sigv1.NewWorkersClient(conn), 10*time.Second, build)
	if leaser, err = testHoldCompletions(leaser); err != nil {
		return err
	}
	var runner workers.Runner = &memo.Runner{Store: store, Segments: block.NewSegmentCache(sigd.WorkerCacheBytes(*cacheBytes)), Compression: comp}
	if wrap != nil {
		runner = wrap(runner)
	}
	pool := workers.NewPool(leaser, runner, workers.PoolOptions{Name: *name, Logger: log, BatchTasks: *batch})
	pool.Resize(*n)
	fmt.Fprintf(stderr, "sigd worker: %d workers leasing from %s as build %q, batches of up to %d tasks\n", *n, sigdConn.Addr, build, *batch)
	<-ctx.Done()
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return pool.Close(cctx)
}

// testTaskDelay reads SIG_TEST_TASK_DELAY and SIG_TEST_HOLD_PACKS (see
// the package comment): nil when both are unset.
func testTaskDelay() (func(workers.Runner) workers.Runner, error) {
	v, hold := os.Getenv("SIG_TEST_TASK_DELAY"), os.Getenv("SIG_TEST_HOLD_PACKS")
	if v == "" && hold == "" {
		return nil, nil
	}
	var d time.Duration
	if v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d < 0 {
			return nil, fmt.Errorf("SIG_TEST_TASK_DELAY=%q: want a non-negative duration", v)
		}
	}
	return func(r workers.Runner) workers.Runner {
		return workers.RunnerFunc(func(ctx context.Context, t workers.Task) (workers.Result, error) {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return workers.Result{}, ctx.Err()
			}
			res, err := r.Run(ctx, t)
			if hold == "" || err != nil || res.Object == "" {
				return res, err
			}
			// The pack is written whole; its entry is switched to it
			// only by the completion, which this task never reaches.
			if err := appendLine(hold, res.Object); err != nil {
				return workers.Result{}, err
			}
			<-ctx.Done()
			return workers.Result{}, ctx.Err()
		})
	}, nil
}

// testHoldCompletions reads SIG_TEST_HOLD_COMPLETIONS ("N:FILE", see the
// package comment) and wraps l so that, past its first N completions,
// every completion appends the object it names to FILE and never returns:
// the worker holds its batch's other tasks (their leases heartbeated) and
// the held task's lease expires, where crash tests kill the process. l
// itself when the variable is unset.
func testHoldCompletions(l workers.Leaser) (workers.Leaser, error) {
	v := os.Getenv("SIG_TEST_HOLD_COMPLETIONS")
	if v == "" {
		return l, nil
	}
	n, file, ok := strings.Cut(v, ":")
	after, err := strconv.Atoi(n)
	if !ok || err != nil || after < 0 || file == "" {
		return nil, fmt.Errorf("SIG_TEST_HOLD_COMPLETIONS=%q: want N:FILE, N >= 0", v)
	}
	return &holdCompletions{Leaser: l, after: after, file: file}, nil
}

type holdCompletions struct {
	workers.Leaser
	after int
	file  string
	mu    sync.Mutex
	done  int
}

func (h *holdCompletions) Complete(ctx context.Context, leaseID string, res workers.Result) error {
	h.mu.Lock()
	pass := h.done < h.after
	h.done++
	h.mu.Unlock()
	if pass {
		return h.Leaser.Complete(ctx, leaseID, res)
	}
	if err := appendLine(h.file, res.Object); err != nil {
		return err
	}
	select {} // until the process is killed
}

// testHoldConcat reads SIG_TEST_HOLD_CONCAT (see the package comment):
// nil when unset.
func testHoldConcat() func(ctx context.Context, packs []string) error {
	hold := os.Getenv("SIG_TEST_HOLD_CONCAT")
	if hold == "" {
		return nil
	}
	return func(ctx context.Context, packs []string) error {
		// The packs are written whole; no memo entry names them until
		// the concatenation switches the entries, which this never lets
		// it reach.
		for _, p := range packs {
			if err := appendLine(hold, p); err != nil {
				return err
			}
		}
		<-ctx.Done()
		return ctx.Err()
	}
}

// appendLine appends line to the file at path, synced, so that a process
// killed right after it returns leaves the line.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
