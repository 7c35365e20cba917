package paramservers

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/trainer/checkpoint"
	"github.com/sigdata/sig/trainer/embedding/ps"
	"github.com/sigdata/sig/trainer/model"
)

// Servers are a job's parameter servers and its connection to them: the
// `trainer ps` processes it started (or servers run by hand, Config.Addrs),
// and, while the tables are on them, the tables' client. Not safe for
// concurrent use: the caller serializes every call (the trainer makes them
// under its device's mutex), and its methods are safe on a nil *Servers,
// which is a job that keeps its tables on the slice.
type Servers struct {
	cfg   Config
	log   *slog.Logger
	now   func() time.Time
	fleet *fleet // nil: servers the operator runs (Addrs)
	conns []*grpc.ClientConn
	// client is the tables' client while they are on the servers; nil while
	// they are on the slice.
	client *ps.Client
	rep    Report

	// Placed, when set (tests), is called once the tables are on the
	// servers, with the model state they were placed from.
	Placed func(ctx context.Context, client *ps.Client, m *model.Model)
	// BeforeApply, when set (tests), is called before a step's Apply with
	// the step it applies.
	BeforeApply func(step int64)
}

// Start starts (or, with Config.Addrs, dials) the servers; nil when the job
// keeps its tables on the slice. now is the job's clock, which times the
// moves, saves and RPCs the report counts.
func Start(ctx context.Context, cfg Config, now func() time.Time, log *slog.Logger) (*Servers, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	s := &Servers{cfg: cfg, log: log, now: now}
	addrs, token := cfg.Addrs, cfg.Token
	if len(addrs) == 0 {
		f, err := startFleet(ctx, cfg, log)
		if err != nil {
			return nil, err
		}
		s.fleet, addrs, token = f, f.addrs(), f.token.secret
	}
	// Every call carries the token: the servers refuse any other caller
	// (`trainer ps` requires --tokens). Loopback or a private network
	// carries it in the clear, as the hosts' calls to their controller.
	creds := grpc.WithPerRPCCredentials(auth.BearerCredentials{Token: token, Insecure: true})
	for _, a := range addrs {
		cc, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()), creds)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("parameter server %s: %w", a, err)
		}
		s.conns = append(s.conns, cc)
	}
	s.rep.Servers, s.rep.Stacking = len(addrs), !cfg.NoStacking
	log.Info("parameter servers", "addrs", addrs, "stacking", !cfg.NoStacking)
	return s, nil
}

// Close closes the connections and stops the servers the job started.
func (s *Servers) Close() {
	if s == nil {
		return
	}
	for _, cc := range s.conns {
		cc.Close()
	}
	if s.fleet != nil {
		s.fleet.close()
	}
}

// Report is what the servers did so far (nil for a nil *Servers).
func (s *Servers) Report() *Report {
	if s == nil {
		return nil
	}
	r := s.rep
	if s.fleet != nil {
		r.Restarts = s.fleet.restarts()
	}
	if s.client != nil {
		r.RPCs += s.client.RPCs()
	}
	return &r
}

// Addrs are the servers' addresses, shard by shard.
func (s *Servers) Addrs() []string {
	if s.fleet != nil {
		return s.fleet.addrs()
	}
	return s.cfg.Addrs
}

// PID is shard i's process id (tests kill it); 0 for servers the job did
// not start.
func (s *Servers) PID(shard int) int {
	if s == nil || s.fleet == nil {
		return 0
	}
	return s.fleet.pid(shard)
}

// OnServers reports whether the tables are on the servers: placed since
// the last Drop.
func (s *Servers) OnServers() bool { return s != nil && s.client != nil }

// Drop forgets the tables' client: the model is restored, and its tables
// are on the slice until Place puts them on the servers again.
func (s *Servers) Drop() {
	if s == nil {
		return
	}
	if s.client != nil {
		s.rep.RPCs += s.client.RPCs()
	}
	s.client = nil
}

// tables describes the model's embedding tables to the servers: plain SGD
// at the model's embedding learning rate, in float32 (the arithmetic the
// slice uses too, trainer/model).
func tables(m *model.Model) []ps.Table {
	cfg := m.Config()
	var out []ps.Table
	for k, i := range cfg.Features.Sparse {
		sh := cfg.Shape(k)
		out = append(out, ps.Table{Name: cfg.Features.Inputs[i].Name, Vocab: sh.Vocab, Dim: sh.Dim,
			Optimizer: ps.SGD, LearningRate: float32(cfg.EmbeddingLearningRate)})
	}
	return out
}

