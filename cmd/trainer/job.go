package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/internal/cli"
	"github.com/sigdata/sig/internal/grpcsvc"
	"github.com/sigdata/sig/trainer"
	"github.com/sigdata/sig/trainer/control"
	"github.com/sigdata/sig/trainer/embedding/paramservers"
	"github.com/sigdata/sig/trainer/steptime"
	"github.com/sigdata/sig/warehouse/objstore"
)

// The training job commands (see trainer/doc.go for the architecture):
//
//	trainer controller --listen ADDR [job flags]       the controller, a gRPC server
//	trainer host --controller ADDR --id ID             one TPU host worker
//	trainer run --hosts N [job flags]                  a controller and N hosts in one process
//
// Every flag also reads its SIG_* environment variable. SIGTERM is a
// preemption notice of --preempt-notice (paper VI.B): the controller
// checkpoints early and exits, a host tells its controller and exits when
// told; SIGINT stops at once. At exit the controller writes its report
// (--report-json, --report-text; text to stdout by default).
func init() {
	commands.Register(cli.Command{Name: "controller", HandlesSIGTERM: true, Run: runController,
		Usage: "--listen ADDR --client C --pipeline P --sigd ADDR ...: a training job's controller (gRPC)"})
	commands.Register(cli.Command{Name: "host", HandlesSIGTERM: true, Run: runHostCmd,
		Usage: "--controller ADDR --id ID: one TPU host worker of a training job"})
	commands.Register(cli.Command{Name: "run", HandlesSIGTERM: true, Run: runJobCmd,
		Usage: "--hosts N --client C --pipeline P --sigd ADDR ...: controller and hosts in one process"})
}

type jobFlags struct {
	job, client, pipeline, graph, rangeS, source       string
	priority                                           int
	sigd                                               *cli.Conn
	tokens                                             string
	s3                                                 *objstore.Config
	kafka, readers                                     cli.List
	hosts, chips, cuChips, epochUnits, cuUnits         int
	batch, bufferEx, minIF, maxIF, credits             int
	readRows                                           int
	vocab                                              int64
	dim, hidden                                        int
	lr, elr                                            float64
	seed                                               uint64
	mode                                               string
	timeScale                                          float64
	compile                                            time.Duration
	follow                                             bool
	retrain, caughtUpInputs                            string
	maxAttempts                                        int
	nanAtStep                                          uint64
	preemptNotice, statusInterval, holdPoll, holdAfter time.Duration
	reportJSON, reportText, metrics                    string
	psServers                                          int
	psAddrs                                            cli.List
	psNoStacking                                       bool
	psBandwidth                                        float64
	newLogger                                          func(io.Writer) (*slog.Logger, error)
}

