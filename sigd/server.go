package sigd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/eviction"
	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/internal/devenv"
	"github.com/sigdata/sig/internal/grpcsvc"
	"github.com/sigdata/sig/internal/pebbleutil"
	"github.com/sigdata/sig/internal/randid"
	"github.com/sigdata/sig/internal/topics"
	"github.com/sigdata/sig/matching"
	"github.com/sigdata/sig/matching/insertion"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd/trainers"
	"github.com/sigdata/sig/sigd/ui"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/versions"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/catalog"
	"github.com/sigdata/sig/warehouse/ingest"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/warehouse/ready"
	"github.com/sigdata/sig/workers"
	"github.com/sigdata/sig/workers/memo"
)

// Server is a running sigd.
type Server struct {
	cfg   Config
	log   *slog.Logger
	clock clock.Clock

	dev       *DevEnv
	store     *objstore.Store
	catalog   *catalog.Catalog
	segments  *block.SegmentCache // the in-process workers'
	cache     *matching.Cache
	frontend  *matching.Frontend
	memos     *matching.Memos
	queue     *workers.Queue
	stats     *statsService // the feature statistics of FDP (package featstats)
	pool      *workers.Pool
	scaler    *workers.Autoscaler
	kafka     *kgo.Client
	ingesters []*ingest.Ingester
	evictor   *eviction.Evictor
	ui        *ui.UI
	tokens    *auth.Tokens
	schemas   map[string]*transform.Schema
	// schemaJSON is each schema as task descriptions and read solutions
	// carry it, encoded once.
	schemaJSON map[string]string
	reg        *prometheus.Registry
	metrics    *metrics

	grpc      *grpc.Server
	health    *grpcsvc.Health
	lis       net.Listener
	httpSrv   *http.Server
	httpLis   net.Listener
	extraHTTP map[string]http.Handler
	trainers  *trainers.Registry
	// stopping is closed when Serve starts shutting down: watch streams and
	// long-polling LeaseTask calls end then, so a graceful stop does not
	// wait for them.
	stopping chan struct{}
	// versions follows and collects block versions (package versions).
	versions *versions.Manager
	// concat makes compacted blocks' memo entries from their parts'
	// (versions.Concatenator, issue 28).
	concat *versions.Concatenator
}

// Options are what a caller (cmd/sigd, tests) adds beyond Config.
type Options struct {
	Logger *slog.Logger
	Clock  clock.Clock
	// HTTP handlers mounted on the HTTP listener besides /metrics (the web
	// UI mounts itself here).
	HTTP map[string]http.Handler
	// WrapRunner, if set, wraps the in-process workers' Runner (tests count
	// or slow down memoization runs with it).
	WrapRunner func(workers.Runner) workers.Runner
	// UISampleEvery is the period of the web UI's charts (default 5s;
	// tests shorten it).
	UISampleEvery time.Duration
	// Insertion, if set, replaces the insertion policy's constants under
	// --insertion=cost (bench/insertion.sh sweeps them).
	Insertion *insertion.Config
	// GCTrigger, if set, runs a version GC on each receive, besides every
	// Config.VersionGCEvery (tests).
	GCTrigger <-chan struct{}
	// HoldConcat, if set, is called with the packs concatenated for a
	// compacted block after they were written and before any memo entry
	// names them (versions.ConcatOptions.Hold; crash tests).
	HoldConcat func(ctx context.Context, packs []string) error
	// WorkerBuild, if set, is the build the in-process workers say they
	// run when they lease (default workers.BuildID(); tests name builds to
	// ban one, issue 27).
	WorkerBuild string
}

