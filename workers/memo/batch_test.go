package memo_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/cockroachdb/datadriven"

	"github.com/sigdata/sig/canon"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/workers"
	"github.com/sigdata/sig/workers/memo"
)

// TestRunBatchData runs testdata/batch: batches of tasks over one
// generated raw block and a version 2 of it (advertiser_id changed),
// through Runner.RunBatch. For every batch it prints each task's outcome
// (its pack, numbered in order of appearance, and the op classes of its
// OpNanos; or its error's first line), the calls of the counting ops
// (lower_counted, unigrams_counted: lower and unigrams counting their
// kernel's runs), the stages Observe was told of and the packs written.
// Beside what it prints it checks every task against Run, the task alone
// on a fresh runner: a task that succeeds in the batch succeeds alone, its
// member's segment and the pack's event_id segment are the bytes Run
// writes (so the values are), its result's bytes are the member's segment
// and its OpNanos has the op classes Run's has; a task that fails in the
// batch fails alone.
//
// Ops beyond the built-in ones: fail (lower's signature) always errs, boom
// (lower's signature) panics.
//
//	batch [pack-bytes=N]
//	NAME VERSION [memo=OTHER] EXPR
//	----
//
// VERSION is v1 (the raw block), v2 (its version 2; the task's block is
// the ref at the version's input version for the columns it reads) or v2!
// (version 2 with a task claiming an input version it does not have).
// memo=OTHER lists task OTHER of an earlier batch of the file, a node of
// the component's cone, as the task's memo input. An EXPR that does not
// canonicalize is sent as written under a made-up key.
func TestRunBatchData(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 1, RowsPerBlock: 2000, Seed: 5})
	ctx := context.Background()
	base := w.Blocks[0]
	v2 := writeVersion2(t, w)
	h := &batchHarness{t: t, w: w, raws: map[string]block.Meta{"v1": base, "v2": v2}, reg: batchRegistry()}
	datadriven.Walk(t, "testdata/batch", func(t *testing.T, path string) {
		h.done = map[string]workers.Result{}
		h.keys = map[string]canon.Key{}
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			if td.Cmd != "batch" {
				t.Fatalf("unknown command %q", td.Cmd)
			}
			return h.batch(ctx, t, td)
		})
	})
}

// writeVersion2 writes version 2 of the warehouse's block: the same
// events, advertiser_id at input version 2.
func writeVersion2(t *testing.T, w *sigdtest.Warehouse) block.Meta {
	t.Helper()
	ctx := context.Background()
	base := w.Blocks[0]
	_, rec, err := block.ReadBlock(ctx, w.Store, base.Key)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	v2 := base.Clone()
	v2.Key, v2.Version, v2.ColumnVersions = block.RawKey("ads", blockref.New(base.ID, 2)), 2, map[string]int64{"advertiser_id": 2}
	v2.Changes = []block.Change{{Version: 2, Topic: "raw.ads", First: 1 << 20, Last: 1 << 20, UpdatedRows: 1, Columns: []string{"advertiser_id"}}}
	meta, err := block.Write(ctx, w.Store, v2, rec)
	if err != nil {
		t.Fatal(err)
	}
	return meta
}

// batchRegistry is the built-in ops with lower_counted, unigrams_counted,
// fail and boom.
func batchRegistry() *countingRegistry {
	r := &countingRegistry{Registry: transform.NewRegistry(), calls: map[string]*atomic.Int64{}}
	for _, name := range transform.Default().Names() {
		spec, _ := transform.Default().Op(name)
		k, _ := transform.Default().Kernel(name)
		r.Register(spec, k)
	}
	wrap := func(name, like string, k func(transform.Kernel) transform.Kernel) {
		spec, _ := transform.Default().Op(like)
		inner, _ := transform.Default().Kernel(like)
		s := *spec
		s.Name = name
		r.Register(&s, k(inner))
	}
	for _, op := range []string{"lower", "unigrams"} {
		n := &atomic.Int64{}
		r.calls[op+"_counted"] = n
		wrap(op+"_counted", op, func(k transform.Kernel) transform.Kernel {
			return func(in []arrow.Array, nd *transform.Node) (arrow.Array, error) {
				n.Add(1)
				return k(in, nd)
			}
		})
	}
	wrap("fail", "lower", func(transform.Kernel) transform.Kernel {
		return func([]arrow.Array, *transform.Node) (arrow.Array, error) {
			return nil, errors.New("fail refuses every row")
		}
	})
	wrap("boom", "lower", func(transform.Kernel) transform.Kernel {
		return func([]arrow.Array, *transform.Node) (arrow.Array, error) {
			var m map[string]int
			m["x"]++
			return nil, nil
		}
	})
	return r
}

