package catalog_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"

	"github.com/sigdata/sig/internal/devenv"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/catalog"
	"github.com/sigdata/sig/warehouse/compact"
	"github.com/sigdata/sig/warehouse/objstore"
)

// compacted is the compacted block of parts as the compactor makes it,
// without an object (rows and columns as block.Write would set them).
func compacted(t *testing.T, gen int64, parts ...block.Meta) block.Meta {
	t.Helper()
	m, err := compact.Meta(parts, gen)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		m.Rows += p.Rows
	}
	m.Format, m.MinEventTime, m.MaxEventTime = 1, parts[0].MinEventTime, parts[0].MaxEventTime
	m.Columns = []block.Column{{Name: "event_id", Type: "int64"}, {Name: "event_time", Type: "int64"}, {Name: "click", Type: "int64"}}
	return m
}

func withColumns(m block.Meta) block.Meta {
	m.Columns = []block.Column{{Name: "event_id", Type: "int64"}, {Name: "event_time", Type: "int64"}, {Name: "click", Type: "int64"}}
	return m
}

// TestCompactSnapshotsAndGC: a compaction is one batch: after it "now" and
// every later snapshot list the compacted block and not its parts, a
// snapshot pinned before it still reads the parts at the versions it saw,
// the parts' coverage names the compacted block, a part can get no new
// version, and GC collects the parts' versions only once the pin is gone,
// keeping their tombstones.
func TestCompactSnapshotsAndGC(t *testing.T) {
	c := open(t, t.TempDir())
	defer c.Close()
	w := 100 * hour
	a, b, d := withColumns(meta(w, 0, 0, 99, 1)), withColumns(meta(w, 0, 100, 149, 1)), withColumns(meta(w, 0, 150, 199, 1))
	other := withColumns(meta(w, 1, 0, 99, 1))
	for _, m := range []block.Meta{a, b, d, other} {
		if err := c.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	a2 := next(a, 300, 310, 1, "click") // a label update after the window's events
	if err := c.Add(a2); err != nil {
		t.Fatal(err)
	}
	before, _ := c.Snapshot()
	if _, err := c.Pin("trainer", before); err != nil {
		t.Fatal(err)
	}
	covBefore, _ := c.Covered("raw.ads", 0)

	// A compaction that read a before its update is refused, and changes
	// nothing.
	if err := c.Compact(compacted(t, 2, a, b, d)); !errors.Is(err, catalog.ErrConflict) {
		t.Fatalf("compaction of a changed part: %v, want ErrConflict", err)
	}
	if s, _ := c.Snapshot(); s != before {
		t.Fatalf("a refused compaction moved the snapshot from %d to %d", before, s)
	}
	cm := compacted(t, 2, a2, b, d)
	if err := c.Compact(cm); err != nil {
		t.Fatal(err)
	}
	if err := c.Compact(cm); !errors.Is(err, catalog.ErrConflict) {
		t.Fatalf("the same compaction again: %v, want ErrConflict", err)
	}

	now, _ := c.RangeAt("ads", w, w+hour, 0)
	if got, want := ids(now), []string{other.ID, cm.ID}; !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("now: %v, want %v", got, want)
	}
	old, _ := c.RangeAt("ads", w, w+hour, before)
	if got, want := ids(old), []string{a.ID, b.ID, d.ID, other.ID}; !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("pinned snapshot: %v, want %v", got, want)
	}
	for _, m := range old {
		if m.ID == a.ID && m.Ref() != a2.Ref() {
			t.Fatalf("pinned snapshot reads a at %s, want %s", m.Ref(), a2.Ref())
		}
	}
	if got, _ := c.GetAt("ads", a.ID, before); got.Ref() != a2.Ref() {
		t.Fatalf("GetAt the pinned snapshot: %s", got.Ref())
	}
	tomb, err := c.Get("ads", a.ID)
	if err != nil || !tomb.IsTombstone() || tomb.CompactedInto != cm.ID || tomb.Rows != 0 || tomb.Key != "" || tomb.Ref().Version() != 3 {
		t.Fatalf("a now: %+v, %v; want a tombstone naming %s", tomb, err, cm.ID)
	}
	if bs, _ := c.Blocks("ads"); !slices.Equal(ids(bs), []string{cm.ID, other.ID}) && !slices.Equal(ids(bs), []string{other.ID, cm.ID}) {
		t.Fatalf("Blocks lists %v", ids(bs))
	}
	// The same records are covered, by the compacted block.
	covAfter, _ := c.Covered("raw.ads", 0)
	if len(covAfter) != len(covBefore) {
		t.Fatalf("coverage %+v, before %+v", covAfter, covBefore)
	}
	for i := range covAfter {
		if covAfter[i].First != covBefore[i].First || covAfter[i].Last != covBefore[i].Last || covAfter[i].ID != cm.ID {
			t.Fatalf("coverage %+v, before %+v", covAfter, covBefore)
		}
	}
	if err := c.Add(withColumns(meta(w, 0, 120, 130, 3))); !errors.Is(err, catalog.ErrOverlap) {
		t.Fatalf("a block over compacted records: %v, want ErrOverlap", err)
	}
	// A change buffer that read the part before the compaction cannot
	// make a version of it.
	if err := c.Add(next(b, 400, 401, 3, "click")); !errors.Is(err, catalog.ErrConflict) {
		t.Fatalf("a version of a compacted part: %v, want ErrConflict", err)
	}
	// The compacted block changes like any block.
	cm2 := next(cm, 500, 510, 3, "click")
	cm2.Seq = 0
	if err := c.Add(cm2); err != nil {
		t.Fatal(err)
	}
	fed, _, _ := c.ChangedSince(before, 0)
	if got := ids(fed); !slices.Contains(got, a.ID) || !slices.Contains(got, cm.ID) || len(got) != 4 {
		t.Fatalf("feed after the compaction: %v", got)
	}

	// GC keeps what the pin sees; after the unpin it collects the parts'
	// versions (objects to delete) and keeps their tombstones.
	// (The pin sees neither a@1, superseded before it, nor the compacted
	// block's first version, superseded by cm2 since.)
	if gone, err := c.GC(); err != nil || !slices.Equal(slices.Sorted(slices.Values(keysOf(gone))), slices.Sorted(slices.Values([]string{a.Key, cm.Key}))) {
		t.Fatalf("GC with the pin: %v %v, want a@1 and the compacted block's version 1", keysOf(gone), err)
	}
	if err := c.Unpin("trainer"); err != nil {
		t.Fatal(err)
	}
	gone, err := c.GC()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{a2.Key, b.Key, d.Key}
	if got := keysOf(gone); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("GC after the unpin removed %v, want %v", got, want)
	}
	if m, err := c.Get("ads", b.ID); err != nil || !m.IsTombstone() {
		t.Fatalf("b's tombstone after GC: %+v %v", m, err)
	}
	if old, _ := c.RangeAt("ads", w, w+hour, before); len(old) != 1 || old[0].ID != other.ID {
		t.Fatalf("the unpinned snapshot after GC lists %v", ids(old))
	}
}

