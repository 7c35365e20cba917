package reader

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"google.golang.org/grpc/codes"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/block/blocktest"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/objstore"
)

// TestForeignRawBlockIsDataLoss: a raw block object whose columns are not
// of the schema's types, in its footer or inside a segment the footer
// mislabels, is DataLoss naming the object and the column; nothing is
// sent, nothing panics. A float64 event_id segment labelled int64 in the
// footer was read as int64s (garbage event ids) before DecodeSegment
// checked each segment's own Arrow schema against the footer.
func TestForeignRawBlockIsDataLoss(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 300, Graphs: fleetGraphs(t, "ctr_small"), NoMemos: true})
	s := f.server(t, Config{})
	ctx := context.Background()
	_, rec, err := block.ReadBlock(ctx, f.store, f.blocks[0].meta.Key)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	column := func(name string) arrow.Array { return blocktest.Column(rec, name) }
	floats := func(name string) arrow.Array { return blocktest.Float64s(rec, name) }
	strs := func(s string) arrow.Array { return blocktest.Strings(s, rec.NumRows()) }
	cases := []struct {
		name, column string
		col          arrow.Array
		relabel      string // the type the footer is made to say, if set
		want         string
	}{
		{"event_id float64", transform.ColEventID, floats(transform.ColEventID), "",
			`column "event_id" is "float64" in the footer, want int64`},
		{"label utf8", "click", strs("yes"), "", `column "click" is "string" in the footer, want int64`},
		{"event_id float64 labelled int64", transform.ColEventID, floats(transform.ColEventID), "int64",
			"column event_id: segment holds float64, footer says int64"},
		{"query int64 labelled string", "query", column("advertiser_id"), "string",
			"column query: segment holds int64, footer says string"},
		{"event_id list labelled int64", transform.ColEventID, listOf(column(transform.ColEventID)), "int64",
			"column event_id: segment holds list<int64>, footer says int64"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bad := blocktest.WithColumn(rec, tc.column, tc.col)
			defer bad.Release()
			id := f.blocks[0].id + "-foreign" + string(rune('a'+i))
			meta := blocktest.Renamed(f.blocks[0].meta, id)
			data, _, err := block.Encode(meta, bad)
			if err != nil {
				t.Fatal(err)
			}
			if tc.relabel != "" {
				data = relabel(t, data, tc.column, tc.col.DataType(), tc.relabel)
			}
			if _, err := f.store.PutChecksummed(ctx, meta.Key, data, objstore.Checksum(data), nil); err != nil {
				t.Fatal(err)
			}
			u := f.unit(0, 100, allMode(local))
			u.BlockId, u.RawObject, u.LabelColumns = id, meta.Key, []string{"click"}
			for j, in := range u.Inputs {
				in.MemoObject = block.MemoKey(f.inputs[j].key, blockref.ParseMemo(id))
			}
			resps, err := collect(ctx, s, &readerv1.ReadRequest{Unit: u})
			st := Status(err)
			if st.Code() != codes.DataLoss || len(resps) != 0 || !strings.Contains(st.Message(), meta.Key) || !strings.Contains(st.Message(), tc.want) {
				t.Fatalf("%v (code %v, %d responses); want DataLoss naming %s and %q", err, st.Code(), len(resps), meta.Key, tc.want)
			}
		})
	}
}

// listOf is a list<int64> array of one-element rows of a.
func listOf(a arrow.Array) arrow.Array {
	b := array.NewListBuilder(memory.DefaultAllocator, arrow.PrimitiveTypes.Int64)
	vb := b.ValueBuilder().(*array.Int64Builder)
	for _, v := range a.(*array.Int64).Int64Values() {
		b.Append(true)
		vb.Append(v)
	}
	return b.NewArray()
}

// relabel rewrites a block object's footer so that column name's type
// reads typ instead of what Encode wrote for dt, with the footer's
// checksum and length in the trailer made to match.
func relabel(t *testing.T, data []byte, name string, dt arrow.DataType, typ string) []byte {
	t.Helper()
	n := int(binary.LittleEndian.Uint32(data[len(data)-block.TrailerSize:]))
	footer := string(data[len(data)-block.TrailerSize-n : len(data)-block.TrailerSize])
	from, _ := transform.TypeOfArrow(dt)
	entry := func(typ string) string {
		b, _ := json.Marshal(block.Column{Name: name, Type: typ})
		return strings.TrimSuffix(string(b), `,"offset":0,"length":0,"crc32c":0}`)
	}
	old := entry(from.String())
	if !strings.Contains(footer, old) {
		t.Fatalf("footer has no %s: %s", old, footer)
	}
	footer = strings.Replace(footer, old, entry(typ), 1)
	out := append([]byte(nil), data[:len(data)-block.TrailerSize-n]...)
	out = append(out, footer...)
	var tr [block.TrailerSize]byte
	binary.LittleEndian.PutUint32(tr[0:], uint32(len(footer)))
	binary.LittleEndian.PutUint32(tr[4:], crc32.Checksum([]byte(footer), crc32.MakeTable(crc32.Castagnoli)))
	copy(tr[8:], block.Magic)
	return append(out, tr[:]...)
}

// TestTruncatedObjectsAreDataLoss: a memo or raw block object cut short,
// to nothing, to less than a trailer or a footer, or by one byte, is
// DataLoss naming the object, not Unavailable (which clients retry as a
// store outage); a 0-byte memo object was reported as the store being
// unavailable.
func TestTruncatedObjectsAreDataLoss(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 300, Graphs: fleetGraphs(t, "ctr_small")})
	s := f.server(t, Config{})
	ctx := context.Background()
	blk := f.blocks[0]
	memoKey := block.MemoKey(f.inputs[0].key, blockref.ParseMemo(blk.id))
	whole := map[string][]byte{}
	for _, key := range []string{memoKey, blk.meta.Key} {
		data, _, err := f.store.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		whole[key] = data
	}
	for _, key := range []string{memoKey, blk.meta.Key} {
		data := whole[key]
		for _, n := range []int{0, 1, 8, block.TrailerSize - 1, block.TrailerSize, block.TrailerSize + 100, len(data) / 2, len(data) - 1} {
			for _, exact := range []bool{false, true} {
				name := fmt.Sprintf("%s/%d bytes/exact=%v", strings.SplitN(key, "/", 2)[0], n, exact)
				t.Run(name, func(t *testing.T) {
					if _, err := f.store.PutChecksummed(ctx, key, data[:n], objstore.Checksum(data[:n]), nil); err != nil {
						t.Fatal(err)
					}
					defer func() {
						if _, err := f.store.PutChecksummed(ctx, key, data, objstore.Checksum(data), nil); err != nil {
							t.Fatal(err)
						}
					}()
					srv := s
					if exact {
						srv = f.server(t, Config{ExactAlignment: true})
					}
					resps, err := collect(ctx, srv, &readerv1.ReadRequest{Unit: f.unit(0, 100, nil)})
					st := Status(err)
					if st.Code() != codes.DataLoss || len(resps) != 0 || !strings.Contains(st.Message(), key) {
						t.Fatalf("%v (code %v, %d responses); want DataLoss naming %s", err, st.Code(), len(resps), key)
					}
				})
			}
		}
	}
}
