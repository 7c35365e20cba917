package transform

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/internal/rowref"
)

// The copying paths of truncate and fill_missing on strings (blocks that
// overshoot, runs between nulls, fallbacks near the end of the data) over
// the shapes that move their boundaries: null and empty rows at the
// edges, null rows with elements or bytes under them, rows longer than a
// block, and inputs sliced at every offset, with and without a child
// offset. TestKernelsAgainstReference draws lists with null elements,
// which the kernels compact first; these have none, so the kernels read
// the input's own buffers.

// shapeStrings returns n strings of lengths around those of tokens, with
// some empty and some longer than truncate's 64-byte block.
func shapeStrings(r *rand.Rand, n int) []string {
	out := make([]string, n)
	for i := range out {
		switch r.IntN(12) {
		case 0:
			out[i] = ""
		case 1:
			out[i] = strings.Repeat("é日x", 10+r.IntN(30)) // 60 to 234 bytes (6 a repeat)
		default:
			out[i] = fmt.Sprintf("w%d", r.IntN(100000))
		}
	}
	return out
}

// shapeList builds a list<string> of rows (nil: a null row, which gets
// garbage elements when garbage is set) over a child whose first pad
// elements belong to no row, so that the child's offsets start above 0.
func shapeList(rows [][]string, null []bool, pad int, garbage bool) arrow.Array {
	mem := memory.DefaultAllocator
	cb := array.NewStringBuilder(mem)
	defer cb.Release()
	for k := range pad {
		cb.Append(fmt.Sprintf("PAD%d", k))
	}
	offs := []int32{0}
	bits := make([]byte, (len(rows)+7)/8)
	nulls := 0
	for i, row := range rows {
		if null[i] {
			nulls++
			if garbage {
				for k := range i % 4 {
					cb.Append(fmt.Sprintf("GARBAGE%d", k))
				}
			}
		} else {
			bits[i/8] |= 1 << (i % 8)
			for _, s := range row {
				cb.Append(s)
			}
		}
		offs = append(offs, int32(cb.Len()-pad))
	}
	whole := cb.NewArray()
	defer whole.Release()
	child := array.NewSlice(whole, int64(pad), int64(whole.Len()))
	defer child.Release()
	var valid *memory.Buffer
	if nulls > 0 {
		valid = memory.NewBufferBytes(bits)
	}
	d := array.NewData(arrow.ListOf(arrow.BinaryTypes.String), len(rows),
		[]*memory.Buffer{valid, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offs))},
		[]arrow.ArrayData{child.Data()}, nulls, 0)
	defer d.Release()
	return array.NewListData(d)
}

// checkCompactString checks that a is a string array at offset 0 whose
// offsets start at 0 and whose data buffer ends at its last offset.
func checkCompactString(t *testing.T, a arrow.Array) {
	t.Helper()
	s := a.(*array.String)
	if s.Data().Offset() != 0 {
		t.Fatalf("string array at offset %d", s.Data().Offset())
	}
	offs := s.ValueOffsets()
	if len(offs) != s.Len()+1 || offs[0] != 0 || int(offs[s.Len()]) != s.Data().Buffers()[2].Len() {
		t.Fatalf("string array of %d rows: %d offsets from %d to %d, %d data bytes",
			s.Len(), len(offs), offs[0], offs[len(offs)-1], s.Data().Buffers()[2].Len())
	}
}

