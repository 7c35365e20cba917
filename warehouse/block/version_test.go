package block_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// TestVersionKeys: version 1 keeps today's key, later versions get their
// own, and keys parse back to (source, id, version).
func TestVersionKeys(t *testing.T) {
	id := "20260101T000000Z-p00003-00000000000000000001-00000000000000000009"
	for _, tc := range []struct {
		v    int64
		want string
	}{
		{0, "raw/ads/" + id + ".arrow"},
		{1, "raw/ads/" + id + ".arrow"},
		{2, "raw/ads/" + id + ".v2.arrow"},
		{12, "raw/ads/" + id + ".v12.arrow"},
	} {
		key := block.RawKey("ads", blockref.New(id, tc.v))
		if key != tc.want {
			t.Errorf("RawKey(version %d) = %s, want %s", tc.v, key, tc.want)
		}
		src, ref, ok := block.ParseRawKey(key)
		if !ok || src != "ads" || ref != blockref.New(id, tc.v) {
			t.Errorf("ParseRawKey(%s) = %s %#v %v", key, src, ref, ok)
		}
	}
	// Ids that merely look versioned are version-1 ids.
	// (warehouse/blockref's tests hold the rest of the parser.)
	for _, s := range []string{"x.v1", "x.v02", "x.v", "x.va", "x.v99999999999999999999"} {
		if _, ref, ok := block.ParseRawKey("raw/ads/" + s + ".arrow"); !ok || ref != blockref.New(s, 1) {
			t.Errorf("ParseRawKey of %q = %#v", s, ref)
		}
	}
}

// TestVersionFields: a version-1 block's object is byte for byte what it was
// before versions (no version fields in the footer); a later version's
// footer carries its version, column versions and changes, and
// InputVersion reads them.
func TestVersionFields(t *testing.T) {
	rec := testRecord(10)
	defer rec.Release()
	m := testMeta()
	v1, _, err := block.Encode(m, rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"version"`, `"column_versions"`, `"changes"`, `"seq"`} {
		if bytes.Contains(v1, []byte(field)) {
			t.Errorf("a version-1 footer holds %s", field)
		}
	}
	m2 := m
	m2.Version = 3
	m2.Key = block.RawKey(m.Source, blockref.New(m.ID, 3))
	m2.ColumnVersions = map[string]int64{"query": 2, "price": 3}
	m2.Changes = []block.Change{
		{Version: 2, Topic: "raw.ads", Partition: 3, First: 100, Last: 120, UpdatedRows: 4, Columns: []string{"query"}},
		{Version: 3, Topic: "raw.ads", Partition: 3, First: 121, Last: 130, UpdatedRows: 1, Columns: []string{"price"}},
	}
	m2.Seq = 99 // the catalog's, never the footer's
	data, enc, err := block.Encode(m2, rec)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := block.Decode(m2.Key, data)
	if err != nil {
		t.Fatal(err)
	}
	enc.Seq = 0
	if !reflect.DeepEqual(got, enc) {
		t.Fatalf("decoded footer\n%+v\nwant\n%+v", got, enc)
	}
	for _, tc := range []struct {
		cols []string
		want int64
	}{{nil, 1}, {[]string{"event_id", "tokens"}, 1}, {[]string{"query"}, 2}, {[]string{"query", "price", "ids"}, 3}} {
		if v := got.InputVersion(tc.cols); v != tc.want {
			t.Errorf("InputVersion(%v) = %d, want %d", tc.cols, v, tc.want)
		}
	}
	bad := m2
	bad.ColumnVersions = map[string]int64{"query": 4}
	if _, _, err := block.Encode(bad, rec); err == nil {
		t.Error("a column version above the block's was accepted")
	}
	c := got.Clone()
	c.ColumnVersions["query"] = 7
	c.Changes[0].Columns[0] = "scribbled"
	if got.ColumnVersions["query"] != 2 || got.Changes[0].Columns[0] != "query" {
		t.Error("Clone shares maps or slices")
	}
}
