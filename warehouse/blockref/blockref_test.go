package blockref

import (
	"encoding/json"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		id   string
		v    int64
		name string // String() of the parsed Ref
	}{
		{"20260101T000000Z-p00000-1-2", "20260101T000000Z-p00000-1-2", 1, "20260101T000000Z-p00000-1-2"},
		{"b.v2", "b", 2, "b.v2"},
		{"b.v17", "b", 17, "b.v17"},
		{"b.v999999999999999999", "b", 999999999999999999, "b.v999999999999999999"},
		// Not a version suffix: the whole string is a version-1 id.
		{"b.v1", "b.v1", 1, "b.v1"},
		{"b.v0", "b.v0", 1, "b.v0"},
		{"b.v02", "b.v02", 1, "b.v02"},
		{"b.v+2", "b.v+2", 1, "b.v+2"},
		{"b.v-2", "b.v-2", 1, "b.v-2"},
		{"b.v", "b.v", 1, "b.v"},
		{"b.v2x", "b.v2x", 1, "b.v2x"},
		{".v3", ".v3", 1, ".v3"},
		{"b.v1000000000000000000", "b.v1000000000000000000", 1, "b.v1000000000000000000"}, // 19 digits
		{"a.v2.v3", "a.v2", 3, "a.v2.v3"},
	} {
		r := Parse(c.in)
		if r.ID() != c.id || r.Version() != c.v || r.String() != c.name {
			t.Errorf("Parse(%q) = %#v (%q), want id %q version %d (%q)", c.in, r, r.String(), c.id, c.v, c.name)
		}
		m := ParseMemo(c.in)
		if m.ID() != c.id || m.InputVersion() != c.v || m.String() != c.name {
			t.Errorf("ParseMemo(%q) = %#v, want id %q version %d", c.in, m, c.id, c.v)
		}
	}
}

// TestUnversionedMeansOne: version 0 (objects and records written before
// versions) and 1 name the same block version, equal as values.
func TestUnversionedMeansOne(t *testing.T) {
	for _, v := range []int64{-3, 0, 1} {
		if New("b", v) != New("b", 1) || New("b", v).Version() != 1 || New("b", v).String() != "b" {
			t.Errorf("New(b, %d) = %#v, want version 1 named b", v, New("b", v))
		}
		if NewMemo("b", v) != NewMemo("b", 1) {
			t.Errorf("NewMemo(b, %d) = %#v", v, NewMemo("b", v))
		}
	}
	for _, v := range []int64{0, 1, 2, 9} {
		if New("b", Stored(v)) != New("b", v) || (v <= 1) != (Stored(v) == 0) {
			t.Errorf("Stored(%d) = %d", v, Stored(v))
		}
	}
	if New("b", 2) == New("b", 1) || Parse("b.v2") != New("b", 2) {
		t.Error("versions 1 and 2 of a block must differ, and parse as they print")
	}
	if !New("", 3).IsZero() || New("", 3) != (Ref{}) || Parse("") != (Ref{}) || ParseMemo("") != (Memo{}) {
		t.Error("an empty id is the zero value")
	}
	if New("b", 3).Memo(2) != NewMemo("b", 2) {
		t.Error("Ref.Memo")
	}
}

func TestRoundTrip(t *testing.T) {
	for _, r := range []Ref{New("b", 1), New("b", 2), New("x-p00001-2-3", 41)} {
		if Parse(r.String()) != r {
			t.Errorf("Parse(%q) != %#v", r.String(), r)
		}
		b, err := json.Marshal(struct{ R Ref }{r})
		if err != nil {
			t.Fatal(err)
		}
		var back struct{ R Ref }
		if err := json.Unmarshal(b, &back); err != nil || back.R != r {
			t.Errorf("JSON %s read back as %#v (%v)", b, back.R, err)
		}
		m := r.Memo(r.Version())
		b, _ = json.Marshal(m)
		var mb Memo
		if err := json.Unmarshal(b, &mb); err != nil || mb != m {
			t.Errorf("memo JSON %s read back as %#v (%v)", b, mb, err)
		}
	}
}