// New opens every store, connects to S3 and Kafka (starting embedded ones
// in development mode) and builds the services. Serve starts them.
func New(ctx context.Context, cfg Config, opts Options) (*Server, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	s := &Server{cfg: cfg, log: opts.Logger, clock: opts.Clock, extraHTTP: opts.HTTP,
		stopping: make(chan struct{})}
	// What ingestion and the in-process workers write (Validate checked
	// it).
	compression, _ := block.ParseCompression(cfg.SegmentCompression)
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	if err := s.openEnv(ctx); err != nil {
		return nil, err
	}
	if err := s.loadSchemas(); err != nil {
		return nil, err
	}
	if err := s.loadTokens(); err != nil {
		return nil, err
	}
	var err error
	dur := pebbleutil.DurabilityProcess
	if cfg.Sync {
		dur = pebbleutil.DurabilityMachine
	}
	if s.catalog, err = catalog.Open(filepath.Join(cfg.DataDir, "catalog")); err != nil {
		return nil, err
	}
	if s.cache, err = matching.OpenCache(filepath.Join(cfg.DataDir, "cache"), matching.CacheOptions{Durability: dur}); err != nil {
		return nil, err
	}
	s.queue, err = workers.Open(filepath.Join(cfg.DataDir, "queue"), workers.Options{
		Clock: s.clock, LeaseTTL: cfg.Lease, MaxAttempts: cfg.MaxAttempts, Durability: dur,
		MaxQueuedPerClient: max(0, cfg.MaxQueuedPerClient), OnEvent: s.onQueueEvent,
	})
	if err != nil {
		return nil, err
	}
	s.frontend = matching.NewFrontend(matching.FrontendConfig{
		Cache: s.cache, Blocks: catalogBlocks{s.catalog}, Scheduler: queueScheduler{s.queue},
		Schema: s.schema, Clock: s.clock,
		Insertion: insertionConfig(cfg, opts),
	})
	s.evictor = s.newEvictor()
	s.evictor.Recompute = eviction.RecomputeFromRaw(s.store, s.schema) // the guard's check
	s.reg = prometheus.NewRegistry()
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := workers.RegisterQueueMetrics(s.reg, s.queue); err != nil {
		return nil, err
	}
	s.metrics = newMetrics(s)
	s.trainers = &trainers.Registry{Clock: s.clock, Reported: s.metrics.trainerReport, Forgotten: s.metrics.trainerForget}
	if err := s.reg.Register(s.metrics); err != nil {
		return nil, err
	}
	s.versions = versions.New(versions.Options{Catalog: s.catalog, Frontend: versionsFrontend{s.frontend}, Store: s.store,
		Clock: s.clock, Logger: s.log, GCEvery: cfg.VersionGCEvery, GCGrace: cfg.VersionGCGrace, GCTrigger: opts.GCTrigger,
		OnChanged: s.metrics.versionChanged, OnCollected: s.metrics.versionGC})
	if err := s.reg.Register(guardMetrics{s}); err != nil {
		return nil, err
	}
	if err := s.reg.Register(pebbleutil.Collector(pebbleutil.Store{Name: "cache", Metrics: s.cache.PebbleMetrics},
		pebbleutil.Store{Name: "queue", Metrics: s.queue.PebbleMetrics}, pebbleutil.Store{Name: "catalog", Metrics: s.catalog.PebbleMetrics})); err != nil {
		return nil, err
	}
	// The autoscaler always decides and exports the desired worker count;
	// it sizes an in-process pool unless workers are remote only.
	var resizer workers.Resizer
	if !cfg.RemoteWorkers {
		s.segments = block.NewSegmentCache(cfg.WorkerCacheBytes)
		var runner workers.Runner = &memo.Runner{Store: s.store, Catalog: s.catalog, Segments: s.segments, Observe: s.metrics.phase,
			Compression: compression}
		if opts.WrapRunner != nil {
			runner = opts.WrapRunner(runner)
		}
		build := opts.WorkerBuild
		if build == "" {
			build = workers.BuildID()
		}
		leaser := &completing{Leaser: workers.Describe(s.queue.ForBuild(build), s.describe), q: s.queue, hook: s.completeHook}
		s.pool = workers.NewPool(leaser, runner, workers.PoolOptions{Clock: s.clock, Name: "sigd", Logger: s.log,
			BatchTasks: cfg.WorkerBatchTasks})
		resizer = s.pool
	}
	// Workers lease batches and run each whole (memo.Runner is a
	// workers.BatchRunner, in process and in `sigd worker`: a batch's
	// tasks are held until its pack is written), so each holds several at
	// once; remote workers are assumed to lease batches as the in-process
	// ones would.
	tasksPerWorker := workers.BatchTasksHeld(cfg.WorkerBatchTasks)
	if s.pool != nil {
		tasksPerWorker = s.pool.TasksHeld()
	}
	s.scaler, err = workers.NewAutoscaler(workers.ScaleConfig{
		Min: cfg.WorkersMin, Max: cfg.WorkersMax, TargetDrain: cfg.TargetDrain, CoolDown: cfg.ScaleDownCooldown,
		TasksPerWorker: tasksPerWorker,
	}, s.queue, resizer, workers.AutoscalerOptions{Clock: s.clock, Interval: time.Second, Registerer: s.reg})
	if err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	s.memos = &matching.Memos{Frontend: s.frontend, Versions: s.catalog, Announce: ready.NewPublisher(s.kafka), Bucket: cfg.S3Bucket,
		Clock: s.clock, Logger: s.log, Done: s.metrics.taskDone,
		Stat: func(ctx context.Context, key string) error {
			_, err := s.store.Stat(ctx, key)
			return err
		},
		Delete: s.store.Delete, Repack: cfg.Repack, RepackBelow: max(cfg.RepackBelow, 0)}
	// Compacted blocks' memo entries, concatenated from their parts' where
	// the components are row-wise, in packs as the workers write them.
	s.concat = versions.NewConcatenator(versions.ConcatOptions{Catalog: s.catalog, Memos: s.memos, Store: s.store,
		Compression: compression, Hold: opts.HoldConcat, Clock: s.clock, Logger: s.log, OnConcat: s.metrics.concatenated})
	// A crash may have lost queue events or tasks of pending entries:
	// reconcile both before serving.
	var quarantined []matching.Failed
	for _, t := range s.queue.ListQuarantine() {
		quarantined = append(quarantined, matching.Failed{Task: matching.Task{Component: t.ID.Component, Block: t.ID.Block}, Reason: t.Err})
	}
	if n, err := s.memos.Recover(quarantined); err != nil {
		return nil, err
	} else if n > 0 {
		s.log.Info("rescheduled pending memo entries", "entries", n)
	}
	for _, src := range s.cfg.Ingest {
		sc, err := s.schema(src)
		if err != nil {
			return nil, err
		}
		in, err := ingest.New(ingest.Config{Brokers: s.cfg.KafkaBrokers, Schema: sc, Store: s.store, Catalog: s.catalog,
			RowsPerBlock: s.cfg.RowsPerBlock, BlockBytes: s.cfg.BlockBytes, SealAfter: s.cfg.SealAfter, Window: s.cfg.Window,
			CompactBytes: s.cfg.CompactBytes, CompactQuiet: s.cfg.CompactQuiet,
			MaxEventTimeAhead: s.cfg.MaxEventTimeAhead, Clock: s.clock, Compression: compression,
			InstanceID: "sigd-" + src, Logger: s.log.With("ingest", src),
			// sigd collects superseded versions itself, with the memo
			// entries and objects only they had (package versions).
			GCInterval: -1})
		if err != nil {
			return nil, err
		}
		s.ingesters = append(s.ingesters, in)
	}
	if err := ingest.RegisterMetrics(s.reg, s.ingesters...); err != nil {
		return nil, err
	}
	if err := s.ensureTopics(ctx); err != nil {
		return nil, err
	}
	s.ui = s.newUI(opts.UISampleEvery)
	if err := s.buildGRPC(); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// topicsTimeout bounds how long sigd tries to create its topics at start.
const topicsTimeout = 30 * time.Second

// ensureTopics creates every topic sigd reads or writes that the brokers do
// not have (internal/topics): the raw and dead-letter topics of each
// ingested source, and sig.memo.ready, which it publishes. It runs before
// sigd serves, so a producer or subscriber that starts once sigd is up finds
// them. Brokers that cannot be reached or refuse to create a missing topic
// stop sigd here, with the reason, rather than leave it running without a
// topic it needs.
func (s *Server) ensureTopics(ctx context.Context) error {
	specs := []topics.Spec{{Name: ready.Topic}}
	for _, in := range s.ingesters {
		specs = append(specs, in.Topics()...)
	}
	tctx, cancel := context.WithTimeout(ctx, topicsTimeout)
	defer cancel()
	created, err := topics.Ensure(tctx, s.kafka, specs...)
	if err != nil {
		return fmt.Errorf("kafka %v: %w", s.cfg.KafkaBrokers, err)
	}
	if len(created) > 0 {
		s.log.Info("created kafka topics", "topics", created)
	}
	return nil
}

// DevEnv is the embedded MinIO and Kafka of development mode.
type DevEnv struct {
	MinIO *devenv.MinIO
	Kafka *devenv.Kafka
	// StateFile is DataDir/dev.json: the embedded store's endpoint and
	// keys, and the brokers, for tools outside sigd (S3 clients, kcat).
	StateFile string
}

// devState persists development mode's credentials and ports so a
// restarted sigd finds its data and its clients find it.
type devState struct {
	S3Endpoint   string `json:"s3_endpoint"`
	S3AccessKey  string `json:"s3_access_key"`
	S3SecretKey  string `json:"s3_secret_key"`
	KafkaBrokers string `json:"kafka_brokers"`
}

func (s *Server) openEnv(ctx context.Context) error {
	cfg := &s.cfg
	statePath := filepath.Join(cfg.DataDir, "dev.json")
	var st devState
	if b, err := os.ReadFile(statePath); err == nil {
		_ = json.Unmarshal(b, &st)
	}
	port := func(addr string) int {
		_, p, _ := net.SplitHostPort(addr)
		n, _ := strconv.Atoi(p)
		return n
	}
	if cfg.S3Endpoint == "" {
		if st.S3AccessKey == "" {
			st.S3AccessKey, st.S3SecretKey = "sig"+randid.Hex(6), randid.Hex(16)
		}
		m, err := devenv.StartMinIO(ctx, devenv.MinIOConfig{Dir: filepath.Join(cfg.DataDir, "minio"),
			AccessKey: st.S3AccessKey, SecretKey: st.S3SecretKey, Port: port(st.S3Endpoint)})
		if err != nil && st.S3Endpoint != "" {
			// The old port is taken: take any.
			m, err = devenv.StartMinIO(ctx, devenv.MinIOConfig{Dir: filepath.Join(cfg.DataDir, "minio"),
				AccessKey: st.S3AccessKey, SecretKey: st.S3SecretKey})
		}
		if err != nil {
			return fmt.Errorf("development mode: %w", err)
		}
		s.dev = &DevEnv{MinIO: m}
		st.S3Endpoint = m.Endpoint
		cfg.S3Endpoint, cfg.S3AccessKey, cfg.S3SecretKey, cfg.S3Secure = m.Endpoint, m.AccessKey, m.SecretKey, false
		s.log.Info("development mode: started MinIO", "endpoint", m.Endpoint, "dir", m.DataDir, "credentials", statePath)
	}
	if len(cfg.KafkaBrokers) == 0 {
		var kport int
		if st.KafkaBrokers != "" {
			kport = port(st.KafkaBrokers)
		}
		k, err := devenv.StartKafka(devenv.KafkaConfig{DataDir: filepath.Join(cfg.DataDir, "kafka"), Port: kport})
		if err != nil && kport != 0 {
			k, err = devenv.StartKafka(devenv.KafkaConfig{DataDir: filepath.Join(cfg.DataDir, "kafka")})
		}
		if err != nil {
			return fmt.Errorf("development mode: kfake: %w", err)
		}
		if s.dev == nil {
			s.dev = &DevEnv{}
		}
		s.dev.Kafka = k
		cfg.KafkaBrokers = k.Brokers
		st.KafkaBrokers = k.Brokers[0]
		s.log.Info("development mode: started Kafka (kfake)", "brokers", k.Brokers)
	}
	if s.dev != nil {
		s.dev.StateFile = statePath
		b, _ := json.MarshalIndent(st, "", "  ")
		if err := os.WriteFile(statePath, b, 0o600); err != nil {
			return err
		}
	}
	var err error
	s.store, err = objstore.New(objstore.Config{Endpoint: cfg.S3Endpoint, AccessKey: cfg.S3AccessKey,
		SecretKey: cfg.S3SecretKey, Bucket: cfg.S3Bucket, Secure: cfg.S3Secure, Logger: s.log})
	if err != nil {
		return err
	}
	if err := s.store.EnsureBucket(ctx); err != nil {
		return err
	}
	// No auto-creation: the topics are created at start (ensureTopics).
	s.kafka, err = kgo.NewClient(kgo.SeedBrokers(cfg.KafkaBrokers...))
	if err != nil {
		return err
	}
	return nil
}

// Dev returns the embedded environment of development mode, or nil.
func (s *Server) Dev() *DevEnv { return s.dev }

// Config returns the effective configuration (development mode fills in
// the embedded endpoints).
func (s *Server) Config() Config { return s.cfg }

func (s *Server) loadSchemas() error {
	s.schemas = map[string]*transform.Schema{"ads": transform.AdsSchema()}
	for _, f := range s.cfg.SchemaFiles {
		sc, err := transform.LoadSchema(f)
		if err != nil {
			return err
		}
		s.schemas[sc.Source] = sc
	}
	s.schemaJSON = make(map[string]string, len(s.schemas))
	for src, sc := range s.schemas {
		js, err := json.Marshal(sc)
		if err != nil {
			return fmt.Errorf("schema %s: %w", src, err)
		}
		s.schemaJSON[src] = string(js)
	}
	return nil
}

// solutionProto converts a read solution and adds its source's schema, so
// that readers decode any source's blocks (not only the built-in ads).
func (s *Server) solutionProto(sol *matching.Solution) *sigv1.ReadSolution {
	out := SolutionToProto(sol)
	src := sol.Source
	if src == "" {
		src = "ads"
	}
	out.RawSchemaJson = s.schemaJSON[src]
	return out
}

func (s *Server) schema(source string) (*transform.Schema, error) {
	sc, ok := s.schemas[source]
	if !ok {
		return nil, fmt.Errorf("unknown raw source %q", source)
	}
	return sc, nil
}

// DevTokens are the tokens development mode writes when no token file is
// given: an operator, a worker, a reader (for `reader --sigd`), and for
// each of four clients a client token and a trainer token
// ("trainer-<client>").
func DevTokens() []auth.Entry {
	mk := func(name string, role auth.Role, client string) auth.Entry {
		return auth.Entry{Token: name + "-" + randid.Hex(12), Principal: auth.Principal{Name: name, Role: role, Client: client}}
	}
	return []auth.Entry{
		mk("operator", auth.RoleOperator, ""),
		mk("worker", auth.RoleWorker, ""),
		mk("reader", auth.RoleReader, ""),
		mk("ctr", auth.RoleClient, "ctr"),
		mk("cvr", auth.RoleClient, "cvr"),
		mk("ranking", auth.RoleClient, "ranking"),
		mk("explore", auth.RoleClient, "explore"),
		mk("trainer-ctr", auth.RoleTrainer, "ctr"),
		mk("trainer-cvr", auth.RoleTrainer, "cvr"),
		mk("trainer-ranking", auth.RoleTrainer, "ranking"),
		mk("trainer-explore", auth.RoleTrainer, "explore"),
	}
}

func (s *Server) loadTokens() error {
	path := s.cfg.TokensFile
	if path == "" {
		path = filepath.Join(s.cfg.DataDir, "tokens.json")
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			b, _ := json.MarshalIndent(auth.File{Tokens: DevTokens()}, "", "  ")
			if err := os.WriteFile(path, b, 0o600); err != nil {
				return err
			}
			s.log.Info("wrote development tokens", "file", path)
		}
		s.cfg.TokensFile = path
	}
	t, err := auth.Load(path)
	if err != nil {
		return err
	}
	s.tokens = t
	return nil
}

