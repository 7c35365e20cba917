package memo

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/matching/insertion"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
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
// Transform, Write), so a pool worker with batches of one pipelines them,
// reading the next block and writing the previous memo objects while it
// transforms one (workers.Pool). Run does the three in turn. It is a
// workers.BatchRunner too (RunBatch, batch.go): a pool leasing batches of
// a block's tasks runs each batch whole, one read of the block's raw
// columns, one run of the union of the tasks' graphs, one pack.
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
	// sum can exceed the wall time. A batch (RunBatch) reports each of its
	// groups' stages once, whatever the number of tasks in it.
	Observe func(phase string, d time.Duration)
	// Compression is the Arrow IPC buffer compression of the packs'
	// member segments (block.Compression; zero: uncompressed). Their
	// event_id segment is encoded as the raw block's is, whatever this
	// says, so that the two stay byte-identical: readers then know a pack
	// row-aligned from the footers alone and need not fetch its event_id
	// (reader, block.SameSegment).
	Compression block.Compression
	// PackKey names each pack the runner writes (block.NewPackKey, a new
	// random key every time, when nil; tests fix it to compare bytes).
	PackKey func(source string, raw blockref.Ref) string
	// PackBytes bounds the members' column bytes of one pack a batch
	// writes (block.PackOptions.MaxBytes; 0: block.DefaultPackBytes):
	// past it, RunBatch's group goes into more than one pack.
	PackBytes int64
	// Wide stores the value column in its declared type; by default an
	// int64 or list<int64> value is stored in the narrowest integer type
	// that holds it (block.EncodeOptions.Narrow), which readers widen back.
	// bench/narrow.sh sets it for the bytes and reader CPU before.
	Wide bool
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
	d, err := r.parse(spec)
	if err != nil {
		return nil, err
	}
	key, memoBlock, s, reg, prog := d.key, d.block, d.schema, d.reg, d.prog
	// The raw block version the task names (issue 21: its BlockId is a
	// memo block ref, the block and the input version to compute; its
	// RawObject a version of the block with that input version for the
	// component's columns).
	meta, err := r.rawMeta(ctx, spec, memoBlock)
	if err != nil {
		return nil, err
	}
	// Memoized nodes of the cone, when there are any readable: only the
	// residual above them runs, over the raw columns it reads.
	columns := spec.Columns
	var over *overMemo
	if len(spec.MemoInputs) > 0 {
		if over = r.overMemo(ctx, spec, key, meta, prog.Graph(), s, reg); over != nil {
			prog, columns = over.prog, over.prog.Columns()
		}
	}
	classes := opClasses(prog)
	start := time.Now()
	raw, err := block.ReadColumnsCached(ctx, r.Store, meta, columns, r.Segments)
	if err != nil {
		over.release()
		return nil, err
	}
	r.observe("read", start)
	// A raw block is Arrow from outside the worker: its columns, event_id
	// included (it becomes the memo object's), must be the schema's types
	// before any op or the memo encoder reads them. The program conforms
	// them here, once, so that the alignment check below and the memo
	// record see them too; Transform's run takes them as they are.
	conformed, err := prog.Conform(raw)
	raw.Release()
	if err != nil {
		over.release()
		return nil, taskError("raw block %s: %v", spec.BlockId, err)
	}
	raw = conformed
	if over != nil && !over.alignedWith(raw) {
		// A memo input not row-aligned with the raw block is not used: the
		// component is computed from raw columns, as without it.
		over.release()
		raw.Release()
		spec = proto.Clone(spec).(*sigv1.Task)
		spec.MemoInputs = nil
		return r.Read(ctx, workers.Task{ID: t.ID, Spec: spec, Since: t.Since})
	}
	return &memoTask{r: r, spec: spec, key: key, block: memoBlock, prog: prog, meta: meta, raw: raw, classes: classes, over: over}, nil
}

// parsed is a task's description as the worker takes it in: its
// component and memo block, the raw source's schema, the registry its ops
// run with and its canonical graph compiled.
type parsed struct {
	key    canon.Key
	block  blockref.Memo
	schema *transform.Schema
	reg    *transform.Registry
	prog   *transform.Program
}

