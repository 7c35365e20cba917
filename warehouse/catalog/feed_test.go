package catalog_test

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/catalog"
)

// changed is ChangedSince(after, limit), as "<id prefix>@<version>/<seq>"
// per block, and the position it returned.
func changed(t *testing.T, c *catalog.Catalog, after int64, limit int, names map[string]string) ([]string, int64) {
	t.Helper()
	ms, next, err := c.ChangedSince(after, limit)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		out = append(out, fmt.Sprintf("%s@%d/%d", names[m.ID], m.Ref().Version(), m.Seq))
	}
	return out, next
}

func checkChanged(t *testing.T, c *catalog.Catalog, after int64, limit int, names map[string]string, want []string, wantNext int64) {
	t.Helper()
	got, next := changed(t, c, after, limit, names)
	if !reflect.DeepEqual(got, want) || next != wantNext {
		t.Fatalf("ChangedSince(%d, %d) = %v, next %d; want %v, next %d", after, limit, got, next, want, wantNext)
	}
}

// TestChangedSince: the change feed lists, in sequence order, each block
// whose newest version was catalogued after the position given, once, at
// that version; a page ends where the next begins, and the last page's
// position is the current snapshot. Replacing, removing and collecting
// leave no entry behind, and the feed survives a reopen.
func TestChangedSince(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir)
	w := 5 * hour
	a, b := meta(w, 0, 0, 9, 1), meta(w, 1, 0, 9, 1)
	names := map[string]string{a.ID: "a", b.ID: "b"}
	checkChanged(t, c, 0, 0, names, nil, 1) // a new catalog is at snapshot 1
	if err := c.Commit([]block.Meta{a, b}); err != nil {
		t.Fatal(err)
	}
	checkChanged(t, c, 0, 0, names, []string{"a@1/2", "b@1/3"}, 3)
	a2 := next(a, 10, 10, 1, "click")
	a3 := next(a2, 11, 11, 1, "click")
	b2 := next(b, 10, 10, 1)
	for _, m := range []block.Meta{a2, b2, a3} {
		if err := c.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	// a@2 (4) was superseded by a@3 (6): a is listed once, at version 3.
	checkChanged(t, c, 0, 0, names, []string{"b@2/5", "a@3/6"}, 6)
	checkChanged(t, c, 3, 0, names, []string{"b@2/5", "a@3/6"}, 6)
	checkChanged(t, c, 0, 1, names, []string{"b@2/5"}, 5)
	checkChanged(t, c, 5, 1, names, []string{"a@3/6"}, 6)
	checkChanged(t, c, 6, 1, names, nil, 6)
	checkChanged(t, c, 5, 5, names, []string{"a@3/6"}, 6)

	// A version-1 block catalogued again (re-sealed after a crash) is
	// listed at its new place only; a removed one not at all, and the
	// position passes both.
	d := meta(w, 2, 0, 9, 1)
	names[d.ID] = "d"
	for range 2 {
		if err := c.Add(d); err != nil {
			t.Fatal(err)
		}
	}
	checkChanged(t, c, 6, 0, names, []string{"d@1/8"}, 8)
	if err := c.Remove("ads", d.ID); err != nil {
		t.Fatal(err)
	}
	checkChanged(t, c, 6, 0, names, nil, 8)

	// GC removes superseded versions only: the feed is unchanged.
	if gone, err := c.GC(); err != nil || len(gone) != 3 {
		t.Fatalf("GC removed %d versions, %v; want a@1, a@2, b@1", len(gone), err)
	}
	checkChanged(t, c, 0, 0, names, []string{"b@2/5", "a@3/6"}, 8)
	c.Close()
	c = open(t, dir)
	defer c.Close()
	checkChanged(t, c, 0, 0, names, []string{"b@2/5", "a@3/6"}, 8)
	checkChanged(t, c, -3, 1, names, []string{"b@2/5"}, 5)
}

