package paramservers

import (
	"context"
	"errors"
	"time"

	"github.com/sigdata/sig/trainer/embedding/ps"
)

// Remote is one step's view of the servers (model.Remote): one coalesced
// Lookup of the step's unique rows, one Apply of their gradients, timed.
type Remote struct {
	client *ps.Client
	before func(step int64) // nil, or Servers.BeforeApply
	now    func() time.Time
	f      *ps.Fetched
	rpc    time.Duration
}

// Remote returns a step's view of the servers; nil while the tables are on
// the slice.
func (s *Servers) Remote() *Remote {
	if !s.OnServers() {
		return nil
	}
	return &Remote{client: s.client, before: s.BeforeApply, now: s.now}
}

// Stepped records a step that ran on r: the real wall time of its RPCs
// (the emulator's cost, inside the step's modelled time: the step-time
// model prices the wait on the servers, trainer/steptime), and the step
// itself unless it failed (err).
func (s *Servers) Stepped(r *Remote, err error) {
	s.rep.RPCSeconds += r.rpc.Seconds()
	if err == nil {
		s.rep.Steps++
	}
}

// rpcTimeout bounds a step's Lookup or Apply: a server that hangs fails
// the step (and the attempt is retrained) instead of stalling the job.
const rpcTimeout = 30 * time.Second

// Lookup fetches the step's unique rows of every table.
func (r *Remote) Lookup(ctx context.Context, rows [][]int64) (func(t, k int) []float32, error) {
	ctx, cancel := context.WithTimeout(ctx, rpcTimeout)
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

// Apply sends the gradients of the rows Lookup fetched.
func (r *Remote) Apply(ctx context.Context, grads [][]float32) error {
	if r.f == nil {
		return errors.New("apply without a lookup")
	}
	if r.before != nil {
		r.before(r.client.Step() + 1)
	}
	ctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	t0 := r.now()
	err := r.client.Apply(ctx, r.f, ps.Grads{grads})
	r.rpc += r.now().Sub(t0)
	return err
}
