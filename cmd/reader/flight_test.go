package main

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/flight"
	flightpb "github.com/apache/arrow/go/v15/arrow/flight/gen/flight"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/reader"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/warehouse/block"
)

// TestFlightInfoFromSigd: a reader started with --sigd answers Arrow
// Flight's GetFlightInfo for a pipeline's read solution, asking sigd with
// the caller's own token: one endpoint per raw block in event order, with
// the reader's location and a ticket holding the unit reader.UnitsFromSolution
// builds; the batches' schema; the rows. DoGet of every ticket, read with
// Arrow's own Flight reader, gives the records reader.Client reads for the
// same units. sigd's refusals come through with their codes.
func TestFlightInfoFromSigd(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 3, RowsPerBlock: 400})
	srv := sigdtest.Start(t, w, sigd.Config{WorkersMin: 1, WorkersMax: 1}, sigd.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sig := srv.SIG(t, "trainer")
	if _, err := sig.SubmitGraph(ctx, sigdtest.Submit("ctr", "p1", 1, sigdtest.DSL(t, "ctr_small"), w.All())); err != nil {
		t.Fatal(err)
	}
	sol := sigdtest.WaitComplete(ctx, t, sig, "ctr", "p1")

	addr := startReader(t, w.MinIO, listeningLine, "--tokens", srv.Config().TokensFile,
		"--sigd", srv.Addr(), "--sigd-token", srv.Tokens["reader"])[1]
	fc := flightpb.NewFlightServiceClient(sigdtest.Dial(t, addr, srv.Tokens["trainer"]))
	descriptor := func(c *readerv1.FlightCommand) *flightpb.FlightDescriptor {
		b, err := proto.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return &flightpb.FlightDescriptor{Type: flightpb.FlightDescriptor_CMD, Cmd: b}
	}
	info, err := fc.GetFlightInfo(ctx, descriptor(&readerv1.FlightCommand{Client: "ctr", Pipeline: "p1", BatchRows: 128}))
	if err != nil {
		t.Fatal(err)
	}
	units, err := reader.UnitsFromSolution(sol, reader.UnitOptions{BatchRows: 128})
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Endpoint) != 3 || info.TotalRecords != 1200 || !info.Ordered {
		t.Fatalf("%d endpoints, %d records, ordered %v; want 3 blocks of 400 rows in order", len(info.Endpoint), info.TotalRecords, info.Ordered)
	}
	progress := &sigv1.ReadSolution{}
	if err := proto.Unmarshal(info.AppMetadata, progress); err != nil || !progress.Complete || progress.BlocksReady != sol.BlocksReady {
		t.Fatalf("app_metadata %v (%v), want the complete solution's progress", progress, err)
	}
	schema, err := flight.DeserializeSchema(info.Schema, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range schema.Fields() {
		names = append(names, f.Name)
	}
	if want := []string{"event_id", "click", "conversion", "qa_overlap", "query_ids", "price_bin"}; !slices.Equal(names, want) {
		t.Fatalf("schema columns %v, want %v", names, want)
	}

	gc, err := reader.NewClient(reader.ClientConfig{Addresses: []string{addr}, Token: srv.Tokens["trainer"]})
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	for i, ep := range info.Endpoint {
		if len(ep.Location) != 1 || ep.Location[0].Uri != "grpc+tcp://"+addr {
			t.Fatalf("endpoint %d: locations %v, want grpc+tcp://%s", i, ep.Location, addr)
		}
		req := &readerv1.ReadRequest{}
		if err := proto.Unmarshal(ep.Ticket.Ticket, req); err != nil || !proto.Equal(req.Unit, units[i]) || req.StartRow != 0 {
			t.Fatalf("endpoint %d: ticket %v (%v), want unit %v from row 0", i, req, err, units[i])
		}
		rd := doGet(ctx, t, fc, ep.Ticket)
		if !rd.Schema().Equal(schema) {
			t.Fatalf("endpoint %d: stream schema %s, FlightInfo's %s", i, rd.Schema(), schema)
		}
		n := 0
		for b, err := range gc.ReadBatches(ctx, units[i]) {
			if err != nil {
				t.Fatal(err)
			}
			if !rd.Next() {
				t.Fatalf("endpoint %d: Flight stream ended after %d batches: %v", i, n, rd.Err())
			}
			if !array.RecordEqual(rd.Record(), b.Record) {
				t.Fatalf("endpoint %d: batch %d differs from the Go client's", i, n)
			}
			n++
		}
		if rd.Next() || rd.Err() != nil {
			t.Fatalf("endpoint %d: Flight stream longer than the Go client's %d batches, or failed: %v", i, n, rd.Err())
		}
		rd.Release()
	}

	// GetSchema answers the schema of the same descriptor; a command as
	// JSON (protobuf's JSON mapping, what a client without SIG's
	// generated code sends) is the same command.
	sr, err := fc.GetSchema(ctx, descriptor(&readerv1.FlightCommand{Client: "ctr", Pipeline: "p1", BatchRows: 128}))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := flight.DeserializeSchema(sr.Schema, memory.DefaultAllocator); err != nil || !got.Equal(schema) {
		t.Fatalf("GetSchema: %v (%v), want GetFlightInfo's %s", got, err, schema)
	}
	jsonInfo, err := fc.GetFlightInfo(ctx, &flightpb.FlightDescriptor{Type: flightpb.FlightDescriptor_CMD,
		Cmd: []byte(` {"client": "ctr", "pipeline": "p1", "batchRows": 128, "mode": "FLIGHT_MODE_MEMO"}`)})
	if err != nil {
		t.Fatal(err)
	}
	for i, ep := range jsonInfo.Endpoint {
		if !proto.Equal(ep.Ticket, info.Endpoint[i].Ticket) {
			t.Fatalf("JSON command: endpoint %d's ticket differs from the marshaled command's", i)
		}
	}
	_, err = fc.GetFlightInfo(ctx, &flightpb.FlightDescriptor{Type: flightpb.FlightDescriptor_CMD, Cmd: []byte(`{"client": "ctr", "pipe": "p1"}`)})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "descriptor.cmd") {
		t.Fatalf("JSON command with an unknown field: %v, want InvalidArgument naming descriptor.cmd", err)
	}
	// ListActions lists none; ListFlights says what to call instead.
	la, err := fc.ListActions(ctx, &flightpb.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if a, err := la.Recv(); err != io.EOF {
		t.Fatalf("ListActions: %v, %v; want no actions", a, err)
	}
	lf, err := fc.ListFlights(ctx, &flightpb.Criteria{})
	if err == nil {
		_, err = lf.Recv()
	}
	if st := status.Convert(err); st.Code() != codes.Unimplemented || !strings.Contains(st.Message(), "GetFlightInfo") {
		t.Fatalf("ListFlights: %v, want Unimplemented naming GetFlightInfo", err)
	}

	// A range cutting blocks (issue 29): the second half of block 0's
	// events to the first half of block 1's. Their tickets carry the
	// range, the uncut block 2 is not in the solution, and the rows read
	// are exactly the events in it.
	ev0, ev1 := sol.RawBlocks[0].Events, sol.RawBlocks[1].Events
	rng := &sigv1.EventRange{StartMicros: (ev0.StartMicros + ev0.EndMicros) / 2, EndMicros: (ev1.StartMicros + ev1.EndMicros) / 2}
	rinfo, err := fc.GetFlightInfo(ctx, descriptor(&readerv1.FlightCommand{Client: "ctr", Pipeline: "p1", BatchRows: 128, Range: rng}))
	if err != nil {
		t.Fatal(err)
	}
	if len(rinfo.Endpoint) != 2 || rinfo.TotalRecords != -1 {
		t.Fatalf("range %v: %d endpoints, %d records; want 2 blocks of rows not known before they are read (-1)", rng, len(rinfo.Endpoint), rinfo.TotalRecords)
	}
	want := 0
	for _, b := range w.Blocks[:2] {
		_, raw, err := block.ReadBlock(ctx, w.Store, b.Key)
		if err != nil {
			t.Fatal(err)
		}
		times := raw.Column(raw.Schema().FieldIndices("event_time")[0]).(*array.Int64)
		for _, v := range times.Int64Values() {
			if v >= rng.StartMicros && v < rng.EndMicros {
				want++
			}
		}
		raw.Release()
	}
	got := 0
	for i, ep := range rinfo.Endpoint {
		req := &readerv1.ReadRequest{}
		if err := proto.Unmarshal(ep.Ticket.Ticket, req); err != nil || !proto.Equal(req.Unit.EventRange, rng) {
			t.Fatalf("endpoint %d: ticket's event_range %v (%v), want %v", i, req.GetUnit().GetEventRange(), err, rng)
		}
		rd := doGet(ctx, t, fc, ep.Ticket)
		for rd.Next() {
			got += int(rd.Record().NumRows())
		}
		if rd.Err() != nil {
			t.Fatal(rd.Err())
		}
		rd.Release()
	}
	if want == 0 || got != want {
		t.Fatalf("range %v: read %d rows, want the %d events in it", rng, got, want)
	}

	// sigd's answers pass through with their codes.
	_, err = fc.GetFlightInfo(ctx, descriptor(&readerv1.FlightCommand{Client: "ctr", Pipeline: "no-such-pipeline"}))
	if st := status.Convert(err); st.Code() != codes.NotFound || !strings.HasPrefix(st.Message(), "sigd: ") {
		t.Fatalf("unknown pipeline: %v, want NotFound from sigd", err)
	}
	_, err = fc.GetFlightInfo(ctx, descriptor(&readerv1.FlightCommand{Client: "cvr", Pipeline: "p1"}))
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("another client's pipeline: %v, want PermissionDenied", err)
	}
}

// doGet reads ticket's stream with Flight's record reader.
func doGet(ctx context.Context, t *testing.T, fc flight.FlightServiceClient, ticket *flight.Ticket) *flight.Reader {
	t.Helper()
	stream, err := fc.DoGet(ctx, ticket)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := flight.NewRecordReader(stream)
	if err != nil {
		t.Fatal(err)
	}
	return rd
}