// parse checks a task's description (component key, schema, canonical
// graph of one model input), parsed once where the task enters the worker.
func (r *Runner) parse(spec *sigv1.Task) (parsed, error) {
	var d parsed
	key, err := canon.ParseKey(spec.ComponentKey)
	if err != nil {
		return d, taskError("task component_key: %v", err)
	}
	s, err := transform.ParseSchema([]byte(spec.SchemaJson))
	if err != nil {
		return d, taskError("task schema: %v", err)
	}
	reg := r.Registry
	if reg == nil {
		reg = transform.Default()
	}
	prog, err := transform.CompileDSL([]byte(spec.CanonicalDsl), "component "+spec.ComponentKey, s, reg, transform.Limits{})
	if err != nil {
		return d, taskError("%v", err)
	}
	if n := len(prog.Graph().Inputs); n != 1 {
		return d, taskError("component %s: canonical DSL has %d model inputs, want 1", spec.ComponentKey, n)
	}
	return parsed{key: key, block: blockref.ParseMemo(spec.BlockId), schema: s, reg: reg, prog: prog}, nil
}

// opClasses returns each node's op class (insertion.OpClass), under which
// its kernel's time is reported.
func opClasses(prog *transform.Program) []string {
	g, types := prog.Graph(), prog.Types()
	classes := make([]string, len(g.Nodes))
	for i, n := range g.Nodes {
		ins := make([]transform.Type, len(n.Inputs))
		for x, j := range n.Inputs {
			ins[x] = types[j]
		}
		classes[i] = insertion.OpClass(n.Op, ins)
	}
	return classes
}

// rawMeta returns the metadata of the raw block version the task reads,
// from the catalog when the runner has it (in process), else from the
// object's footer, and checks that it is the task's block at the task's
// input version.
func (r *Runner) rawMeta(ctx context.Context, spec *sigv1.Task, want blockref.Memo) (block.Meta, error) {
	meta, err := r.rawVersion(ctx, spec.RawSource, spec.RawObject, want.ID())
	if err != nil {
		return meta, err
	}
	return meta, checkRaw(meta, spec, want)
}

// rawVersion returns the metadata of raw object object, block id of
// source: the catalog's when the runner has it and lists the version,
// else the object's footer.
func (r *Runner) rawVersion(ctx context.Context, source, object, id string) (block.Meta, error) {
	if r.Catalog != nil {
		vs, err := r.Catalog.Versions(source, id)
		if err != nil {
			return block.Meta{}, taskError("block %s: %v", id, err)
		}
		for _, m := range vs {
			if m.Key == object {
				return m, nil
			}
		}
	}
	return block.ReadFooter(ctx, r.Store, object)
}

// checkRaw checks that raw version meta is the task's block at the task's
// input version for its columns.
func checkRaw(meta block.Meta, spec *sigv1.Task, want blockref.Memo) error {
	if got := meta.Ref().Memo(meta.InputVersion(spec.Columns)); got != want {
		return taskError("raw object %s is block %s, whose input version for %v is %s; the task is %s",
			spec.RawObject, meta.Ref(), spec.Columns, got, want)
	}
	return nil
}

// overMemo is a task's residual over the memo inputs it could read: the
// program of the residual graph (canon.Residual), which reads only the raw
// columns the residual needs, and each given node's column, from its memo
// object's record.
type overMemo struct {
	prog  *transform.Program
	given map[int]arrow.Array
	recs  []arrow.Record
}

// overMemo reads the task's memo inputs that are nodes of its component,
// checked as readers check memo objects (their footer names the node and
// the block, the node's type). It returns nil when none is readable: the
// component is then computed from raw columns. A memo input that cannot be
// read is skipped, never an error: any subset gives the same column.
func (r *Runner) overMemo(ctx context.Context, spec *sigv1.Task, key canon.Key, raw block.Meta, g *transform.Graph, s *transform.Schema, reg *transform.Registry) *overMemo {
	c, err := canon.Canonicalize(g, s, reg, transform.Limits{})
	if err != nil || len(c.Components) != 1 || c.Components[0].Key != key {
		return nil
	}
	root := c.Components[0].Root
	o := &overMemo{}
	memo := map[int]bool{}
	cols := map[int]arrow.Array{}
	for _, mi := range spec.MemoInputs {
		k, err := canon.ParseKey(mi.GetKey())
		if err != nil {
			continue
		}
		j, ok := c.NodeIndex(k)
		if !ok || j == root || memo[j] {
			continue
		}
		// The node's entry of the raw version's data in the columns the
		// node reads (issue 21): another input version has other values.
		nv := raw.InputVersion(c.Cone(j, "").Columns)
		want := raw.Ref().Memo(nv)
		if !memoInputOf(mi, k, want, spec.RawSource) {
			continue
		}
		// Checked as readers check a memo input (block.CheckMember: the
		// node's column at its input version, of its type, the raw block's
		// rows), whether the node is in a pack or in an object of its own.
		meta, err := block.ReadFooter(ctx, r.Store, mi.GetMemoObject())
		if err != nil {
			continue
		}
		col, err := block.CheckMember(meta, mi.GetMemoColumn(), k, want, c.Nodes[j].Type.String(), raw.Rows)
		if err != nil {
			continue
		}
		rec, err := block.ReadColumns(ctx, r.Store, meta, []string{col.Name})
		if err != nil {
			continue
		}
		o.recs = append(o.recs, rec)
		memo[j] = true
		cols[j] = rec.Column(1)
	}
	if len(memo) == 0 {
		return nil
	}
	g, given, types := c.Residual(memo)
	o.given = map[int]arrow.Array{}
	var nodes []int
	for j, gi := range given {
		o.given[gi] = cols[j]
		nodes = append(nodes, gi)
	}
	if o.prog, err = transform.CompileResidual(g, types, nodes, s, reg); err != nil {
		o.release()
		return nil
	}
	return o
}

