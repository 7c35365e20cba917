package versions_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/devenv"
	"github.com/sigdata/sig/matching"
	"github.com/sigdata/sig/matching/insertion"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/versions"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/catalog"
	"github.com/sigdata/sig/warehouse/compact"
	"github.com/sigdata/sig/warehouse/gen"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/workers"
	"github.com/sigdata/sig/workers/memo"
)

// catBlocks is the catalog as the matching frontend reads it (sigd's
// catalogBlocks).
type catBlocks struct{ c *catalog.Catalog }

func toBlocks(ms []block.Meta) []matching.Block {
	out := make([]matching.Block, len(ms))
	for i, m := range ms {
		out[i] = matching.BlockOf(m)
	}
	return out
}

func (b catBlocks) Range(source string, from, to int64) ([]matching.Block, error) {
	ms, err := b.c.Range(source, from, to)
	return toBlocks(ms), err
}

func (b catBlocks) Snapshot() (int64, error) { return b.c.Snapshot() }

func (b catBlocks) RangeAt(source string, from, to, snap int64) ([]matching.Block, error) {
	ms, err := b.c.RangeAt(source, from, to, snap)
	return toBlocks(ms), err
}

// tasks records the tasks the frontend schedules.
type tasks struct {
	mu   sync.Mutex
	list []matching.Task
}

func (s *tasks) Enqueue(k canon.Key, m blockref.Memo, _, _ string, _ int32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.list, matching.Task{Component: k, Block: m}) {
		s.list = append(s.list, matching.Task{Component: k, Block: m})
	}
	return nil
}

func (s *tasks) take() []matching.Task {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.list
	s.list = nil
	return out
}

// centerRegistry is the default registry with one op across rows, center
// (a column minus its block's mean; none is built in), as
// warehouse/compact's TestAcrossRowsIsRecomputed registers it.
func centerRegistry() *transform.Registry {
	reg := transform.Default().WithVersion("log1p", 1) // a copy
	reg.Register(&transform.OpSpec{Name: "center", Version: 1, MinArgs: 1, MaxArgs: 1, AcrossRows: true,
		Infer: func(in []transform.Type, n *transform.Node) (transform.Type, error) {
			if in[0] != transform.Float64 {
				return transform.TypeInvalid, fmt.Errorf("center: want float64, got %s", in[0])
			}
			return transform.Float64, nil
		}}, func(in []arrow.Array, _ *transform.Node) (arrow.Array, error) {
		x := in[0].(*array.Float64)
		var sum float64
		for i := range x.Len() {
			sum += x.Value(i)
		}
		b := array.NewFloat64Builder(memory.DefaultAllocator)
		defer b.Release()
		for i := range x.Len() {
			b.Append(x.Value(i) - sum/float64(x.Len()))
		}
		return b.NewArray(), nil
	})
	return reg
}

// withTimes returns rec with event times from t, a millisecond apart.
func withTimes(rec arrow.Record, t int64) arrow.Record {
	idx := rec.Schema().FieldIndices(transform.ColEventTime)[0]
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for i := range rec.NumRows() {
		b.Append(t + i*1000)
	}
	col := b.NewArray()
	defer col.Release()
	cols := slices.Clone(rec.Columns())
	cols[idx] = col
	return array.NewRecord(rec.Schema(), cols, rec.NumRows())
}