// insertionConfig is the insertion policy's configuration: the paper's
// (every component whole) unless --insertion=cost.
func insertionConfig(cfg Config, opts Options) insertion.Config {
	if cfg.Insertion != InsertionCost {
		return insertion.Config{MemoizeAll: true}
	}
	if opts.Insertion != nil {
		c := *opts.Insertion
		c.MemoizeAll = false
		return c
	}
	return insertion.Config{}
}

// queueScheduler adapts the work queues to the matching frontend.
type queueScheduler struct{ q *workers.Queue }

func (a queueScheduler) Enqueue(k canon.Key, block blockref.Memo, client, pipeline string, prio int32) error {
	_, err := a.q.Enqueue(workers.Request{Task: workers.TaskID{Component: k, Block: block},
		Client: client, Pipeline: pipeline, Priority: prio})
	return err
}

// Room and Admit bound what a submission may queue (--max-queued-per-client).
func (a queueScheduler) Room(client string) int { return a.q.Room(client) }

func (a queueScheduler) Admit(client string, tasks []matching.Task) error {
	ids := make([]workers.TaskID, len(tasks))
	for i, t := range tasks {
		ids[i] = workers.TaskID{Component: t.Component, Block: t.Block}
	}
	return a.q.Admit(client, ids)
}

// onQueueEvent mirrors quarantines into the matching cache, so read
// solutions show the failure and its reason.
func (s *Server) onQueueEvent(e workers.Event) {
	k, m := e.Task.ID.Component, e.Task.ID.Block
	switch e.Kind {
	case workers.EventQuarantined:
		s.memos.Quarantined(k, m, e.Task.Err)
	case workers.EventReleased:
		s.memos.Released(k, m)
	}
}

