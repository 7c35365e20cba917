package catalog_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sigdata/sig/internal/devenv"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/catalog"
	"github.com/sigdata/sig/warehouse/objstore"
)

// next is version base.Ref().Version()+1 of a block, made by the change records first..last
// of its partition and window; cols are the columns it changed (nil: the row
// set changed, so every column).
func next(base block.Meta, first, last int64, gen int64, cols ...string) block.Meta {
	m := base.Clone()
	m.Seq = 0
	m.Version = base.Ref().Version() + 1
	m.Key = block.RawKey(m.Source, blockref.New(m.ID, m.Version))
	m.Generation = gen
	if m.ColumnVersions == nil {
		m.ColumnVersions = map[string]int64{}
	}
	all := cols
	if all == nil {
		all = []string{"event_id", "event_time", "click"}
	}
	for _, c := range all {
		m.ColumnVersions[c] = m.Version
	}
	ch := block.Change{Version: m.Version, Topic: m.Kafka.Topic, Partition: m.Kafka.Partition, First: first, Last: last, Columns: all}
	if cols == nil {
		ch.LateRows = 1
		m.Rows++
	} else {
		ch.UpdatedRows = 1
	}
	m.Changes = append(m.Changes, ch)
	return m
}

func versionsOf(ms []block.Meta) []int64 {
	var out []int64
	for _, m := range ms {
		out = append(out, m.Ref().Version())
	}
	return out
}

// TestVersionsAndSnapshots: a snapshot keeps seeing the versions it saw,
// while "now" sees the newest; blocks added after a snapshot are absent
// from it; versions follow each other, and a change's Kafka span is covered
// like a block's.
func TestVersionsAndSnapshots(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir)
	w := 100 * hour
	a, b := meta(w, 0, 0, 99, 1), meta(w, 1, 0, 49, 1)
	if err := c.Commit([]block.Meta{a, b}); err != nil {
		t.Fatal(err)
	}
	s1, err := c.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	a2 := next(a, 200, 210, 1, "click")
	if err := c.Add(a2); err != nil {
		t.Fatal(err)
	}
	s2, _ := c.Snapshot()
	cBlock := meta(w, 0, 300, 309, 1)
	a3 := next(a2, 211, 220, 1)
	if err := c.Commit([]block.Meta{cBlock, a3}); err != nil {
		t.Fatal(err)
	}
	s3, _ := c.Snapshot()
	if !(1 <= s1 && s1 < s2 && s2 < s3) {
		t.Fatalf("snapshots %d %d %d do not increase", s1, s2, s3)
	}
	for _, tc := range []struct {
		snap     int64
		ids      []string
		versions []int64
	}{
		{s1, []string{a.ID, b.ID}, []int64{1, 1}},
		{s2, []string{a.ID, b.ID}, []int64{2, 1}},
		{s3, []string{a.ID, cBlock.ID, b.ID}, []int64{3, 1, 1}},
		{0, []string{a.ID, cBlock.ID, b.ID}, []int64{3, 1, 1}},
	} {
		got, err := c.RangeAt("ads", w, w+hour, tc.snap)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ids(got), tc.ids) || !reflect.DeepEqual(versionsOf(got), tc.versions) {
			t.Errorf("RangeAt(snap %d) = %v %v, want %v %v", tc.snap, ids(got), versionsOf(got), tc.ids, tc.versions)
		}
	}
	if got, _ := c.Range("ads", w, w+hour); !reflect.DeepEqual(versionsOf(got), []int64{3, 1, 1}) {
		t.Errorf("Range = versions %v, want the newest", versionsOf(got))
	}
	if m, err := c.GetAt("ads", a.ID, s2); err != nil || m.Ref().Version() != 2 || m.Key != block.RawKey("ads", blockref.New(a.ID, 2)) {
		t.Errorf("GetAt(s2) = version %d %s, %v", m.Ref().Version(), m.Key, err)
	}
	if _, err := c.GetAt("ads", cBlock.ID, s2); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("GetAt of a block added after the snapshot: %v, want ErrNotFound", err)
	}
	vs, err := c.Versions("ads", a.ID)
	if err != nil || !reflect.DeepEqual(versionsOf(vs), []int64{1, 2, 3}) {
		t.Fatalf("Versions = %v, %v", versionsOf(vs), err)
	}
	for i := 1; i < len(vs); i++ {
		if vs[i].Seq <= vs[i-1].Seq {
			t.Errorf("version %d has seq %d after %d", vs[i].Ref().Version(), vs[i].Seq, vs[i-1].Seq)
		}
	}
	if got := vs[2].InputVersion([]string{"query"}); got != 1 {
		t.Errorf("InputVersion of an unchanged column = %d", got)
	}
	if got := vs[1].InputVersion([]string{"query", "click"}); got != 2 {
		t.Errorf("InputVersion of a label read after a label update = %d", got)
	}

	// Out of order, repeated and overlapping versions are refused.
	for name, bad := range map[string]block.Meta{
		"repeated":       next(a2, 400, 401, 1),
		"gap":            next(next(a3, 400, 401, 1), 402, 403, 1),
		"no such block":  next(meta(w, 5, 0, 1, 1), 10, 11, 1),
		"v1 over a v3":   meta(w, 0, 0, 99, 2),
		"overlap change": next(a3, 215, 230, 1),
		"overlap block":  next(a3, 305, 305, 1),
	} {
		err := c.Add(bad)
		want := catalog.ErrConflict
		if name == "overlap change" || name == "overlap block" {
			want = catalog.ErrOverlap
		}
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
	cov, _ := c.Covered("raw.ads", 0)
	want := []catalog.Coverage{{w, 0, 99, a.ID, a.MaxEventTime}, {w, 200, 210, a.ID, a2.MaxEventTime},
		{w, 211, 220, a.ID, a3.MaxEventTime}, {w, 300, 309, cBlock.ID, cBlock.MaxEventTime}}
	if !reflect.DeepEqual(cov, want) {
		t.Fatalf("coverage\n%+v\nwant\n%+v", cov, want)
	}
	// Snapshots, versions and coverage survive a reopen.
	c.Close()
	c = open(t, dir)
	defer c.Close()
	if s, _ := c.Snapshot(); s != s3 {
		t.Fatalf("snapshot after reopen %d, want %d", s, s3)
	}
	if got, _ := c.RangeAt("ads", w, w+hour, s1); !reflect.DeepEqual(versionsOf(got), []int64{1, 1}) {
		t.Fatalf("RangeAt(s1) after reopen = %v", versionsOf(got))
	}
	if err := c.Remove("ads", a.ID); err != nil {
		t.Fatal(err)
	}
	if vs, err := c.Versions("ads", a.ID); !errors.Is(err, catalog.ErrNotFound) || vs != nil {
		t.Fatalf("Versions after Remove: %v %v", vs, err)
	}
	if cov, _ := c.Covered("raw.ads", 0); len(cov) != 1 || cov[0].ID != cBlock.ID {
		t.Fatalf("coverage after Remove: %+v", cov)
	}
}

