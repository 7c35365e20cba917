package reader

import (
	"bytes"
	"context"
	"testing"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// TestCompressedSegments: raw blocks and memo objects with Arrow IPC
// buffer compression (LZ4 frame, ZSTD), and old uncompressed objects mixed
// with compressed ones either way, are served with responses byte for byte
// equal to LIG's over the same raw block (and so to the uncompressed
// warehouse's). A memo object's event_id segment is encoded as its raw
// block's (memo.Runner does it), so the reader still proves row alignment
// from the footers and fetches each value segment with its footer in one
// request: a unit costs as many GETs compressed as uncompressed.
func TestCompressedSegments(t *testing.T) {
	ctx := context.Background()
	var want [][]byte // LIG's responses on the uncompressed warehouse
	var wantGETs int64
	for _, tc := range []struct {
		name      string
		raw, memo block.Compression
	}{
		{"none", block.Uncompressed, block.Uncompressed},
		{"lz4", block.LZ4Frame, block.LZ4Frame},
		{"zstd", block.ZSTD, block.ZSTD},
		{"old raw, lz4 memo", block.Uncompressed, block.LZ4Frame},
		{"zstd raw, old memo", block.ZSTD, block.Uncompressed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 1500, Graphs: fleetGraphs(t, "ctr_small"), Nulls: true,
				RawCompression: tc.raw, MemoCompression: tc.memo})
			s := f.server(t, Config{})
			raw := f.blocks[0].meta
			for _, c := range raw.Columns {
				if c.Compression != tc.raw {
					t.Fatalf("raw column %s: compression %q, want %q", c.Name, c.Compression, tc.raw)
				}
			}
			for _, in := range f.inputs {
				m, err := block.ReadFooter(ctx, f.store, block.MemoKey(in.key, blockref.ParseMemo(f.blocks[0].id)))
				if err != nil {
					t.Fatal(err)
				}
				ev, _ := m.Column(transform.ColEventID)
				rev, _ := raw.Column(transform.ColEventID)
				if ev.Length != rev.Length || ev.CRC32C != rev.CRC32C {
					t.Fatalf("%s: memo event_id segment differs from the raw block's", in.name)
				}
				if v, _ := m.Column(MemoColumn); v.Compression != tc.memo {
					t.Fatalf("%s: value compression %q, want %q", in.name, v.Compression, tc.memo)
				}
			}
			read := func(mode readerv1.InputMode) ([][]byte, int64) {
				before := f.store.Stats().Requests
				resps, err := collect(ctx, s, &readerv1.ReadRequest{Unit: f.unit(0, 512, allMode(mode))})
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
						t.Fatalf("%s: response %d differs from the uncompressed warehouse's", name, i)
					}
				}
			}
			if gets != wantGETs {
				t.Errorf("SIG read took %d requests, %d uncompressed", gets, wantGETs)
			}
		})
	}
}
