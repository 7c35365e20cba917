package trainer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/internal/cli"
	"github.com/sigdata/sig/internal/grpcsvc"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/reader"
	"github.com/sigdata/sig/trainer/buffer"
)

// JobConfig is a whole training job in one process: the controller, its
// TPU host workers as goroutines, and optionally its readers (`trainer run`,
// the demo, tests). The hosts speak to the controller over loopback gRPC,
// the same code path as separate processes.
type JobConfig struct {
	ControllerConfig
	// Listen is the controller's gRPC address. Default 127.0.0.1:0.
	Listen string
	// InProcessReaders starts this many reader servers in the process on
	// ControllerConfig.Store when ControllerConfig.Readers is empty.
	// Default 2.
	InProcessReaders int
	// HostToken authenticates hosts to the controller and readers
	// (ControllerConfig.Token when empty).
	HostToken string
	// HostInFlight, when Max > 0, overrides the hosts' in-flight scaling
	// bounds (benchmarks: Min = Max = 1 is the fixed baseline).
	HostInFlight buffer.Scaling
	// OnController, if set, is called with the controller once it serves
	// (tests send preemption notices and release holds through it).
	OnController func(c *Controller, addr string)
	// ReaderOptions are added to the in-process readers' gRPC servers
	// (benchmarks give each reader stream the capacity of one reader task).
	ReaderOptions []grpc.ServerOption
}

// RunJob runs a training job to its end — every block of the range
// committed, a preemption, or ctx ending — and returns its report.
//
// A demo calls it with a SIG client (or sigd address and a token of role
// trainer for the client), the warehouse's object store, a pipeline and
// event range, and the graph to submit (or none if it was submitted):
//
//	rep, err := trainer.RunJob(ctx, trainer.JobConfig{ControllerConfig: trainer.ControllerConfig{
//		Client: "ctr", Pipeline: "ctr_small", Graph: dsl, From: from, To: to,
//		SIG: sigClient, Store: store, KafkaBrokers: brokers,
//		Hosts: 2, Chips: 8, CaughtUpChips: 2, EpochUnits: 4,
//	}})
//	rep.WriteText(os.Stdout)
//
// Jobs sharing a fleet run concurrently with one fleet.Shared as their
// Allocator (FleetChips its capacity) and one goodput.Recorder of that
// capacity as their Recorder; the recorder's report is the fleet's goodput.
func RunJob(ctx context.Context, cfg JobConfig) (Report, error) {
	cfg.EnsureDefaults()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.InProcessReaders <= 0 {
		cfg.InProcessReaders = 2
	}
	if cfg.HostToken == "" {
		cfg.HostToken = cfg.Token
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	var readers []*reader.Server // in-process, whose work the report counts
	if len(cfg.Readers) == 0 {
		if cfg.Store == nil {
			return Report{}, errors.New("trainer: no readers and no store to serve them from")
		}
		// The job's readers report the memo objects they refuse to sigd
		// with the job's trainer token (its own pipelines' components),
		// as `reader --sigd` does, so that damage they find is repaired
		// (sigd's ReportCorruptMemo); the controller shares the connection.
		if cfg.SIG == nil && cfg.SigdAddr != "" {
			cc, err := cli.Dial(cfg.SigdAddr, cfg.Token, cfg.TLS)
			if err != nil {
				return Report{}, fmt.Errorf("trainer: sigd: %w", err)
			}
			defer cc.Close()
			cfg.SIG = sigv1.NewSIGClient(cc)
			if cfg.FeatureStats == nil {
				cfg.FeatureStats = sigv1.NewFeatureStatsClient(cc)
			}
		}
		var rep reader.Reporter
		if cfg.SIG != nil {
			rep = reader.SIGReporter(cfg.SIG)
		}
		for i := 0; i < cfg.InProcessReaders; i++ {
			srv, err := reader.NewServer(reader.Config{Store: cfg.Store, Logger: cfg.Logger, Reporter: rep})
			if err != nil {
				return Report{}, err
			}
			readers = append(readers, srv)
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return Report{}, err
			}
			gs := srv.GRPCServer(cfg.ReaderOptions...)
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = gs.Serve(lis)
			}()
			defer gs.Stop()
			cfg.Readers = append(cfg.Readers, lis.Addr().String())
		}
	}
	c, err := NewController(cfg.ControllerConfig)
	if err != nil {
		return Report{}, err
	}
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return Report{}, err
	}
	gs := c.GRPCServer()
	// The controller listens on cfg.Listen, reachable by outside hosts:
	// health and reflection as in every process (the in-process readers
	// above serve this process's hosts only).
	grpcsvc.Register(gs)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = gs.Serve(lis)
	}()
	defer gs.Stop()
	addr := lis.Addr().String()
	if cfg.OnController != nil {
		cfg.OnController(c, addr)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)), hostCredentials(cfg.HostToken))
	if err != nil {
		return Report{}, err
	}
	defer conn.Close()
	hctx, hcancel := context.WithCancel(ctx)
	defer hcancel()
	for i := 0; i < cfg.Hosts; i++ {
		hc := HostConfig{ID: fmt.Sprintf("host%d", i), Conn: conn, ReaderToken: cfg.HostToken, Logger: cfg.Logger,
			Clock: cfg.Clock, InFlight: cfg.HostInFlight}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := RunHost(hctx, hc); err != nil && hctx.Err() == nil {
				cfg.Logger.Warn("host stopped", "host", hc.ID, "err", err)
			}
		}()
	}
	rep, err := c.Run(ctx)
	// The hosts were told to exit; stop any still reconnecting.
	hcancel()
	if len(readers) > 0 {
		rep.Readers = &ReaderTotals{}
		for _, r := range readers {
			st := r.Stats()
			rep.Readers.Units += st.Units
			rep.Readers.Rows += st.Rows
			rep.Readers.ObjectRequests += st.ObjectRequests
		}
	}
	return rep, err
}

func hostCredentials(token string) grpc.DialOption {
	if token == "" {
		return grpc.EmptyDialOption{}
	}
	return grpc.WithPerRPCCredentials(auth.BearerCredentials{Token: token, Insecure: true})
}