// describe translates a task's description (matching.Memos.Describe) into
// the Workers API's, with the raw source's schema.
func (s *Server) describe(id workers.TaskID) (*sigv1.Task, error) {
	spec, err := s.memos.Describe(id.Component, id.Block)
	if err != nil {
		return nil, err
	}
	sj, ok := s.schemaJSON[spec.Source]
	if !ok {
		return nil, fmt.Errorf("unknown raw source %q", spec.Source)
	}
	t := &sigv1.Task{
		ComponentKey: spec.Component.String(), BlockId: spec.Block.String(), CanonicalDsl: spec.DSL, RawSource: spec.Source,
		RawObject: spec.RawObject, MemoObject: spec.MemoObject, Columns: spec.Columns,
		SchemaJson: sj, MemoGeneration: spec.Gen,
	}
	for _, mi := range spec.MemoInputs {
		t.MemoInputs = append(t.MemoInputs, &sigv1.MemoInput{Key: mi.Key.String(), MemoObject: mi.Object, MemoColumn: mi.Column})
	}
	for _, p := range spec.Repack {
		t.Repack = append(t.Repack, &sigv1.PackedMember{ComponentKey: p.Component.String(), BlockId: p.Block.ID(),
			InputVersion: p.Block.InputVersion(), MemoObject: p.Object, MemoColumn: p.Column, Bytes: p.Bytes})
	}
	return t, nil
}

