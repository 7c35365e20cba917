package memo

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/apache/arrow/go/v15/arrow"

	"github.com/sigdata/sig/canon"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/workers"
)

var _ workers.BatchRunner = (*Runner)(nil)

// RunBatch implements workers.BatchRunner (issue 28, "Block-batched
// tasks"): the tasks of one raw block, leased together, are run together.
// They are grouped by the raw block version each reads (its description's
// raw object, checked as Read checks it: the block at the task's input
// version); for each group the runner
//
//   - reads the union of the group's raw columns once (through
//     Runner.Segments, as Read does);
//   - merges the tasks' canonical graphs into one graph and canonicalizes
//     it (canon.Canonicalize, as a reader merges its LOCAL inputs), so a
//     subexpression that several components share — lower(col("query"))
//     under a dozen of the fleet's components — is one node, and runs it
//     once (one transform.Program);
//   - writes one pack of the raw version holding every task's column
//     (block.WritePacks, which starts another pack past
//     Runner.PackBytes), and reports each task's pack, rows and member
//     segment length, as Write does for one.
//
// A task fails alone. One whose description does not parse or check fails
// before its group forms. If the merged program cannot be built (say, the
// union passes a graph limit) or fails to run (an op of one component
// errs or panics: a kernel's panic is an error of transform.Program's),
// the group's tasks are computed one by one over the raw columns already
// read, each failing with its own error, and the rest still go into one
// pack. A panic outside the kernels abandons the group's shared work and
// runs each of its tasks alone (Run), so it too fails only the task that
// causes it. A task that reads memo inputs (Task.memo_inputs: it computes
// only the residual above memoized nodes of its cone) is run alone as well,
// after the groups. A failure of the shared read or of the pack's write
// fails the tasks it concerns. Once ctx is done, no more work starts and
// the tasks not yet written fail with its error.
//
// Runner.Observe is told each group's stages once: its read, its
// transform (the merged program's run) and its write, whatever the number
// of tasks in it. Compression, Wide and PackKey apply to the pack as to a
// task's.
//
// A batch holds its group's columns until the group's pack is written:
// at most its tasks' columns (workers.PoolOptions.BatchTasks of them).
func (r *Runner) RunBatch(ctx context.Context, tasks []workers.Task) []workers.Outcome {
	out := make([]workers.Outcome, len(tasks))
	var groups []*group
	var alone []int
	raws := map[rawObject]rawVersion{}
	for i, t := range tasks {
		if err := ctx.Err(); err != nil {
			out[i].Err = err
			continue
		}
		var bt *batchTask
		err := protect(func() error {
			var err error
			bt, err = r.prepare(ctx, t, raws)
			return err
		})
		switch {
		case err != nil:
			out[i].Err = err
		case bt == nil:
			// Nothing left to compute: an empty result, as Run's.
		case bt.alone:
			alone = append(alone, i)
		default:
			bt.i = i
			groups = addToGroup(groups, bt)
		}
	}
	for _, g := range groups {
		if err := ctx.Err(); err != nil {
			for _, bt := range g.tasks {
				out[bt.i].Err = err
			}
			continue
		}
		if err := protect(func() error { r.runGroup(ctx, g); return nil }); err != nil {
			// A panic outside the kernels: the group's shared work is
			// dropped and each task runs alone, failing on its own.
			g.release()
			for _, bt := range g.tasks {
				alone = append(alone, bt.i)
			}
			continue
		}
		for _, bt := range g.tasks {
			out[bt.i] = workers.Outcome{Result: bt.res, Err: bt.err}
		}
	}
	for _, i := range alone {
		if err := ctx.Err(); err != nil {
			out[i].Err = err
			continue
		}
		err := protect(func() error {
			var err error
			out[i].Result, err = r.Run(ctx, tasks[i])
			return err
		})
		out[i].Err = err
	}
	return out
}

// batchTask is one task of a batch between its preparation and its
// outcome.
type batchTask struct {
	i    int // in the batch
	spec *sigv1.Task
	parsed
	meta block.Meta
	// alone: the task reads memo inputs and runs as Run runs it.
	alone bool
	// value is the task's column once computed, until the group's write;
	// opNanos its kernels' time by op class.
	value   arrow.Array
	opNanos map[string]int64
	res     workers.Result
	err     error
}

// rawObject names a raw block version a task reads; rawVersion is its
// metadata, read once per batch (the catalog's, or its footer).
type rawObject struct{ source, object, id string }

type rawVersion struct {
	meta block.Meta
	err  error
}

// prepare checks a task's description as Read does (schema, canonical
// graph of one model input, the raw version at the task's input version)
// and returns it ready to group; nil when there is nothing to compute.
func (r *Runner) prepare(ctx context.Context, t workers.Task, raws map[rawObject]rawVersion) (*batchTask, error) {
	spec := t.Spec
	if spec == nil {
		return nil, fmt.Errorf("task %s has no description", t.ID)
	}
	if spec.MemoGeneration == 0 {
		return nil, nil
	}
	if len(spec.MemoInputs) > 0 {
		return &batchTask{spec: spec, alone: true}, nil
	}
	d, err := r.parse(spec)
	if err != nil {
		return nil, err
	}
	ro := rawObject{spec.RawSource, spec.RawObject, d.block.ID()}
	rv, ok := raws[ro]
	if !ok {
		rv.meta, rv.err = r.rawVersion(ctx, ro.source, ro.object, ro.id)
		raws[ro] = rv
	}
	if rv.err != nil {
		return nil, rv.err
	}
	if err := checkRaw(rv.meta, spec, d.block); err != nil {
		return nil, err
	}
	return &batchTask{spec: spec, parsed: d, meta: rv.meta}, nil
}

