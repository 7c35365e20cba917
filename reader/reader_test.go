package reader

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	"github.com/sigdata/sig/warehouse/block"
)

// TestSIGAndLIGStreamIdenticalBytes streams the same work units reading
// every input from its memo object (SIG) and computing every input from the
// raw block (LIG), and requires byte-identical responses. It also checks the
// batches' content against an independent computation, so identical but
// wrong (or empty) streams fail too.
func TestSIGAndLIGStreamIdenticalBytes(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 2, RowsPerBlock: 5000, Nulls: true,
		Graphs: fleetGraphs(t, "ctr_small", "ctr_wide", "cvr", "explore", "ranking")})
	s := f.server(t, Config{})
	ctx := context.Background()
	for b := range f.blocks {
		for _, batch := range []int{4096, 1000, 7, 5000, 65536} {
			t.Run(fmt.Sprintf("block%d/batch%d", b, batch), func(t *testing.T) {
				sig, err := collect(ctx, s, &readerv1.ReadRequest{Unit: f.unit(b, batch, allMode(memo))})
				if err != nil {
					t.Fatalf("SIG: %v", err)
				}
				lig, err := collect(ctx, s, &readerv1.ReadRequest{Unit: f.unit(b, batch, allMode(local))})
				if err != nil {
					t.Fatalf("LIG: %v", err)
				}
				sameResponses(t, "SIG", sig, "LIG", lig)
				wantBatches := (int(f.blocks[b].rows) + batch - 1) / batch
				if len(sig) != wantBatches+1 {
					t.Fatalf("%d responses, want %d batches and a summary", len(sig), wantBatches)
				}
				f.checkContent(t, b, sig)
			})
		}
	}
	st := s.Stats()
	if st.MemoInputs == 0 || st.LocalInputs == 0 || st.MemoInputs != st.LocalInputs {
		t.Fatalf("stats %+v: want as many memo as local input columns served", st)
	}
}

// TestMixedModeEqualsPureModes reads every subset of the inputs from memo
// objects and the rest locally (brief, "Beyond the paper" 2: join memoized
// columns with locally computed ones) and requires the bytes of both pure
// modes.
func TestMixedModeEqualsPureModes(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 3000, Nulls: true,
		Graphs: fleetGraphs(t, "ctr_small", "cvr")})
	s := f.server(t, Config{})
	ctx := context.Background()
	n := len(f.inputs)
	if n < 5 {
		t.Fatalf("fixture has %d inputs (%s), want at least 5", n, f.inputNames())
	}
	pure, err := collect(ctx, s, &readerv1.ReadRequest{Unit: f.unit(0, 512, allMode(memo))})
	if err != nil {
		t.Fatal(err)
	}
	lig, err := collect(ctx, s, &readerv1.ReadRequest{Unit: f.unit(0, 512, allMode(local))})
	if err != nil {
		t.Fatal(err)
	}
	sameResponses(t, "SIG", pure, "LIG", lig)
	for mask := 1; mask < 1<<n-1; mask++ {
		mixed, err := collect(ctx, s, &readerv1.ReadRequest{Unit: f.unit(0, 512, func(i int) readerv1.InputMode {
			if mask&(1<<i) != 0 {
				return local
			}
			return memo
		})})
		if err != nil {
			t.Fatalf("mask %b: %v", mask, err)
		}
		sameResponses(t, "SIG", pure, fmt.Sprintf("mixed %b", mask), mixed)
	}
	f.checkContent(t, 0, pure)
}

// TestStartRowResumesWithIdenticalBatches: a call from a block-aligned
// start_row sends exactly the tail of the full stream; an unaligned one a
// partial first batch, then the same batches again.
func TestStartRowResumesWithIdenticalBatches(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 2500, Graphs: fleetGraphs(t, "ctr_small")})
	s := f.server(t, Config{})
	ctx := context.Background()
	full, err := collect(ctx, s, &readerv1.ReadRequest{Unit: f.unit(0, 1000, nil)})
	if err != nil {
		t.Fatal(err)
	}
	if len(full) != 4 {
		t.Fatalf("%d responses, want 3 batches and a summary", len(full))
	}
	for _, tc := range []struct {
		start     int64
		mode      readerv1.InputMode
		skip      int // full batches before the first identical one
		partial   bool
		summaryOf int64
	}{
		{start: 1000, mode: memo, skip: 1, summaryOf: 1500},
		{start: 2000, mode: local, skip: 2, summaryOf: 500},
		{start: 1500, mode: local, skip: 2, partial: true, summaryOf: 1000},
		{start: 2500, mode: memo, skip: 3, summaryOf: 0},
	} {
		got, err := collect(ctx, s, &readerv1.ReadRequest{Unit: f.unit(0, 1000, allMode(tc.mode)), StartRow: tc.start})
		if err != nil {
			t.Fatalf("start %d: %v", tc.start, err)
		}
		if tc.partial {
			if got[0].StartRow != tc.start || got[0].Rows != 500 {
				t.Fatalf("start %d: first batch at %d with %d rows, want 500 rows at %d", tc.start, got[0].StartRow, got[0].Rows, tc.start)
			}
			got = got[1:]
		}
		sameBatches(t, "full tail", full[tc.skip:len(full)-1], fmt.Sprintf("from %d", tc.start), got[:len(got)-1])
		if s := got[len(got)-1].Summary; s == nil || s.Rows != tc.summaryOf || s.BlockRows != 2500 {
			t.Fatalf("start %d: summary %v, want %d rows of 2500", tc.start, s, tc.summaryOf)
		}
	}
}

