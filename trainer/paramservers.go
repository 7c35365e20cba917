package trainer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/trainer/checkpoint"
	"github.com/sigdata/sig/trainer/embedding/ps"
	"github.com/sigdata/sig/trainer/model"
)

// The caught-up phase's parameter servers (paper III.B, V.B; doc.go,
// "Parameter servers"): the embedding tables move off the slice onto `trainer
// ps` processes at the switch, the device's steps look their rows up and
// send their updates there (one coalesced Lookup and one Apply per server
// per step), and the epoch protocol checkpoints and restores them with the
// model. Everything here runs under the device's mutex.

// psState is the device's connection to the servers.
type psState struct {
	cfg   ParameterServers
	fleet *psFleet // nil: servers the operator runs (Addrs)
	conns []*grpc.ClientConn
	// client is the tables' client while they are on the servers (the
	// device restored in the caught-up phase); nil while they are on the
	// slice.
	client *ps.Client
	rep    ParameterServerReport
	// placed, when set (tests), is called once the tables are on the
	// servers, with the model state they were placed from.
	placed func(ctx context.Context, client *ps.Client, m *model.Model)
	// beforeApply, when set (tests), is called before a step's Apply with
	// the step it applies.
	beforeApply func(step int64)
}

// ParameterServerReport is what the parameter servers did in a run.
type ParameterServerReport struct {
	Servers  int  `json:"servers"`
	Stacking bool `json:"stacking"`
	// Restarts of servers the controller started, after one died.
	Restarts int `json:"restarts"`
	// Moves: the tables were written onto the servers from the model state
	// (ps Assign) — at the switch to the caught-up phase, or when a server
	// no longer had the committed checkpoint. Restores: the servers were
	// rolled back to a checkpoint's committed step (ps Restore).
	Moves    int `json:"moves"`
	Restores int `json:"restores"`
	// Steps trained on the servers, the RPCs the client sent (Lookup,
	// Apply, Assign, reads, checkpoints, restores; one Lookup and one Apply
	// per server per step) and the wall time of the steps' Lookup and Apply,
	// which is in the steps' productive time (doc.go, "Parameter servers").
	Steps      int     `json:"steps"`
	RPCs       int64   `json:"rpcs"`
	RPCSeconds float64 `json:"rpc_seconds"`
	// Checkpoints the servers wrote for committed model checkpoints, the
	// last committed step, and the seconds spent reading the tables back
	// and checkpointing the servers (in checkpoint_save).
	Checkpoints   int     `json:"checkpoints"`
	CommittedStep int64   `json:"committed_step"`
	SaveSeconds   float64 `json:"save_seconds"`
	// MoveSeconds is the time spent moving the tables onto the servers or
	// rolling them back (in checkpoint_restore).
	MoveSeconds float64 `json:"move_seconds"`
}

// startParameterServers starts (or dials) the servers; nil when the job
// keeps its tables on the slice.
func (c *Controller) startParameterServers(ctx context.Context) (*psState, error) {
	cfg := c.cfg.ParameterServers
	if !cfg.enabled() {
		return nil, nil
	}
	st := &psState{cfg: cfg}
	addrs := cfg.Addrs
	if len(addrs) == 0 {
		f, err := startPSFleet(ctx, cfg, c.log)
		if err != nil {
			return nil, err
		}
		st.fleet, addrs = f, f.addrs()
	}
	for _, a := range addrs {
		cc, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			st.close()
			return nil, fmt.Errorf("parameter server %s: %w", a, err)
		}
		st.conns = append(st.conns, cc)
	}
	st.rep.Servers, st.rep.Stacking = len(addrs), !cfg.NoStacking
	c.log.Info("parameter servers", "addrs", addrs, "stacking", !cfg.NoStacking)
	return st, nil
}

func (st *psState) close() {
	for _, cc := range st.conns {
		cc.Close()
	}
	if st.fleet != nil {
		st.fleet.close()
	}
}

// report is the servers' part of the run's report.
func (st *psState) report() *ParameterServerReport {
	r := st.rep
	if st.fleet != nil {
		r.Restarts = st.fleet.restarts()
	}
	return &r
}

// psTables describes the model's embedding tables to the servers: plain
// SGD at the model's embedding learning rate, in float32 (the arithmetic
// the slice uses too, trainer/model).
func psTables(m *model.Model) []ps.Table {
	cfg := m.Config()
	var out []ps.Table
	for k, i := range cfg.Features.Sparse {
		sh := cfg.Shape(k)
		out = append(out, ps.Table{Name: cfg.Features.Inputs[i].Name, Vocab: sh.Vocab, Dim: sh.Dim,
			Optimizer: ps.SGD, LearningRate: float32(cfg.EmbeddingLearningRate)})
	}
	return out
}