// group is the tasks of a batch that read one raw block version, under
// one schema and registry, each of another component: one pack's members.
type group struct {
	tasks []*batchTask
	keys  map[canon.Key]bool
}

// addToGroup adds bt to the first group of its raw version, schema and
// registry that does not hold its component yet (two tasks of one
// component cannot be members of one pack), else to a new group.
func addToGroup(groups []*group, bt *batchTask) []*group {
	for _, g := range groups {
		first := g.tasks[0]
		if first.meta.Key == bt.meta.Key && first.spec.SchemaJson == bt.spec.SchemaJson && first.reg == bt.reg && !g.keys[bt.key] {
			g.tasks = append(g.tasks, bt)
			g.keys[bt.key] = true
			return groups
		}
	}
	return append(groups, &group{tasks: []*batchTask{bt}, keys: map[canon.Key]bool{bt.key: true}})
}

// release frees the columns the group's tasks hold.
func (g *group) release() {
	for _, bt := range g.tasks {
		if bt.value != nil {
			bt.value.Release()
			bt.value = nil
		}
	}
}

// runGroup computes and writes a group's tasks, setting each one's res or
// err.
func (r *Runner) runGroup(ctx context.Context, g *group) {
	defer g.release()
	first := g.tasks[0]
	meta, s, reg := first.meta, first.schema, first.reg
	m, mergeErr := merge(g.tasks, s, reg)
	var columns []string
	if mergeErr == nil {
		columns = m.prog.Columns()
	} else {
		seen := map[string]bool{}
		for _, bt := range g.tasks {
			for _, c := range bt.prog.Columns() {
				if !seen[c] {
					seen[c] = true
					columns = append(columns, c)
				}
			}
		}
	}
	fail := func(err error) {
		for _, bt := range g.tasks {
			if bt.err == nil {
				bt.err = err
			}
		}
	}
	start := time.Now()
	raw, err := block.ReadColumnsCached(ctx, r.Store, meta, columns, r.Segments)
	if err != nil {
		fail(err)
		return
	}
	r.observe("read", start)
	start = time.Now()
	var eventID arrow.Array
	if mergeErr == nil {
		eventID = m.run(raw, g.tasks)
	}
	if eventID == nil {
		// One by one over the columns read: each task fails on its own.
		for _, bt := range g.tasks {
			if ev := bt.runAlone(raw); ev != nil {
				if eventID == nil {
					eventID = ev
				} else {
					ev.Release()
				}
			}
		}
	}
	raw.Release()
	r.observe("transform", start)
	if eventID == nil {
		return // every task failed
	}
	defer eventID.Release()
	if err := ctx.Err(); err != nil {
		fail(err)
		return
	}
	var members []block.PackMember
	var written []*batchTask
	for _, bt := range g.tasks {
		if bt.err == nil {
			members = append(members, block.PackMember{Component: bt.key, Block: bt.block, Value: bt.value})
			written = append(written, bt)
		}
	}
	start = time.Now()
	// The block's ready columns in older packs go into this one too
	// (repack.go), after the tasks' own.
	sibs := r.readSiblings(ctx, g, meta)
	defer func() {
		for _, sb := range sibs {
			sb.value.Release()
		}
	}()
	for _, sb := range sibs {
		members = append(members, block.PackMember{Component: sb.key, Block: sb.block, Value: sb.value})
	}
	_, packed, err := block.WritePacks(ctx, r.Store, meta, eventID, members, r.packOptions())
	if err != nil {
		fail(err)
		return
	}
	r.observe("write", start)
	for x, bt := range written {
		p := packed[x]
		// Bytes is the member's share, as for a task's own pack.
		bt.res = workers.Result{Object: p.Object, Rows: meta.Rows, Bytes: p.Column.Length, OpNanos: bt.opNanos}
	}
	// Each copied column is reported moved with the first task written
	// into the same pack (a pack holding copies only, past the bound, is
	// named by no entry and swept).
	for x, sb := range sibs {
		p := packed[len(written)+x]
		for _, bt := range written {
			if bt.res.Object == p.Object {
				bt.res.Moved = append(bt.res.Moved, &sigv1.PackedMember{ComponentKey: sb.from.GetComponentKey(),
					BlockId: sb.from.GetBlockId(), InputVersion: sb.from.GetInputVersion(), MemoObject: sb.from.GetMemoObject(),
					MemoColumn: sb.from.GetMemoColumn(), Bytes: p.Column.Length})
				break
			}
		}
	}
}