func addJobFlags(fs *flag.FlagSet) *jobFlags {
	f := &jobFlags{}
	fs.StringVar(&f.job, "job", "", "job name in reports (default: the pipeline)")
	fs.StringVar(&f.client, "client", "", "SIG client of the pipeline (required)")
	fs.StringVar(&f.pipeline, "pipeline", "", "pipeline name (required)")
	fs.StringVar(&f.graph, "graph", "", "DSL `FILE` of the model's transformation graph, submitted at setup (default: the pipeline is already submitted)")
	fs.IntVar(&f.priority, "priority", 0, "priority of the submitted graph")
	fs.StringVar(&f.rangeS, "range", "", "event range FROM:TO, microseconds or RFC 3339 (required; TO may be empty to follow the stream)")
	fs.StringVar(&f.source, "raw-source", "ads", "raw event source")
	f.sigd = cli.ConnFlags(fs, "sigd", "127.0.0.1:7070", "sigd gRPC address",
		"bearer token (role trainer) for sigd, the readers and, for hosts, the controller")
	fs.StringVar(&f.tokens, "tokens", "", "token file authenticating the controller's service (internal/auth format; empty: no authentication)")
	f.s3 = objstore.Flags(fs, "S3 endpoint of the warehouse (checkpoints; required)")
	fs.Var(&f.kafka, "kafka-brokers", "Kafka brokers for sig.memo.ready completion events (optional)")
	fs.Var(&f.readers, "readers", "reader addresses, comma-separated")
	fs.IntVar(&f.hosts, "hosts", 2, "TPU host workers of the slice")
	fs.IntVar(&f.chips, "chips", 8, "chips of the initial-phase slice")
	fs.IntVar(&f.cuChips, "caught-up-chips", 2, "chips of the caught-up slice")
	fs.IntVar(&f.epochUnits, "epoch-units", 4, "work units (blocks) per initial epoch")
	fs.IntVar(&f.cuUnits, "caught-up-epoch-units", 1, "work units per caught-up epoch")
	fs.IntVar(&f.batch, "batch-size", 256, "per-host batch size")
	fs.IntVar(&f.bufferEx, "buffer-examples", 0, "host buffer capacity (default 8 batches)")
	fs.IntVar(&f.minIF, "min-in-flight", 1, "fewest work units a host keeps in flight")
	fs.IntVar(&f.maxIF, "max-in-flight", 8, "most work units a host keeps in flight")
	fs.IntVar(&f.credits, "credits", 2, "batches a host may send ahead")
	fs.IntVar(&f.readRows, "read-batch-rows", 1024, "rows per reader record batch")
	fs.Int64Var(&f.vocab, "vocab", 1<<15, "rows of every embedding table")
	fs.IntVar(&f.dim, "dim", 8, "embedding width")
	fs.IntVar(&f.hidden, "hidden", 32, "hidden layer width")
	fs.Float64Var(&f.lr, "lr", 0, "dense learning rate (default 0.05)")
	fs.Float64Var(&f.elr, "embedding-lr", 0, "embedding learning rate (default 0.5)")
	fs.Uint64Var(&f.seed, "seed", 0, "seed of the initial parameters")
	fs.StringVar(&f.mode, "mode", "serialized", "TensorCore/SparseCore execution: serialized or pipelined")
	fs.Float64Var(&f.timeScale, "time-scale", trainer.DefaultTimeScale, "wall time per modelled device time")
	fs.DurationVar(&f.compile, "compile-time", 50*time.Millisecond, "time to compile a slice")
	fs.BoolVar(&f.follow, "follow", false, "after catching up, wait for new blocks instead of exiting")
	fs.StringVar(&f.retrain, "retrain", "changed", "blocks that changed after they were trained: changed (train the new version in a later epoch) or never")
	fs.StringVar(&f.caughtUpInputs, "caught-up-inputs", "sig", "caught-up phase inputs: sig (memoized where ready, computed where pending) or lig (all computed locally)")
	fs.IntVar(&f.maxAttempts, "max-attempts", 5, "failed attempts of one epoch before a permanent hold")
	fs.Uint64Var(&f.nanAtStep, "nan-at-step", 0, "fault injection: make this step's loss NaN (a permanent hold)")
	fs.DurationVar(&f.preemptNotice, "preempt-notice", 30*time.Second, "notice a SIGTERM gives (paper VI.B)")
	fs.DurationVar(&f.statusInterval, "status-interval", 5*time.Second, "how often status goes to sigd (0: never)")
	fs.DurationVar(&f.holdPoll, "hold-poll", 10*time.Second, "re-read the solution this often during a transient hold")
	fs.DurationVar(&f.holdAfter, "hold-after", 0, "keep the slice, stalled (input stall), this long when the next epoch's data is pending in SIG before a transient hold releases it (0: hold at once)")
	fs.StringVar(&f.reportJSON, "report-json", "", "write the report as JSON to this `FILE` at exit")
	fs.StringVar(&f.reportText, "report-text", "-", "write the report as text to this `FILE` at exit (- for stdout)")
	fs.StringVar(&f.metrics, "metrics", "", "serve Prometheus /metrics on this address")
	fs.IntVar(&f.psServers, "ps-servers", 0, "parameter servers holding the embedding tables in the caught-up phase: the controller starts this many `trainer ps` processes (checkpoints in the warehouse bucket; 0: the tables stay on the slice)")
	fs.Var(&f.psAddrs, "ps-addrs", "parameter servers already running (shard i at the i-th address) instead of --ps-servers; called with --token, which their --tokens file must admit")
	fs.Float64Var(&f.psBandwidth, "ps-bandwidth", steptime.DefaultNetworkBandwidth,
		"bytes/s between the caught-up slice's host and its parameter servers: prices a step's wait on them, which program goodput counts (a guess: 100 Gbit/s)")
	fs.BoolVar(&f.psNoStacking, "ps-no-stacking", false, "do not stack tables of one width into one variable on the parameter servers")
	f.newLogger = cli.LogFlag(fs)
	return f
}