// completeHook marks a finished task's memo entry ready and announces it,
// before the task leaves the queue (matching.Memos.Complete). In-process
// workers' tasks carry the description they ran, with the generation of
// the entry they computed (0: nothing was left to compute); remotely
// completed ones do not (the queue keeps no descriptions; CompleteTask
// names only the lease).
//
// res.Build is the build the lease recorded; the entry keeps it, so that a
// mismatch sigd confirms names the build (issue 27). A build banned since
// it leased (its leases were taken back) marks nothing.
func (s *Server) completeHook(ctx context.Context, t workers.Task, res workers.Result) error {
	var gen uint64
	if t.Spec != nil {
		if gen = t.Spec.MemoGeneration; gen == 0 {
			return nil
		}
	}
	if ban, ok := s.queue.Banned(res.Build); ok {
		return &workers.BannedError{Ban: ban}
	}
	err := s.memos.Complete(ctx, t.ID.Component, t.ID.Block, gen,
		matching.Completion{Object: res.Object, Rows: res.Rows, Bytes: res.Bytes, OpNanos: res.OpNanos, Since: t.Since, Build: res.Build})
	if len(res.Moved) > 0 && res.Object != "" && (err == nil || errors.Is(err, matching.ErrStale)) {
		// The columns the worker copied into its pack (issue 28): moved
		// whether or not the task's own entry took the pack, since the
		// copies are whole either way.
		if merr := s.moved(ctx, res.Object, res.Moved); merr != nil {
			s.log.Warn("switching copied memo columns to their new pack", "pack", res.Object, "err", merr)
		}
	}
	return err
}

