package memo

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/catalog"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/workers"
)

// Runner memoizes one (component, block) from the task's description: it
// reads only the columns the component needs from the raw block, runs the
// component's canonical graph with transform and writes the memo object
// whole (paper IV.A: SIG workers "fetch raw data, apply transformations, and
// store results back in the warehouse"). Marking the entry ready is the
// completion hook's job, on the sigd side, so in-process and remote workers
// run the same code.
//
// It is a workers.StagedRunner: those three steps are its stages (Read,
// Transform, Write), so a pool worker pipelines them, reading the next
// block and writing the previous memo objects while it transforms one
// (workers.Pool). Run does the three in turn.
type Runner struct {
	Store *objstore.Store
	// Catalog, when set (in-process workers), saves reading the raw block's
	// footer: its column directory is in the catalog.
	Catalog  *catalog.Catalog
	Registry *transform.Registry
	// Segments, if set, keeps the raw columns read last, so that the
	// tasks of one block (one per component) fetch each column once.
	Segments *block.SegmentCache
	// Observe, if set, is told how long each stage of a run took: "read"
	// (the raw columns from the object store), "transform" (the component's
	// ops) and "write" (encoding and storing the memo object). sigd exports
	// them as sig_worker_phase_seconds. Pipelined stages overlap, so their
	// sum can exceed the wall time.
	Observe func(phase string, d time.Duration)
	// Compression is the Arrow IPC buffer compression of the memo
	// objects' value segments (block.Compression; zero: uncompressed).
	// Their event_id segment is encoded as the raw block's is, whatever
	// this says, so that the two stay byte-identical: readers then know a
	// memo object row-aligned from the footers alone and fetch its value
	// segment with its footer in one request (reader, block.FetchTail).
	Compression block.Compression
}

var _ workers.StagedRunner = (*Runner)(nil)

func (r *Runner) observe(phase string, start time.Time) {
	if r.Observe != nil {
		r.Observe(phase, time.Since(start))
	}
}

// Run implements workers.Runner: the three stages one after the other.
func (r *Runner) Run(ctx context.Context, t workers.Task) (workers.Result, error) {
	return workers.RunStages(ctx, r, t)
}

// taskError is a failure retrying cannot fix; it is still retried up to the
// queue's limit and then quarantined with this message.
func taskError(format string, args ...any) error { return fmt.Errorf(format, args...) }

// Read implements workers.StagedRunner: it checks the task's description
// (schema, canonical graph, raw block) and reads the columns the component
// needs from the raw block.
func (r *Runner) Read(ctx context.Context, t workers.Task) (workers.StagedTask, error) {
	spec := t.Spec
	if spec == nil {
		return nil, fmt.Errorf("task %s has no description", t.ID)
	}
	if spec.MemoGeneration == 0 {
		return &memoTask{}, nil // nothing left to compute
	}
	s, err := transform.ParseSchema([]byte(spec.SchemaJson))
	if err != nil {
		return nil, taskError("task schema: %v", err)
	}
	reg := r.Registry
	if reg == nil {
		reg = transform.Default()
	}
	g, _, err := transform.ParseAndCheck([]byte(spec.CanonicalDsl), "component "+spec.ComponentKey, s, reg, transform.Limits{})
	if err != nil {
		return nil, taskError("%v", err)
	}
	var meta block.Meta
	if r.Catalog != nil {
		if meta, err = r.Catalog.Get(spec.RawSource, spec.BlockId); err != nil {
			return nil, taskError("block %s: %v", spec.BlockId, err)
		}
	} else if meta, err = block.ReadFooter(ctx, r.Store, spec.RawObject); err != nil {
		return nil, err
	}
	start := time.Now()
	raw, err := block.ReadColumnsCached(ctx, r.Store, meta, spec.Columns, r.Segments)
	if err != nil {
		return nil, err
	}
	r.observe("read", start)
	// A raw block is Arrow from outside the worker: its columns, event_id
	// included (it becomes the memo object's), must be the schema's types
	// before any op or the memo encoder reads them.
	conformed, err := transform.Conform(s, raw, recordColumns(raw))
	raw.Release()
	if err != nil {
		return nil, taskError("raw block %s: %v", spec.BlockId, err)
	}
	raw = conformed
	if err := transform.CheckRecord(g, s, raw); err != nil {
		raw.Release()
		return nil, taskError("block %s: %v", spec.BlockId, err)
	}
	return &memoTask{r: r, spec: spec, g: g, reg: reg, meta: meta, raw: raw}, nil
}