// memoInputOf reports whether memo input mi names node k's data of memo
// block want where it can be: a pack of want's block of the task's source,
// the node's column in it, or (no column) the node's own object of want.
func memoInputOf(mi *sigv1.MemoInput, k canon.Key, want blockref.Memo, source string) bool {
	if mi.GetMemoColumn() == "" {
		return mi.GetMemoObject() == block.MemoKey(k, want)
	}
	src, ref, ok := block.ParsePackKey(mi.GetMemoObject())
	return ok && src == source && ref.ID() == want.ID() && mi.GetMemoColumn() == block.MemberColumn(k)
}

// alignedWith reports whether every memo input's rows are the raw block's,
// event id for event id.
func (o *overMemo) alignedWith(raw arrow.Record) bool {
	ids := raw.Column(0)
	for _, rec := range o.recs {
		if rec.NumRows() != raw.NumRows() || !array.Equal(rec.Column(0), ids) {
			return false
		}
	}
	return true
}

// release frees the memo inputs' records (nil-safe).
func (o *overMemo) release() {
	if o == nil {
		return
	}
	for _, rec := range o.recs {
		rec.Release()
	}
	o.recs = nil
}

// memoTask is one task between its stages: the raw columns after Read, the
// memo record after Transform. The zero memoTask has nothing to compute.
type memoTask struct {
	r    *Runner
	spec *sigv1.Task
	// key and block are the task's component and memo block.
	key   canon.Key
	block blockref.Memo
	// prog computes the component (or the residual over the memo inputs
	// in over); raw is its Conform's record.
	prog *transform.Program
	meta block.Meta
	raw  arrow.Record // until Transform
	memo arrow.Record // from Transform until Write
	// classes[i] is node i's op class; opNanos what its kernels took.
	classes []string
	opNanos map[string]int64
	// over holds the memo inputs' columns the residual prog runs over
	// (nil: prog is the whole component), until Transform.
	over *overMemo
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
	m.opNanos = map[string]int64{}
	var given map[int]arrow.Array
	if m.over != nil {
		given = m.over.given
	}
	out, err := m.prog.RunObserved(m.raw, given, func(node int, d time.Duration) {
		m.opNanos[m.classes[node]] += d.Nanoseconds()
	})
	m.over.release()
	m.over = nil
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

// Write stores the task's column whole, as a pack of one member (issue 28,
// block.WritePacks): a new object of the raw block version the column was
// computed from, holding its event_id (encoded as the raw block's, so
// readers prove alignment from the footers) and the column under the
// component's key with its input version. The completion names the pack
// (Result.Object), and sigd switches the entry to it only then, so the
// entry never names an object that is not whole. A batch of a block's tasks
// writes one pack of many members through the same writer.
func (m *memoTask) Write(ctx context.Context) (workers.Result, error) {
	if m.memo == nil {
		return workers.Result{}, nil
	}
	start := time.Now()
	_, packed, err := block.WritePacks(ctx, m.r.Store, m.meta, m.memo.Column(0),
		[]block.PackMember{{Component: m.key, Block: m.block, Value: m.memo.Column(1)}}, m.r.packOptions())
	if err != nil {
		return workers.Result{}, err
	}
	m.r.observe("write", start)
	p := packed[0]
	// Bytes is the member's share: its column's segment (the event_id
	// segment and the footer are the pack's, shared by its members).
	return workers.Result{Object: p.Object, Rows: m.meta.Rows, Bytes: p.Column.Length, OpNanos: m.opNanos}, nil
}

// Release frees the raw columns or the memo record, whichever the task
// still holds.
func (m *memoTask) Release() {
	m.over.release()
	m.over = nil
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
