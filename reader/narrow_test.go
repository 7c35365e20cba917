package reader

import (
	"bytes"
	"context"
	"testing"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// TestNarrowMemoObjects: memo objects whose values are stored narrow (as
// workers write them: the fleet's hashes as list<int32> or int16, its
// bucketize and lengths as int8) and objects of the same values stored
// wide (as before issue 28) are served with responses byte for byte equal
// to LIG's, compressed or not, in as many requests: the value segment is
// still fetched with its footer in one request, and widened as it is
// decoded.
func TestNarrowMemoObjects(t *testing.T) {
	ctx := context.Background()
	graphs := fleetGraphs(t, "ctr_wide", "explore")
	var want [][]byte // LIG's responses
	var wantGETs int64
	for _, tc := range []struct {
		name string
		wide bool
		comp block.Compression
	}{
		{"wide", true, block.Uncompressed},
		{"narrow", false, block.Uncompressed},
		{"narrow lz4", false, block.LZ4Frame},
		{"narrow zstd", false, block.ZSTD},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 2000, Graphs: graphs, Nulls: true,
				MemoCompression: tc.comp, WideMemos: tc.wide})
			s := f.server(t, Config{})
			stored := map[string]bool{}
			for _, in := range f.inputs {
				m, err := block.ReadFooter(ctx, f.store, block.MemoKey(in.key, blockref.ParseMemo(f.blocks[0].id)))
				if err != nil {
					t.Fatal(err)
				}
				v, _ := m.Column(MemoColumn)
				if v.Stored != "" {
					stored[v.Type+" as "+v.Stored] = true
				}
			}
			// ctr_wide's title hash, category hash, cross and bucketize;
			// explore's query hash, cross and length.
			if tc.wide != (len(stored) == 0) || !tc.wide && (!stored["list<int64> as list<int32>"] || !stored["int64 as int8"] || !stored["int64 as int16"]) {
				t.Fatalf("memo values stored %v (wide %t)", stored, tc.wide)
			}
			read := func(mode readerv1.InputMode) ([][]byte, int64) {
				before := f.store.Stats().Requests
				resps, err := collect(ctx, s, &readerv1.ReadRequest{Unit: f.unit(0, 700, allMode(mode))})
				if err != nil {
					t.Fatalf("%v: %v", mode, err)
				}
				var out [][]byte
				for _, r := range resps {
					out = append(out, r.ArrowIpc)
				}
				return out, f.store.Stats().Requests - before
			}
			lig, _ := read(local)
			sig, gets := read(memo)
			if want == nil {
				want, wantGETs = lig, gets
			}
			for name, got := range map[string][][]byte{"LIG": lig, "SIG": sig} {
				if len(got) != len(want) {
					t.Fatalf("%s: %d responses, want %d", name, len(got), len(want))
				}
				for i := range got {
					if !bytes.Equal(got[i], want[i]) {
						t.Fatalf("%s: response %d differs from the wide warehouse's LIG", name, i)
					}
				}
			}
			if gets != wantGETs {
				t.Errorf("SIG read took %d requests, %d wide", gets, wantGETs)
			}
		})
	}
}
