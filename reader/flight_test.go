package reader

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/flight"
	flightpb "github.com/apache/arrow/go/v15/arrow/flight/gen/flight"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sigdata/sig/internal/auth"
	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// flightClient dials addr with a bearer token (none if empty).
func flightClient(t testing.TB, addr, token string) flightpb.FlightServiceClient {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256 << 20))}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(auth.BearerCredentials{Token: token, Insecure: true}))
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return flightpb.NewFlightServiceClient(conn)
}

func ticket(t testing.TB, req *readerv1.ReadRequest) *flightpb.Ticket {
	t.Helper()
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return &flightpb.Ticket{Ticket: b}
}

// doGet runs one DoGet and returns every FlightData received.
func doGet(ctx context.Context, c flightpb.FlightServiceClient, tk *flightpb.Ticket) ([]*flightpb.FlightData, error) {
	stream, err := c.DoGet(ctx, tk)
	if err != nil {
		return nil, err
	}
	var out []*flightpb.FlightData
	for {
		d, err := stream.Recv()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, d)
	}
}

// asReadIPC returns the arrow_ipc bytes of a Read response holding the
// record batch of a Flight message d: the schema message of the unit's
// stream (schemaMsg, framed), d's header framed and padded as a stream
// frames it, d's body, end-of-stream.
func asReadIPC(schemaMsg []byte, d *flightpb.FlightData) []byte {
	var b bytes.Buffer
	b.Write(schemaMsg)
	metaLen := pad(int64(len(d.DataHeader))+8, 8) - 8
	var frame [8]byte
	binary.LittleEndian.PutUint32(frame[:], ipcContinuation)
	binary.LittleEndian.PutUint32(frame[4:], uint32(metaLen))
	b.Write(frame[:])
	b.Write(d.DataHeader)
	b.Write(make([]byte, int(metaLen)-len(d.DataHeader)))
	b.Write(d.DataBody)
	b.Write(endOfStream[:])
	return b.Bytes()
}

// schemaMessage returns the framed schema message an arrow_ipc stream
// starts with.
func schemaMessage(ipc []byte) []byte {
	return ipc[:8+int(binary.LittleEndian.Uint32(ipc[4:]))]
}

// checkFlightIsRead fails unless a DoGet stream carries Read's batches for
// the same request: the schema first (Arrow's own Flight writer's), then per
// Read batch the same bytes, framed by Flight, app_metadata naming its rows,
// the last one holding Read's summary.
func checkFlightIsRead(t *testing.T, what string, enc *encoder, got []*flightpb.FlightData, want []*readerv1.ReadResponse) {
	t.Helper()
	schema, err := enc.flightSchema()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || !bytes.Equal(got[0].DataHeader, schema) || len(got[0].DataBody) != 0 {
		t.Fatalf("%s: the stream does not start with the schema message", what)
	}
	got = got[1:]
	if len(got) != len(want)-1 {
		t.Fatalf("%s: %d batches, Read sent %d", what, len(got), len(want)-1)
	}
	for i, d := range got {
		r := want[i]
		if ipc := asReadIPC(schemaMessage(r.ArrowIpc), d); !bytes.Equal(ipc, r.ArrowIpc) {
			t.Fatalf("%s: batch %d: Flight's bytes differ from Read's at byte %d", what, i, firstDiff(ipc, r.ArrowIpc))
		}
		meta := &readerv1.ReadResponse{}
		if err := proto.Unmarshal(d.AppMetadata, meta); err != nil {
			t.Fatalf("%s: batch %d: app_metadata: %v", what, i, err)
		}
		wantMeta := &readerv1.ReadResponse{StartRow: r.StartRow, Rows: r.Rows}
		if i == len(got)-1 {
			wantMeta.Summary = want[len(want)-1].Summary
		}
		if !proto.Equal(meta, wantMeta) {
			t.Fatalf("%s: batch %d: app_metadata %v, want %v", what, i, meta, wantMeta)
		}
	}
}

