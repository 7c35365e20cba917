package sigd_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/reader"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/catalog"
)

// compactGraph's components are all row-wise (every built-in op is), of
// int64 (stored narrow), list and float types.
const compactGraph = `input q_uni = hash(unigrams(lower(col("query"))), buckets=1000003)
input price = bucketize(col("bid_price"), boundaries=[0.5, 1, 5])
input adv = hash(col("advertiser_id"), buckets=100)
input t_len = length(unigrams(lower(col("ad_title"))))
input q_bi = hash(truncate(ngrams(lower(col("query")), n=2), max=16), buckets=1000003)
`

// labelledMetric is a counter of srv's registry with the given label value.
func labelledMetric(t *testing.T, srv *sigdtest.Server, name, label, value string) float64 {
	t.Helper()
	mfs, err := srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestCompactedBlockConcatenated (issue 28, item 5): three small blocks of
// one window are memoized for a pipeline, then compacted. sigd makes the
// compacted block's entries ready from the parts' columns without a worker
// task (the in-process workers run none after the compaction; the
// concatenation is the only way they become ready), in one pack; a read
// solution names the compacted block with every input ready in that pack,
// each column equal to LIG's over the compacted block byte for byte and a
// reader's SIG batches equal to its LIG batches byte for byte; a snapshot
// pinned before the compaction still reads the parts, whose objects are
// still readable and LIG's.
//
// It fails without the Concatenator (sig_compacted_memo_packs_total never
// moves; if the wait is dropped, the read solution makes the entries
// pending and the workers run five tasks), and if the concatenated columns
// are not the compacted block's (CheckSolution compares them with LIG).
func TestCompactedBlockConcatenated(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Seed: 28})
	parts := w.AddWindow(t, 3, 300)
	runs, wrap := newCounter()
	srv := sigdtest.Start(t, w, sigd.Config{WorkersMin: 1, WorkersMax: 1}, sigd.Options{WrapRunner: wrap})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctr, trainer := srv.SIG(t, "ctr"), srv.SIG(t, "trainer")
	if _, err := ctr.SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 5, compactGraph, w.All())); err != nil {
		t.Fatal(err)
	}
	before := sigdtest.WaitComplete(ctx, t, ctr, "ctr", "p")
	const inputs = 5
	if n := total(runs.snapshot()); n != inputs*len(parts) {
		t.Fatalf("%d memo tasks over the parts, want %d", n, inputs*len(parts))
	}
	ligs := map[string]*sigdtest.LIGOutput{}
	sigdtest.CheckSolution(t, w.Store, w.Blocks, before, compactGraph, ligs)
	pin, err := trainer.PinSnapshot(ctx, &sigv1.PinSnapshotRequest{Name: "ctr:before"})
	if err != nil {
		t.Fatal(err)
	}

	c := w.Compact(t, srv.Catalog(), parts)
	waitFor(t, 30*time.Second, "sigd to concatenate the compacted block's memo entries", func() bool {
		return metricValue(t, srv, "sig_compacted_memo_packs_total") >= 1
	})
	if got := labelledMetric(t, srv, "sig_compacted_memo_entries_total", "outcome", "concatenated"); got != inputs {
		t.Fatalf("%v entries concatenated, want %d", got, inputs)
	}
	if got := labelledMetric(t, srv, "sig_compacted_memo_entries_total", "outcome", "recompute"); got != 0 {
		t.Fatalf("%v entries left to recompute, want 0", got)
	}
	sol := sigdtest.WaitComplete(ctx, t, ctr, "ctr", "p")
	if n := total(runs.snapshot()); n != inputs*len(parts) {
		t.Fatalf("%d memo tasks in all after the compaction, want the %d over the parts: the compacted block's ran", n, inputs*len(parts))
	}
	if s := srv.Queue().Stats(); s.Queued != 0 || s.Leased != 0 {
		t.Fatalf("queue after the compaction: %+v; want nothing queued", s)
	}
	if len(sol.RawBlocks) != 1 || sol.RawBlocks[0].BlockId != c.ID {
		t.Fatalf("solution after the compaction names %d blocks, want the compacted %s", len(sol.RawBlocks), c.ID)
	}
	packs := map[string]bool{}
	for _, in := range sol.Inputs {
		for _, b := range in.Blocks {
			src, raw, ok := block.ParsePackKey(b.MemoObject)
			if !ok || src != "ads" || raw != c.Ref() || b.MemoColumn == "" {
				t.Fatalf("input %s names %s column %q: want a pack of %s", in.Input, b.MemoObject, b.MemoColumn, c.Ref())
			}
			packs[b.MemoObject] = true
		}
	}
	if len(packs) != 1 {
		t.Fatalf("the compacted block's entries name %d packs, want one", len(packs))
	}
	sigdtest.CheckSolution(t, w.Store, w.Blocks, sol, compactGraph, ligs)
	rs, err := reader.NewServer(reader.Config{Store: srv.Store()})
	if err != nil {
		t.Fatal(err)
	}
	sig, lig := unitBytes(ctx, t, rs, sol, false), unitBytes(ctx, t, rs, sol, true)
	if len(sig) != 1 || len(sig[c.ID]) == 0 || !bytes.Equal(sig[c.ID], lig[c.ID]) {
		t.Fatalf("the reader's SIG batches over the compacted block (%d bytes) differ from its LIG batches (%d bytes)", len(sig[c.ID]), len(lig[c.ID]))
	}

	// The snapshot pinned before still reads the parts, ready.
	old, err := ctr.GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: "ctr", Pipeline: "p", Snapshot: pin.GetSnapshot()})
	if err != nil {
		t.Fatal(err)
	}
	if len(old.RawBlocks) != len(parts) || old.RawBlocks[0].BlockId != parts[0].ID {
		t.Fatalf("the pinned solution names %d blocks, want the %d parts", len(old.RawBlocks), len(parts))
	}
	sigdtest.CheckSolution(t, w.Store, w.Blocks, old, compactGraph, ligs)
	if n := total(runs.snapshot()); n != inputs*len(parts) {
		t.Fatalf("%d memo tasks in all, want %d", n, inputs*len(parts))
	}
}