func TestTruncateShapes(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	const n = 200
	rows := make([][]string, n)
	null := make([]bool, n)
	for i := range rows {
		switch {
		case i == 0 || i == n-1 || r.IntN(8) == 0:
			null[i] = true
		case i == 1 || i == n-2 || r.IntN(8) == 0:
			rows[i] = []string{}
		case r.IntN(10) == 0:
			rows[i] = shapeStrings(r, 9+r.IntN(20)) // more than one block of offsets
		default:
			rows[i] = shapeStrings(r, 1+r.IntN(8))
		}
	}
	// Rows 1 and n-2 are empty, 0 and n-1 null: also try them valid and
	// long, so that the last row's bytes end at the end of the child.
	rows2 := append([][]string(nil), rows...)
	null2 := append([]bool(nil), null...)
	rows2[0], null2[0] = shapeStrings(r, 12), false
	rows2[n-1], null2[n-1] = append(shapeStrings(r, 10), strings.Repeat("z", 100)), false
	for _, shape := range []struct {
		name     string
		rows     [][]string
		null     []bool
		pad      int
		garbage  bool
		withNull bool
	}{
		{"nulls-at-edges", rows, null, 0, false, true},
		{"null-garbage", rows, null, 0, true, true},
		{"child-offset", rows, null, 5, true, true},
		{"valid-edges", rows2, null2, 0, false, true},
		{"valid-edges-child-offset", rows2, null2, 3, false, true},
		{"no-nulls", rows2, make([]bool, n), 0, false, false},
	} {
		whole := shapeList(shape.rows, shape.null, shape.pad, shape.garbage)
		for _, sl := range [][2]int{{0, n}, {1, n}, {3, n - 1}, {8, n}, {63, n}, {64, n}, {65, 131}, {n - 1, n}, {n, n}, {0, 1}, {2, 2}} {
			in := array.NewSlice(whole, int64(sl[0]), int64(sl[1]))
			ref := fromArrow(in)
			for _, max := range []int64{0, 1, 2, 5, 7, 8, 9, 16, 100} {
				name := fmt.Sprintf("%s[%d:%d] max=%d", shape.name, sl[0], sl[1], max)
				got, err := kernelTruncate([]arrow.Array{in}, &Node{Op: "truncate", Params: []Param{pInt("max", max)}})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				want := rowref.Truncate(ref, int(max))
				if d := diffColumns(want, fromArrow(got)); d != "" {
					t.Fatalf("%s: %s", name, d)
				}
				// The kernel returns its input or a list-view over the
				// input's elements; check the copy the executor makes.
				if _, ok := got.(*array.ListView); !ok && got != in {
					t.Fatalf("%s: got a %T, neither the input nor a list-view", name, got)
				}
				// hash and length read the view as it is.
				for _, k := range []struct {
					op   string
					want rowref.Column
					run  Kernel
				}{
					{"hash", rowref.Hash(want, 1009, 3), kernelHash},
					{"length", rowref.Length(want), kernelLength},
				} {
					h, err := k.run([]arrow.Array{got}, &Node{Op: k.op, Params: []Param{pInt("buckets", 1009), pInt("salt", 3)}})
					if err != nil {
						t.Fatalf("%s: %s: %v", name, k.op, err)
					}
					if d := diffColumns(k.want, fromArrow(h)); d != "" {
						t.Fatalf("%s: %s: %s", name, k.op, d)
					}
					h.Release()
				}
				c, err := contiguous(got)
				if err != nil {
					t.Fatalf("%s: contiguous: %v", name, err)
				}
				got.Release()
				got = c
				if d := diffColumns(want, fromArrow(got)); d != "" {
					t.Fatalf("%s: contiguous: %s", name, d)
				}
				if got != in { // not returned as it is
					l := got.(*array.List)
					if l.Data().Offset() != 0 || l.Offsets()[0] != 0 {
						t.Fatalf("%s: list at offset %d, offsets from %d", name, l.Data().Offset(), l.Offsets()[0])
					}
					checkCompactString(t, l.ListValues())
					if int(l.Offsets()[l.Len()]) != l.ListValues().Len() {
						t.Fatalf("%s: %d child elements, %d in rows", name, l.ListValues().Len(), l.Offsets()[l.Len()])
					}
				}
				got.Release()
			}
			in.Release()
		}
		whole.Release()
	}
}

// stringList returns a list<string> of len(offs)-1 rows over child with
// the given offsets, checked by nothing (tests of malformed input).
func stringList(child arrow.Array, offs []int32) arrow.Array {
	d := array.NewData(arrow.ListOf(arrow.BinaryTypes.String), len(offs)-1,
		[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offs))},
		[]arrow.ArrayData{child.Data()}, 0, 0)
	defer d.Release()
	return array.NewListData(d)
}

// stringListView is stringList for a list-view<string> with the given row
// starts and sizes.
func stringListView(child arrow.Array, starts, sizes []int32) arrow.Array {
	d := array.NewData(arrow.ListViewOf(arrow.BinaryTypes.String), len(starts),
		[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(starts)),
			memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(sizes))},
		[]arrow.ArrayData{child.Data()}, 0, 0)
	defer d.Release()
	return array.NewListViewData(d)
}