// Place puts a restored model's tables on the servers: rolled back to the
// checkpoint's committed step when the checkpoint was written with them
// there (committed, its manifest's ParameterServers; ps Restore) — or
// written from the model state, at the switch to the caught-up phase and
// when a server lost that checkpoint (ps Assign, then a server checkpoint
// of it, so a server restarted before the next commit comes back to these
// values). Training then continues from the same state: the servers are at
// the model's step. A checkpoint whose servers' step is not its model's is
// checkpoint.ErrCorrupt.
func (s *Servers) Place(ctx context.Context, m *model.Model, committed *checkpoint.ParameterServers) error {
	t0 := s.now()
	defer func() { s.rep.MoveSeconds += s.now().Sub(t0).Seconds() }()
	conns := make([]grpc.ClientConnInterface, len(s.conns))
	for i, cc := range s.conns {
		conns[i] = cc
	}
	s.Drop()
	client, err := ps.NewClient(ctx, conns, ps.ClientConfig{Tables: tables(m), Stacking: !s.cfg.NoStacking, Mode: ps.Coalesced, Cores: 1})
	if err != nil {
		return err
	}
	step := int64(m.Steps())
	if p := committed; p != nil && p.Servers == len(conns) && p.Stacking == !s.cfg.NoStacking {
		if p.Step != step {
			return fmt.Errorf("%w: the checkpoint's parameter servers are at step %d, its model at %d", checkpoint.ErrCorrupt, p.Step, step)
		}
		err := client.Restore(ctx, p.Step)
		if err == nil {
			s.client = client
			s.rep.Restores++
			if s.Placed != nil {
				s.Placed(ctx, client, m)
			}
			s.log.Info("parameter servers rolled back to the committed step", "step", p.Step)
			return nil
		}
		if status.Code(err) != codes.NotFound {
			s.rep.RPCs += client.RPCs()
			return err
		}
		// A server came back without that checkpoint (its store was lost):
		// the model object holds the same tables, read back at the commit.
		s.log.Warn("a parameter server lacks the committed checkpoint: writing the tables from the model state", "step", p.Step, "err", err)
	}
	if err := client.Assign(ctx, step, m.TableValues()); err != nil {
		s.rep.RPCs += client.RPCs()
		return err
	}
	if _, err := client.Checkpoint(ctx); err != nil {
		s.rep.RPCs += client.RPCs()
		return err
	}
	s.client = client
	s.rep.Moves++
	if s.Placed != nil {
		s.Placed(ctx, client, m)
	}
	s.log.Info("embedding tables moved onto the parameter servers", "step", step, "servers", len(conns))
	return nil
}

// Save checkpoints the servers for a model checkpoint: the tables are read
// back into the model m, so its object is a whole model state, then every
// server writes its shard at the model's step — before the manifest, the
// commit point, is written. It returns what the manifest records.
func (s *Servers) Save(ctx context.Context, m *model.Model) (*checkpoint.ParameterServers, error) {
	t0 := s.now()
	defer func() { s.rep.SaveSeconds += s.now().Sub(t0).Seconds() }()
	if s.client.Step() != int64(m.Steps()) {
		return nil, fmt.Errorf("parameter servers at step %d, the model at %d", s.client.Step(), m.Steps())
	}
	vals, err := s.client.ReadTables(ctx)
	if err != nil {
		return nil, err
	}
	if err := m.SetTableValues(vals); err != nil {
		return nil, err
	}
	step, err := s.client.Checkpoint(ctx)
	if err != nil {
		return nil, err
	}
	return &checkpoint.ParameterServers{Servers: len(s.conns), Stacking: !s.cfg.NoStacking, Step: step}, nil
}

// Committed records that the checkpoint Save returned p for is durable.
func (s *Servers) Committed(p *checkpoint.ParameterServers) {
	if s == nil || p == nil {
		return
	}
	s.rep.Checkpoints++
	s.rep.CommittedStep = p.Step
}
