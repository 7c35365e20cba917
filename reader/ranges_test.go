package reader

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/array"
	flightpb "github.com/apache/arrow/go/v15/arrow/flight/gen/flight"
	"github.com/cockroachdb/datadriven"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/transform"
)

// TestEventRanges (testdata/ranges.txt) reads units trimmed to an event
// range (WorkUnit.event_range, issue 29) at a block's edges: ranges
// starting or ending exactly on a block's first or last event, inside a
// block, spanning two blocks (each block's unit), holding none of a
// block's rows, and ranges that take or leave the late events whose times
// lie hours before their block's others (so the rows in range are several
// runs, not one). Each read is checked beyond what the file records:
//
//   - SIG, LIG and mixed units of the range send identical bytes;
//   - the batches hold exactly the raw block's rows with event_time in
//     [from, to), in block order, each input's values those of its
//     component run directly over the whole block (an independent
//     selection, row by row);
//   - a stream resumed from a batch boundary and from inside a batch
//     sends the same batches again, and the Go client over gRPC reads
//     the same bytes (its summary check counts the unit's rows);
//   - Flight's DoGet sends Read's bytes (a unit of no rows: one batch of
//     no rows carrying the summary).
//
// The blocks are the generator's at 100 events a second from
// 2026-01-01T00:00:00Z: block 0 holds events at 0.00 s to 19.99 s, block
// 1 at 20.00 s to 39.99 s, and both some late events 1 to 3 hours
// earlier. from and to are seconds from 2026-01-01T00:00:00Z.
func TestEventRanges(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 2, RowsPerBlock: 2000, Nulls: true, Late: 0.01,
		Graphs: fleetGraphs(t, "ctr_small", "cvr")})
	s := f.server(t, Config{})
	addr := serveGRPC(t, s)
	fc := flightClient(t, addr, "")
	gc := newClient(t, ClientConfig{Addresses: []string{addr}})
	ctx := context.Background()
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	micros := func(td *datadriven.TestData, key string) int64 {
		var sec string
		td.ScanArgs(t, key, &sec)
		var v float64
		if _, err := fmt.Sscan(sec, &v); err != nil {
			t.Fatalf("%s=%s: %v", key, sec, err)
		}
		return epoch + int64(math.Round(v*1e6))
	}
	datadriven.RunTest(t, "testdata/ranges.txt", func(t *testing.T, td *datadriven.TestData) string {
		switch td.Cmd {
		case "read":
			var b int
			td.ScanArgs(t, "block", &b)
			batch := 256
			if td.HasArg("batch") {
				td.ScanArgs(t, "batch", &batch)
			}
			var start int64
			if td.HasArg("start") {
				td.ScanArgs(t, "start", &start)
			}
			var rng *sigv1.EventRange
			if td.HasArg("from") {
				rng = &sigv1.EventRange{StartMicros: micros(td, "from"), EndMicros: micros(td, "to")}
			}
			unit := func(m func(int) readerv1.InputMode) *readerv1.WorkUnit {
				u := f.unit(b, batch, m)
				u.EventRange = rng
				return u
			}
			sig, err := collect(ctx, s, &readerv1.ReadRequest{Unit: unit(allMode(memo)), StartRow: start})
			if err != nil {
				st := status.Convert(Status(err).Err())
				return fmt.Sprintf("error %s: %s", st.Code(), st.Message())
			}
			if start != 0 {
				return summarize(sig)
			}
			lig, err := collect(ctx, s, &readerv1.ReadRequest{Unit: unit(allMode(local))})
			if err != nil {
				t.Fatalf("LIG: %v", err)
			}
			sameResponses(t, "SIG", sig, "LIG", lig)
			mixed, err := collect(ctx, s, &readerv1.ReadRequest{Unit: unit(func(i int) readerv1.InputMode { return []readerv1.InputMode{memo, local}[i%2] })})
			if err != nil {
				t.Fatalf("mixed: %v", err)
			}
			sameResponses(t, "SIG", sig, "mixed", mixed)
			runs := f.checkRangeContent(t, b, rng, sig)
			if sum := sig[len(sig)-1].Summary; rng != nil && sum.BlockRows == f.blocks[b].rows {
				whole, err := collect(ctx, s, &readerv1.ReadRequest{Unit: f.unit(b, batch, nil)})
				if err != nil {
					t.Fatal(err)
				}
				sameResponses(t, "a range holding every row", sig, "no range", whole)
			}
			checkResumes(t, ctx, s, unit(allMode(local)), sig)
			got, err := readAll(ctx, gc, unit(nil))
			if err != nil {
				t.Fatalf("Go client: %v", err)
			}
			sameBytes(t, "the Go client's batches", got, batchBytes(sig))
			checkFlightRange(t, ctx, fc, unit(nil), sig)
			return fmt.Sprintf("%s; %d runs", summarize(sig), runs)
		default:
			t.Fatalf("unknown command %q", td.Cmd)
			return ""
		}
	})
	// Whole and trimmed units of one input set share its plan (the range
	// is the unit's own, bound per unit, never part of the shape): SIG,
	// LIG and mixed are three input sets.
	if st := s.Stats().Plans; st.Misses != 3 || st.Hits == 0 {
		t.Fatalf("plan cache %+v: want 3 misses (SIG, LIG, mixed) and hits for the rest", st)
	}
}