type countingRegistry struct {
	*transform.Registry
	calls map[string]*atomic.Int64
}

type batchHarness struct {
	t    *testing.T
	w    *sigdtest.Warehouse
	raws map[string]block.Meta
	reg  *countingRegistry
	// done and keys are the file's earlier tasks, by name.
	done map[string]workers.Result
	keys map[string]canon.Key
}

// task builds the task of one line of a batch.
func (h *batchHarness) task(t *testing.T, line string) (string, workers.Task) {
	t.Helper()
	name, rest, _ := strings.Cut(line, " ")
	version, rest, _ := strings.Cut(strings.TrimSpace(rest), " ")
	if rest = strings.TrimSpace(rest); rest == "" {
		t.Fatalf("task line %q: want NAME VERSION [memo=OTHER] EXPR", line)
	}
	var memoOf string
	if m, ok := strings.CutPrefix(rest, "memo="); ok {
		memoOf, rest, _ = strings.Cut(m, " ")
		rest = strings.TrimSpace(rest)
	}
	raw, ok := h.raws[strings.TrimSuffix(version, "!")]
	if !ok {
		t.Fatalf("task %s: version %q", name, version)
	}
	s := transform.AdsSchema()
	schemaJSON, _ := json.Marshal(s)
	key, c, err := canon.KeyOf(rest, s, h.reg.Registry)
	dsl, columns := "input out = "+rest, []string(nil)
	if err == nil {
		dsl, columns = c.DSL(&c.Components[0], "out"), c.Components[0].Columns
	} else {
		key = sha256.Sum256([]byte(rest))
	}
	mb := raw.Ref().Memo(raw.InputVersion(columns))
	if strings.HasSuffix(version, "!") {
		mb = blockref.NewMemo(raw.ID, 3)
	}
	spec := &sigv1.Task{ComponentKey: key.String(), BlockId: mb.String(), CanonicalDsl: dsl, RawSource: "ads",
		RawObject: raw.Key, MemoObject: block.MemoKey(key, mb), Columns: columns, SchemaJson: string(schemaJSON), MemoGeneration: 1}
	if memoOf != "" {
		res, ok := h.done[memoOf]
		if !ok {
			t.Fatalf("task %s: memo=%s is no earlier task of the file", name, memoOf)
		}
		k := h.keys[memoOf]
		spec.MemoInputs = []*sigv1.MemoInput{{Key: k.String(), MemoObject: res.Object, MemoColumn: block.MemberColumn(k)}}
	}
	h.keys[name] = key
	return name, workers.Task{ID: workers.TaskID{Component: key, Block: mb}, Spec: spec}
}