// TestTruncateMalformedOffsets: list offsets that decrease are an error,
// not a read outside the child.
func TestTruncateMalformedOffsets(t *testing.T) {
	child := toArrow(rowref.Column{Type: rowref.String, Str: []string{"a", "b", "c", "d", "e"}})
	defer child.Release()
	for _, c := range []struct {
		name string
		offs []int32
	}{
		{"decreasing", []int32{0, 3, 1, 5}},
		// An error from truncate, not a list-view that fails later in
		// whatever reads it.
		{"past the child", []int32{0, 3, 9}},
	} {
		l := stringList(child, c.offs)
		if got, err := kernelTruncate([]arrow.Array{l}, &Node{Op: "truncate", Params: []Param{pInt("max", 1)}}); err == nil {
			t.Errorf("no error for offsets %s, got %v", c.name, got)
			got.Release()
		}
		l.Release()
	}
}

// TestCompactMalformedView: a list-view whose rows overlap, leave the
// child or have a negative size is an error when made contiguous, not a
// read outside the child.
func TestCompactMalformedView(t *testing.T) {
	child := toArrow(rowref.Column{Type: rowref.String, Str: []string{"a", "b", "c", "d", "e"}})
	defer child.Release()
	for _, c := range []struct {
		name          string
		starts, sizes []int32
	}{
		{"overlap", []int32{0, 1}, []int32{2, 2}},
		{"decreasing", []int32{3, 0}, []int32{1, 1}},
		{"past-child", []int32{0, 4}, []int32{1, 2}},
		{"start-past-child", []int32{0, 9}, []int32{1, 0}},
		{"negative-start", []int32{-1, 2}, []int32{1, 1}},
		{"negative-size", []int32{0, 2}, []int32{-1, 1}},
	} {
		v := stringListView(child, c.starts, c.sizes)
		if got, err := contiguous(v); err == nil {
			t.Errorf("%s: no error, got %v", c.name, got)
			got.Release()
		}
		v.Release()
	}
}

func TestFillMissingStringShapes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	const n = 300
	vals := shapeStrings(r, n)
	patterns := map[string]func(i int) bool{
		"edges":    func(i int) bool { return i == 0 || i == n-1 || i%37 == 0 },
		"runs":     func(i int) bool { return (i/5)%3 == 0 }, // runs of 5 nulls
		"sparse":   func(i int) bool { return i == 150 },
		"dense":    func(i int) bool { return i%7 != 3 },
		"all-null": func(i int) bool { return true },
		"word":     func(i int) bool { return i >= 64 && i < 128 || i == 200 }, // a whole bitmap word
	}
	for pname, isNull := range patterns {
		for _, garbage := range []bool{false, true} {
			b := array.NewStringBuilder(memory.DefaultAllocator)
			var nulls []int
			for i, s := range vals {
				if isNull(i) {
					nulls = append(nulls, i)
					if garbage {
						b.Append("GARBAGE" + s) // cleared below
						continue
					}
					b.AppendNull()
					continue
				}
				b.Append(s)
			}
			whole := b.NewArray()
			b.Release()
			if garbage { // null slots that have bytes
				bits := make([]byte, (n+7)/8)
				for i := range n {
					if !isNull(i) {
						bits[i/8] |= 1 << (i % 8)
					}
				}
				bufs := whole.Data().Buffers()
				d := array.NewData(arrow.BinaryTypes.String, n, []*memory.Buffer{memory.NewBufferBytes(bits), bufs[1], bufs[2]}, nil, len(nulls), 0)
				whole.Release()
				whole = array.MakeFromData(d)
				d.Release()
			}
			for _, sl := range [][2]int{{0, n}, {1, n}, {5, n - 3}, {63, n}, {64, 200}, {65, 129}, {n - 1, n}, {0, 1}} {
				in := array.NewSlice(whole, int64(sl[0]), int64(sl[1]))
				ref := fromArrow(in)
				for _, def := range []string{"", "none", "É😀 long default, longer than a word"} {
					name := fmt.Sprintf("%s garbage=%v [%d:%d] default=%q", pname, garbage, sl[0], sl[1], def)
					got, err := kernelFillMissing([]arrow.Array{in}, &Node{Op: "fill_missing", Params: []Param{{Name: "default", Value: StringValue(def)}}})
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if d := diffColumns(rowref.FillMissing(ref, def), fromArrow(got)); d != "" {
						t.Fatalf("%s: %s", name, d)
					}
					if got.NullN() != 0 {
						t.Fatalf("%s: %d nulls", name, got.NullN())
					}
					if in.NullN() > 0 {
						checkCompactString(t, got)
					}
					got.Release()
				}
				in.Release()
			}
			whole.Release()
		}
	}
}
