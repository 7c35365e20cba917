package ingest_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/catalog"
	"github.com/sigdata/sig/warehouse/compact"
	"github.com/sigdata/sig/warehouse/gen"
	"github.com/sigdata/sig/warehouse/ingest"
	"github.com/sigdata/sig/warehouse/objstore"
)

// runIngesterOn runs an in-process ingester on catalog c (which the test
// reads meanwhile) until stop is called.
func runIngesterOn(t *testing.T, e *env, c *catalog.Catalog, mod func(*ingest.Config)) (stop func() ingest.Stats) {
	t.Helper()
	cfg := ingest.Config{Brokers: e.kafka.Brokers, Store: e.store, Catalog: c, SealAfter: time.Minute, InstanceID: "test-0"}
	mod(&cfg)
	in, err := ingest.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	var st ingest.Stats
	stopped := false
	stop = func() ingest.Stats {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("ingester: %v", err)
			}
			st = in.Stats()
		}
		return st
	}
	t.Cleanup(func() { stop() })
	return stop
}

// Blocks are cut by their estimated encoded size: with no row bound and a
// seal-after longer than the test, every block but each window's last is
// within a fifth of the target, and every event is in one block.
func TestSealBySize(t *testing.T) {
	e := newEnv(t, 1)
	const n = 30_000
	const target = 256 << 10
	e.produce(t, gen.Config{Seed: 21, EventsPerSecond: 10, LateFraction: -1}, n) // 50 min: one window
	c, err := catalog.Open(e.catalogDir)
	if err != nil {
		t.Fatal(err)
	}
	// The last buffer is sealed by SealAfter, ten seconds after its first
	// row: the others fill up in a fraction of that.
	stop := runIngesterOn(t, e, c, func(cfg *ingest.Config) {
		cfg.BlockBytes, cfg.CompactQuiet, cfg.SealAfter = target, -1, 10*time.Second
	})
	e.waitCaughtUp(t, "sig-ingest-ads", time.Minute, nil)
	stop()
	blocks, err := c.Blocks("ads")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	verifyExactlyOnce(t, e.store, e.catalogDir, 1, n)
	if len(blocks) < 5 {
		t.Fatalf("%d blocks of %d events at %d bytes a block", len(blocks), n, target)
	}
	for _, m := range blocks[:len(blocks)-1] {
		if m.Size < target*4/5 || m.Size > target*6/5 {
			t.Errorf("block %s: %d bytes, %d rows; want %d bytes within 20%%", m.ID, m.Size, m.Rows, target)
		}
	}
	t.Logf("%d blocks, the first %d rows and %d bytes", len(blocks), blocks[0].Rows, blocks[0].Size)
}