// sameResponses fails unless a and b hold the same responses, byte for byte.
func sameResponses(t *testing.T, an string, a []*readerv1.ReadResponse, bn string, b []*readerv1.ReadResponse) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s sent %d responses, %s %d", an, len(a), bn, len(b))
	}
	sameBatches(t, an, a[:len(a)-1], bn, b[:len(b)-1])
	sa, sb := a[len(a)-1].Summary, b[len(b)-1].Summary
	if sa == nil || sb == nil || sa.Rows != sb.Rows || sa.BlockRows != sb.BlockRows || sa.Crc32C != sb.Crc32C {
		t.Fatalf("summaries differ: %s %v, %s %v", an, sa, bn, sb)
	}
}

func sameBatches(t *testing.T, an string, a []*readerv1.ReadResponse, bn string, b []*readerv1.ReadResponse) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s sent %d batches, %s %d", an, len(a), bn, len(b))
	}
	for i := range a {
		if a[i].Summary != nil || b[i].Summary != nil {
			t.Fatalf("response %d: unexpected summary", i)
		}
		if a[i].StartRow != b[i].StartRow || a[i].Rows != b[i].Rows {
			t.Fatalf("batch %d: %s rows [%d,+%d), %s [%d,+%d)", i, an, a[i].StartRow, a[i].Rows, bn, b[i].StartRow, b[i].Rows)
		}
		if !bytes.Equal(a[i].ArrowIpc, b[i].ArrowIpc) {
			t.Fatalf("batch %d (rows [%d,+%d)): %s and %s differ: %d and %d bytes, first difference at byte %d",
				i, a[i].StartRow, a[i].Rows, an, bn, len(a[i].ArrowIpc), len(b[i].ArrowIpc), firstDiff(a[i].ArrowIpc, b[i].ArrowIpc))
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// checkContent decodes the batches of a whole block and compares them with
// the raw block and with each input's component run directly over it: the
// columns, their order and types, every value (nulls included), and the
// summary's checksum.
func (f *fixture) checkContent(t *testing.T, b int, resps []*readerv1.ReadResponse) {
	t.Helper()
	ctx := context.Background()
	blk := f.blocks[b]
	raw, _, err := readWholeRaw(ctx, f, b)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Release()
	want, names := f.computed(t, raw)
	var crc uint32
	var row int64
	for _, r := range resps[:len(resps)-1] {
		crc = crc32.Update(crc, castagnoli, r.ArrowIpc)
		rec, err := decodeBatch(r.ArrowIpc)
		if err != nil {
			t.Fatal(err)
		}
		if r.StartRow != row || rec.NumRows() != r.Rows {
			t.Fatalf("batch at %d of %d rows (record %d), want start %d", r.StartRow, r.Rows, rec.NumRows(), row)
		}
		if int(rec.NumCols()) != len(want) {
			t.Fatalf("%d columns, want %d", rec.NumCols(), len(want))
		}
		for c := range want {
			if rec.Schema().Field(c).Name != names[c] {
				t.Fatalf("column %d is %s, want %s", c, rec.Schema().Field(c).Name, names[c])
			}
			exp := array.NewSlice(want[c], row, row+r.Rows)
			if !array.Equal(exp, rec.Column(c)) {
				t.Fatalf("column %s rows [%d,+%d) differ from the component run directly", names[c], row, r.Rows)
			}
			exp.Release()
		}
		rec.Release()
		row += r.Rows
	}
	sum := resps[len(resps)-1].Summary
	if row != blk.rows || sum == nil || sum.Rows != row || sum.BlockRows != blk.rows || sum.Crc32C != crc {
		t.Fatalf("streamed %d of %d rows, crc %08x; summary %v", row, blk.rows, crc, sum)
	}
}

func readWholeRaw(ctx context.Context, f *fixture, b int) (arrow.Record, block.Meta, error) {
	m, rec, err := block.ReadBlock(ctx, f.store, f.blocks[b].meta.Key)
	return rec, m, err
}

func column(rec arrow.Record, name string) arrow.Array {
	return rec.Column(rec.Schema().FieldIndices(name)[0])
}
