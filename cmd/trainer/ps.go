package main

import (
	"context"
	"fmt"
	"io"
	"net"

	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/internal/cli"
	"github.com/sigdata/sig/internal/grpcsvc"
	"github.com/sigdata/sig/trainer/embedding/ps"
	"github.com/sigdata/sig/warehouse/objstore"
)

// trainer ps --listen ADDR --shard I --shards N --tokens FILE (--data DIR | --s3-endpoint ... --pipeline P)
//
// Runs one CPU parameter server (trainer/embedding/ps; the paper's
// caught-up training: `trainer run|controller --ps-servers N` starts N of
// these with the job and moves the caught-up phase's tables onto them;
// --ps-addrs uses servers started by hand): shard I of
// N of every embedding table, configured by the first client (the tables
// come over gRPC, proto/ps/v1) or restored from the newest checkpoint in
// the store. Checkpoints go to a local directory (--data) or to the
// warehouse bucket under checkpoints/<pipeline>/ps/ (--s3-*). Every call
// but health and reflection needs a bearer token of role trainer or
// operator from the --tokens file, which is required (a job that starts its
// servers writes one for them, holding a secret of its own; servers run by
// hand admit the job's trainer token). The server prints "listening on
// ADDR" once it serves, and stops on SIGINT/SIGTERM; killed outright, it
// restarts from its newest checkpoint.
func init() {
	commands.Register(cli.Command{
		Name:  "ps",
		Usage: "--listen ADDR --shard I --shards N --tokens FILE --data DIR: run a CPU parameter server (caught-up training)",
		Run:   runPS,
	})
}

func runPS(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := commands.NewFlags("ps", stderr)
	listen := fs.String("listen", "127.0.0.1:0", "gRPC listen address")
	shard := fs.Int("shard", 0, "this server's shard index, in [0, --shards)")
	shards := fs.Int("shards", 1, "number of parameter servers")
	data := fs.String("data", "", "directory for checkpoints (or use --s3-endpoint)")
	keep := fs.Int("keep", 3, "checkpoints retained")
	tokens := fs.String("tokens", "", "token file (internal/auth format); roles trainer and operator may call (required)")
	sc := objstore.Flags(fs, "S3 endpoint for checkpoints in the warehouse bucket (instead of --data)")
	pipeline := fs.String("pipeline", "", "pipeline whose checkpoints these are (with --s3-endpoint)")
	newLogger := cli.LogFlag(fs)
	if err := cli.ParseEnv(fs, args); err != nil {
		return err
	}
	log, err := newLogger(stderr)
	if err != nil {
		return err
	}
	// Like every SIG service, a parameter server refuses an
	// unauthenticated caller: its tables are a job's model. A job that
	// starts its servers gives them a token file of its own
	// (trainer/embedding/paramservers).
	if *tokens == "" {
		return fmt.Errorf("%w: --tokens is required: parameter servers serve only authenticated trainers and operators", cli.ErrUsage)
	}
	toks, err := auth.Load(*tokens)
	if err != nil {
		return fmt.Errorf("--tokens: %w", err)
	}
	var store ps.Store
	switch {
	case *data != "" && sc.Endpoint != "":
		return fmt.Errorf("%w: give --data or --s3-endpoint, not both", cli.ErrUsage)
	case *data != "":
		store = ps.DirStore{Dir: *data}
	case sc.Endpoint != "":
		if *pipeline == "" {
			return fmt.Errorf("%w: --s3-endpoint needs --pipeline", cli.ErrUsage)
		}
		st, err := objstore.New(*sc)
		if err != nil {
			return err
		}
		store = ps.ObjectStore{S: st, Pipeline: *pipeline}
	default:
		return fmt.Errorf("%w: --data DIR or --s3-endpoint is required (checkpoints)", cli.ErrUsage)
	}
	if *shards < 1 || *shard < 0 || *shard >= *shards {
		return fmt.Errorf("%w: --shard %d of --shards %d", cli.ErrUsage, *shard, *shards)
	}
	srv, err := ps.NewServer(ctx, ps.Config{Shard: *shard, Shards: *shards, Store: store, Keep: *keep, Logger: log})
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	g := ps.NewGRPCServer(srv, toks)
	hs := grpcsvc.Register(g)
	fmt.Fprintf(stderr, "listening on %s\n", lis.Addr())
	errc := make(chan error, 1)
	go func() { errc <- g.Serve(lis) }()
	select {
	case <-ctx.Done():
		hs.Stop(-1)
		return nil
	case err := <-errc:
		return err
	}
}