func (f *jobFlags) config(log *slog.Logger) (trainer.ControllerConfig, error) {
	var c trainer.ControllerConfig
	if f.client == "" || f.pipeline == "" || f.rangeS == "" {
		return c, fmt.Errorf("%w: --client, --pipeline and --range are required", cli.ErrUsage)
	}
	if f.s3.Endpoint == "" {
		return c, fmt.Errorf("%w: --s3-endpoint is required (checkpoints)", cli.ErrUsage)
	}
	from, to, err := cli.ParseTimeRange(f.rangeS, true)
	if err != nil {
		return c, err
	}
	mode, err := steptime.ParseMode(f.mode)
	if err != nil {
		return c, fmt.Errorf("%w: --mode: %v", cli.ErrUsage, err)
	}
	retrain, ok := control.ParseRetrainPolicy(f.retrain)
	if !ok {
		return c, fmt.Errorf("%w: --retrain %q: want changed or never", cli.ErrUsage, f.retrain)
	}
	cuInputs, err := trainer.ParseCaughtUpInputs(f.caughtUpInputs)
	if err != nil {
		return c, fmt.Errorf("%w: --caught-up-inputs: %v", cli.ErrUsage, err)
	}
	var graph string
	if f.graph != "" {
		b, err := os.ReadFile(f.graph)
		if err != nil {
			return c, err
		}
		graph = string(b)
	}
	sc := *f.s3
	sc.Logger = log
	store, err := objstore.New(sc)
	if err != nil {
		return c, err
	}
	c = trainer.ControllerConfig{Job: f.job, Client: f.client, Pipeline: f.pipeline, Graph: graph, Priority: int32(f.priority),
		RawSource: f.source, From: from, To: to, SigdAddr: f.sigd.Addr, Token: f.sigd.Token, TLS: f.sigd.TLS, Store: store,
		KafkaBrokers: f.kafka, Readers: f.readers, Hosts: f.hosts, Chips: f.chips, CaughtUpChips: f.cuChips,
		EpochUnits: f.epochUnits, CaughtUpEpochUnits: f.cuUnits, Follow: f.follow, MaxAttempts: f.maxAttempts,
		Retrain: retrain, CaughtUpInputs: cuInputs,
		BatchSize: f.batch, BufferExamples: f.bufferEx, Credits: f.credits, ReadBatchRows: f.readRows,
		Vocab: f.vocab, Dim: f.dim, Hidden: f.hidden, LearningRate: f.lr, EmbeddingLearningRate: f.elr, Seed: f.seed,
		Device:      steptime.Model{Mode: mode, TimeScale: f.timeScale, Network: steptime.Network{Bandwidth: f.psBandwidth}},
		CompileTime: f.compile, StatusInterval: f.statusInterval, HoldPollInterval: f.holdPoll, HoldAfter: f.holdAfter,
		Faults: trainer.Faults{NaNAtStep: f.nanAtStep}, Logger: log}
	c.InFlight.Min, c.InFlight.Max = f.minIF, f.maxIF
	c.ParameterServers = paramservers.Config{Servers: f.psServers, Addrs: f.psAddrs, NoStacking: f.psNoStacking}
	if f.psServers > 0 && len(f.psAddrs) == 0 {
		// The servers checkpoint beside the job's checkpoints
		// (checkpoints/<pipeline>/ps/); the keys go in their environment.
		c.ParameterServers.StoreArgs = []string{"--s3-endpoint", f.s3.Endpoint, "--s3-bucket", f.s3.Bucket, "--pipeline", f.pipeline}
		if f.s3.Secure {
			c.ParameterServers.StoreArgs = append(c.ParameterServers.StoreArgs, "--s3-secure")
		}
		c.ParameterServers.Env = []string{cli.EnvName("s3-access-key") + "=" + f.s3.AccessKey, cli.EnvName("s3-secret-key") + "=" + f.s3.SecretKey}
	}
	if f.statusInterval == 0 {
		c.StatusInterval = -1
	}
	if f.tokens != "" {
		toks, err := auth.Load(f.tokens)
		if err != nil {
			return c, fmt.Errorf("--tokens: %w", err)
		}
		c.Tokens = toks
	}
	return c, nil
}

// parse parses a job command's flags (args; fs holds f's) and makes the
// controller's config, with the logger of --log-level (to stderr) and a
// registry whose metrics are served on --metrics (none if empty) until the
// returned function closes them.
func (f *jobFlags) parse(fs *flag.FlagSet, args []string, stderr io.Writer) (trainer.ControllerConfig, func() error, error) {
	if err := cli.ParseEnv(fs, args); err != nil {
		return trainer.ControllerConfig{}, nil, err
	}
	log, err := f.newLogger(stderr)
	if err != nil {
		return trainer.ControllerConfig{}, nil, err
	}
	cfg, err := f.config(log)
	if err != nil {
		return cfg, nil, err
	}
	reg := prometheus.NewRegistry()
	cfg.Registry = reg
	if f.metrics == "" {
		return cfg, func() error { return nil }, nil
	}
	url, closeMetrics, err := cli.ServeMetrics(f.metrics, reg)
	if err != nil {
		return cfg, nil, err
	}
	log.Info("metrics", "addr", url)
	return cfg, closeMetrics, nil
}

// finish writes the run's report and returns the run's error; a run the
// context stopped (SIGINT) is not a failure.
func (f *jobFlags) finish(rep trainer.Report, runErr error, stdout io.Writer) error {
	if err := f.writeReport(rep, stdout); err != nil {
		return err
	}
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return runErr
	}
	return nil
}