// TestPositions: a follower's position is stored durably, 0 until it stores
// one, and only a snapshot the catalog has handed out can be stored.
func TestPositions(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir)
	if p, err := c.Position("sigd.versions"); err != nil || p != 0 {
		t.Fatalf("position before any: %d, %v", p, err)
	}
	if err := c.Commit([]block.Meta{meta(0, 0, 0, 9, 1), meta(0, 1, 0, 9, 1)}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetPosition("sigd.versions", 3); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		name string
		seq  int64
	}{{"sigd.versions", 4}, {"sigd.versions", -1}, {"a/b", 1}, {"", 1}} {
		if err := c.SetPosition(bad.name, bad.seq); err == nil {
			t.Errorf("SetPosition(%q, %d) succeeded", bad.name, bad.seq)
		}
	}
	c.Close()
	c = open(t, dir)
	defer c.Close()
	if p, err := c.Position("sigd.versions"); err != nil || p != 3 {
		t.Fatalf("position after reopen: %d, %v; want 3", p, err)
	}
	if p, err := c.Position("other"); err != nil || p != 0 {
		t.Fatalf("another follower's position: %d, %v; want 0", p, err)
	}
}

// TestCatalogWithoutSeqIndexIsIndexedAtOpen: a catalog written before the
// change feed has no q\x00 index and no sig.catalog.seqindex; Open builds
// the index, and again when a binary that did not keep it committed since
// (the marker behind the sequence number, the new version unindexed and
// the version it superseded still indexed): the feed is what a catalog
// that always had the index gives.
func TestCatalogWithoutSeqIndexIsIndexedAtOpen(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir)
	w := 9 * hour
	a, b := meta(w, 0, 0, 9, 1), meta(w, 1, 0, 9, 1)
	names := map[string]string{a.ID: "a", b.ID: "b"}
	a2 := next(a, 10, 10, 1, "click")
	for _, ms := range [][]block.Meta{{a, b}, {a2}} {
		if err := c.Commit(ms); err != nil {
			t.Fatal(err)
		}
	}
	want, wantNext := changed(t, c, 0, 0, names)
	if !reflect.DeepEqual(want, []string{"b@1/3", "a@2/4"}) {
		t.Fatalf("feed %v", want)
	}
	c.Close()
	u64 := func(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
	q := func(seq int64) []byte { return append([]byte("q\x00"), u64(seq)...) }
	raw := func(edit func(db *pebble.DB)) {
		t.Helper()
		db, err := pebble.Open(dir, &pebble.Options{Logger: nopLogger{}})
		if err != nil {
			t.Fatal(err)
		}
		edit(db)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Written before the index: none of its keys.
	raw(func(db *pebble.DB) {
		db.DeleteRange([]byte("q\x00"), []byte("q\x01"), pebble.Sync)
		db.Delete([]byte("sig.catalog.seqindex"), pebble.Sync)
	})
	for range 2 { // building it is idempotent
		c = open(t, dir)
		if got, next := changed(t, c, 0, 0, names); !reflect.DeepEqual(got, want) || next != wantNext {
			t.Fatalf("feed of a catalog indexed at open: %v, next %d; want %v, next %d", got, next, want, wantNext)
		}
		c.Close()
	}
	// a@2 committed by a binary that did not keep the index: the index
	// as it was at snapshot 3.
	raw(func(db *pebble.DB) {
		db.Delete(q(4), pebble.Sync)
		db.Set(q(2), []byte("ads\x00"+a.ID), pebble.Sync)
		db.Set([]byte("sig.catalog.seqindex"), u64(3), pebble.Sync)
	})
	c = open(t, dir)
	defer c.Close()
	if got, next := changed(t, c, 0, 0, names); !reflect.DeepEqual(got, want) || next != wantNext {
		t.Fatalf("feed after an unindexed commit: %v, next %d; want %v, next %d", got, next, want, wantNext)
	}
	// And commits keep it from there.
	if err := c.Add(next(b, 10, 10, 1)); err != nil {
		t.Fatal(err)
	}
	checkChanged(t, c, 4, 0, names, []string{"b@2/5"}, 5)
}