// TestConcatenatorNamesRowWiseColumns (issue 28): once a window's parts
// are compacted, the Concatenator following the catalog's feed writes the
// compacted block's pack from the parts' ready member columns and names it
// in the compacted block's entries of the row-wise components, in one
// batch and with no worker task; the component with an op across rows
// (center, registered here: the sigd harness has no registry to add it
// to) gets no entry from it, and a read solution then makes its entry
// pending and a worker recomputes it over the compacted block, whose
// values are not its parts' one after the other. A hold between writing
// the pack and naming it that fails (a crash) names nothing and leaves
// the position before the block, so the next pass writes a new pack and
// names that; the held pack stays unnamed, the evictor's sweep's.
//
// It fails if the Concatenator concatenates a component with an op across
// rows (the centered entry would be ready, its values the parts' one after
// the other, not the recomputed ones), if it names the pack before the
// hold returns, or if it stores its position past a failed block.
func TestConcatenatorNamesRowWiseColumns(t *testing.T) {
	ctx := context.Background()
	m := devenv.NewMinIO(t)
	st := m.NewStore(t, objstore.Config{Bucket: "sig", RetryFor: 5 * time.Second})
	dir := t.TempDir()
	cat, err := catalog.Open(filepath.Join(dir, "catalog"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	cache, err := matching.OpenCache(filepath.Join(dir, "cache"), matching.CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	reg := centerRegistry()
	s := transform.AdsSchema()
	schemaJSON, _ := json.Marshal(s)
	sched := &tasks{}
	f := matching.NewFrontend(matching.FrontendConfig{Cache: cache, Blocks: catBlocks{cat}, Scheduler: sched, Registry: reg,
		Insertion: insertion.Config{MemoizeAll: true},
		Schema:    func(string) (*transform.Schema, error) { return s, nil }})
	memos := &matching.Memos{Frontend: f, Versions: cat, Stat: func(ctx context.Context, key string) error {
		_, err := st.Stat(ctx, key)
		return err
	}}
	runner := &memo.Runner{Store: st, Catalog: cat, Registry: reg}
	// buildOf is the build a worker computing (k, m) reports (set below).
	var buildOf func(k canon.Key, m blockref.Memo) string
	// work runs every scheduled task as sigd's workers do and returns how
	// many computed something.
	work := func() int {
		t.Helper()
		n := 0
		for _, tk := range sched.take() {
			spec, err := memos.Describe(tk.Component, tk.Block)
			if err != nil {
				t.Fatal(err)
			}
			if spec.Gen == 0 {
				continue
			}
			res, err := runner.Run(ctx, workers.Task{ID: workers.TaskID{Component: tk.Component, Block: tk.Block}, Spec: &sigv1.Task{
				ComponentKey: spec.Component.String(), BlockId: spec.Block.String(), CanonicalDsl: spec.DSL, RawSource: spec.Source,
				RawObject: spec.RawObject, MemoObject: spec.MemoObject, Columns: spec.Columns, SchemaJson: string(schemaJSON),
				MemoGeneration: spec.Gen}})
			if err != nil {
				t.Fatal(err)
			}
			if err := memos.Complete(ctx, tk.Component, tk.Block, spec.Gen, matching.Completion{Object: res.Object, Rows: res.Rows, Bytes: res.Bytes,
				Build: buildOf(tk.Component, tk.Block)}); err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n
	}

	// Three small blocks of one window and partition.
	const hour = int64(time.Hour / time.Microsecond)
	window := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	var parts []block.Meta
	var first int64
	for i, rec := range gen.New(gen.Config{Seed: 28}).Records(700, 300) {
		r := withTimes(rec, window+int64(i)*600_000_000)
		rec.Release()
		kr := block.KafkaRange{Topic: "raw.ads", First: first, Last: first + r.NumRows() - 1}
		first += r.NumRows()
		id := block.ID(window, kr)
		pm, err := block.Write(ctx, st, block.Meta{Key: block.RawKey("ads", blockref.New(id, 1)), ID: id, Source: "ads",
			WindowStart: window, WindowLength: hour, SchemaFingerprint: s.Fingerprint(), Kafka: &kr, Generation: 1}, r)
		r.Release()
		if err != nil {
			t.Fatal(err)
		}
		if err := cat.Add(pm); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, pm)
	}
	const dsl = `input q = hash(unigrams(lower(col("query"))), buckets=1000)
input price = bucketize(col("bid_price"), boundaries=[0.5, 1, 5])
input centered = center(col("bid_price"))
`
	g, err := transform.Parse([]byte(dsl), "t", transform.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := f.Submit(matching.SubmitRequest{Client: "c", Pipeline: "p", Graph: g, From: window, To: window + hour})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]canon.Key{}
	for _, in := range sub.Solution.Inputs {
		keys[in.Name] = in.Component
	}
	// One build computes every part but price's last, which another
	// does: the concatenated q entry records that build, price's none
	// (partsBuild).
	buildOf = func(k canon.Key, m blockref.Memo) string {
		if k == keys["price"] && m.ID() == parts[len(parts)-1].ID {
			return "build-b"
		}
		return "build-a"
	}
	if n := work(); n != 9 {
		t.Fatalf("%d tasks computed over the parts, want 9", n)
	}
	conc := func(hold func(context.Context, []string) error) *versions.Concatenator {
		return versions.NewConcatenator(versions.ConcatOptions{Catalog: cat, Memos: memos, Store: st, Registry: reg, Hold: hold})
	}
	// Nothing compacted: nothing to do.
	if n, err := conc(nil).Follow(ctx); err != nil || n != 0 {
		t.Fatalf("Follow before the compaction: %d, %v", n, err)
	}

	// The compaction, as ingestion's compactor commits it.
	cm, err := compact.Meta(parts, 2)
	if err != nil {
		t.Fatal(err)
	}
	var recs []arrow.Record
	for _, p := range parts {
		_, rec, err := block.ReadBlock(ctx, st, p.Key)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	all, err := compact.Concat(recs)
	if err != nil {
		t.Fatal(err)
	}
	c, err := block.Write(ctx, st, cm, all)
	all.Release()
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.Compact(c); err != nil {
		t.Fatal(err)
	}
	if c, err = cat.Get("ads", c.ID); err != nil { // with its sequence number
		t.Fatal(err)
	}
	cb := c.Ref().Memo(1)

	// A pass held after writing the pack and failing there (a crash):
	// no entry names the pack, the position stays before the block.
	var held []string
	crashed := conc(func(_ context.Context, packs []string) error {
		held = append(held, packs...)
		return errors.New("killed")
	})
	if n, err := crashed.Follow(ctx); err == nil || n != 0 || len(held) != 1 {
		t.Fatalf("held pass: %d blocks, %v, packs %v", n, err, held)
	}
	if _, err := st.Stat(ctx, held[0]); err != nil {
		t.Fatalf("the held pack: %v; want it written whole before the hold", err)
	}
	if named, _ := cache.PackNamed(held[0]); named {
		t.Fatal("an entry names the pack written before the hold")
	}
	for name, k := range keys {
		if _, err := cache.Memo(k, cb); !errors.Is(err, matching.ErrNotFound) {
			t.Fatalf("input %s: the compacted block has an entry after the held pass: %v", name, err)
		}
	}
	if p, _ := cat.Position(versions.ConcatPositionName); p >= c.Seq {
		t.Fatalf("position %d stored past the compacted block (seq %d) after its pass failed", p, c.Seq)
	}

	// A restart's pass: the row-wise entries ready in one new pack.
	var results []versions.ConcatResult
	cc := versions.NewConcatenator(versions.ConcatOptions{Catalog: cat, Memos: memos, Store: st, Registry: reg,
		OnConcat: func(r versions.ConcatResult) { results = append(results, r) }})
	if n, err := cc.Follow(ctx); err != nil || n != 1 {
		t.Fatalf("Follow after the compaction: %d, %v", n, err)
	}
	if r := results[0]; r.Concatenated != 2 || r.Packs != 1 || r.LeftTotal() != 1 || r.Left["not row-wise"] != 1 {
		t.Fatalf("result %+v; want q and price concatenated into one pack, centered left as not row-wise", r)
	}
	if len(sched.take()) != 0 {
		t.Fatal("the concatenation scheduled tasks")
	}
	var pack string
	for _, name := range []string{"q", "price"} {
		e, err := cache.Memo(keys[name], cb)
		if err != nil || e.State != matching.MemoReady || !e.Packed() || e.Object == held[0] {
			t.Fatalf("input %s: the compacted block's entry %+v, %v", name, e, err)
		}
		if pack != "" && e.Object != pack {
			t.Fatalf("the entries name packs %s and %s, want one", pack, e.Object)
		}
		pack = e.Object
		if want := map[string]string{"q": "build-a", "price": ""}[name]; e.Build != want {
			t.Errorf("input %s: the concatenated entry records build %q, want %q (its parts' one build, or none when two computed them)", name, e.Build, want)
		}
	}
	if _, err := cache.Memo(keys["centered"], cb); !errors.Is(err, matching.ErrNotFound) {
		t.Fatalf("centered (across rows) got an entry from the concatenation: %v", err)
	}
	if named, _ := cache.PackNamed(held[0]); named {
		t.Fatal("an entry names the pack written before the hold")
	}
	if n, err := cc.Follow(ctx); err != nil || n != 0 {
		t.Fatalf("a second Follow: %d, %v", n, err)
	}

	// A read solution over the compacted block: the row-wise inputs are
	// ready, the centered one pending and computed by a worker, the only
	// task.
	sol, err := f.ReadSolution("c", "p", window, window+hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(sol.Raw) != 1 || sol.Raw[0].Ref != c.Ref() || sol.Pending != 1 || sol.Ready != 2 {
		t.Fatalf("solution over the compacted block: %d blocks (%v), %d ready, %d pending; want c, 2 ready, 1 pending",
			len(sol.Raw), sol.Raw[0].Ref, sol.Ready, sol.Pending)
	}
	if n := work(); n != 1 {
		t.Fatalf("%d tasks computed after the concatenation, want 1 (centered)", n)
	}
	// Every entry of the compacted block reads as the readers check it,
	// with what a worker computes over the compacted block.
	want := runner
	for name, k := range keys {
		e, err := cache.Memo(k, cb)
		if err != nil || e.State != matching.MemoReady {
			t.Fatalf("input %s: %+v, %v", name, e, err)
		}
		rec, err := cache.Component(k)
		if err != nil {
			t.Fatal(err)
		}
		meta, err := block.ReadFooter(ctx, st, e.Object)
		if err != nil {
			t.Fatal(err)
		}
		col, err := block.CheckMember(meta, e.Column, k, cb, rec.Type, c.Rows)
		if err != nil {
			t.Fatalf("input %s: %v", name, err)
		}
		got, err := block.ReadColumns(ctx, st, meta, []string{col.Name})
		if err != nil {
			t.Fatal(err)
		}
		res, err := want.Run(ctx, workers.Task{ID: workers.TaskID{Component: k, Block: cb}, Spec: &sigv1.Task{
			ComponentKey: k.String(), BlockId: cb.String(), CanonicalDsl: rec.DSL, RawSource: "ads", RawObject: c.Key,
			Columns: rec.Columns, SchemaJson: string(schemaJSON), MemoGeneration: 1}})
		if err != nil {
			t.Fatal(err)
		}
		wm, err := block.ReadFooter(ctx, st, res.Object)
		if err != nil {
			t.Fatal(err)
		}
		wrec, err := block.ReadColumns(ctx, st, wm, []string{block.MemberColumn(k)})
		if err != nil {
			t.Fatal(err)
		}
		if !array.RecordEqual(got, wrec) {
			t.Fatalf("input %s: the compacted block's column differs from a worker's over it", name)
		}
		got.Release()
		wrec.Release()
	}
	// And the centered values are not the parts' one after the other.
	var pieces []arrow.Array
	for _, p := range parts {
		e, _ := cache.Memo(keys["centered"], p.Ref().Memo(1))
		meta, _ := block.ReadFooter(ctx, st, e.Object)
		rec, err := block.ReadColumns(ctx, st, meta, []string{e.Column})
		if err != nil {
			t.Fatal(err)
		}
		pieces = append(pieces, rec.Column(1))
	}
	cat1, _ := array.Concatenate(pieces, memory.DefaultAllocator)
	e, _ := cache.Memo(keys["centered"], cb)
	meta, _ := block.ReadFooter(ctx, st, e.Object)
	whole, err := block.ReadColumns(ctx, st, meta, []string{e.Column})
	if err != nil {
		t.Fatal(err)
	}
	if array.Equal(cat1, whole.Column(1)) {
		t.Fatal("centered over the compacted block equals its parts' one after the other: the test shows nothing")
	}

	// No pin sees the parts: version GC drops their entries (their newest
	// version, a tombstone, changed every column: catalog.Compact) and
	// deletes their packs and raw objects; the compacted block's entries
	// and packs stay.
	var partPacks []string
	for _, p := range parts {
		for _, k := range keys {
			e, err := cache.Memo(k, p.Ref().Memo(1))
			if err != nil {
				t.Fatal(err)
			}
			partPacks = append(partPacks, e.Object)
		}
	}
	gc := versions.New(versions.Options{Catalog: cat, Frontend: collectFrontend{f}, Store: st, GCGrace: -1})
	got, err := gc.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Versions != len(parts) || got.MemoEntries != len(parts)*len(keys) {
		t.Fatalf("GC after the compaction: %+v; want the %d parts' versions and their %d entries", got, len(parts), len(parts)*len(keys))
	}
	for _, p := range parts {
		for name, k := range keys {
			if _, err := cache.Memo(k, p.Ref().Memo(1)); !errors.Is(err, matching.ErrNotFound) {
				t.Fatalf("input %s: part %s's entry after GC: %v", name, p.ID, err)
			}
		}
	}
	for _, key := range append(partPacks, parts[0].Key) {
		if _, err := st.Stat(ctx, key); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("object %s after GC: %v; want it deleted", key, err)
		}
	}
	for name, k := range keys {
		e, err := cache.Memo(k, cb)
		if err != nil || e.State != matching.MemoReady {
			t.Fatalf("input %s: the compacted block's entry after GC: %+v, %v", name, e, err)
		}
		if _, err := st.Stat(ctx, e.Object); err != nil {
			t.Fatalf("input %s: the compacted block's pack after GC: %v", name, err)
		}
	}
}