func (f *jobFlags) writeReport(rep trainer.Report, stdout io.Writer) error {
	var errs []error
	if f.reportJSON != "" {
		errs = append(errs, writeFile(f.reportJSON, rep.WriteJSON))
	}
	switch f.reportText {
	case "":
	case "-":
		errs = append(errs, rep.WriteText(stdout))
	default:
		errs = append(errs, writeFile(f.reportText, rep.WriteText))
	}
	return errors.Join(errs...)
}

// writeFile creates path and writes it with write.
func writeFile(path string, write func(io.Writer) error) error {
	w, err := os.Create(path)
	if err != nil {
		return err
	}
	err = write(w)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return err
}

// preemptOnSIGTERM turns SIGTERM into preemption notices of the job.
func preemptOnSIGTERM(ctx context.Context, c *trainer.Controller, notice time.Duration, log *slog.Logger) {
	onSIGTERM(ctx, func() {
		d := c.Preempt(notice, control.ScopeJob)
		log.Warn("SIGTERM: preemption notice", "deadline", d)
	})
}

// onSIGTERM calls f on every SIGTERM until ctx ends (the commands that
// take SIGTERM as a preemption notice).
func onSIGTERM(ctx context.Context, f func()) {
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-commands.SIGTERM:
				f()
			}
		}
	}()
}

func runController(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := commands.NewFlags("controller", stderr)
	listen := fs.String("listen", "127.0.0.1:7100", "gRPC address of the controller service")
	serverOpts := cli.ServerTLSFlags(fs)
	f := addJobFlags(fs)
	cfg, closeMetrics, err := f.parse(fs, args, stderr)
	if err != nil {
		return err
	}
	defer closeMetrics()
	c, err := trainer.NewController(cfg)
	if err != nil {
		return err
	}
	opts, err := serverOpts()
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	gs := c.GRPCServer(opts...)
	hs := grpcsvc.Register(gs)
	go func() { _ = gs.Serve(lis) }()
	fmt.Fprintf(stderr, "listening on %s\n", lis.Addr())
	preemptOnSIGTERM(ctx, c, f.preemptNotice, cfg.Logger)
	rep, runErr := c.Run(ctx)
	// Give hosts a moment to receive their exit before the server stops.
	hs.Stop(2 * time.Second)
	return f.finish(rep, runErr, stdout)
}

func runHostCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := commands.NewFlags("host", stderr)
	controller := cli.ConnFlags(fs, "controller", "127.0.0.1:7100", "controller gRPC address",
		"bearer token (role trainer) for the controller and readers")
	id := fs.String("id", "", "host id, unique in the job (required)")
	var readers cli.List
	fs.Var(&readers, "readers", "reader addresses (default: the controller's)")
	notice := fs.Duration("preempt-notice", 30*time.Second, "notice a SIGTERM gives (paper VI.B)")
	minIF := fs.Int("min-in-flight", 0, "override the controller's fewest in-flight units")
	maxIF := fs.Int("max-in-flight", 0, "override the controller's most in-flight units")
	newLogger := cli.LogFlag(fs)
	if err := cli.ParseEnv(fs, args); err != nil {
		return err
	}
	if *id == "" {
		return fmt.Errorf("%w: --id is required", cli.ErrUsage)
	}
	log, err := newLogger(stderr)
	if err != nil {
		return err
	}
	preempt := make(chan time.Duration, 1)
	onSIGTERM(ctx, func() {
		select {
		case preempt <- *notice:
		default:
		}
	})
	cfg := trainer.HostConfig{ID: *id, Controller: controller.Addr, Token: controller.Token, TLS: controller.TLS, Readers: readers,
		Preempt: preempt, Logger: log}
	cfg.InFlight.Min, cfg.InFlight.Max = *minIF, *maxIF
	err = trainer.RunHost(ctx, cfg)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func runJobCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := commands.NewFlags("run", stderr)
	listen := fs.String("listen", "127.0.0.1:0", "gRPC address of the controller service")
	inproc := fs.Int("in-process-readers", 2, "readers to run in the process when --readers is empty")
	f := addJobFlags(fs)
	cfg, closeMetrics, err := f.parse(fs, args, stderr)
	if err != nil {
		return err
	}
	defer closeMetrics()
	job := trainer.JobConfig{ControllerConfig: cfg, Listen: *listen, InProcessReaders: *inproc,
		OnController: func(c *trainer.Controller, addr string) {
			fmt.Fprintf(stderr, "listening on %s\n", addr)
			preemptOnSIGTERM(ctx, c, f.preemptNotice, cfg.Logger)
		}}
	rep, runErr := trainer.RunJob(ctx, job)
	return f.finish(rep, runErr, stdout)
}