// recordColumns is the names of rec's columns, in order.
func recordColumns(rec arrow.Record) []string {
	names := make([]string, rec.NumCols())
	for i, f := range rec.Schema().Fields() {
		names[i] = f.Name
	}
	return names
}

// memoTask is one task between its stages: the raw columns after Read, the
// memo record after Transform. The zero memoTask has nothing to compute.
type memoTask struct {
	r    *Runner
	spec *sigv1.Task
	g    *transform.Graph
	reg  *transform.Registry
	meta block.Meta
	raw  arrow.Record // until Transform
	memo arrow.Record // from Transform until Write
}

// Transform runs the component's ops over the raw columns and builds the
// memo record (event_id and the output column). The raw columns are
// released as soon as the record is built, so a task waiting for the write
// stage holds only its output.
func (m *memoTask) Transform(ctx context.Context) error {
	if m.raw == nil {
		return nil
	}
	start := time.Now()
	out, err := transform.Run(m.g, m.reg, m.raw, m.g.Inputs[0].Node)
	if err != nil {
		return err
	}
	m.r.observe("transform", start)
	m.memo = MemoRecord(m.raw.Column(0), out[0]) // retains both columns
	out[0].Release()
	m.raw.Release()
	m.raw = nil
	return nil
}

// Write encodes the memo record and stores it whole.
func (m *memoTask) Write(ctx context.Context) (workers.Result, error) {
	if m.memo == nil {
		return workers.Result{}, nil
	}
	spec, meta := m.spec, m.meta
	mm := block.Meta{
		Key: spec.MemoObject, ID: spec.BlockId, Source: spec.RawSource, ComponentKey: spec.ComponentKey,
		WindowStart: meta.WindowStart, WindowLength: meta.WindowLength,
		MinEventTime: meta.MinEventTime, MaxEventTime: meta.MaxEventTime,
		SchemaFingerprint: meta.SchemaFingerprint, Late: meta.Late, Generation: meta.Generation,
	}
	start := time.Now()
	opts := block.EncodeOptions{Compression: m.r.Compression}
	if c, ok := meta.Column(transform.ColEventID); ok {
		opts.Columns = map[string]block.Compression{transform.ColEventID: c.Compression}
	}
	written, err := block.WriteWith(ctx, m.r.Store, mm, m.memo, opts)
	if err != nil {
		return workers.Result{}, err
	}
	m.r.observe("write", start)
	return workers.Result{Rows: written.Rows, Bytes: written.Size}, nil
}

// Release frees the raw columns or the memo record, whichever the task
// still holds.
func (m *memoTask) Release() {
	if m.raw != nil {
		m.raw.Release()
		m.raw = nil
	}
	if m.memo != nil {
		m.memo.Release()
		m.memo = nil
	}
}

// MemoRecord is the record stored in a memo object: event_id and the
// component's output column.
func MemoRecord(eventID, value arrow.Array) arrow.Record {
	s := arrow.NewSchema([]arrow.Field{
		{Name: transform.ColEventID, Type: arrow.PrimitiveTypes.Int64},
		{Name: block.MemoColumn, Type: value.DataType(), Nullable: true},
	}, nil)
	return array.NewRecord(s, []arrow.Array{eventID, value}, int64(value.Len()))
}