func keysOf(ms []block.Meta) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Key)
	}
	return out
}

// TestRebuildCompacted: a catalog rebuilt from the bucket has the
// compacted block and not its parts (whose objects GC has not deleted
// yet), with the same coverage, and leaves out a compacted object whose
// catalog batch never happened: one a crash orphaned (a part was changed
// after it was written), and one an equal-generation compaction lost.
func TestRebuildCompacted(t *testing.T) {
	m := devenv.NewMinIO(t)
	store := m.NewStore(t, objstore.Config{Bucket: "warehouse"})
	ctx := context.Background()
	orig := open(t, filepath.Join(t.TempDir(), "orig"))
	defer orig.Close()
	write := func(mm block.Meta) block.Meta {
		t.Helper()
		var rec arrow.Record
		if len(mm.Parts) == 0 {
			rec = smallRecord(int(mm.Rows), mm.WindowStart+5)
		} else {
			var recs []arrow.Record
			for _, p := range mm.Parts {
				recs = append(recs, smallRecord(int(p.Rows), mm.WindowStart+5))
			}
			var err error
			if rec, err = compact.Concat(recs); err != nil {
				t.Fatal(err)
			}
		}
		defer rec.Release()
		full, err := block.Write(ctx, store, mm, rec)
		if err != nil {
			t.Fatal(err)
		}
		return full
	}
	add := func(mm block.Meta) block.Meta {
		t.Helper()
		full := write(mm)
		if err := orig.Add(full); err != nil {
			t.Fatal(err)
		}
		return full
	}
	w := 70 * hour
	a := add(meta(w, 0, 0, 9, 1))
	b := add(meta(w, 0, 10, 19, 1))
	d := add(meta(w, 0, 20, 29, 1))
	e := add(meta(w, 0, 30, 39, 1))
	// A crashed compaction of e and f: f changed after it (f@2), so its
	// batch was never committed.
	f := add(meta(w, 0, 40, 49, 1))
	orphan, _ := compact.Meta([]block.Meta{e, f}, 1)
	write(orphan)
	add(next(f, 50, 52, 2, "click"))
	// Generation 2 compacts a, b and d.
	cmeta, _ := compact.Meta([]block.Meta{a, b, d}, 2)
	cm := write(cmeta)
	if err := orig.Compact(cm); err != nil {
		t.Fatal(err)
	}
	if rec, err := block.ReadColumns(ctx, store, cm, nil); err != nil || rec.NumRows() != 30 {
		t.Fatalf("compacted object: %v", err)
	}

	want, _ := orig.Blocks("ads")
	rebuilt, rep, err := catalog.Rebuild(ctx, store, filepath.Join(t.TempDir(), "rebuilt"))
	if err != nil {
		t.Fatal(err)
	}
	defer rebuilt.Close()
	got, _ := rebuilt.Blocks("ads")
	if !reflect.DeepEqual(noSeqs(got), noSeqs(want)) {
		t.Fatalf("rebuilt catalog:\n%v\nwant\n%v", ids(got), ids(want))
	}
	ca, _ := orig.Covered("raw.ads", 0)
	cb, _ := rebuilt.Covered("raw.ads", 0)
	if !reflect.DeepEqual(ca, cb) {
		t.Fatalf("coverage differs:\n%+v\n%+v", ca, cb)
	}
	wantSup := []string{a.Key, b.Key, d.Key, orphan.Key}
	slices.Sort(wantSup)
	if !slices.Equal(rep.Superseded, wantSup) {
		t.Fatalf("superseded %v, want %v", rep.Superseded, wantSup)
	}
}
