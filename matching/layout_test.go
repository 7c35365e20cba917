package matching

import (
	"bufio"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/internal/pebbleutil"
	"github.com/sigdata/sig/matching/insertion"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// graphCover has an input memoized whole by override, a cheap one never
// memoized by override and one the policy decides.
const graphCover = `
let q = unigrams(lower(col("query")))
input qa = hash(q, buckets=1000)
input qb = length(q)
input price = bucketize(col("bid_price"), boundaries=[1.0, 2.0])
`

// layoutEpoch is the fake clock's start: UTC, so that the times in the JSON
// records do not depend on the machine's time zone.
var layoutEpoch = time.Unix(1_700_000_000, 0).UTC()

// writeLayoutCache fills a cache in dir through the API: two pipelines, one
// re-submitted with another graph (its old components lose it as a user),
// memo entries in every state, a touch, a priority change and an audit
// entry. Memo entries are rewritten with fixed generations (the frontend
// draws them at random).
func writeLayoutCache(t *testing.T, dir string) {
	t.Helper()
	cache, err := OpenCache(dir, CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	fb := &fakeBlocks{}
	for i := 0; i < 2; i++ {
		fb.blocks = append(fb.blocks, Block{Ref: blockref.New(fmt.Sprintf("b%03d", i), 1), RawObject: fmt.Sprintf("raw/ads/b%03d.arrow", i),
			MinEvent: int64(i * 100), MaxEvent: int64(i*100 + 99), Rows: 100})
	}
	clk := clock.NewFake(layoutEpoch)
	f := NewFrontend(FrontendConfig{Cache: cache, Blocks: fb, Scheduler: &fakeSched{}, Clock: clk,
		Insertion: insertion.Config{MemoizeAll: true},
		Schema:    func(string) (*transform.Schema, error) { return transform.AdsSchema(), nil }})
	submit := func(client, pipeline, graph string, prio int32) {
		t.Helper()
		if _, err := f.Submit(SubmitRequest{Client: client, Pipeline: pipeline, Priority: prio,
			Graph: mustParse(t, graph), From: 0, To: 200}); err != nil {
			t.Fatal(err)
		}
	}
	submit("ctr", "p1", graphA, 5)
	clk.Advance(2 * time.Second)
	submit("cvr", "p2", graphB, 7)
	clk.Advance(2 * time.Second)
	submit("ctr", "p1", graphB, 5) // graphA's components lose ctr/p1
	// A cost-aware cover: the insertion policy's statistics and a pipeline
	// whose cheap input readers compute and whose nested node is memoized.
	if err := cache.AddOpStats(map[string]OpStat{"hash/list": {Nanos: 59000, Rows: 1000}, "lower": {Nanos: 40000, Rows: 1000}}); err != nil {
		t.Fatal(err)
	}
	f.cfg.Insertion = insertion.Config{}
	clk.Advance(2 * time.Second)
	if _, err := f.Submit(SubmitRequest{Client: "ads", Pipeline: "p3", Priority: 5, Graph: mustParse(t, graphCover), From: 0, To: 200,
		Memoize: map[string]insertion.Override{"qa": insertion.Always, "price": insertion.Never}}); err != nil {
		t.Fatal(err)
	}
	keys, err := cache.ComponentKeys()
	if err != nil {
		t.Fatal(err)
	}
	gen := uint64(0)
	for _, k := range keys {
		memos, err := cache.Memos(k)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"b000", "b001"} {
			e, ok := memos[blockref.NewMemo(id, 1)]
			if !ok {
				continue // a component readers compute
			}
			gen++
			e.Gen, e.Updated = gen, layoutEpoch.Add(time.Duration(gen)*time.Second)
			switch gen % 3 {
			case 0:
				e.State, e.Rows, e.Bytes = MemoReady, 100, 4096
				// Packed (issue 28): the block's pack and the component's
				// column in it, indexed under the pack; one with the build
				// that computed it, one without.
				e.Object, e.Column = block.PackKey("ads", blockref.New(id, 1), "00112233445566778899aabbccddeeff"), block.MemberColumn(k)
				e.Bytes = 800
				if gen%2 == 0 {
					e.Build = "sigd-test"
				}
			case 1:
				e.State, e.Error = MemoFailed, "quarantined: boom"
			}
			if err := cache.SetMemo(e); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A new version of b001 whose query changed (issue 21): the entries of
	// the components reading query at input version 2, under the memo
	// block ref b001.v2.
	v2 := fb.blocks[1]
	v2.Ref, v2.ColumnVersions, v2.RawObject = blockref.New("b001", 2), map[string]int64{"query": 2}, "raw/ads/b001.v2.arrow"
	inv, err := f.BlockChanged("ads", v2)
	if err != nil || len(inv.Tasks) == 0 {
		t.Fatalf("BlockChanged: %+v, %v", inv, err)
	}
	for _, task := range inv.Tasks {
		e, err := cache.Memo(task.Component, task.Block)
		if err != nil {
			t.Fatal(err)
		}
		gen++
		e.Gen, e.Updated = gen, layoutEpoch.Add(time.Duration(gen)*time.Second)
		if err := cache.SetMemo(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := cache.Touch(keys[:1], layoutEpoch.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := cache.SetPipelinePriority("cvr", "p2", 9); err != nil {
		t.Fatal(err)
	}
	if err := cache.AppendAudit(AuditEntry{ID: "0123456789abcdef", Who: "op", When: layoutEpoch.Add(time.Minute),
		What: "subgraph lower(col(\"query\"))", Why: "test", Components: []canon.Key{keys[0]},
		Pipelines: []string{"ctr/p1"}, Blocks: 2, Bytes: 4096, Objects: 1}); err != nil {
		t.Fatal(err)
	}
}

// dumpCache prints every key and value of the cache's Pebble store, quoted,
// one pair a line, in key order.
func dumpCache(t *testing.T, dir string) string {
	t.Helper()
	db, err := pebbleutil.Open(dir, pebbleutil.DurabilityProcess, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var b strings.Builder
	if err := pebbleutil.Scan(db, nil, func(k, v []byte) (bool, error) {
		fmt.Fprintf(&b, "%s %s\n", quoteBytes(k), quoteBytes(v))
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestCacheLayout pins the matching cache's on-disk layout, format 1 (see
// cache.go): testdata/layout.txt holds every Pebble key and value that
// writeLayoutCache leaves, byte for byte. A change to a prefix, a key's
// shape or a value's encoding fails here; such a change needs a new
// FormatVersion (and the caches of running sigds a migration), not a
// rewrite of the file.
func TestCacheLayout(t *testing.T) {
	datadriven.RunTest(t, "testdata/layout.txt", func(t *testing.T, td *datadriven.TestData) string {
		if td.Cmd != "dump" {
			td.Fatalf(t, "unknown command %q", td.Cmd)
		}
		dir := t.TempDir()
		writeLayoutCache(t, dir)
		return dumpCache(t, dir)
	})
}

// TestCacheWrittenBeforeServes: a cache holding exactly the layout the
// code before covers wrote (testdata/layout-v1.txt, frozen; written into
// Pebble as it lists it, not through the cache) opens and serves read
// solutions naming its memo objects (its pipelines' inputs have no cover:
// whole components, under the cost-aware policy too), component records,
// the search index, pipelines and the audit log (issue 20, migration).
func TestCacheWrittenBeforeServes(t *testing.T) {
	dir := loadFrozenCache(t, "testdata/layout-v1.txt")
	cache, err := OpenCache(dir, CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	fb := &fakeBlocks{}
	for i := 0; i < 2; i++ {
		fb.blocks = append(fb.blocks, Block{Ref: blockref.New(fmt.Sprintf("b%03d", i), 1), MinEvent: int64(i * 100), MaxEvent: int64(i*100 + 99)})
	}
	sched := &fakeSched{}
	f := NewFrontend(FrontendConfig{Cache: cache, Blocks: fb, Scheduler: sched, Clock: clock.NewFake(layoutEpoch.Add(2 * time.Hour)),
		Schema: func(string) (*transform.Schema, error) { return transform.AdsSchema(), nil }})

	cb, err := canon.Canonicalize(mustParse(t, graphB), transform.AdsSchema(), transform.Default(), transform.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, pl := range [][2]string{{"ctr", "p1"}, {"cvr", "p2"}} {
		sol, err := f.ReadSolution(pl[0], pl[1], 0, 0)
		if err != nil {
			t.Fatalf("%s/%s: %v", pl[0], pl[1], err)
		}
		if len(sol.Inputs) != len(cb.Components) || sol.From != 0 || sol.To != 200 {
			t.Fatalf("%s/%s: %d inputs over [%d, %d)", pl[0], pl[1], len(sol.Inputs), sol.From, sol.To)
		}
		for i, in := range sol.Inputs {
			if in.Component != cb.Components[i].Key || in.DSL != cb.DSL(&cb.Components[i], "out") || len(in.Blocks) != 2 {
				t.Fatalf("%s/%s input %d: %+v", pl[0], pl[1], i, in)
			}
		}
		if sol.Ready+sol.Pending+sol.Failed != 2*len(sol.Inputs) || sol.Ready == 0 || sol.Failed == 0 {
			t.Fatalf("%s/%s: ready %d, pending %d, failed %d", pl[0], pl[1], sol.Ready, sol.Pending, sol.Failed)
		}
	}
	p2, err := cache.Pipeline("cvr", "p2")
	if err != nil || p2.Priority != 9 || !p2.Submitted.Equal(layoutEpoch.Add(2*time.Second)) {
		t.Fatalf("cvr/p2: %+v, %v", p2, err)
	}
	// graphA's qid is kept, used by no pipeline; graphB's components (its
	// overlap2 is graphA's overlap) by both.
	keys, err := cache.ComponentKeys()
	if err != nil || len(keys) != 3 {
		t.Fatalf("%d components, %v", len(keys), err)
	}
	for _, comp := range cb.Components {
		info, err := f.Info(comp.Key)
		if err != nil || len(info.Pipelines) != 2 || info.Ready+info.Pending+info.Failed != 2 {
			t.Fatalf("component %s: %+v, %v", comp.Key.Short(), info, err)
		}
	}
	res, _, err := f.Search(Query{Column: "bid_price"})
	if err != nil || len(res) != 1 || res[0].Record.Key != cb.Components[1].Key {
		t.Fatalf("search column bid_price: %d results, %v", len(res), err)
	}
	res, _, err = f.Search(Query{Subgraph: `unigrams(lower(col("query")))`})
	if err != nil || len(res) != 2 {
		t.Fatalf("search subgraph: %d results, %v", len(res), err)
	}
	audit, err := cache.Audit(10)
	if err != nil || len(audit) != 1 || audit[0].Who != "op" || audit[0].Objects != 1 {
		t.Fatalf("audit: %+v, %v", audit, err)
	}
}

// loadFrozenCache writes the pairs of a frozen layout file into an empty
// Pebble store, as it lists them (not through the cache), and returns its
// directory.
func loadFrozenCache(t *testing.T, file string) string {
	t.Helper()
	var dump string
	datadriven.RunTest(t, file, func(t *testing.T, td *datadriven.TestData) string {
		dump = td.Expected
		return td.Expected
	})
	dir := filepath.Join(t.TempDir(), "cache")
	db, err := pebbleutil.Open(dir, pebbleutil.DurabilityProcess, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(dump))
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		k, rest, err := unquotePrefix(sc.Text())
		if err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		v, err := strconv.Unquote(strings.TrimSpace(rest))
		if err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if err := db.Set([]byte(k), []byte(v), pebble.Sync); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if n < 20 {
		t.Fatalf("only %d pairs in %s", n, file)
	}
	return dir
}

// TestCacheWrittenBeforePacksServes (issue 28): a cache holding exactly
// the layout the code before packed memo objects wrote
// (testdata/layout-v2.txt, frozen) serves read solutions whose ready
// blocks name each component's own object and no column (readers read its
// "value", warehouse/block's TestMemoWrittenBeforeServes and reader's
// TestUnitReadsMemoWrittenBefore); such an entry's object is freed with it
// (Unnamed); and recomputing one moves it into a pack, alongside entries
// still naming objects of one component.
func TestCacheWrittenBeforePacksServes(t *testing.T) {
	dir := loadFrozenCache(t, "testdata/layout-v2.txt")
	cache, err := OpenCache(dir, CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	fb := &fakeBlocks{}
	for i := 0; i < 2; i++ {
		fb.blocks = append(fb.blocks, Block{Ref: blockref.New(fmt.Sprintf("b%03d", i), 1), MinEvent: int64(i * 100), MaxEvent: int64(i*100 + 99)})
	}
	clk := clock.NewFake(layoutEpoch.Add(2 * time.Hour))
	f := NewFrontend(FrontendConfig{Cache: cache, Blocks: fb, Scheduler: &fakeSched{}, Clock: clk,
		Schema: func(string) (*transform.Schema, error) { return transform.AdsSchema(), nil }})
	var ready []MemoEntry
	for _, pl := range [][2]string{{"ctr", "p1"}, {"cvr", "p2"}, {"ads", "p3"}} {
		sol, err := f.ReadSolution(pl[0], pl[1], 0, 0)
		if err != nil {
			t.Fatalf("%s/%s: %v", pl[0], pl[1], err)
		}
		sol.EachMemo(func(k canon.Key, b *BlockSolution) {
			if b.State != MemoReady {
				return
			}
			e, err := cache.Memo(k, b.Memo)
			if err != nil || b.Object != block.MemoKey(k, b.Memo) || e.Column != "" || e.Packed() {
				t.Errorf("%s/%s: ready block %s of %s names %s column %q (%v), want its own object", pl[0], pl[1], b.Memo, k.Short(), b.Object, e.Column, err)
			}
			ready = append(ready, e)
		})
	}
	if len(ready) == 0 {
		t.Fatal("no ready block in the frozen cache's solutions")
	}
	e := ready[0]
	if got, err := cache.Unnamed([]MemoEntry{e}); err != nil || !slices.Equal(got, []string{e.Object}) {
		t.Fatalf("Unnamed(%s) = %v, %v", e.Object, got, err)
	}
	// Recomputed, its entry moves into a pack; the other entries stay.
	if _, err := f.Invalidate(e.Component, e.Block, e.Gen, "recompute"); err != nil {
		t.Fatal(err)
	}
	pack := block.PackKey("ads", blockref.New(e.Block.ID(), 1), "p")
	l := &Memos{Frontend: f, Clock: clk, Stat: func(context.Context, string) error { return nil }}
	after, _ := cache.Memo(e.Component, e.Block)
	if err := l.Complete(context.Background(), e.Component, e.Block, after.Gen, Completion{Object: pack, Rows: 100, Bytes: 800}); err != nil {
		t.Fatal(err)
	}
	if got, err := cache.PackEntries(pack); err != nil || len(got) != 1 || got[0].Column != block.MemberColumn(e.Component) {
		t.Fatalf("pack entries %+v, %v", got, err)
	}
	for _, o := range ready[1:] {
		if o.Component == e.Component && o.Block == e.Block {
			continue // named by another pipeline too
		}
		if cur, _ := cache.Memo(o.Component, o.Block); cur.Object != o.Object || cur.State != MemoReady {
			t.Errorf("entry %s/%s changed: %+v", o.Component.Short(), o.Block, cur)
		}
	}
}

// quoteBytes quotes b as a Go string literal with every byte outside
// printable ASCII escaped as \xNN, so that a raw key reads the same whatever
// its bytes happen to spell in UTF-8.
func quoteBytes(b []byte) string {
	var s strings.Builder
	s.WriteByte('"')
	for _, c := range b {
		switch {
		case c == '"' || c == '\\':
			s.WriteByte('\\')
			s.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			s.WriteByte(c)
		default:
			fmt.Fprintf(&s, "\\x%02x", c)
		}
	}
	s.WriteByte('"')
	return s.String()
}

// unquotePrefix reads the quoted string at the start of line and returns
// it and what follows.
func unquotePrefix(line string) (string, string, error) {
	q, err := strconv.QuotedPrefix(line)
	if err != nil {
		return "", "", err
	}
	s, err := strconv.Unquote(q)
	return s, line[len(q):], err
}