// The small blocks of every closed window are compacted, once the window
// is quiet, into blocks of at most the target, each holding its parts'
// rows in order byte for byte; the open window is not compacted; every
// event stays in exactly one block. A snapshot pinned before the
// compaction keeps listing the parts, whose objects stay readable while
// GC runs, until it is unpinned; then GC deletes them.
func TestCompactQuietWindows(t *testing.T) {
	e := newEnv(t, 2)
	const n = 20_000
	const target = 64 << 10
	// 100 events a second, 20-second windows: 10 windows of about 1,000
	// events per partition, sealed every 100 rows (small blocks of about
	// 13 KiB: a window's make about two targets); the last window stays
	// open.
	e.produce(t, gen.Config{Seed: 22, EventsPerSecond: 100, LateFraction: -1}, n)
	c, err := catalog.Open(e.catalogDir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	small := func(cfg *ingest.Config) {
		cfg.RowsPerBlock, cfg.Window, cfg.Lateness, cfg.SealAfter = 100, 20*time.Second, time.Second, 2*time.Second
		cfg.CompactBytes, cfg.CompactEvery = target, 100*time.Millisecond
		cfg.GCInterval, cfg.GCGrace = 200*time.Millisecond, -1
	}
	stop := runIngesterOn(t, e, c, func(cfg *ingest.Config) { small(cfg); cfg.CompactQuiet = -1 })
	e.waitCaughtUp(t, "sig-ingest-ads", time.Minute, nil)
	stop()
	before, err := c.Blocks("ads")
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := c.Pin("trainer", 0)
	if err != nil {
		t.Fatal(err)
	}

	// A restart with compaction on: the stream is idle, and every closed
	// window is compacted after a second of quiet.
	stop = runIngesterOn(t, e, c, func(cfg *ingest.Config) { small(cfg); cfg.CompactQuiet = time.Second })
	lastWindow := before[len(before)-1].WindowStart
	deadline := time.Now().Add(time.Minute)
	for !compacted(t, c, target, lastWindow) {
		if time.Now().After(deadline) {
			t.Fatal("closed windows not compacted after a minute")
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(time.Second) // GC rounds with the pin
	st := stop()
	after, err := c.Blocks("ads")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d blocks before, %d after: %d compactions of %d blocks", len(before), len(after), st.Compactions, st.CompactedBlocks)
	if st.Compactions == 0 || len(after) >= len(before)/2 {
		t.Fatalf("%d blocks before, %d after; stats %+v", len(before), len(after), st)
	}
	verifyExactlyOnceIn(t, e.store, c, 1, n)

	ctx := context.Background()
	var parts []block.Meta
	for _, m := range after {
		if m.WindowStart == lastWindow && len(m.Parts) > 0 {
			t.Errorf("block %s of the open window was compacted", m.ID)
		}
		if len(m.Parts) == 0 {
			continue
		}
		if m.Size > target {
			t.Errorf("compacted block %s: %d bytes, target %d", m.ID, m.Size, target)
		}
		// Its rows are its parts' (read at the versions it names), in
		// order, column for column.
		_, got, err := block.ReadBlock(ctx, e.store, m.Key)
		if err != nil {
			t.Fatal(err)
		}
		var recs []arrow.Record
		for _, p := range m.Parts {
			pm, err := c.GetAt("ads", p.ID, pinned)
			if err != nil || pm.Ref() != p.Ref() {
				t.Fatalf("part %s at the pinned snapshot: %s, %v", p.ID, pm.Ref(), err)
			}
			parts = append(parts, pm)
			_, rec, err := block.ReadBlock(ctx, e.store, pm.Key)
			if err != nil {
				t.Fatalf("part %s while pinned: %v", pm.Key, err)
			}
			recs = append(recs, rec)
		}
		want, err := compact.Concat(recs)
		if err != nil {
			t.Fatal(err)
		}
		if !array.RecordEqual(got, want) {
			t.Fatalf("compacted block %s differs from its parts", m.ID)
		}
		got.Release()
		want.Release()
		for _, r := range recs {
			r.Release()
		}
	}
	// The pinned snapshot lists exactly the blocks it listed before.
	old, err := c.RangeAt("ads", before[0].WindowStart, lastWindow+int64(20*time.Second/time.Microsecond), pinned)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(old), ids(before)) {
		t.Fatalf("the pinned snapshot lists %d blocks, %d before the compaction", len(old), len(before))
	}

	// Unpinned, GC deletes the parts' objects.
	if err := c.Unpin("trainer"); err != nil {
		t.Fatal(err)
	}
	stop = runIngesterOn(t, e, c, func(cfg *ingest.Config) { small(cfg); cfg.CompactQuiet = time.Second })
	deadline = time.Now().Add(30 * time.Second)
	for _, p := range parts {
		for {
			_, err := e.store.Stat(ctx, p.Key)
			if errors.Is(err, objstore.ErrNotFound) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("part %s still stored after the unpin: %v", p.Key, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	stop()
	verifyExactlyOnceIn(t, e.store, c, 1, n)
}

// compacted reports whether every window but lastWindow has nothing left to
// compact.
func compacted(t *testing.T, c *catalog.Catalog, target int64, lastWindow int64) bool {
	t.Helper()
	bs, err := c.Blocks("ads")
	if err != nil {
		t.Fatal(err)
	}
	type pw struct {
		p int32
		w int64
	}
	by := map[pw][]block.Meta{}
	for _, m := range bs {
		if m.WindowStart != lastWindow {
			k := pw{m.Kafka.Partition, m.WindowStart}
			by[k] = append(by[k], m)
		}
	}
	for _, ms := range by {
		slicesSortByFirst(ms)
		if len(compact.Plan(ms, target)) > 0 {
			return false
		}
	}
	return len(by) > 0
}

func slicesSortByFirst(ms []block.Meta) {
	slices.SortFunc(ms, func(a, b block.Meta) int { return int(a.Kafka.First - b.Kafka.First) })
}

// A real ingesting process (`sigctl ingest`) is SIGKILLed three times in
// the middle of a compaction, after it wrote the compacted block's object
// and before its catalog batch (SIG_TEST_COMPACT_DELAY holds it there),
// and compaction then completes after a restart. Every block the catalog
// names, now and at a snapshot pinned before the kills, is a readable
// object with the right bytes: every event once, each compacted block its
// parts' rows; the object the kills orphaned is either rewritten by the
// compaction that committed or left out by a catalog rebuilt from the
// bucket, which equals the ingester's.
func TestCompactionKilledMidWindow(t *testing.T) {
	e := newEnv(t, 2)
	sigctl(t)
	const n = 20_000
	const target = 64 << 10
	e.produce(t, gen.Config{Seed: 23, EventsPerSecond: 100, LateFraction: -1}, n)
	args := []string{"--window", "20s", "--lateness", "1s", "--rows-per-block", "100", "--seal-after", "2s",
		"--compact-bytes", "65536", "--compact-quiet", "1s", "--compact-every", "100ms", "--gc-interval", "-1s"}

	// Ingest without compaction, and pin the snapshot of the small
	// blocks, as a training epoch would.
	p := e.startIngestProc(t, append(args, "--compact-quiet", "-1s")...)
	e.waitCaughtUp(t, "sig-ingest-ads", time.Minute, p.alive)
	p.signal(t, syscall.SIGTERM)
	c, err := catalog.Open(e.catalogDir)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := c.Blocks("ads")
	pinned, err := c.Pin("trainer", 0)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()

	ctx := context.Background()
	for kill := 1; kill <= 3; kill++ {
		p := e.startIngestProcEnv(t, []string{"SIG_TEST_COMPACT_DELAY=1m"}, args...)
		deadline := time.Now().Add(time.Minute)
		const marker = "compaction written, waiting before its catalog batch"
		for !strings.Contains(p.out.String(), marker) {
			if err := p.alive(); err != nil {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("no compaction within a minute:\n%s", p.out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		p.signal(t, syscall.SIGKILL)
		out := p.out.String()
		_, rest, _ := strings.Cut(out, marker)
		_, id, _ := strings.Cut(rest, "block=")
		id, _, _ = strings.Cut(id, " ")
		// Every block the catalog names, now and at the pinned
		// snapshot, is readable.
		c, err := catalog.Open(e.catalogDir)
		if err != nil {
			t.Fatal(err)
		}
		now, _ := c.Blocks("ads")
		old, _ := c.RangeAt("ads", before[0].WindowStart, before[len(before)-1].WindowStart+1, pinned)
		for _, m := range append(now, old...) {
			if _, err := block.ReadColumns(ctx, e.store, m, nil); err != nil {
				t.Fatalf("kill %d (in compaction %s): catalogued block %s: %v", kill, id, m.ID, err)
			}
		}
		c.Close()
		key := block.RawKey("ads", blockref.New(id, 1))
		if _, err := e.store.Stat(ctx, key); err != nil {
			t.Fatalf("kill %d: the compacted object %s is not there: %v", kill, key, err)
		}
		t.Logf("kill %d: after writing %s, before its catalog batch; %d blocks catalogued, all readable", kill, id, len(now))
	}

	// Restarted without the delay, compaction completes.
	c, err = catalog.Open(e.catalogDir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The kills left no block of a compaction in the catalog.
	if now, _ := c.Blocks("ads"); !slices.Equal(ids(now), ids(before)) {
		t.Fatalf("after the kills the catalog lists %d blocks, %d before", len(now), len(before))
	}
	stop := runIngesterOn(t, e, c, func(cfg *ingest.Config) {
		cfg.InstanceID = "ingest-0" // the killed process's static membership: its partitions at once
		cfg.RowsPerBlock, cfg.Window, cfg.Lateness, cfg.SealAfter = 100, 20*time.Second, time.Second, 2*time.Second
		cfg.CompactBytes, cfg.CompactQuiet, cfg.CompactEvery, cfg.GCInterval = target, time.Second, 100*time.Millisecond, -1
	})
	lastWindow := before[len(before)-1].WindowStart
	deadline := time.Now().Add(time.Minute)
	for !compacted(t, c, target, lastWindow) {
		if time.Now().After(deadline) {
			t.Fatal("closed windows not compacted a minute after the restart")
		}
		time.Sleep(200 * time.Millisecond)
	}
	st := stop()
	t.Logf("after the restart: %d compactions of %d blocks", st.Compactions, st.CompactedBlocks)

	// Every block, now and at the pinned snapshot: readable, every event
	// once, each compacted block its parts' rows.
	after := verifyExactlyOnceIn(t, e.store, c, 1, n)
	for _, m := range after {
		if len(m.Parts) == 0 {
			continue
		}
		_, got, err := block.ReadBlock(ctx, e.store, m.Key)
		if err != nil {
			t.Fatal(err)
		}
		var recs []arrow.Record
		for _, part := range m.Parts {
			_, rec, err := block.ReadBlock(ctx, e.store, block.RawKey("ads", part.Ref()))
			if err != nil {
				t.Fatalf("part %s of %s: %v", part.ID, m.ID, err)
			}
			recs = append(recs, rec)
		}
		want, err := compact.Concat(recs)
		if err != nil {
			t.Fatal(err)
		}
		if !array.RecordEqual(got, want) {
			t.Fatalf("compacted block %s differs from its parts", m.ID)
		}
	}
	old, err := c.RangeAt("ads", before[0].WindowStart, lastWindow+int64(20*time.Second/time.Microsecond), pinned)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(old), ids(before)) {
		t.Fatalf("the pinned snapshot lists %d blocks, %d before", len(old), len(before))
	}
	for _, m := range old {
		if _, err := block.ReadColumns(ctx, e.store, m, nil); err != nil {
			t.Fatalf("block %s at the pinned snapshot: %v", m.ID, err)
		}
	}

	// The bucket alone rebuilds the same catalog.
	rebuilt, rep, err := catalog.Rebuild(ctx, e.store, filepath.Join(t.TempDir(), "rebuilt"))
	if err != nil {
		t.Fatal(err)
	}
	defer rebuilt.Close()
	got, _ := rebuilt.Blocks("ads")
	if !reflect.DeepEqual(noSeqs(got), noSeqs(after)) {
		t.Fatalf("rebuilt catalog has %d blocks, the ingester's %d, or they differ (report %+v)", len(got), len(after), rep)
	}
}