// placeTables puts the restored model's tables on the servers (device
// mutex held): rolled back to the checkpoint's committed step when the
// checkpoint was written with them there (ps Restore) — or written from
// the model state, at the switch to the caught-up phase and when a server
// lost that checkpoint (ps Assign, then a server checkpoint of it, so a
// server restarted before the next commit comes back to these values). Training
// then continues from the same state: the servers are at the model's step.
func (c *Controller) placeTables(ctx context.Context, st *psState, m *model.Model, man *checkpoint.Manifest) error {
	t0 := c.now()
	defer func() { st.rep.MoveSeconds += c.now().Sub(t0).Seconds() }()
	conns := make([]grpc.ClientConnInterface, len(st.conns))
	for i, cc := range st.conns {
		conns[i] = cc
	}
	if st.client != nil {
		st.rep.RPCs += st.client.RPCs()
	}
	st.client = nil
	client, err := ps.NewClient(ctx, conns, ps.ClientConfig{Tables: psTables(m), Stacking: !st.cfg.NoStacking, Mode: ps.Coalesced, Cores: 1})
	if err != nil {
		return err
	}
	step := int64(m.Steps())
	var p *checkpoint.ParameterServers
	if man != nil {
		p = man.ParameterServers
	}
	if p != nil && p.Servers == len(conns) && p.Stacking == !st.cfg.NoStacking {
		if p.Step != step {
			return fmt.Errorf("%w: the checkpoint's parameter servers are at step %d, its model at %d", checkpoint.ErrCorrupt, p.Step, step)
		}
		err := client.Restore(ctx, p.Step)
		if err == nil {
			st.client = client
			st.rep.Restores++
			if st.placed != nil {
				st.placed(ctx, client, m)
			}
			c.log.Info("parameter servers rolled back to the committed step", "step", p.Step)
			return nil
		}
		if status.Code(err) != codes.NotFound {
			st.rep.RPCs += client.RPCs()
			return err
		}
		// A server came back without that checkpoint (its store was lost):
		// the model object holds the same tables, read back at the commit.
		c.log.Warn("a parameter server lacks the committed checkpoint: writing the tables from the model state", "step", p.Step, "err", err)
	}
	if err := client.Assign(ctx, step, m.TableValues()); err != nil {
		st.rep.RPCs += client.RPCs()
		return err
	}
	if _, err := client.Checkpoint(ctx); err != nil {
		st.rep.RPCs += client.RPCs()
		return err
	}
	st.client = client
	st.rep.Moves++
	if st.placed != nil {
		st.placed(ctx, client, m)
	}
	c.log.Info("embedding tables moved onto the parameter servers", "step", step, "servers", len(conns))
	return nil
}

// saveTables checkpoints the servers for a model checkpoint (device mutex
// held): the tables are read back into the model, so its object is a whole
// model state, then every server writes its shard at the model's step —
// before the manifest, the commit point, is written.
func (c *Controller) saveTables(ctx context.Context, st *psState, m *model.Model) (*checkpoint.ParameterServers, error) {
	t0 := c.now()
	defer func() { st.rep.SaveSeconds += c.now().Sub(t0).Seconds() }()
	if st.client.Step() != int64(m.Steps()) {
		return nil, fmt.Errorf("parameter servers at step %d, the model at %d", st.client.Step(), m.Steps())
	}
	vals, err := st.client.ReadTables(ctx)
	if err != nil {
		return nil, err
	}
	if err := m.SetTableValues(vals); err != nil {
		return nil, err
	}
	step, err := st.client.Checkpoint(ctx)
	if err != nil {
		return nil, err
	}
	return &checkpoint.ParameterServers{Servers: len(st.conns), Stacking: !st.cfg.NoStacking, Step: step}, nil
}

// psRemote is a step's view of the servers (model.Remote): one coalesced
// Lookup of the step's unique rows, one Apply of their gradients, timed.
type psRemote struct {
	client *ps.Client
	before func(step int64) // nil, or psState.beforeApply
	now    func() time.Time
	f      *ps.Fetched
	rpc    time.Duration
}

// psRPCTimeout bounds a step's Lookup or Apply: a server that hangs fails
// the step (and the attempt is retrained) instead of stalling the job.
const psRPCTimeout = 30 * time.Second

func (r *psRemote) Lookup(ctx context.Context, rows [][]int64) (func(t, k int) []float32, error) {
	ctx, cancel := context.WithTimeout(ctx, psRPCTimeout)
	defer cancel()
	t0 := r.now()
	f, err := r.client.Lookup(ctx, ps.Batch{rows})
	r.rpc += r.now().Sub(t0)
	if err != nil {
		return nil, err
	}
	r.f = f
	// The rows are unique: position k is distinct row k.
	return func(t, k int) []float32 { return f.Value(0, t, k) }, nil
}

func (r *psRemote) Apply(ctx context.Context, grads [][]float32) error {
	if r.f == nil {
		return errors.New("apply without a lookup")
	}
	if r.before != nil {
		r.before(r.client.Step() + 1)
	}
	ctx, cancel := context.WithTimeout(ctx, psRPCTimeout)
	defer cancel()
	t0 := r.now()
	err := r.client.Apply(ctx, r.f, ps.Grads{grads})
	r.rpc += r.now().Sub(t0)
	return err
}