// TestFlightDoGetSendsReadsBytes: DoGet of a ticket sends, for SIG, LIG and
// mixed units, from row 0 and from rows inside and at the end of the
// block, the very batches Read sends for the same request, with Read's
// summary on the last; and Arrow's own Flight reader decodes the stream
// into Read's records.
func TestFlightDoGetSendsReadsBytes(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 2500, Nulls: true, Graphs: fleetGraphs(t, "ctr_wide", "ranking")})
	s := f.server(t, Config{})
	c := flightClient(t, serveGRPC(t, s), "")
	ctx := context.Background()
	modes := map[string]func(int) readerv1.InputMode{
		"SIG": allMode(memo), "LIG": allMode(local),
		"mixed": func(i int) readerv1.InputMode { return []readerv1.InputMode{memo, local}[i%2] },
	}
	for name, m := range modes {
		for _, start := range []int64{0, 1000, 1500, 2500} {
			what := fmt.Sprintf("%s from row %d", name, start)
			req := &readerv1.ReadRequest{Unit: f.unit(0, 1000, m), StartRow: start}
			want, err := collect(ctx, s, req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := doGet(ctx, c, ticket(t, req))
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			p, err := newPlan(req.Unit, transform.Default(), Limits{}.EnsureDefaults())
			if err != nil {
				t.Fatal(err)
			}
			enc, err := newEncoder(p.out)
			if err != nil {
				t.Fatal(err)
			}
			checkFlightIsRead(t, what, enc, got, want)
		}
	}

	// Arrow's Flight reader (the stock client) reads Read's records.
	req := &readerv1.ReadRequest{Unit: f.unit(0, 1000, nil), StartRow: 700}
	want, err := collect(ctx, s, req)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := c.DoGet(ctx, ticket(t, req))
	if err != nil {
		t.Fatal(err)
	}
	rd, err := flight.NewRecordReader(stream)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	i := 0
	for rd.Next() {
		w, err := decodeBatch(want[i].ArrowIpc)
		if err != nil {
			t.Fatal(err)
		}
		if !array.RecordEqual(rd.Record(), w) {
			t.Fatalf("Arrow's Flight reader: batch %d differs from Read's", i)
		}
		w.Release()
		i++
	}
	if rd.Err() != nil || i != len(want)-1 {
		t.Fatalf("Arrow's Flight reader: %d batches of %d, %v", i, len(want)-1, rd.Err())
	}
}

// TestFlightDataMatchesArrowWriter: the FlightData the encoder writes hold
// the data_header and data_body Arrow's own Flight writer
// (flight.NewRecordWriter) sends for the same rows, over random batches of
// every type a reader sends, sliced anywhere; and the schema message is
// the writer's.
func TestFlightDataMatchesArrowWriter(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 1))
	types := []transform.Type{transform.Int64, transform.Float64, transform.String, transform.ListString, transform.ListInt64}
	for iter := 0; iter < 40; iter++ {
		rows := 1 + rng.IntN(300)
		var fields []arrow.Field
		var cols []arrow.Array
		for i, typ := range types {
			c := randomColumn(t, rng, typ, rows, []float64{0, 0.2, 1}[rng.IntN(3)], rng.IntN(3))
			cols = append(cols, c)
			fields = append(fields, arrow.Field{Name: fmt.Sprintf("c%d", i), Type: c.DataType(), Nullable: true})
		}
		schema := arrow.NewSchema(fields, nil)
		enc, err := newEncoder(schema)
		if err != nil {
			t.Fatal(err)
		}
		lo := int64(rng.IntN(rows))
		hi := lo + 1 + int64(rng.IntN(rows-int(lo)))
		m, _, _, err := enc.encodeFlight(cols, lo, hi, int64(rows), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := &flightpb.FlightData{}
		if err := proto.Unmarshal(*m.buf, got); err != nil {
			t.Fatal(err)
		}
		m.free()

		var sent captureData
		w := flight.NewRecordWriter(&sent, ipc.WithSchema(schema))
		rec := array.NewRecord(schema, cols, int64(rows))
		slice := rec.NewSlice(lo, hi)
		if err := w.Write(slice); err != nil {
			t.Fatal(err)
		}
		w.Close()
		slice.Release()
		rec.Release()
		if len(sent.sent) != 2 {
			t.Fatalf("Arrow's writer sent %d messages", len(sent.sent))
		}
		header, err := enc.flightSchema()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(header, sent.sent[0].DataHeader) {
			t.Fatalf("iteration %d: schema message differs from Arrow's writer's", iter)
		}
		want := sent.sent[1]
		if !bytes.Equal(got.DataHeader, want.DataHeader) || !bytes.Equal(got.DataBody, want.DataBody) {
			t.Fatalf("iteration %d: rows [%d, %d) of %d: header equal %v, body equal %v (at byte %d)", iter, lo, hi, rows,
				bytes.Equal(got.DataHeader, want.DataHeader), bytes.Equal(got.DataBody, want.DataBody), firstDiff(got.DataBody, want.DataBody))
		}
		for _, c := range cols {
			c.Release()
		}
	}
}