// summarize writes a stream as the file records it: the summary's rows of
// the unit's rows, and each batch as [start_row,+rows).
func summarize(resps []*readerv1.ReadResponse) string {
	var b strings.Builder
	sum := resps[len(resps)-1].Summary
	fmt.Fprintf(&b, "rows %d of %d; batches", sum.GetRows(), sum.GetBlockRows())
	for _, r := range resps[:len(resps)-1] {
		fmt.Fprintf(&b, " [%d,+%d)", r.StartRow, r.Rows)
	}
	if len(resps) == 1 {
		b.WriteString(" none")
	}
	return b.String()
}

// checkRangeContent checks a trimmed unit's batches against the raw block
// read whole: its rows with event_time in rng (all of them for nil), picked
// one by one, and each input's component run over the whole block. It
// returns the number of runs of consecutive block rows the unit holds.
func (f *fixture) checkRangeContent(t *testing.T, b int, rng *sigv1.EventRange, resps []*readerv1.ReadResponse) int {
	t.Helper()
	raw, _, err := readWholeRaw(context.Background(), f, b)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Release()
	times := column(raw, transform.ColEventTime).(*array.Int64)
	var rows []int
	runs := 0
	for r := 0; r < int(raw.NumRows()); r++ {
		if rng == nil || times.Value(r) >= rng.StartMicros && times.Value(r) < rng.EndMicros {
			if len(rows) == 0 || rows[len(rows)-1] != r-1 {
				runs++
			}
			rows = append(rows, r)
		}
	}
	want, _ := f.computed(t, raw)
	next := 0 // the unit's next row
	for _, r := range resps[:len(resps)-1] {
		rec, err := decodeBatch(r.ArrowIpc)
		if err != nil {
			t.Fatal(err)
		}
		if r.StartRow != int64(next) || rec.NumRows() != r.Rows || int(rec.NumCols()) != len(want) {
			t.Fatalf("batch at %d of %d rows (record %d rows, %d columns), want row %d, %d columns", r.StartRow, r.Rows, rec.NumRows(), rec.NumCols(), next, len(want))
		}
		for i := 0; i < int(r.Rows); i++ {
			if next+i >= len(rows) {
				t.Fatalf("the unit sent more than the %d rows in range", len(rows))
			}
			br := int64(rows[next+i])
			for c := range want {
				exp, got := array.NewSlice(want[c], br, br+1), array.NewSlice(rec.Column(c), int64(i), int64(i)+1)
				if !array.Equal(exp, got) {
					t.Fatalf("unit row %d (block row %d), column %s: %v, want %v", next+i, br, rec.Schema().Field(c).Name, got, exp)
				}
				exp.Release()
				got.Release()
			}
		}
		rec.Release()
		next += int(r.Rows)
	}
	if sum := resps[len(resps)-1].Summary; next != len(rows) || sum.GetRows() != int64(len(rows)) || sum.GetBlockRows() != int64(len(rows)) {
		t.Fatalf("sent %d rows, summary %v; want the %d rows in range", next, sum, len(rows))
	}
	return runs
}