// moved switches the entries of columns a worker copied into pack object
// to it (matching.Memos.Moved), counting them.
func (s *Server) moved(ctx context.Context, object string, moved []*sigv1.PackedMember) error {
	es := make([]matching.PackedEntry, 0, len(moved))
	for i, mv := range moved {
		k, err := canon.ParseKey(mv.GetComponentKey())
		if err != nil {
			return fmt.Errorf("moved[%d]: %w", i, err)
		}
		es = append(es, matching.PackedEntry{Component: k, Block: blockref.NewMemo(mv.GetBlockId(), mv.GetInputVersion()),
			Object: mv.GetMemoObject(), Column: mv.GetMemoColumn(), Bytes: mv.GetBytes()})
	}
	done, err := s.memos.Moved(ctx, object, es)
	n := 0
	for _, d := range done {
		if d {
			n++
		}
	}
	s.metrics.repacked.Add(float64(n))
	return err
}

func (s *Server) buildGRPC() error {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(s.cfg.MaxMessageBytes),
		grpc.MaxConcurrentStreams(maxConcurrentStreams),
		grpc.ChainUnaryInterceptor(s.tokens.UnaryInterceptor()),
		// Authentication first: the watch limit counts per principal.
		grpc.ChainStreamInterceptor(s.tokens.StreamInterceptor(), (&watchLimiter{}).interceptor()),
	}
	if s.cfg.TLSCert != "" {
		creds, err := credentials.NewServerTLSFromFile(s.cfg.TLSCert, s.cfg.TLSKey)
		if err != nil {
			return err
		}
		opts = append(opts, grpc.Creds(creds))
	}
	s.grpc = grpc.NewServer(opts...)
	sigv1.RegisterSIGServer(s.grpc, &sigService{s: s})
	sigv1.RegisterWorkersServer(s.grpc, &workersAuth{stopping: s.stopping, inner: workers.NewWorkersServer(s.queue, s.describe, workers.WithCompleteHook(s.completeHook))})
	s.stats = &statsService{s: s}
	sigv1.RegisterFeatureStatsServer(s.grpc, s.stats)
	// Health for every service above, and reflection (grpcurl).
	s.health = grpcsvc.Register(s.grpc)
	return nil
}

