package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/internal/cli"
	"github.com/sigdata/sig/internal/grpcsvc"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/reader"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/objstore"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "reader:", err)
		}
		os.Exit(2)
	}
}

// minTailRead is the least --read-tail: a tail read shorter than a
// footer only costs a second request.
const minTailRead = 16 << 10

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("reader", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:7090", "gRPC address to serve on")
	sc := objstore.Flags(fs, "S3 endpoint host:port of the warehouse (required)")
	tokens := fs.String("tokens", "", "token file (internal/auth format); roles trainer and operator may Read (required)")
	serverOpts := cli.ServerTLSFlags(fs)
	maxUnits := fs.Int("max-units", 0, "units served at once, each holding one block in memory (0: 4 x GOMAXPROCS)")
	maxRequest := fs.Int("max-request-bytes", 4<<20, "largest ReadRequest accepted")
	s3Retry := fs.Duration("s3-retry-for", 30*time.Second, "how long one object read retries a failing S3 before the unit fails as unavailable")
	applyRuntime := cli.RuntimeFlags(fs, reader.DefaultGCPercent)
	newLogger := cli.LogFlag(fs)
	sigdAddr := fs.String("sigd", "", "sigd gRPC address to report corrupt memo objects to (empty: report none)")
	sigdToken := fs.String("sigd-token", "", "token of role reader for --sigd")
	sigdTLS := fs.Bool("sigd-tls", false, "connect to --sigd with TLS")
	guardRows := fs.Int("guard-sample-rows", reader.DefaultGuardSampleRows, "rows of each memo input a unit recomputes from the raw block and compares with the memo object (the shared-fate guard; 0: none)")
	guardEvery := fs.Int("guard-every", 1, "guard each memo input in one read of this many (drawn per read), dividing the guard's cost by about as much; 1: every read")
	guardOnError := fs.String("guard-on-error", "serve", "when the guard cannot recompute its sampled rows: serve the unit unchecked (serve) or fail it, FailedPrecondition GUARD_ERROR (fail); counted either way on --metrics as "+reader.MetricGuardErrors)
	holeLimit := fs.Int64("read-hole-limit", block.HoleLimit, "largest hole in bytes between two wanted segments of an object one ranged GET spans rather than two (Arrow's hole_size_limit; 0: the default)")
	tailRead := fs.Int64("read-tail", block.TailRead, "bytes of the speculative tail read of an object whose footer is not cached")
	metricsAddr := fs.String("metrics", "", "serve Prometheus /metrics over HTTP on this address (empty: none)")
	var flightLocations cli.List
	fs.Var(&flightLocations, "flight-locations", "Arrow Flight locations (grpc+tcp://HOST:PORT, comma-separated) of the readers GetFlightInfo's endpoints name (default: this reader's address, none if it listens on all interfaces)")
	if err := cli.ParseEnv(fs, args); err != nil {
		return err
	}
	logger, err := newLogger(stderr)
	if err != nil {
		return err
	}
	applyRuntime()
	if sc.Endpoint == "" {
		return errors.New("--s3-endpoint is required")
	}
	if *guardRows < 0 {
		return fmt.Errorf("--guard-sample-rows: %d is negative (0 turns the guard off)", *guardRows)
	}
	if *guardEvery < 1 {
		return fmt.Errorf("--guard-every: %d, want 1 or more", *guardEvery)
	}
	if *holeLimit < 0 {
		return fmt.Errorf("--read-hole-limit: %d is negative", *holeLimit)
	}
	if *tailRead < minTailRead {
		return fmt.Errorf("--read-tail: %d, want at least %d (an object's trailer and an ordinary footer)", *tailRead, minTailRead)
	}
	if *guardRows == 0 {
		*guardRows = -1 // reader.Config: negative is off, 0 the default
	}
	onError, err := reader.ParseGuardOnError(*guardOnError)
	if err != nil {
		return fmt.Errorf("--guard-on-error: %w", err)
	}
	if *tokens == "" {
		return errors.New("--tokens is required: readers serve only authenticated trainers and operators")
	}
	toks, err := auth.Load(*tokens)
	if err != nil {
		return fmt.Errorf("--tokens: %w", err)
	}
	var reporter reader.Reporter
	var solutions reader.SolutionResolver
	if *sigdAddr != "" {
		if *sigdToken == "" {
			return errors.New("--sigd needs --sigd-token (role reader)")
		}
		conn, err := cli.Dial(*sigdAddr, *sigdToken, *sigdTLS)
		if err != nil {
			return fmt.Errorf("--sigd: %w", err)
		}
		defer conn.Close()
		reporter = reader.SIGReporter(sigv1.NewSIGClient(conn))
		// Flight's GetFlightInfo asks sigd for read solutions with the
		// caller's own token (reader.Config.Solutions): a connection that
		// adds none of its own.
		fconn, err := cli.Dial(*sigdAddr, "", *sigdTLS)
		if err != nil {
			return fmt.Errorf("--sigd: %w", err)
		}
		defer fconn.Close()
		solutions = sigv1.NewSIGClient(fconn)
	}
	sc.RetryFor, sc.Logger = *s3Retry, logger
	store, err := objstore.New(*sc)
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
	if len(flightLocations) == 0 {
		if ap, err := netip.ParseAddrPort(lis.Addr().String()); err == nil && !ap.Addr().IsUnspecified() {
			scheme := "grpc+tcp://"
			if len(opts) > 0 { // --tls-cert
				scheme = "grpc+tls://"
			}
			flightLocations = cli.List{scheme + lis.Addr().String()}
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv, err := reader.NewServer(reader.Config{Store: store, Tokens: toks, MaxConcurrentUnits: *maxUnits,
		MaxRequestBytes: *maxRequest, Logger: logger, Reporter: reporter, Registerer: reg,
		Solutions: solutions, FlightLocations: flightLocations, GuardSampleRows: *guardRows, GuardEvery: *guardEvery,
		GuardOnError: onError, ReadLimits: block.ReadLimits{Hole: *holeLimit, Tail: *tailRead}})
	if err != nil {
		lis.Close()
		return err
	}
	gs := srv.GRPCServer(opts...)
	hs := grpcsvc.Register(gs)

	metricsURL := ""
	if *metricsAddr != "" {
		url, closeMetrics, err := cli.ServeMetrics(*metricsAddr, reg)
		if err != nil {
			lis.Close()
			return fmt.Errorf("--metrics: %w", err)
		}
		defer closeMetrics()
		metricsURL = url
	}
	fmt.Fprintf(stdout, "listening on %s\n", lis.Addr())
	if metricsURL != "" {
		fmt.Fprintf(stdout, "metrics on %s\n", metricsURL)
	}
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// Graceful stop: finish the streams in flight (a unit is one block), but
	// not forever; a client resumes whatever is cut off on another reader.
	hs.Stop(30 * time.Second)
	st := srv.Stats()
	logger.Info("stopped", "units", st.Units, "rows", st.Rows, "bytes", st.Bytes, "memo_pending", st.MemoPending, "failures", st.Failures)
	return nil
}
