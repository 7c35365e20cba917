package sigd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/sigdata/sig/matching"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/catalog"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/workers"
)

// MemoColumn is the name of the memoized column in a memo object (see
// warehouse/block.MemoColumn).
const MemoColumn = block.MemoColumn

// Runner memoizes one (component, block) from the task's description: it
// reads only the columns the component needs from the raw block, runs the
// component's canonical graph with transform and writes the memo object
// whole (paper IV.A: SIG workers "fetch raw data, apply transformations, and
// store results back in the warehouse"). Marking the entry ready is the
// completion hook's job, on the sigd side, so in-process and remote workers
// run the same code.
type Runner struct {
	Store *objstore.Store
	// Catalog, when set (in-process workers), saves reading the raw block's
	// footer: its column directory is in the catalog.
	Catalog  *catalog.Catalog
	Registry *transform.Registry
	// Observe, if set, is told how long each phase of a run took: "read"
	// (the raw columns from the object store), "transform" (the component's
	// ops) and "write" (encoding and storing the memo object). sigd exports
	// them as sig_worker_phase_seconds.
	Observe func(phase string, d time.Duration)
}

func (r *Runner) observe(phase string, start time.Time) {
	if r.Observe != nil {
		r.Observe(phase, time.Since(start))
	}
}

// Run implements workers.Runner.
func (r *Runner) Run(ctx context.Context, t workers.Task) (workers.Result, error) {
	spec := t.Spec
	if spec == nil {
		return workers.Result{}, fmt.Errorf("task %s has no description", t.ID)
	}
	if spec.MemoGeneration == 0 {
		return workers.Result{}, nil // nothing left to compute
	}
	return r.compute(ctx, spec)
}

// taskError is a failure retrying cannot fix; it is still retried up to the
// queue's limit and then quarantined with this message.
func taskError(format string, args ...any) error { return fmt.Errorf(format, args...) }

func (r *Runner) compute(ctx context.Context, spec *sigv1.Task) (workers.Result, error) {
	s, err := transform.ParseSchema([]byte(spec.SchemaJson))
	if err != nil {
		return workers.Result{}, taskError("task schema: %v", err)
	}
	reg := r.Registry
	if reg == nil {
		reg = transform.Default()
	}
	comp := spec.ComponentKey
	g, _, err := transform.ParseAndCheck([]byte(spec.CanonicalDsl), "component "+comp, s, reg, transform.Limits{})
	if err != nil {
		return workers.Result{}, taskError("%v", err)
	}
	var meta block.Meta
	if r.Catalog != nil {
		if meta, err = r.Catalog.Get(spec.RawSource, spec.BlockId); err != nil {
			return workers.Result{}, taskError("block %s: %v", spec.BlockId, err)
		}
	} else if meta, err = block.ReadFooter(ctx, r.Store, spec.RawObject); err != nil {
		return workers.Result{}, err
	}
	start := time.Now()
	raw, err := block.ReadColumns(ctx, r.Store, meta, spec.Columns)
	if err != nil {
		return workers.Result{}, err
	}
	r.observe("read", start)
	defer raw.Release()
	if err := transform.CheckRecord(g, s, raw); err != nil {
		return workers.Result{}, taskError("block %s: %v", spec.BlockId, err)
	}
	start = time.Now()
	out, err := transform.Run(g, reg, raw, g.Inputs[0].Node)
	if err != nil {
		return workers.Result{}, err
	}
	r.observe("transform", start)
	defer out[0].Release()
	memo := MemoRecord(raw.Column(0), out[0])
	defer memo.Release()
	m := block.Meta{
		Key: spec.MemoObject, ID: spec.BlockId, Source: spec.RawSource, ComponentKey: comp,
		WindowStart: meta.WindowStart, WindowLength: meta.WindowLength,
		MinEventTime: meta.MinEventTime, MaxEventTime: meta.MaxEventTime,
		SchemaFingerprint: meta.SchemaFingerprint, Late: meta.Late, Generation: meta.Generation,
	}
	start = time.Now()
	written, err := block.Write(ctx, r.Store, m, memo)
	if err != nil {
		return workers.Result{}, err
	}
	r.observe("write", start)
	return workers.Result{Rows: written.Rows, Bytes: written.Size}, nil
}

// MemoRecord is the record stored in a memo object: event_id and the
// component's output column.
func MemoRecord(eventID, value arrow.Array) arrow.Record {
	s := arrow.NewSchema([]arrow.Field{
		{Name: transform.ColEventID, Type: arrow.PrimitiveTypes.Int64},
		{Name: MemoColumn, Type: value.DataType(), Nullable: true},
	}, nil)
	return array.NewRecord(s, []arrow.Array{eventID, value}, int64(value.Len()))
}

// completing wraps the in-process leaser so that Complete first marks the
// memo entry ready, exactly like the remote protocol's completion hook. It
// remembers each lease's task (with its description) for the hook.
type completing struct {
	workers.Leaser // described: leased tasks carry their Spec
	q              *workers.Queue
	hook           func(ctx context.Context, t workers.Task, res workers.Result) error
	leases         sync.Map // lease id -> workers.Task
}

func (c *completing) Lease(ctx context.Context, workerID string) (workers.Lease, error) {
	l, err := c.Leaser.Lease(ctx, workerID)
	if err == nil {
		c.leases.Store(l.ID, l.Task)
	}
	return l, err
}

func (c *completing) Complete(ctx context.Context, leaseID string, res workers.Result) error {
	v, ok := c.leases.LoadAndDelete(leaseID)
	if !ok {
		return fmt.Errorf("lease %s: %w", leaseID, workers.ErrLeaseLost)
	}
	if err := c.hook(ctx, v.(workers.Task), res); err != nil {
		if errors.Is(err, matching.ErrStale) {
			// The entry was evicted and re-created meanwhile: run again for
			// the new incarnation, without counting an attempt.
			return c.q.Return(leaseID)
		}
		return err
	}
	return c.Leaser.Complete(ctx, leaseID, res)
}

func (c *completing) Fail(ctx context.Context, leaseID, cause string) (bool, error) {
	c.leases.Delete(leaseID)
	return c.Leaser.Fail(ctx, leaseID, cause)
}