func (h *batchHarness) batch(ctx context.Context, t *testing.T, td *datadriven.TestData) string {
	var packBytes int64
	for _, a := range td.CmdArgs {
		switch a.Key {
		case "pack-bytes":
			n, err := strconv.ParseInt(a.Vals[0], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			packBytes = n
		default:
			t.Fatalf("unknown argument %s", a.Key)
		}
	}
	var names []string
	var tasks []workers.Task
	for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		n, task := h.task(t, line)
		names = append(names, n)
		tasks = append(tasks, task)
	}
	var mu sync.Mutex
	phases := map[string]int{}
	r := &memo.Runner{Store: h.w.Store, Registry: h.reg.Registry, PackBytes: packBytes, Observe: func(phase string, _ time.Duration) {
		mu.Lock()
		phases[phase]++
		mu.Unlock()
	}}
	for _, n := range h.reg.calls {
		n.Store(0)
	}
	before := packs(t, h.w.Store)
	outs := r.RunBatch(ctx, tasks)
	written := packs(t, h.w.Store) - before
	calls := map[string]int64{}
	for op, n := range h.reg.calls {
		calls[op] = n.Load()
	}
	if len(outs) != len(tasks) {
		t.Fatalf("%d outcomes for %d tasks", len(outs), len(tasks))
	}
	var b strings.Builder
	packNo := map[string]int{}
	for i, o := range outs {
		name, task := names[i], tasks[i]
		alone, aloneErr := (&memo.Runner{Store: h.w.Store, Registry: h.reg.Registry}).Run(ctx, task)
		if o.Err != nil {
			msg, _, _ := strings.Cut(o.Err.Error(), "\n")
			fmt.Fprintf(&b, "%s: error: %s\n", name, msg)
			if aloneErr == nil {
				t.Errorf("task %s failed in the batch (%v) but not alone", name, o.Err)
			}
			continue
		}
		if aloneErr != nil {
			t.Errorf("task %s failed alone (%v) but not in the batch", name, aloneErr)
			continue
		}
		h.done[name] = o.Result
		if _, ok := packNo[o.Result.Object]; !ok {
			packNo[o.Result.Object] = len(packNo) + 1
		}
		mb := task.ID.Block
		got := memberSegments(t, h.w, o.Result, task.ID.Component, mb)
		want := memberSegments(t, h.w, alone, task.ID.Component, mb)
		if !bytes.Equal(got, want) {
			t.Errorf("task %s: the batch's member and event_id segments (%d bytes) differ from Run's (%d bytes)", name, len(got), len(want))
		}
		if g, w := slices.Sorted(maps.Keys(o.Result.OpNanos)), slices.Sorted(maps.Keys(alone.OpNanos)); !slices.Equal(g, w) {
			t.Errorf("task %s: op classes %v in the batch, %v alone", name, g, w)
		}
		if o.Result.Rows != alone.Rows {
			t.Errorf("task %s: %d rows in the batch, %d alone", name, o.Result.Rows, alone.Rows)
		}
		fmt.Fprintf(&b, "%s: pack %d; ops %s\n", name, packNo[o.Result.Object], strings.Join(slices.Sorted(maps.Keys(o.Result.OpNanos)), " "))
	}
	var cs []string
	for _, op := range slices.Sorted(maps.Keys(calls)) {
		cs = append(cs, fmt.Sprintf("%s=%d", op, calls[op]))
	}
	fmt.Fprintf(&b, "calls: %s\n", strings.Join(cs, " "))
	fmt.Fprintf(&b, "stages: read=%d transform=%d write=%d\n", phases["read"], phases["transform"], phases["write"])
	fmt.Fprintf(&b, "packs written: %d\n", written)
	return b.String()
}

// memberSegments reads a task's pack (checked as readers check it) and
// returns its event_id segment and the task's member segment, the bytes
// stored.
func memberSegments(t *testing.T, w *sigdtest.Warehouse, res workers.Result, k canon.Key, mb blockref.Memo) []byte {
	t.Helper()
	meta, _ := packed(t, w.Store, res, k, mb)
	segs, err := block.FetchSegments(context.Background(), w.Store, meta, []string{transform.ColEventID, block.MemberColumn(k)})
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Join(segs, nil)
}

// TestRunBatchCancelled: a batch whose context is done before it starts
// runs nothing, and one cancelled once its raw columns are read (the lease
// of every task lost) writes no pack: every task fails with the context's
// error, none is reported done.
func TestRunBatchCancelled(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 1, RowsPerBlock: 300})
	h := &batchHarness{t: t, w: w, raws: map[string]block.Meta{"v1": w.Blocks[0]}, reg: batchRegistry(),
		done: map[string]workers.Result{}, keys: map[string]canon.Key{}}
	var tasks []workers.Task
	for _, line := range []string{
		`a v1 hash(unigrams(lower(col("query"))), buckets=100)`,
		`b v1 length(unigrams(lower(col("query"))))`,
		`c v1 hash(col("advertiser_id"), buckets=1000)`,
	} {
		_, task := h.task(t, line)
		tasks = append(tasks, task)
	}
	before := packs(t, w.Store)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i, o := range (&memo.Runner{Store: w.Store}).RunBatch(ctx, tasks) {
		if !errors.Is(o.Err, context.Canceled) {
			t.Errorf("task %d of a batch cancelled before it started: %+v", i, o)
		}
	}
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	r := &memo.Runner{Store: w.Store, Observe: func(phase string, _ time.Duration) {
		if phase == "read" {
			cancel()
		}
	}}
	for i, o := range r.RunBatch(ctx, tasks) {
		if !errors.Is(o.Err, context.Canceled) {
			t.Errorf("task %d of a batch cancelled after its read: %+v", i, o)
		}
	}
	if n := packs(t, w.Store); n != before {
		t.Errorf("%d packs written by cancelled batches", n-before)
	}
}