// TestCatalogBeforeVersionsOpens: a catalog written by the format before
// versions (no sequence key, entries without seq) opens, reads as before,
// is seen whole by the first snapshot, and takes new versions.
func TestCatalogBeforeVersionsOpens(t *testing.T) {
	dir := t.TempDir()
	db, err := pebble.Open(dir, &pebble.Options{Logger: nopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	w := 7 * hour
	old := meta(w, 0, 0, 9, 1)
	v, _ := json.Marshal(old)
	db.Set([]byte("sig.catalog.format"), []byte("1"), pebble.Sync)
	db.Set([]byte("s\x00ads"), []byte(`{"source":"ads","window_length":3600000000}`), pebble.Sync)
	db.Set([]byte("b\x00ads\x00"+old.ID), v, pebble.Sync)
	ok := []byte("o\x00raw.ads\x00")
	ok = binary.BigEndian.AppendUint32(ok, 0)
	ok = binary.BigEndian.AppendUint64(ok, uint64(w)^(1<<63))
	ok = binary.BigEndian.AppendUint64(ok, 0)
	db.Set(ok, []byte(`{"source":"ads","id":"`+old.ID+`","last":9,"max_event_time":1}`), pebble.Sync)
	db.Close()

	c := open(t, dir)
	defer c.Close()
	s1, err := c.Snapshot()
	if err != nil || s1 < 1 {
		t.Fatalf("snapshot %d, %v", s1, err)
	}
	if got, err := c.Get("ads", old.ID); err != nil || !reflect.DeepEqual(got, old) {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if got, _ := c.RangeAt("ads", w, w+hour, s1); !reflect.DeepEqual(ids(got), []string{old.ID}) {
		t.Fatalf("RangeAt(first snapshot) = %v", ids(got))
	}
	if err := c.Add(next(old, 10, 12, 2)); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.RangeAt("ads", w, w+hour, s1); !reflect.DeepEqual(versionsOf(got), []int64{1}) {
		t.Fatalf("RangeAt(first snapshot) after a new version = %v", versionsOf(got))
	}
	if got, _ := c.Range("ads", w, w+hour); !reflect.DeepEqual(versionsOf(got), []int64{2}) {
		t.Fatalf("Range after a new version = %v", versionsOf(got))
	}
	// The block catalogued before versions is in every snapshot and was
	// in no feed; its new version is.
	if got, _, err := c.ChangedSince(0, 0); err != nil || !reflect.DeepEqual(versionsOf(got), []int64{2}) {
		t.Fatalf("ChangedSince(0) = %v, %v; want the new version", versionsOf(got), err)
	}
}

// TestPinsAndGC: GC removes exactly the superseded versions neither a pin
// nor "now" sees, returns them, and keeps pins across a reopen.
func TestPinsAndGC(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir)
	w := 3 * hour
	a, b := meta(w, 0, 0, 9, 1), meta(w, 1, 0, 9, 1)
	if err := c.Commit([]block.Meta{a, b}); err != nil {
		t.Fatal(err)
	}
	pinned, err := c.Pin("epoch-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	a2 := next(a, 10, 10, 1, "click")
	a3 := next(a2, 11, 11, 1, "click")
	b2 := next(b, 10, 10, 1)
	if err := c.Add(a2); err != nil {
		t.Fatal(err)
	}
	sA2, _ := c.Snapshot()
	for _, m := range []block.Meta{a3, b2} {
		if err := c.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	s2, _ := c.Snapshot()
	// A grace horizon keeps what was superseded after it: a@2 went at a@3.
	if gone, err := c.GCUpTo(sA2); err != nil || len(gone) != 0 {
		t.Fatalf("GCUpTo(%d) removed %d versions, %v", sA2, len(gone), err)
	}
	if _, err := c.Pin("epoch-2", s2+1); err == nil {
		t.Fatal("pinned a snapshot in the future")
	}
	if _, err := c.Pin("bad/name", 0); err == nil {
		t.Fatal("pinned under an invalid name")
	}
	keys := func(ms []block.Meta) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Key)
		}
		slices.Sort(out)
		return out
	}
	// epoch-1 sees a@1 and b@1; nothing sees a@2.
	gone, err := c.GC()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{a2.Key}; !reflect.DeepEqual(keys(gone), want) {
		t.Fatalf("GC removed %v, want %v", keys(gone), want)
	}
	if got, _ := c.RangeAt("ads", w, w+hour, pinned); !reflect.DeepEqual(versionsOf(got), []int64{1, 1}) {
		t.Fatalf("the pinned snapshot now reads versions %v", versionsOf(got))
	}
	c.Close()
	c = open(t, dir)
	defer c.Close()
	if pins, err := c.Pins(); err != nil || !reflect.DeepEqual(pins, map[string]int64{"epoch-1": pinned}) {
		t.Fatalf("pins after reopen %v, %v", pins, err)
	}
	if gone, err := c.GC(); err != nil || len(gone) != 0 {
		t.Fatalf("second GC removed %v, %v", keys(gone), err)
	}
	if err := c.Unpin("epoch-1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Unpin("never-pinned"); err != nil {
		t.Fatalf("unpin of a missing pin: %v", err)
	}
	gone, err = c.GC()
	if err != nil {
		t.Fatal(err)
	}
	if want := keys([]block.Meta{a, b}); !reflect.DeepEqual(keys(gone), want) {
		t.Fatalf("GC after unpin removed %v, want %v", keys(gone), want)
	}
	if vs, _ := c.Versions("ads", a.ID); !reflect.DeepEqual(versionsOf(vs), []int64{3}) {
		t.Fatalf("versions left %v", versionsOf(vs))
	}
}

// TestRebuildVersions: a catalog rebuilt from the bucket has every
// catalogued version and the coverage of every change, and leaves out a
// version written by a generation that crashed before cataloguing it,
// whose change records a later generation applied again; GC's objects are
// deleted by DeleteObjects.
func TestRebuildVersions(t *testing.T) {
	m := devenv.NewMinIO(t)
	store := m.NewStore(t, objstore.Config{Bucket: "warehouse"})
	ctx := context.Background()
	orig := open(t, filepath.Join(t.TempDir(), "orig"))
	defer orig.Close()
	write := func(mm block.Meta, catalogue bool) block.Meta {
		t.Helper()
		rec := smallRecord(int(mm.Rows), mm.WindowStart+5)
		defer rec.Release()
		full, err := block.Write(ctx, store, mm, rec)
		if err != nil {
			t.Fatal(err)
		}
		if catalogue {
			if err := orig.Add(full); err != nil {
				t.Fatal(err)
			}
		}
		return full
	}
	w := 50 * hour
	a := write(meta(w, 0, 0, 99, 1), true)
	b := write(meta(w, 0, 100, 199, 1), true)
	a2 := write(next(a, 200, 210, 1, "click"), true)
	// Generation 1 crashed after writing b@2 from changes 211-230; generation
	// 2 applied 211-220 to a (a@3) and had not yet reached b.
	write(next(b, 211, 230, 1), false)
	write(next(a2, 211, 220, 2), true)

	want, _ := orig.Blocks("ads")
	dir := filepath.Join(t.TempDir(), "rebuilt")
	rebuilt, rep, err := catalog.Rebuild(ctx, store, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer rebuilt.Close()
	got, _ := rebuilt.Blocks("ads")
	if !reflect.DeepEqual(noSeqs(got), noSeqs(want)) {
		t.Fatalf("rebuilt catalog:\n%+v\nwant\n%+v", noSeqs(got), noSeqs(want))
	}
	if vs, _ := rebuilt.Versions("ads", a.ID); !reflect.DeepEqual(versionsOf(vs), []int64{1, 2, 3}) {
		t.Fatalf("rebuilt versions of a: %v", versionsOf(vs))
	}
	// Its feed has every block once, at its newest version, in its new
	// sequence.
	if fed, _, err := rebuilt.ChangedSince(0, 0); err != nil || len(fed) != 2 || fed[0].ID != b.ID || fed[1].ID != a.ID || fed[1].Ref().Version() != 3 {
		t.Fatalf("rebuilt feed: %v versions %v, %v", ids(fed), versionsOf(fed), err)
	}
	ca, _ := orig.Covered("raw.ads", 0)
	cb, _ := rebuilt.Covered("raw.ads", 0)
	if !reflect.DeepEqual(ca, cb) {
		t.Fatalf("coverage differs:\n%+v\n%+v", ca, cb)
	}
	if rep.Blocks != 2 || rep.Versions != 2 || !reflect.DeepEqual(rep.Superseded, []string{block.RawKey("ads", blockref.New(b.ID, 2))}) {
		t.Fatalf("report %+v", rep)
	}

	gone, err := catalog.CollectGarbage(ctx, orig, store)
	if err != nil {
		t.Fatal(err)
	}
	if len(gone) != 2 {
		t.Fatalf("GC removed %d versions, want a@1 and a@2", len(gone))
	}
	for _, g := range gone {
		if _, err := store.Stat(ctx, g.Key); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("object %s of a collected version: %v, want not found", g.Key, err)
		}
	}
	if _, err := store.Stat(ctx, block.RawKey("ads", blockref.New(a.ID, 3))); err != nil {
		t.Errorf("newest version's object: %v", err)
	}

	// Rebuilt after GC deleted a@1 and a@2, the catalog has a at version 3
	// as its first, covering every record a's footer says it holds.
	if err := store.Delete(ctx, block.RawKey("ads", blockref.New(b.ID, 2))); err != nil { // the orphan
		t.Fatal(err)
	}
	after, rep, err := catalog.Rebuild(ctx, store, filepath.Join(t.TempDir(), "after-gc"))
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	got, _ = after.Blocks("ads")
	want, _ = orig.Blocks("ads")
	if !reflect.DeepEqual(noSeqs(got), noSeqs(want)) || rep.Blocks != 1 || rep.Versions != 1 || len(rep.Superseded) != 0 {
		t.Fatalf("rebuilt after GC: %v versions %v, report %+v", ids(got), versionsOf(got), rep)
	}
	spans := func(cs []catalog.Coverage) [][3]int64 {
		var out [][3]int64
		for _, c := range cs {
			out = append(out, [3]int64{c.Window, c.First, c.Last})
		}
		return out
	}
	ca, _ = orig.Covered("raw.ads", 0)
	cb, _ = after.Covered("raw.ads", 0)
	if !reflect.DeepEqual(spans(ca), spans(cb)) {
		t.Fatalf("coverage after GC and rebuild:\n%v\nwant\n%v", spans(cb), spans(ca))
	}
}