// TestSIGKILLBetweenConcatAndSwitch (issue 28, "What must show": the
// compactor's crash test, memo side): sigd writes a compacted block's pack
// from its parts' columns and is SIGKILLed before the entries name it
// (SIG_TEST_HOLD_CONCAT holds it there). After a restart on the same data
// directory, with no worker at all (--remote-workers, none started), the
// compacted block's entries become ready from a new concatenation: every
// entry names a pack that reads with the readers' own check and LIG's
// bytes; the held pack is named by no entry and is swept; nothing under
// memo/ is stray.
//
// It fails if sigd stores its position in the feed before the entries name
// the pack (the restart does not concatenate again, and with no worker the
// solution never completes), if it names the pack before it is written
// whole, and without the sweep of unnamed packs (the held pack stays).
func TestSIGKILLBetweenConcatAndSwitch(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Seed: 29})
	parts := w.AddWindow(t, 3, 300)
	dir := t.TempDir()
	w.Catalog(t, dir)
	tokPath, toks := sigdtest.WriteTokens(t, t.TempDir())
	bin := sigdtest.BuildCommand(t, "cmd/sigd")
	args := func(extra ...string) []string {
		return append(append([]string{"serve", "--data-dir", dir, "--tokens", tokPath, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
			"--kafka-brokers", strings.Join(w.Kafka.Brokers, ","), "--lease", "2s", "--evict-interval", "1s"}, w.S3Args()...), extra...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const dsl = `input q = hash(unigrams(lower(col("query"))), buckets=1000)
input price = bucketize(col("bid_price"), boundaries=[0.5, 1, 5])
input t_len = length(unigrams(lower(col("ad_title"))))
`
	// The parts memoized by sigd's own workers.
	p := sigdtest.StartProcess(t, bin, args("--workers-min", "1", "--workers-max", "1"))
	c := sigv1.NewSIGClient(sigdtest.Dial(t, p.Addr, toks["ctr"]))
	if _, err := c.SubmitGraph(ctx, sigdtest.Submit("ctr", "crash", 5, dsl, w.All())); err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, in := range sigdtest.WaitComplete(ctx, t, c, "ctr", "crash").Inputs {
		for _, b := range in.Blocks {
			named[b.MemoObject] = true
		}
	}
	p.Kill()

	// The window compacted while sigd is down, as ingestion would.
	cat, err := catalog.Open(filepath.Join(dir, "catalog"))
	if err != nil {
		t.Fatal(err)
	}
	cm := w.Compact(t, cat, parts)
	if err := cat.Close(); err != nil {
		t.Fatal(err)
	}

	// sigd concatenates, writes the pack and is killed before naming it.
	held := filepath.Join(t.TempDir(), "held")
	p = sigdtest.StartProcess(t, bin, args("--remote-workers"), "SIG_TEST_HOLD_CONCAT="+held)
	var packs []string
	waitFor(t, time.Minute, "the concatenated pack written and its switch held", func() bool {
		b, _ := os.ReadFile(held)
		packs = strings.Fields(string(b))
		return len(packs) > 0
	})
	p.Kill()
	for _, pk := range packs {
		if _, err := w.Store.Stat(ctx, pk); err != nil {
			t.Fatalf("held pack %s: %v; want it written whole before the kill", pk, err)
		}
	}

	// A restart with no worker: only the concatenation can make the
	// compacted block's entries ready.
	p = sigdtest.StartProcess(t, bin, args("--remote-workers"))
	c = sigv1.NewSIGClient(sigdtest.Dial(t, p.Addr, toks["ctr"]))
	sol := sigdtest.WaitComplete(ctx, t, c, "ctr", "crash")
	if len(sol.RawBlocks) != 1 || sol.RawBlocks[0].BlockId != cm.ID {
		t.Fatalf("solution names %d blocks, want the compacted %s", len(sol.RawBlocks), cm.ID)
	}
	sigdtest.CheckSolution(t, w.Store, w.Blocks, sol, dsl, map[string]*sigdtest.LIGOutput{})
	checkHeldPacksReplaced(ctx, t, w.Store, sol, packs, named)
}