// Serve listens and serves until ctx ends, then shuts down gracefully.
// Ready is closed once both listeners accept connections.
func (s *Server) Serve(ctx context.Context, readyCh chan<- struct{}) error {
	var err error
	if s.lis, err = net.Listen("tcp", s.cfg.Listen); err != nil {
		return err
	}
	if s.httpLis, err = net.Listen("tcp", s.cfg.HTTPListen); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.Handle("/ui/", s.ui.Handler())
	mux.Handle("/{$}", http.RedirectHandler("/ui/", http.StatusSeeOther))
	for p, h := range s.extraHTTP {
		mux.Handle(p, h)
	}
	// Timeouts so that slow or idle clients do not hold connections: the
	// whole request (UI forms are small) within a minute, keep-alive
	// connections closed after two idle minutes. No WriteTimeout: it would
	// cut off any handler mounted through Options.HTTP that streams or
	// responds slowly.
	s.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		IdleTimeout: 2 * time.Minute}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	run := func(name string, f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, grpc.ErrServerStopped) {
				errc <- fmt.Errorf("%s: %w", name, err)
				cancel()
			}
		}()
	}
	run("grpc", func() error { return s.grpc.Serve(s.lis) })
	run("http", func() error { return s.httpSrv.Serve(s.httpLis) })
	run("queue", func() error { return s.queue.Run(ctx) })
	run("eviction", func() error { return s.evictor.Run(ctx) })
	run("ui", func() error { return s.ui.Run(ctx) })
	run("autoscaler", func() error { return s.scaler.Run(ctx) })
	run("versions", func() error { return s.versions.Run(ctx) })
	run("concat", func() error { return s.concat.Run(ctx) })
	for i, in := range s.ingesters {
		run("ingest "+s.cfg.Ingest[i], func() error { return in.Run(ctx) })
	}
	s.log.Info("sigd serving", "grpc", s.lis.Addr().String(), "http", s.httpLis.Addr().String())
	if readyCh != nil {
		close(readyCh)
	}
	<-ctx.Done()
	close(s.stopping)
	// NOT_SERVING before the pool drains, so that probes and balancers
	// stop sending calls meanwhile; the pool, the gRPC calls in flight and
	// HTTP then share one 10s budget.
	s.health.Shutdown()
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if s.pool != nil {
		_ = s.pool.Close(sctx)
	}
	deadline, _ := sctx.Deadline()
	s.health.Stop(max(time.Until(deadline), 0))
	_ = s.httpSrv.Shutdown(sctx)
	wg.Wait()
	close(errc)
	return <-errc
}