// checkResumes reads unit again from a batch boundary and from inside a
// batch and requires the tail of full, byte for byte, and the summary of
// the rows sent.
func checkResumes(t *testing.T, ctx context.Context, s *Server, unit *readerv1.WorkUnit, full []*readerv1.ReadResponse) {
	t.Helper()
	batches := full[:len(full)-1]
	total := full[len(full)-1].Summary.GetBlockRows()
	for k, r := range batches {
		for _, start := range []int64{r.StartRow, r.StartRow + r.Rows/2} {
			got, err := collect(ctx, s, &readerv1.ReadRequest{Unit: unit, StartRow: start})
			if err != nil {
				t.Fatalf("from row %d: %v", start, err)
			}
			tail := batches[k:]
			if start != r.StartRow {
				if got[0].StartRow != start || got[0].StartRow+got[0].Rows != r.StartRow+r.Rows {
					t.Fatalf("from row %d: first batch [%d,+%d), want the rest of [%d,+%d)", start, got[0].StartRow, got[0].Rows, r.StartRow, r.Rows)
				}
				got, tail = got[1:], batches[k+1:]
			}
			sameBatches(t, "the full stream's tail", tail, fmt.Sprintf("from row %d", start), got[:len(got)-1])
			if sum := got[len(got)-1].Summary; sum.GetRows() != total-start || sum.GetBlockRows() != total {
				t.Fatalf("from row %d: summary %v, want %d rows of %d", start, sum, total-start, total)
			}
		}
		if k == 1 {
			break // the first two batches' boundaries suffice
		}
	}
}

// checkFlightRange requires DoGet of unit to send Read's batches (full);
// a unit of no rows sends one batch of no rows with the summary.
func checkFlightRange(t *testing.T, ctx context.Context, fc flightpb.FlightServiceClient, unit *readerv1.WorkUnit, full []*readerv1.ReadResponse) {
	t.Helper()
	req := &readerv1.ReadRequest{Unit: unit}
	got, err := doGet(ctx, fc, ticket(t, req))
	if err != nil {
		t.Fatalf("DoGet: %v", err)
	}
	p, err := newPlan(unit, transform.Default(), Limits{}.EnsureDefaults())
	if err != nil {
		t.Fatal(err)
	}
	enc, err := newEncoder(p.out)
	if err != nil {
		t.Fatal(err)
	}
	if len(full) > 1 {
		checkFlightIsRead(t, "DoGet of the trimmed unit", enc, got, full)
		return
	}
	if len(got) != 2 {
		t.Fatalf("DoGet of a unit of no rows: %d messages, want the schema and one batch of no rows", len(got))
	}
	meta := &readerv1.ReadResponse{}
	if err := proto.Unmarshal(got[1].AppMetadata, meta); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(meta, &readerv1.ReadResponse{Summary: &readerv1.Summary{}}) {
		t.Fatalf("DoGet of a unit of no rows: app_metadata %v, want an empty summary", meta)
	}
	rec, err := decodeBatch(asReadIPC(enc.schemaMsg, got[1]))
	if err != nil || rec.NumRows() != 0 || !rec.Schema().Equal(p.out) {
		t.Fatalf("DoGet of a unit of no rows: batch %v (%v), want no rows of the unit's schema", rec, err)
	}
	rec.Release()
}
