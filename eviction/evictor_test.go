package eviction_test

// The Evictor's decisions, on the stack (stack_test.go): the Evictor wired
// as sigd wires it over the matching cache, the work queue and an object
// store, without sigd.

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/eviction"
	"github.com/sigdata/sig/matching"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/block/blocktest"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/workers"
	"github.com/sigdata/sig/workers/memo"
)

// drain returns the changes a watcher has been told so far.
func drain(ch <-chan matching.MemoEntry) []matching.MemoEntry {
	var out []matching.MemoEntry
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, e)
		default:
			return out
		}
	}
}

// TestRoundEvictsIdleComponents: last-requested eviction by TTL. Within
// the TTL nothing goes; past it, the components not requested since lose
// their memo entries and objects and those requested recently keep them;
// the round is audited under the policy's name at the clock's time; a
// second round at once evicts nothing; the next read of an evicted
// pipeline re-creates its entries pending and schedules them at its
// priority, and they are computed again.
func TestRoundEvictsIdleComponents(t *testing.T) {
	s := newStack(t, 2, 200, eviction.Policy{TTL: time.Hour})
	s.pipelines()
	ctr := []canon.Key{s.input("ctr", "query_ids"), s.input("ctr", "price")}
	cvr, exp := s.input("cvr", "q_small"), s.input("explore", "adv")

	s.clk.Advance(30 * time.Minute)
	s.read("ctr") // ctr's components are requested again
	if d, err := s.ev.Round(s.ctx); err != nil || len(d) != 0 {
		t.Fatalf("round within the TTL: %v, %v", d, err)
	}
	// 75 minutes after cvr's and explore's last reads, 45 after ctr's.
	s.clk.Advance(45 * time.Minute)
	d, err := s.ev.Round(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range d {
		if x.Reason != "ttl" {
			t.Errorf("decision %v, want reason ttl", x)
		}
		got = append(got, x.Component.String())
	}
	slices.Sort(got)
	if want := sortedKeys(cvr, exp); !slices.Equal(got, want) {
		t.Errorf("evicted %v, want cvr's and explore's components %v", got, want)
	}
	s.checkEvicted(cvr)
	s.checkEvicted(exp)
	for _, k := range ctr {
		s.checkMemoized(k)
	}
	a := s.audit()
	if len(a) != 1 || a[0].Who != "eviction-policy" || !strings.Contains(a[0].Why, "2 by ttl") || !a[0].When.Equal(s.clk.Now()) ||
		a[0].Blocks != 2*len(s.raw) || a[0].Objects != 2*len(s.raw) {
		t.Errorf("audit after the round: %+v", a)
	}
	if s.ev.Evicted() != int64(2*len(s.raw)) {
		t.Errorf("Evicted() = %d, want %d", s.ev.Evicted(), 2*len(s.raw))
	}
	if d, err := s.ev.Round(s.ctx); err != nil || len(d) != 0 {
		t.Errorf("a second round at once evicted %v (%v)", d, err)
	}

	// The next read re-creates cvr's entries pending and schedules them at
	// cvr's priority; explore, not read, stays evicted.
	sol := s.read("cvr")
	if sol.Complete() || pending(sol, cvr) != len(s.raw) {
		t.Errorf("cvr after TTL eviction: complete=%v, %d pending", sol.Complete(), sol.Pending)
	}
	for _, b := range s.raw {
		if task, ok := s.task(cvr, b.ID); !ok || task.Priority() != priorities["cvr"] {
			t.Errorf("task of block %s: %+v (queued %v), want one at cvr's priority", b.ID, task, ok)
		}
	}
	if n := s.work(); n != len(s.raw) {
		t.Errorf("%d tasks ran, want cvr's %d", n, len(s.raw))
	}
	s.checkMemoized(cvr)
	s.checkEvicted(exp)
}

// TestRoundEvictsLeastRecentlyRequestedOverBudget: with a storage budget,
// a round evicts the least recently requested components until the rest
// fits.
func TestRoundEvictsLeastRecentlyRequestedOverBudget(t *testing.T) {
	s := newStack(t, 2, 200, eviction.Policy{})
	s.submit("explore", exploreGraph)
	s.work()
	s.clk.Advance(time.Minute)
	s.submit("cvr", cvrGraph)
	s.work()
	exp, cvr := s.input("explore", "adv"), s.input("cvr", "q_small")
	// Read in that order, a minute apart, so explore's is the older
	// request.
	s.clk.Advance(time.Minute)
	s.read("cvr")
	info, err := s.f.Info(cvr)
	if err != nil {
		t.Fatal(err)
	}
	s.ev.Policy = eviction.Policy{BudgetBytes: info.Bytes}
	d, err := s.ev.Round(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != 1 || d[0].Component != exp || d[0].Reason != "budget" {
		t.Errorf("budget round: %v, want explore's component", d)
	}
	s.checkEvicted(exp)
	s.checkMemoized(cvr)
}

// TestEvictSubgraph: subgraph eviction as an operator asks for it. Bad
// requests name the field and change nothing; a dry run lists every
// component containing the subgraph, the pipelines using them, their
// blocks and bytes, and changes nothing; a node key names the same
// components; the eviction removes exactly those components' entries and
// objects, tells watchers, audits who, what and why, turns the affected
// read solutions pending (their next reads schedule the blocks at each
// pipeline's priority) and leaves the others complete. An eviction while
// those blocks wait in the queue cancels their tasks. Recomputed, the
// objects are byte for byte what they were.
func TestEvictSubgraph(t *testing.T) {
	s := newStack(t, 2, 200, eviction.Policy{})
	s.pipelines()
	qids, price := s.input("ctr", "query_ids"), s.input("ctr", "price")
	qsmall, adv := s.input("cvr", "q_small"), s.input("explore", "adv")
	affected, untouched := []canon.Key{qids, qsmall}, []canon.Key{price, adv}
	target := eviction.Target{Subgraph: tokenizer}
	before := map[string][]byte{}
	for _, k := range affected {
		for _, o := range s.objects(k) {
			before[o] = s.get(o)
		}
	}

	for name, tc := range map[string]struct {
		target     eviction.Target
		why, field string
	}{
		"no reason":          {target, "", "reason"},
		"blank reason":       {target, " \t\n", "reason"},
		"long reason":        {target, strings.Repeat("x", 4097), "reason"},
		"no target":          {eviction.Target{}, "r", "target"},
		"bad DSL":            {eviction.Target{Subgraph: `unigrams(lower(col("nope")))`}, "r", "subgraph"},
		"unparsable DSL":     {eviction.Target{Subgraph: "lower("}, "r", "subgraph"},
		"oversized subgraph": {eviction.Target{Subgraph: strings.Repeat(" ", 2<<20)}, "r", "subgraph"},
		"bad node key":       {eviction.Target{NodeKey: "zz"}, "r", "node_key"},
		"unknown source":     {eviction.Target{Subgraph: tokenizer, Source: "nope"}, "r", "graph.raw_source"},
	} {
		if _, err := s.ev.Evict(s.ctx, tc.target, "operator", tc.why); !inputError(err, tc.field) {
			t.Errorf("%s: %v, want an input error naming %s", name, err, tc.field)
		}
	}

	// The dry run.
	dry, err := s.ev.Plan(target)
	if err != nil {
		t.Fatal(err)
	}
	if got := sortedKeys(dry.Components...); !slices.Equal(got, sortedKeys(affected...)) {
		t.Errorf("dry run components %v, want %v", got, sortedKeys(affected...))
	}
	if want := []string{"ctr/p", "cvr/p"}; !slices.Equal(dry.Pipelines, want) {
		t.Errorf("dry run pipelines %q, want %q", dry.Pipelines, want)
	}
	var bytes int64
	for _, k := range affected {
		for _, b := range s.raw {
			bytes += s.memo(k, blockref.ParseMemo(b.ID)).Bytes
		}
	}
	if dry.Blocks != 2*len(s.raw) || dry.Bytes != bytes || dry.Objects != 0 || dry.AuditID != "" {
		t.Errorf("dry run: %+v, want %d blocks of %d bytes", dry, 2*len(s.raw), bytes)
	}
	key, err := s.f.SubgraphKey(tokenizer, "")
	if err != nil {
		t.Fatal(err)
	}
	if byNode, err := s.ev.Plan(eviction.Target{NodeKey: key.String()}); err != nil ||
		!slices.Equal(sortedKeys(byNode.Components...), sortedKeys(affected...)) {
		t.Errorf("dry run by node key: %v (%v), want the subgraph's components", byNode.Components, err)
	}
	for _, k := range append(affected, untouched...) {
		s.checkMemoized(k)
	}
	if a := s.audit(); len(a) != 0 {
		t.Errorf("audit after a dry run and bad requests: %+v", a)
	}
	for _, c := range []string{"ctr", "cvr", "explore"} {
		if !s.read(c).Complete() {
			t.Errorf("%s's solution is incomplete after a dry run", c)
		}
	}

	// The eviction.
	ch, cancel := s.f.Watch(affected)
	defer cancel()
	done, err := s.ev.Evict(s.ctx, target, "operator", "tokenizer bug")
	if err != nil {
		t.Fatal(err)
	}
	if done.Blocks != dry.Blocks || done.Bytes != dry.Bytes || done.Objects != 2*len(s.raw) || done.AuditID == "" ||
		!slices.Equal(done.Pipelines, dry.Pipelines) {
		t.Errorf("eviction: %+v (dry run said %+v)", done, dry)
	}
	for _, k := range affected {
		s.checkEvicted(k)
	}
	for _, k := range untouched {
		s.checkMemoized(k)
	}
	gone := 0
	for _, e := range drain(ch) {
		if e.State != 0 || !slices.Contains(affected, e.Component) {
			t.Errorf("watcher told %+v, want evictions of the affected components", e)
		}
		gone++
	}
	if gone != 2*len(s.raw) {
		t.Errorf("watcher told of %d evicted blocks, want %d", gone, 2*len(s.raw))
	}
	a := s.audit()
	if len(a) != 1 {
		t.Fatalf("audit: %+v", a)
	}
	if e := a[0]; e.ID != done.AuditID || e.Who != "operator" || e.Why != "tokenizer bug" || !strings.Contains(e.What, tokenizer) ||
		!slices.Equal(sortedKeys(e.Components...), sortedKeys(affected...)) || e.Blocks != done.Blocks || e.Bytes != done.Bytes ||
		e.Objects != done.Objects || !slices.Equal(e.Pipelines, done.Pipelines) || !e.When.Equal(s.clk.Now()) {
		t.Errorf("audit entry %+v, eviction %+v", e, done)
	}

	// The affected read solutions are pending, the others untouched; the
	// reads schedule the blocks at each pipeline's priority.
	ctr := s.read("ctr")
	if ctr.Complete() || pending(ctr, qids) != len(s.raw) || pending(ctr, price) != 0 {
		t.Errorf("ctr's solution after eviction: complete=%v, %d pending", ctr.Complete(), ctr.Pending)
	}
	if sol := s.read("cvr"); sol.Complete() || pending(sol, qsmall) != len(s.raw) {
		t.Errorf("cvr's solution after eviction: complete=%v, %d pending", sol.Complete(), sol.Pending)
	}
	if !s.read("explore").Complete() {
		t.Error("explore's solution is incomplete; it does not use the subgraph")
	}
	for _, b := range s.raw {
		for k, client := range map[canon.Key]string{qids: "ctr", qsmall: "cvr"} {
			if task, ok := s.task(k, b.ID); !ok || task.Priority() != priorities[client] {
				t.Errorf("task of %s block %s: %+v (queued %v), want one at %s's priority", k.Short(), b.ID, task, ok, client)
			}
		}
	}

	// Evicted again before any worker ran: the queued tasks are cancelled.
	if _, err := s.ev.Evict(s.ctx, target, "operator", "tokenizer bug, again"); err != nil {
		t.Fatal(err)
	}
	for _, k := range affected {
		for _, b := range s.raw {
			if task, ok := s.task(k, b.ID); ok {
				t.Errorf("task %+v of an evicted block is still queued", task)
			}
		}
	}

	// Read again, the solutions recompute what was evicted, as it was.
	s.read("ctr")
	s.read("cvr")
	if n := s.work(); n != 2*len(s.raw) {
		t.Errorf("%d tasks ran, want %d", n, 2*len(s.raw))
	}
	for _, k := range append(affected, untouched...) {
		s.checkMemoized(k)
	}
	for o, want := range before {
		if got := s.get(o); !slices.Equal(got, want) {
			t.Errorf("memo object %s differs after its recomputation", o)
		}
	}
}

// TestEvictBlock: an operator evicts one block. Bad requests name the
// field; the block's entry and object go, watchers are told, the
// eviction is audited, and nothing else changes; the next read re-creates
// the block pending at the pipeline's priority and it is recomputed as it
// was.
func TestEvictBlock(t *testing.T) {
	s := newStack(t, 2, 200, eviction.Policy{})
	s.pipelines()
	q, price := s.input("ctr", "query_ids"), s.input("ctr", "price")
	b0, b1 := s.raw[0].ID, s.raw[1].ID

	if _, err := s.ev.EvictBlock(s.ctx, q, blockref.ParseMemo("../"+b1), "operator", "x"); !inputError(err, "block_id") {
		t.Errorf("a bad block id: %v, want an input error naming block_id", err)
	}
	if _, err := s.ev.EvictBlock(s.ctx, q, blockref.ParseMemo(b1), "operator", " "); !inputError(err, "reason") {
		t.Errorf("a blank reason: %v, want an input error naming reason", err)
	}
	if _, err := s.ev.EvictBlock(s.ctx, q, blockref.ParseMemo("20990101T000000Z-p00000-1-2"), "operator", "x"); !errors.Is(err, matching.ErrNotFound) {
		t.Errorf("a block without an entry: %v, want ErrNotFound", err)
	}

	was, other, otherBlock := s.memo(q, blockref.ParseMemo(b1)), s.memo(price, blockref.ParseMemo(b1)), s.memo(q, blockref.ParseMemo(b0))
	data := s.get(was.Object)
	ch, cancel := s.f.Watch([]canon.Key{q})
	defer cancel()
	im, err := s.ev.EvictBlock(s.ctx, q, blockref.ParseMemo(b1), "operator", "bad disk")
	if err != nil {
		t.Fatal(err)
	}
	if im.Component != q || im.Block.String() != b1 || !slices.Equal(im.Pipelines, []string{"ctr/p"}) || im.Bytes != was.Bytes ||
		im.Objects != 1 || im.State != 0 || im.AuditID == "" {
		t.Errorf("block eviction: %+v", im)
	}
	if _, err := s.f.Cache().Memo(q, blockref.ParseMemo(b1)); !errors.Is(err, matching.ErrNotFound) {
		t.Errorf("the evicted block's entry: %v, want none", err)
	}
	if _, err := s.store.Stat(s.ctx, was.Object); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("the evicted block's object: %v, want none", err)
	}
	if m := s.memo(price, blockref.ParseMemo(b1)); m != other {
		t.Errorf("another component's block changed: %+v, was %+v", m, other)
	}
	if m := s.memo(q, blockref.ParseMemo(b0)); m != otherBlock {
		t.Errorf("another block of the component changed: %+v, was %+v", m, otherBlock)
	}
	if told := drain(ch); len(told) != 1 || told[0].Block.String() != b1 || told[0].State != 0 {
		t.Errorf("watcher told %+v, want block %s evicted", told, b1)
	}
	if a := s.audit(); len(a) != 1 || a[0].ID != im.AuditID || a[0].Who != "operator" || a[0].Why != "bad disk" ||
		!strings.Contains(a[0].What, b1) || !strings.Contains(a[0].What, q.String()) || len(a[0].Components) != 1 ||
		a[0].Components[0] != q || a[0].Blocks != 1 || a[0].Bytes != was.Bytes || a[0].Objects != 1 {
		t.Errorf("audit %+v, want the block's eviction", a)
	}
	if s.ev.Evicted() != 1 {
		t.Errorf("Evicted() = %d, want 1", s.ev.Evicted())
	}
	if _, err := s.ev.EvictBlock(s.ctx, q, blockref.ParseMemo(b1), "operator", "bad disk"); !errors.Is(err, matching.ErrNotFound) {
		t.Errorf("evicting it again: %v, want ErrNotFound", err)
	}

	sol := s.read("ctr")
	if sol.Complete() || pending(sol, q) != 1 {
		t.Errorf("ctr's solution after the block's eviction: complete=%v, %d pending; want the one block", sol.Complete(), sol.Pending)
	}
	if task, ok := s.task(q, b1); !ok || task.Priority() != priorities["ctr"] {
		t.Errorf("task %+v (queued %v), want one at ctr's priority", task, ok)
	}
	if n := s.work(); n != 1 {
		t.Errorf("%d tasks ran, want 1", n)
	}
	if m := s.memo(q, blockref.ParseMemo(b1)); m.State != matching.MemoReady || !slices.Equal(s.get(m.Object), data) {
		t.Errorf("block %s after its recomputation: %+v, or its object differs", b1, m)
	}
}

// TestRecomputeBlock: an operator recomputes one block now. A ready
// block's object goes, its entry turns pending with a new generation and
// the reason, its task is queued at the pipeline's priority, and the
// recomputation is audited; a pending block is only scheduled again (no
// new generation, no audit); a quarantined one is refused, to be released
// instead. Recomputed, the object is byte for byte what it was.
func TestRecomputeBlock(t *testing.T) {
	s := newStack(t, 2, 200, eviction.Policy{})
	s.pipelines()
	q, price := s.input("ctr", "query_ids"), s.input("ctr", "price")
	b0 := s.raw[0].ID

	if _, err := s.ev.RecomputeBlock(s.ctx, price, blockref.ParseMemo("../"+b0), "operator", "x"); !inputError(err, "block_id") {
		t.Errorf("a bad block id: %v, want an input error naming block_id", err)
	}
	if _, err := s.ev.RecomputeBlock(s.ctx, price, blockref.ParseMemo(b0), "operator", " "); !inputError(err, "reason") {
		t.Errorf("a blank reason: %v, want an input error naming reason", err)
	}

	was := s.memo(price, blockref.ParseMemo(b0))
	data := s.get(was.Object)
	im, err := s.ev.RecomputeBlock(s.ctx, price, blockref.ParseMemo(b0), "operator", "suspect bucketize")
	if err != nil {
		t.Fatal(err)
	}
	if im.State != matching.MemoPending || im.Objects != 1 || im.Bytes != was.Bytes || im.AuditID == "" ||
		!slices.Equal(im.Pipelines, []string{"ctr/p"}) {
		t.Errorf("recomputation: %+v", im)
	}
	m := s.memo(price, blockref.ParseMemo(b0))
	if m.State != matching.MemoPending || m.Gen == was.Gen || !strings.Contains(m.Error, "recomputing at the request of operator: suspect bucketize") {
		t.Errorf("entry %+v, want pending with a new generation (old %d) and the reason", m, was.Gen)
	}
	if _, err := s.store.Stat(s.ctx, was.Object); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("the object of the block being recomputed: %v, want it deleted", err)
	}
	if task, ok := s.task(price, b0); !ok || task.Priority() != priorities["ctr"] || len(task.Requesters) != 1 {
		t.Errorf("task %+v (queued %v), want one at ctr's priority", task, ok)
	}
	if a := s.audit(); len(a) != 1 || a[0].ID != im.AuditID || a[0].Who != "operator" || !strings.Contains(a[0].What, "recompute block "+b0) ||
		a[0].Why != "suspect bucketize" || a[0].Components[0] != price || a[0].Objects != 1 {
		t.Errorf("audit %+v, want the recomputation", a)
	}

	// Pending: only scheduled again.
	if _, err := s.queue.Cancel(workers.TaskID{Component: price, Block: blockref.ParseMemo(b0)}); err != nil {
		t.Fatal(err)
	}
	again, err := s.ev.RecomputeBlock(s.ctx, price, blockref.ParseMemo(b0), "operator", "again")
	if err != nil || again.State != matching.MemoPending || again.AuditID != "" {
		t.Errorf("recomputing a pending block: %+v, %v", again, err)
	}
	if got := s.memo(price, blockref.ParseMemo(b0)); got.Gen != m.Gen {
		t.Errorf("recomputing a pending block changed its generation: %d, was %d", got.Gen, m.Gen)
	}
	if _, ok := s.task(price, b0); !ok {
		t.Error("recomputing a pending block did not schedule it")
	}
	if n := len(s.audit()); n != 1 {
		t.Errorf("%d audit entries after recomputing a pending block, want 1", n)
	}
	if n := s.work(); n != 1 {
		t.Errorf("%d tasks ran, want 1", n)
	}
	if m := s.memo(price, blockref.ParseMemo(b0)); m.State != matching.MemoReady || !slices.Equal(s.get(m.Object), data) {
		t.Errorf("block %s after its recomputation: %+v, or its object differs", b0, m)
	}

	// Quarantined: refused.
	if _, err := s.ev.RecomputeBlock(s.ctx, q, blockref.ParseMemo(b0), "operator", "x"); err != nil {
		t.Fatal(err)
	}
	if err := s.f.MarkFailed(q, blockref.ParseMemo(b0), "boom"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ev.RecomputeBlock(s.ctx, q, blockref.ParseMemo(b0), "operator", "x"); !errors.Is(err, eviction.ErrQuarantined) {
		t.Errorf("recomputing a quarantined block: %v, want ErrQuarantined", err)
	}
}

// rot flips one byte in the middle of a memo object's value segment. With
// keepSum the object keeps the checksum it was stored with, as bitrot on
// a disk does (the store's Get answers ErrCorrupt); without, it is stored
// anew with its new checksum, as by a copy that rewrote it, and only the
// block's own segment checksums tell.
func (s *stack) rot(key string, keepSum bool) {
	s.t.Helper()
	data, info, err := s.store.Get(s.ctx, key)
	if err != nil {
		s.t.Fatal(err)
	}
	meta, rec, err := block.Decode(key, data)
	if err != nil {
		s.t.Fatal(err)
	}
	rec.Release()
	c, _ := meta.Column(block.MemoColumn)
	data[c.Offset+c.Length/2] ^= 0x5a
	sum := info.Checksum
	if !keepSum {
		sum = objstore.Checksum(data)
	}
	if _, err := s.store.PutChecksummed(s.ctx, key, data, sum, nil); err != nil {
		s.t.Fatal(err)
	}
}

// misalign rewrites a memo object with every event id moved by one: the
// right component, block, type and rows, sound checksums, but rows that
// are not the raw block's.
func (s *stack) misalign(key string) {
	s.t.Helper()
	meta, rec, err := block.ReadBlock(s.ctx, s.store, key)
	if err != nil {
		s.t.Fatal(err)
	}
	defer rec.Release()
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for _, id := range rec.Column(0).(*array.Int64).Int64Values() {
		b.Append(id + 1)
	}
	ids := b.NewArray()
	defer ids.Release()
	out := memo.MemoRecord(ids, rec.Column(1))
	defer out.Release()
	meta.Columns, meta.Size, meta.Rows = nil, 0, 0
	if _, err := block.Write(s.ctx, s.store, meta, out); err != nil {
		s.t.Fatal(err)
	}
}

// TestReportCorruptVerifies: a report of a corrupt memo object is a hint
// the Evictor checks by reading the object itself. A healthy object
// changes nothing, whoever reports it; bad requests name the field. An
// object found bad — rotten under its stored checksum, rotten in a
// segment under a fresh one, not row-aligned with its raw block,
// missing, or with a footer readers refuse (every kind of
// blocktest.MemoFooterDamages, its checksums written to match) — is
// deleted, its entry turns pending with a new generation and
// the finding, its task is queued at the pipeline's priority, and the
// repair is audited under the reporter's name with what it saw and what
// was found; nothing else changes. Reported by several at once, a block is
// repaired once; reported while pending, nothing is done. Reports are
// counted by outcome, and every block is recomputed as it was.
func TestReportCorruptVerifies(t *testing.T) {
	s := newStack(t, 2, 300, eviction.Policy{})
	s.pipelines()
	q, price := s.input("ctr", "query_ids"), s.input("ctr", "price")
	b0, b1 := s.raw[0].ID, s.raw[1].ID
	data := map[string][]byte{}
	for _, k := range []canon.Key{q, price} {
		for _, o := range s.objects(k) {
			data[o] = s.get(o)
		}
	}
	report := func(k canon.Key, id, who string) (eviction.Finding, error) {
		return s.ev.ReportCorrupt(s.ctx, k, blockref.ParseMemo(id), who, "", "DataLoss seen")
	}
	unchanged := func(what string, k canon.Key, id string, was matching.MemoEntry) {
		t.Helper()
		if m := s.memo(k, blockref.ParseMemo(id)); m != was {
			t.Errorf("%s: entry %+v, want it as it was, %+v", what, m, was)
		}
		if task, queued := s.task(k, id); queued {
			t.Errorf("%s: task %+v queued", what, task)
		}
	}

	healthy := s.memo(q, blockref.ParseMemo(b1))
	for _, who := range []string{"trainer", "reader", "operator"} {
		f, err := report(q, b1, who)
		if err != nil || f.Corrupt || !strings.Contains(f.What, "healthy") || f.Entry != healthy || f.Repair.AuditID != "" {
			t.Errorf("%s reports a healthy object: %+v, %v", who, f, err)
		}
	}
	unchanged("healthy object reported", q, b1, healthy)
	if _, err := report(q, "../x", "reader"); !inputError(err, "block_id") {
		t.Errorf("a report of a bad block id: %v, want an input error naming block_id", err)
	}
	if _, err := s.ev.ReportCorrupt(s.ctx, q, blockref.ParseMemo(b1), "reader", "BOGUS", ""); !inputError(err, "reason") {
		t.Errorf("a report of an unknown reason: %v, want an input error naming reason", err)
	}
	unchanged("bad requests", q, b1, healthy)
	if a := s.audit(); len(a) != 0 {
		t.Errorf("audit after healthy reports: %+v", a)
	}

	// Rotten under its stored checksum, reported by several at once.
	other, otherBlock := s.memo(price, blockref.ParseMemo(b1)), s.memo(q, blockref.ParseMemo(b0))
	s.rot(healthy.Object, true)
	var (
		mu      sync.Mutex
		repairs []eviction.Finding
		wg      sync.WaitGroup
	)
	for i := range 8 {
		who := []string{"trainer", "reader"}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := report(q, b1, who)
			if err != nil {
				t.Errorf("%s reports the corrupt block: %v", who, err)
				return
			}
			if f.Repair.AuditID != "" {
				mu.Lock()
				repairs = append(repairs, f)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(repairs) != 1 || !repairs[0].Corrupt {
		t.Fatalf("concurrent reports of one corrupt block repaired it %d times: %+v", len(repairs), repairs)
	}
	m := s.memo(q, blockref.ParseMemo(b1))
	if m.State != matching.MemoPending || m.Gen == healthy.Gen || !strings.Contains(m.Error, "corrupt") || repairs[0].Entry != m {
		t.Errorf("after the report: %+v, want pending with a new generation (old %d) and the reason", m, healthy.Gen)
	}
	if task, ok := s.task(q, b1); !ok || task.Priority() != priorities["ctr"] {
		t.Errorf("recomputation task %+v (queued %v), want one at ctr's priority", task, ok)
	}
	if m := s.memo(price, blockref.ParseMemo(b1)); m != other {
		t.Errorf("another component of the block changed: %+v", m)
	}
	if m := s.memo(q, blockref.ParseMemo(b0)); m != otherBlock {
		t.Errorf("another block of the component changed: %+v", m)
	}
	a := s.audit()
	if len(a) != 1 {
		t.Fatalf("audit %+v, want the one repair", a)
	}
	if e := a[0]; e.ID != repairs[0].Repair.AuditID || (e.Who != "trainer" && e.Who != "reader") || !strings.Contains(e.What, "corrupt") ||
		!strings.Contains(e.What, b1) || len(e.Components) != 1 || e.Components[0] != q || e.Blocks != 1 ||
		!strings.Contains(e.Why, "DataLoss seen") || !strings.Contains(e.Why, "sigd found") || !strings.Contains(e.Why, objstore.ErrCorrupt.Error()) {
		t.Errorf("audit entry %+v, want the report of block %s with what was found", e, b1)
	}
	// Reported again while it is pending: nothing to repair.
	if f, err := report(q, b1, "reader"); err != nil || f.Corrupt || f.Entry.State != matching.MemoPending || !strings.Contains(f.What, "nothing to repair") {
		t.Errorf("a report of the pending block: %+v, %v", f, err)
	}

	// Rotten in a segment, stored with a fresh checksum; not row-aligned;
	// missing.
	s.rot(s.memo(price, blockref.ParseMemo(b0)).Object, false)
	s.misalign(s.memo(price, blockref.ParseMemo(b1)).Object)
	if err := s.store.Delete(s.ctx, s.memo(q, blockref.ParseMemo(b0)).Object); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		k         canon.Key
		id, found string
	}{
		{price, b0, "checksum"},
		{price, b1, "not row-aligned"},
		{q, b0, "missing"},
	} {
		was := s.memo(tc.k, blockref.ParseMemo(tc.id))
		f, err := report(tc.k, tc.id, "reader")
		if err != nil || !f.Corrupt || !strings.Contains(f.What, tc.found) || f.Repair.AuditID == "" ||
			f.Entry.State != matching.MemoPending || f.Entry.Gen == was.Gen {
			t.Errorf("report of %s block %s: %+v, %v; want it repaired, found %q", tc.k.Short(), tc.id, f, err, tc.found)
		}
	}
	if n := len(s.audit()); n != 4 {
		t.Errorf("%d audit entries, want the 4 repairs", n)
	}
	reports := s.ev.Reports()
	total := int64(0)
	for r, n := range reports {
		if r.Reason != eviction.ReasonCorrupt || r.Outcome == eviction.OutcomeError {
			t.Errorf("reports %v: %d of %v", reports, n, r)
		}
		total += n
	}
	if total != 3+8+1+3 || reports[eviction.ReportCount{Reason: eviction.ReasonCorrupt, Outcome: eviction.OutcomeHealthy}] != 3 ||
		reports[eviction.ReportCount{Reason: eviction.ReasonCorrupt, Outcome: eviction.OutcomeRepaired}] != 4 {
		t.Errorf("reports %v: want 15, 3 healthy and 4 repaired (the refused requests are not reports)", reports)
	}

	// Recomputed, every object is what it was.
	if n := s.work(); n != 4 {
		t.Errorf("%d tasks ran, want the 4 repaired blocks", n)
	}
	for o, want := range data {
		if got := s.get(o); !slices.Equal(got, want) {
			t.Errorf("memo object %s differs after the repairs", o)
		}
	}

	// A footer readers refuse (issue 27), one byte of it flipped with its
	// CRC-32C and the object's checksum written to match, so that only the
	// values it gives are wrong: a segment's place or checksum, the rows,
	// the component key, the block id, the format, the value's type or
	// name; or its JSON broken, or a byte rotted. Each is found corrupt and
	// repaired, and recomputed as it was.
	for _, d := range blocktest.MemoFooterDamages {
		was := s.memo(q, blockref.ParseMemo(b0))
		bad, err := blocktest.DamageFooter(data[was.Object], d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.store.PutChecksummed(s.ctx, was.Object, bad, objstore.Checksum(bad), nil); err != nil {
			t.Fatal(err)
		}
		f, err := report(q, b0, "reader")
		if err != nil || !f.Corrupt || f.Repair.AuditID == "" || f.Entry.State != matching.MemoPending || f.Entry.Gen == was.Gen {
			t.Errorf("report of a footer with its %s damaged: %+v, %v; want it repaired", d.Name, f, err)
		}
		if n := s.work(); n != 1 {
			t.Errorf("footer %s: %d tasks ran, want the repaired block's", d.Name, n)
		}
		if !slices.Equal(s.get(was.Object), data[was.Object]) {
			t.Errorf("footer %s: memo object %s differs after the repair", d.Name, was.Object)
		}
	}
	if n, want := int64(len(s.audit())), int64(4+len(blocktest.MemoFooterDamages)); n != want {
		t.Errorf("%d audit entries, want %d: the 4 repairs and one a damaged footer", n, want)
	}
	if n, want := s.ev.Reports()[eviction.ReportCount{Reason: eviction.ReasonCorrupt, Outcome: eviction.OutcomeRepaired}],
		int64(4+len(blocktest.MemoFooterDamages)); n != want {
		t.Errorf("%d reports repaired, want %d", n, want)
	}
}

// TestReportMismatchConfirmed (issue 21, the shared-fate guard): a faulty
// worker wrote an object of sound bytes and wrong values. Reported as
// corrupt it is healthy: its bytes are. Reported as a value mismatch, the
// Evictor recomputes the block from raw columns, finds the rows differ and
// quarantines that one entry (pending, a new generation, the reason and
// the first differing row), counts it by component, audits it and queues
// the recomputation; nothing else changes. Recomputed, the object
// compares equal, and a second report of the same incarnation is answered
// without recomputing it. An Evictor that cannot recompute checks a
// mismatch report as a corrupt one only.
func TestReportMismatchConfirmed(t *testing.T) {
	s := newStack(t, 2, 300, eviction.Policy{})
	s.submit("ctr", ctrGraph)
	q, price := s.input("ctr", "query_ids"), s.input("ctr", "price")
	b0, b1 := s.raw[0].ID, s.raw[1].ID
	s.faulty[workers.TaskID{Component: q, Block: blockref.ParseMemo(b0)}] = true
	s.work()
	bad, other, otherBlock := s.memo(q, blockref.ParseMemo(b0)), s.memo(price, blockref.ParseMemo(b0)), s.memo(q, blockref.ParseMemo(b1))

	f, err := s.ev.ReportCorrupt(s.ctx, q, blockref.ParseMemo(b0), "reader", eviction.ReasonCorrupt, "DataLoss")
	if err != nil || f.Corrupt || f.Entry != bad || s.recomputes.Load() != 0 {
		t.Errorf("a corrupt report of sound bytes: %+v, %v (%d recomputations)", f, err, s.recomputes.Load())
	}
	f, err = s.ev.ReportCorrupt(s.ctx, q, blockref.ParseMemo(b0), "reader", eviction.ReasonMemoMismatch, "memo mismatch at row 3")
	if err != nil || !f.Corrupt || !strings.Contains(f.What, "wrong values") || f.Repair.AuditID == "" {
		t.Fatalf("the mismatch report: %+v, %v", f, err)
	}
	m := s.memo(q, blockref.ParseMemo(b0))
	if m.State != matching.MemoPending || m.Gen == bad.Gen || !strings.Contains(m.Error, "quarantined (MEMO_MISMATCH)") ||
		!strings.Contains(m.Error, "wrong values") || !strings.Contains(m.Error, "row ") || f.Entry != m {
		t.Errorf("after the report: %+v, want pending, quarantined with the reason and row, a new generation (old %d)", m, bad.Gen)
	}
	if s.recomputes.Load() != 1 {
		t.Errorf("%d recomputations, want 1", s.recomputes.Load())
	}
	if got := s.ev.Mismatches(); !maps.Equal(got, map[canon.Key]int64{q: 1}) {
		t.Errorf("Mismatches() = %v, want 1 for %s", got, q.Short())
	}
	if task, ok := s.task(q, b0); !ok || task.Priority() != priorities["ctr"] {
		t.Errorf("recomputation task %+v (queued %v), want one at ctr's priority", task, ok)
	}
	if got := s.memo(price, blockref.ParseMemo(b0)); got != other {
		t.Errorf("another component of the block changed: %+v", got)
	}
	if got := s.memo(q, blockref.ParseMemo(b1)); got != otherBlock {
		t.Errorf("another block of the component changed: %+v", got)
	}
	if a := s.audit(); len(a) != 1 || a[0].Who != "reader" || !strings.Contains(a[0].What, "quarantine") || !strings.Contains(a[0].What, b0) ||
		len(a[0].Components) != 1 || a[0].Components[0] != q || !strings.Contains(a[0].Why, "memo mismatch at row 3") || !strings.Contains(a[0].Why, "wrong values") {
		t.Errorf("audit %+v, want the reader's report and what the recomputation found", a)
	}

	if n := s.work(); n != 1 {
		t.Errorf("%d tasks ran, want 1", n)
	}
	f, err = s.ev.ReportCorrupt(s.ctx, q, blockref.ParseMemo(b0), "operator", eviction.ReasonMemoMismatch, "a reader with a bad CPU")
	if err != nil || f.Corrupt || !strings.Contains(f.What, "equal a recomputation") || f.Entry.State != matching.MemoReady || s.recomputes.Load() != 2 {
		t.Errorf("reporting the repaired object: %+v, %v (%d recomputations), want healthy after a second one", f, err, s.recomputes.Load())
	}
	f, err = s.ev.ReportCorrupt(s.ctx, q, blockref.ParseMemo(b0), "operator", eviction.ReasonMemoMismatch, "a reader with a bad CPU")
	if err != nil || f.Corrupt || !strings.Contains(f.What, "checked before") || s.recomputes.Load() != 2 {
		t.Errorf("reporting it again: %+v, %v (%d recomputations), want healthy as checked before", f, err, s.recomputes.Load())
	}
	if n := len(s.audit()); n != 1 {
		t.Errorf("%d audit entries after the healthy reports, want 1", n)
	}
	if got, want := s.ev.Reports(), map[eviction.ReportCount]int64{
		{Reason: eviction.ReasonCorrupt, Outcome: eviction.OutcomeHealthy}:       1,
		{Reason: eviction.ReasonMemoMismatch, Outcome: eviction.OutcomeRepaired}: 1,
		{Reason: eviction.ReasonMemoMismatch, Outcome: eviction.OutcomeHealthy}:  2,
	}; !maps.Equal(got, want) {
		t.Errorf("Reports() = %v, want %v", got, want)
	}

	plain := &eviction.Evictor{Frontend: s.f, Queue: queueCanceler{s.queue}, Store: s.store, Clock: s.clk, Versions: s}
	f, err = plain.ReportCorrupt(s.ctx, q, blockref.ParseMemo(b0), "reader", eviction.ReasonMemoMismatch, "")
	if err != nil || f.Corrupt || !strings.Contains(f.What, "cannot recompute") {
		t.Errorf("a mismatch report to an evictor that cannot recompute: %+v, %v", f, err)
	}
}

// TestMismatchBansBuild (issue 27): a misbuilt worker build computes the
// same wrong values every time, so recomputing its block by the same build
// would loop for ever (caught, quarantined, recomputed, caught). A first
// confirmed mismatch recomputes the block, as a fault of the moment
// (TestReportMismatchConfirmed); the recomputation, by the same build, is
// confirmed wrong again: the build is banned from leasing, the block's
// task quarantined and its entry failed, naming the build, and the audit
// says so; nothing is scheduled. Another build then leases what is
// queued; once an operator releases the block it computes it right. A
// block computed wrong once by one build and recomputed by another is
// never banned for: the second object is right. Before, every confirmed
// mismatch was recomputed, by whichever build, for ever.
func TestMismatchBansBuild(t *testing.T) {
	const misbuilt, good = "0123456789ab go1.26 linux/amd64 v3", "fedcba987654 go1.26 linux/amd64 v1"
	s := newStack(t, 2, 300, eviction.Policy{})
	s.submit("ctr", ctrGraph)
	q := s.input("ctr", "query_ids")
	b0 := blockref.ParseMemo(s.raw[0].ID)
	s.build, s.wrong[misbuilt] = misbuilt, true
	s.work()
	if m := s.memo(q, b0); m.State != matching.MemoReady || m.Build != misbuilt {
		t.Fatalf("entry %+v, want ready, computed by %q", m, misbuilt)
	}
	report := func() eviction.Finding {
		t.Helper()
		f, err := s.ev.ReportCorrupt(s.ctx, q, b0, "reader", eviction.ReasonMemoMismatch, "memo mismatch at row 3")
		if err != nil || !f.Corrupt || f.Repair.AuditID == "" {
			t.Fatalf("the mismatch report: %+v, %v", f, err)
		}
		return f
	}

	// Caught once: recomputed, the build not banned.
	if f := report(); f.Repair.BannedBuild != "" || f.Entry.State != matching.MemoPending {
		t.Fatalf("first confirmed mismatch: %+v, want the block recomputed, no ban", f)
	}
	if _, banned := s.queue.Banned(misbuilt); banned {
		t.Fatal("a build banned for one wrong object")
	}
	if a := s.audit(); len(a) != 1 || !strings.Contains(a[0].Why, misbuilt) {
		t.Errorf("audit %+v, want the build that computed the object named", a)
	}
	// Recomputed by the same build: wrong again.
	if n := s.work(); n != 1 {
		t.Fatalf("%d tasks ran, want the recomputation", n)
	}
	s.clk.Advance(time.Minute) // the audit lists the newest first
	f := report()
	if f.Repair.BannedBuild != misbuilt || f.Entry.State != matching.MemoFailed {
		t.Fatalf("second confirmed mismatch from the same build: %+v, want the build banned and the block failed", f)
	}
	m := s.memo(q, b0)
	if m.State != matching.MemoFailed || !strings.Contains(m.Error, "quarantined (MEMO_MISMATCH)") || !strings.Contains(m.Error, misbuilt) ||
		!strings.Contains(m.Error, "banned") || !strings.Contains(m.Error, "wrong values") {
		t.Errorf("entry %+v, want failed, naming the banned build and what sigd found", m)
	}
	if objs := s.objects(q); slices.Contains(objs, m.Object) {
		t.Errorf("the wrong object %s is still there", m.Object)
	}
	if ban, ok := s.queue.Banned(misbuilt); !ok || !strings.Contains(ban.Reason, b0.String()) || !strings.Contains(ban.Reason, q.String()) {
		t.Errorf("ban %+v %v, want one naming the block and component", ban, ok)
	}
	if _, _, err := s.queue.TryLeaseAs("w", misbuilt); !errors.Is(err, workers.ErrBanned) {
		t.Errorf("the banned build leases: %v", err)
	}
	qs := s.queue.ListQuarantine()
	if len(qs) != 1 || qs[0].ID != (workers.TaskID{Component: q, Block: b0}) || !strings.Contains(qs[0].Err, misbuilt) {
		t.Fatalf("quarantine %+v, want the block's task, naming the build", qs)
	}
	if a := s.audit(); len(a) != 2 || !strings.Contains(a[0].What, "ban worker build") || !strings.Contains(a[0].What, misbuilt) ||
		!strings.Contains(a[0].Why, "banned") || !strings.Contains(a[0].Why, "memo mismatch at row 3") {
		t.Errorf("audit %+v, want the ban and the quarantine", a)
	}
	if got, want := s.ev.Reports(), map[eviction.ReportCount]int64{
		{Reason: eviction.ReasonMemoMismatch, Outcome: eviction.OutcomeRepaired}:    1,
		{Reason: eviction.ReasonMemoMismatch, Outcome: eviction.OutcomeQuarantined}: 1,
	}; !maps.Equal(got, want) {
		t.Errorf("Reports() = %v, want %v", got, want)
	}
	if got := s.ev.Mismatches(); got[q] != 2 {
		t.Errorf("Mismatches() = %v, want 2 for %s", got, q.Short())
	}

	// Not looping: nothing runs until an operator acts.
	s.build = good
	if n := s.work(); n != 0 {
		t.Errorf("%d tasks ran with the block quarantined, want none", n)
	}
	if ok, err := s.queue.Release(workers.TaskID{Component: q, Block: b0}); err != nil || !ok {
		t.Fatalf("release: %v %v", ok, err)
	}
	if n := s.work(); n != 1 {
		t.Fatalf("%d tasks ran after the release, want 1", n)
	}
	if m := s.memo(q, b0); m.State != matching.MemoReady || m.Build != good {
		t.Fatalf("after the release: %+v, want ready, computed by %q", m, good)
	}
	if f, err := s.ev.ReportCorrupt(s.ctx, q, b0, "operator", eviction.ReasonMemoMismatch, "check"); err != nil || f.Corrupt {
		t.Errorf("the object the good build computed: %+v %v, want healthy", f, err)
	}

	// Wrong once by the misbuilt build (banned builds aside: lifted), then
	// recomputed by the good one: right, no second strike.
	if ok, err := s.queue.LiftBan(misbuilt); err != nil || !ok {
		t.Fatalf("lift: %v %v", ok, err)
	}
	b1 := blockref.ParseMemo(s.raw[1].ID)
	if _, err := s.ev.RecomputeBlock(s.ctx, q, b1, "operator", "recompute with the misbuilt build"); err != nil {
		t.Fatal(err)
	}
	s.build = misbuilt
	s.work()
	if f, err := s.ev.ReportCorrupt(s.ctx, q, b1, "reader", eviction.ReasonMemoMismatch, "x"); err != nil || !f.Corrupt || f.Repair.BannedBuild != "" {
		t.Fatalf("a block wrong once: %+v %v, want recomputed", f, err)
	}
	s.build = good
	s.work()
	if f, err := s.ev.ReportCorrupt(s.ctx, q, b1, "reader", eviction.ReasonMemoMismatch, "x"); err != nil || f.Corrupt {
		t.Errorf("recomputed by another build: %+v %v, want healthy", f, err)
	}
	if bans := s.queue.Bans(); len(bans) != 0 {
		t.Errorf("bans %v after one wrong object of the build, want none", bans)
	}
}