// runAlone computes the task's column by its own program over raw (the
// group's columns) and returns the conformed event_id (retained), or nil
// with bt.err set.
func (bt *batchTask) runAlone(raw arrow.Record) arrow.Array {
	var eventID arrow.Array
	bt.err = protect(func() error {
		rec, err := bt.prog.Conform(raw)
		if err != nil {
			return taskError("raw block %s: %v", bt.spec.BlockId, err)
		}
		defer rec.Release()
		classes := opClasses(bt.prog)
		bt.opNanos = map[string]int64{}
		out, err := bt.prog.RunObserved(rec, nil, func(node int, d time.Duration) {
			bt.opNanos[classes[node]] += d.Nanoseconds()
		})
		if err != nil {
			return err
		}
		bt.value = out[0]
		eventID = rec.Column(0)
		eventID.Retain()
		return nil
	})
	return eventID
}

// merged is the program of a group's components together: model input x
// is task x's component.
type merged struct {
	prog    *transform.Program
	classes []string
	// cones[x] are the nodes task x's output depends on, its own included.
	cones [][]int
}

// merge builds the union of the tasks' graphs (each task's nodes, its
// model input named after its place) and canonicalizes it, so that the
// nodes the components share are one, then compiles the canonical graph:
// reader/unit.go's planLocal does the same for a unit's LOCAL inputs.
func merge(tasks []*batchTask, s *transform.Schema, reg *transform.Registry) (*merged, error) {
	union := &transform.Graph{}
	for x, bt := range tasks {
		g := bt.prog.Graph()
		base := len(union.Nodes)
		for _, n := range g.Nodes {
			ins := make([]int, len(n.Inputs))
			for k, j := range n.Inputs {
				ins[k] = j + base
			}
			n.Inputs = ins
			n.Name = "" // the tasks' let bindings may collide
			union.Nodes = append(union.Nodes, n)
		}
		union.Inputs = append(union.Inputs, transform.ModelInput{Name: fmt.Sprintf("t%d", x), Node: g.Inputs[0].Node + base})
	}
	lim := transform.DefaultLimits()
	lim.MaxNodes = max(lim.MaxNodes, len(union.Nodes))
	lim.MaxInputs = max(lim.MaxInputs, len(union.Inputs))
	c, err := canon.Canonicalize(union, s, reg, lim)
	if err != nil {
		return nil, err
	}
	prog, err := transform.Compile(c.Graph(), s, reg, lim)
	if err != nil {
		return nil, err
	}
	g := prog.Graph()
	m := &merged{prog: prog, classes: opClasses(prog), cones: make([][]int, len(g.Inputs))}
	for x, in := range g.Inputs {
		seen := map[int]bool{}
		var visit func(i int)
		visit = func(i int) {
			if seen[i] {
				return
			}
			seen[i] = true
			for _, j := range g.Nodes[i].Inputs {
				visit(j)
			}
			m.cones[x] = append(m.cones[x], i)
		}
		visit(in.Node)
	}
	return m, nil
}

// run computes every task's column with the merged program over raw and
// returns the conformed event_id (retained); nil when the raw columns do
// not conform or the program fails, leaving the tasks untouched.
//
// OpNanos: each task is charged the measured time of every node of its
// cone, a shared node's whole time to each task whose cone holds it. A
// task's OpNanos is then what its kernels cost (as run, once, over the
// block's rows), as when it ran alone; the insertion policy divides each
// op class's nanoseconds by the rows reported with them, task by task
// (matching's OpStat), so splitting a shared node's time among its users
// would report the op k times cheaper per row than it is. Summed over a
// batch's tasks, OpNanos exceeds the transform's time by the shared
// nodes' repeats: it prices the ops, it does not account the worker's CPU.
func (m *merged) run(raw arrow.Record, tasks []*batchTask) arrow.Array {
	rec, err := m.prog.Conform(raw)
	if err != nil {
		return nil
	}
	defer rec.Release()
	nodes := len(m.prog.Graph().Nodes)
	ns := make([]int64, nodes)
	ran := make([]bool, nodes)
	var out []arrow.Array
	err = protect(func() error {
		var err error
		out, err = m.prog.RunObserved(rec, nil, func(node int, d time.Duration) {
			ns[node] += d.Nanoseconds()
			ran[node] = true
		})
		return err
	})
	if err != nil {
		return nil
	}
	for x, bt := range tasks {
		bt.value = out[x]
		bt.opNanos = map[string]int64{}
		for _, i := range m.cones[x] {
			if ran[i] {
				bt.opNanos[m.classes[i]] += ns[i]
			}
		}
	}
	ev := rec.Column(0)
	ev.Retain()
	return ev
}

// packOptions are the runner's pack encoding and bound.
func (r *Runner) packOptions() block.PackOptions {
	return block.PackOptions{EncodeOptions: block.EncodeOptions{Compression: r.Compression}, MaxBytes: r.PackBytes,
		NewKey: r.PackKey, Wide: r.Wide}
}

// protect runs f, turning a panic into an error wrapping workers.ErrPanic
// (with the stack), as a pool does for a Runner.
func protect(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: %v\n%s", workers.ErrPanic, v, debug.Stack())
		}
	}()
	return f()
}