// Addr is the gRPC address (after Serve has started listening).
func (s *Server) Addr() string { return s.lis.Addr().String() }

// HTTPAddr is the HTTP address.
func (s *Server) HTTPAddr() string { return s.httpLis.Addr().String() }

// Frontend returns the matching frontend.
func (s *Server) Frontend() *matching.Frontend { return s.frontend }

// Queue returns the work queues.
func (s *Server) Queue() *workers.Queue { return s.queue }

// Store returns the object store.
func (s *Server) Store() *objstore.Store { return s.store }

// Catalog returns the block catalog.
func (s *Server) Catalog() *catalog.Catalog { return s.catalog }

// Versions returns the follower and collector of block versions.
func (s *Server) Versions() *versions.Manager { return s.versions }

// Concatenator returns the follower of compacted blocks that concatenates
// their memo entries.
func (s *Server) Concatenator() *versions.Concatenator { return s.concat }

// Tokens returns the token table.
func (s *Server) Tokens() *auth.Tokens { return s.tokens }

// Registry returns the Prometheus registry.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Close releases everything New opened.
func (s *Server) Close() {
	if s.kafka != nil {
		s.kafka.Close()
	}
	if s.queue != nil {
		s.queue.Close()
	}
	if s.cache != nil {
		s.cache.Close()
	}
	if s.catalog != nil {
		s.catalog.Close()
	}
	if s.stats != nil {
		s.stats.close()
	}
	if s.dev != nil {
		if s.dev.Kafka != nil {
			s.dev.Kafka.Close()
		}
		if s.dev.MinIO != nil {
			s.dev.MinIO.Stop()
		}
	}
}