// TestFlightErrorsAndAuth: DoGet fails as Read does (a pending memo input
// is Unavailable "memo pending:" with its ErrorInfo, a corrupt memo object
// DataLoss, a malformed ticket InvalidArgument naming it), takes the same
// bearer tokens (trainers of the unit's client and operators), and
// GetFlightInfo without sigd or with a malformed descriptor says so.
func TestFlightErrorsAndAuth(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 1, RowsPerBlock: 600, Graphs: fleetGraphs(t, "ctr_small")})
	_, toks := writeTokens(t)
	s := f.server(t, Config{Tokens: toks})
	addr := serveGRPC(t, s)
	ctx := context.Background()
	c := flightClient(t, addr, trainerToken)

	pending := f.unit(0, 100, nil)
	pending.Inputs[1].MemoState = sigv1.BlockState_BLOCK_STATE_PENDING
	got, err := doGet(ctx, c, ticket(t, &readerv1.ReadRequest{Unit: pending}))
	st := status.Convert(err)
	if st.Code() != codes.Unavailable || !IsMemoPending(err) || !strings.HasPrefix(st.Message(), "memo pending: ") || len(got) != 0 {
		t.Fatalf("pending memo: %d messages, %v; want Unavailable \"memo pending:\" before any message", len(got), err)
	}
	if info := errorInfo(t, st.Details()); info.Reason != ReasonMemoPending || info.Metadata["input"] != f.inputs[1].name {
		t.Fatalf("pending memo: detail %v", info)
	}

	// A memo object of another component in the place of input 0's.
	key := block.MemoKey(f.inputs[0].key, blockref.ParseMemo(f.blocks[0].id))
	other, _, err := f.store.Get(ctx, block.MemoKey(f.inputs[1].key, blockref.ParseMemo(f.blocks[0].id)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Put(ctx, key, other, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := doGet(ctx, c, ticket(t, &readerv1.ReadRequest{Unit: f.unit(0, 100, nil)})); status.Code(err) != codes.DataLoss {
		t.Fatalf("corrupt memo object: %v, want DataLoss", err)
	}
	_, err = doGet(ctx, c, &flightpb.Ticket{Ticket: []byte("not a request")})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "ticket") {
		t.Fatalf("malformed ticket: %v, want InvalidArgument naming the ticket", err)
	}
	_, err = doGet(ctx, c, ticket(t, &readerv1.ReadRequest{Unit: f.unit(0, 100, nil), StartRow: -1}))
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "start_row") {
		t.Fatalf("negative start_row: %v, want InvalidArgument naming start_row", err)
	}

	// The LOCAL unit reads whatever the memo objects hold; tokens as Read's.
	lig := &readerv1.ReadRequest{Unit: f.unit(0, 100, allMode(local))}
	for _, tc := range []struct {
		token string
		code  codes.Code
	}{
		{"", codes.Unauthenticated},
		{"not-a-token-0123456789", codes.Unauthenticated},
		{clientToken, codes.PermissionDenied},
		{otherToken, codes.PermissionDenied},
		{trainerToken, codes.OK},
		{operatorToken, codes.OK},
	} {
		fc := flightClient(t, addr, tc.token)
		if _, err := doGet(ctx, fc, ticket(t, lig)); status.Code(err) != tc.code {
			t.Fatalf("DoGet with token %q: %v, want %v", tc.token, err, tc.code)
		}
		cmd, _ := proto.Marshal(&readerv1.FlightCommand{Client: "ctr", Pipeline: "p1"})
		want := tc.code
		if want == codes.OK {
			want = codes.FailedPrecondition // this reader has no sigd
		}
		_, err := fc.GetFlightInfo(ctx, &flightpb.FlightDescriptor{Type: flightpb.FlightDescriptor_CMD, Cmd: cmd})
		if status.Code(err) != want {
			t.Fatalf("GetFlightInfo with token %q: %v, want %v", tc.token, err, want)
		}
	}
	for _, tc := range []struct {
		d     *flightpb.FlightDescriptor
		field string
	}{
		{&flightpb.FlightDescriptor{Type: flightpb.FlightDescriptor_PATH, Path: []string{"ctr", "p1"}}, "descriptor.type"},
		{&flightpb.FlightDescriptor{Type: flightpb.FlightDescriptor_CMD, Cmd: []byte{0xff}}, "descriptor.cmd"},
		{&flightpb.FlightDescriptor{Type: flightpb.FlightDescriptor_CMD}, "descriptor.cmd.client"},
	} {
		_, err := c.GetFlightInfo(ctx, tc.d)
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.field) {
			t.Fatalf("descriptor %v: %v, want InvalidArgument naming %s", tc.d, err, tc.field)
		}
	}
}
