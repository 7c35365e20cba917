package reader

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/flight"
	flightpb "github.com/apache/arrow/go/v15/arrow/flight/gen/flight"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/auth"
	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// SolutionResolver gives GetFlightInfo a pipeline's read solution: sigd's
// SIG service (sigv1.SIGClient satisfies it).
type SolutionResolver interface {
	GetReadSolution(ctx context.Context, req *sigv1.GetReadSolutionRequest, opts ...grpc.CallOption) (*sigv1.ReadSolution, error)
}

// flightService is a Server's Arrow Flight service (arrow.flight.protocol.
// FlightService), on the same gRPC server as Read: any Arrow Flight client
// (pyarrow.flight, Arrow's Go, Java, C++ or Rust clients) reads units with
// DoGet, and resolves a pipeline's read solution into one endpoint per
// block with GetFlightInfo. See doc.go, "Arrow Flight".
type flightService struct {
	flightpb.UnimplementedFlightServiceServer
	s *Server
}

// FlightService returns the server's Arrow Flight service, which
// GRPCServer registers beside the Reader service.
func (s *Server) FlightService() flightpb.FlightServiceServer { return &flightService{s: s} }

// authorize lets a call through when the caller is a trainer of client or
// an operator (always, without Config.Tokens): Read's and DoGet's rule.
func (s *Server) authorize(ctx context.Context, client string) error {
	if s.cfg.Tokens == nil {
		return nil
	}
	if _, err := auth.Require(ctx, auth.RoleTrainer, auth.RoleOperator); err != nil {
		return err
	}
	_, err := auth.RequireClient(ctx, client)
	return err
}

// DoGet implements Flight's DoGet: the ticket is a marshaled ReadRequest.
// The stream is the batch schema, then one FlightData per batch of Read
// (the bytes Read sends, as Flight frames them: the record batch header in
// data_header, its body in data_body; app_metadata a ReadResponse with
// start_row and rows, and on the block's last batch Read's Summary). Errors
// are Read's.
func (f *flightService) DoGet(t *flightpb.Ticket, stream flightpb.FlightService_DoGetServer) (err error) {
	s := f.s
	ctx := stream.Context()
	req := &readerv1.ReadRequest{}
	if err := proto.Unmarshal(t.GetTicket(), req); err != nil {
		// Authentication came first (the interceptor); a caller with no
		// right to any unit learns only that its ticket is malformed.
		return Status(invalid("ticket", "not a marshaled sig.reader.v1.ReadRequest: %v", err)).Err()
	}
	if err := s.authorize(ctx, req.GetUnit().GetClient()); err != nil {
		return err
	}
	err = s.run(ctx, req, flightSink{stream})
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	return Status(err).Err()
}

// flightSink sends a unit as Flight's DoGet stream.
type flightSink struct{ stream grpc.ServerStream }

func (f flightSink) begin(enc *encoder) error {
	h, err := enc.flightSchema()
	if err != nil {
		return err
	}
	return f.stream.SendMsg(&flightpb.FlightData{DataHeader: h})
}

func (f flightSink) batch(enc *encoder, cols []arrow.Array, lo, hi, n, sent int64, crc uint32) (uint32, int64, error) {
	m, size, crc, err := enc.encodeFlight(cols, lo, hi, n, sent, crc)
	if err != nil {
		return crc, 0, err
	}
	defer m.free() // if gRPC did not take it
	return crc, size, f.stream.SendMsg(m)
}

// end sends nothing: the summary rides on the last batch (encodeFlight), as
// a FlightData of app_metadata alone would stop Arrow's Go reader (v15
// reads every FlightData as an IPC message). A unit of no rows (an event
// range that holds none of its block's rows, issue 29) has no last batch,
// so it sends one batch of no rows carrying the summary: a Flight client
// learns that the unit is complete, as from any other, where Read's
// clients have the summary alone. (A read resumed at the end of a unit
// of some rows sends nothing, as Read sends no batch: a client that
// resumes there has every row already and needs no summary to know it,
// as the Python client does.) Read never sends a batch of no rows, so
// the summary's crc32c (of the arrow_ipc bytes Read sends) leaves it out.
func (f flightSink) end(enc *encoder, cols []arrow.Array, sum *readerv1.Summary) error {
	if sum.BlockRows != 0 {
		return nil
	}
	m, _, _, err := enc.encodeFlight(cols, 0, 0, 0, 0, 0)
	if err != nil {
		return err
	}
	defer m.free()
	return f.stream.SendMsg(m)
}

// flightSchema returns the schema message's flatbuffer as Flight sends it
// first in a DoGet stream: the data_header of Arrow's own Flight writer
// (flight.NewRecordWriter), computed once per encoder.
func (e *encoder) flightSchema() ([]byte, error) {
	e.flightOnce.Do(func() {
		var c captureData
		w := flight.NewRecordWriter(&c, ipc.WithSchema(e.schema))
		if err := w.Close(); err != nil {
			e.flightErr = fmt.Errorf("%w: %w", errEncode, err)
			return
		}
		if len(c.sent) != 1 || len(c.sent[0].DataHeader) == 0 {
			e.flightErr = fmt.Errorf("%w: Arrow's Flight writer sent %d messages for the schema", errEncode, len(c.sent))
			return
		}
		e.flightHeader = c.sent[0].DataHeader
	})
	return e.flightHeader, e.flightErr
}

// captureData keeps what a Flight writer sends (copies: the writer reuses
// its buffers).
type captureData struct{ sent []*flightpb.FlightData }

func (c *captureData) Send(d *flightpb.FlightData) error {
	c.sent = append(c.sent, &flightpb.FlightData{DataHeader: bytes.Clone(d.DataHeader),
		AppMetadata: bytes.Clone(d.AppMetadata), DataBody: bytes.Clone(d.DataBody)})
	return nil
}

// FlightData field numbers (Arrow's Flight.proto).
const (
	fdDataHeader  = 2
	fdAppMetadata = 3
	fdDataBody    = 1000
)

// encodeFlight returns rows [lo, hi) of cols, of a block of n rows, as a
// marshaled FlightData, written straight into a pooled buffer as
// encodeMessage writes a ReadResponse: the body's buffers are copied once,
// from the columns into the message gRPC sends (Arrow's Flight writer,
// flight.NewRecordWriter, serializes the body into a bytes.Buffer that
// gRPC's codec then copies into the message). data_header and data_body
// are the bytes Arrow's writer sends. app_metadata is a ReadResponse with
// start_row and rows and, on the block's last batch, the Summary Read
// sends (sent rows before this batch and crc continued over it); it comes
// after data_body, so that the summary's CRC covers the body written just
// before (protobuf parsers take fields in any order).
// It returns the length of the arrow_ipc Read sends for these rows and the
// CRC-32C of those bytes continued from crc.
func (e *encoder) encodeFlight(cols []arrow.Array, lo, hi, n, sent int64, crc uint32) (*batchMessage, int64, uint32, error) {
	size, err := e.layout(cols, lo, hi)
	if err != nil {
		return nil, 0, crc, err
	}
	// app_metadata is at most tag and length, start_row and rows, and a
	// summary of two int64s and a uint32.
	const maxApp = 2 + 2*(1+binary.MaxVarintLen64) + 2 + 2*(1+binary.MaxVarintLen64) + 1 + binary.MaxVarintLen32
	max := bytesField(fdDataHeader, len(e.meta)) + bytesField(fdDataBody, int(e.body)) + protowire.SizeTag(fdAppMetadata) + maxApp
	buf := readerBufferPool.Get(max)
	out := (*buf)[:0]
	out = appendBytesField(out, fdDataHeader, e.meta)
	body := []byte(nil)
	if e.body > 0 {
		out = protowire.AppendVarint(protowire.AppendTag(out, fdDataBody, protowire.BytesType), uint64(e.body))
		body = out[len(out) : len(out)+int(e.body)]
		e.writeBody(body)
		out = out[:len(out)+int(e.body)]
	}
	if hi > lo { // Read sends no batch of no rows (flightSink.end)
		crc = e.crcIPC(crc, body)
	}
	// The ReadResponse, fields in number order, zeros left out as proto3
	// does.
	var app [maxApp]byte
	a := app[:0]
	if lo != 0 {
		a = protowire.AppendVarint(protowire.AppendTag(a, 2, protowire.VarintType), uint64(lo))
	}
	if hi != lo {
		a = protowire.AppendVarint(protowire.AppendTag(a, 3, protowire.VarintType), uint64(hi-lo))
	}
	if hi == n {
		var sum [3 * (1 + binary.MaxVarintLen64)]byte
		m := protowire.AppendVarint(protowire.AppendTag(sum[:0], 1, protowire.VarintType), uint64(sent+hi-lo))
		if n != 0 {
			m = protowire.AppendVarint(protowire.AppendTag(m, 2, protowire.VarintType), uint64(n))
		}
		if crc != 0 {
			m = protowire.AppendVarint(protowire.AppendTag(m, 3, protowire.VarintType), uint64(crc))
		}
		a = protowire.AppendBytes(protowire.AppendTag(a, 4, protowire.BytesType), m)
	}
	out = appendBytesField(out, fdAppMetadata, a)
	*buf = out
	return &batchMessage{buf: buf, startRow: lo, rows: hi - lo}, size, crc, nil
}

// bytesField is the size of a non-empty bytes field (0 for an empty one,
// which proto3 leaves out).
func bytesField(num protowire.Number, n int) int {
	if n == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

func appendBytesField(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

var zeros [8]byte

// crcIPC continues crc over the arrow_ipc bytes write would write for the
// layout planned, whose body is body: the schema message, the record
// batch's framing, header and padding, the body, end-of-stream.
func (e *encoder) crcIPC(crc uint32, body []byte) uint32 {
	crc = crc32.Update(crc, castagnoli, e.schemaMsg)
	var frame [8]byte
	binary.LittleEndian.PutUint32(frame[:], ipcContinuation)
	binary.LittleEndian.PutUint32(frame[4:], uint32(e.metaLen))
	crc = crc32.Update(crc, castagnoli, frame[:])
	crc = crc32.Update(crc, castagnoli, e.meta)
	crc = crc32.Update(crc, castagnoli, zeros[:int(e.metaLen)-len(e.meta)])
	crc = crc32.Update(crc, castagnoli, body)
	return crc32.Update(crc, castagnoli, endOfStream[:])
}

// GetFlightInfo implements Flight's GetFlightInfo. The descriptor is a CMD
// holding a marshaled FlightCommand; the reader asks sigd for the
// pipeline's read solution (Config.Solutions) with the caller's own token,
// so that sigd decides what the caller may read, and answers one endpoint
// per raw block in event order: the ticket DoGet takes for the block's unit
// from row 0, and Config.FlightLocations. The schema is the batches'.
// app_metadata is a marshaled ReadSolution with only its progress (client,
// pipeline, range, raw source, the block counts and complete).
// total_records is the blocks' rows, or -1 (unknown) when the range cuts a
// block (its unit holds only the rows in the range, counted when read).
func (f *flightService) GetFlightInfo(ctx context.Context, d *flightpb.FlightDescriptor) (*flightpb.FlightInfo, error) {
	s := f.s
	r, err := f.resolve(ctx, d)
	if err != nil {
		return nil, err
	}
	var locs []*flightpb.Location
	for _, l := range s.cfg.FlightLocations {
		locs = append(locs, &flightpb.Location{Uri: l})
	}
	info := &flightpb.FlightInfo{Schema: flight.SerializeSchema(r.schema, memory.DefaultAllocator),
		FlightDescriptor: d, TotalBytes: -1, Ordered: true}
	for i, u := range r.units {
		t, err := proto.Marshal(&readerv1.ReadRequest{Unit: u})
		if err != nil {
			return nil, status.Errorf(codes.Internal, "marshaling the ticket of block %s: %v", u.BlockId, err)
		}
		info.Endpoint = append(info.Endpoint, &flightpb.FlightEndpoint{Ticket: &flightpb.Ticket{Ticket: t}, Location: locs})
		if info.TotalRecords >= 0 {
			info.TotalRecords += r.sol.GetRawBlocks()[i].GetRows()
		}
		if u.EventRange != nil {
			// How many of the block's rows are in the range is known only
			// once its event times are read: -1, Flight's unknown.
			info.TotalRecords = -1
		}
	}
	sol := r.sol
	progress := &sigv1.ReadSolution{Client: sol.Client, Pipeline: sol.Pipeline, Range: sol.Range, RawSource: sol.RawSource,
		BlocksReady: sol.BlocksReady, BlocksPending: sol.BlocksPending, BlocksFailed: sol.BlocksFailed, Complete: sol.Complete}
	if info.AppMetadata, err = proto.Marshal(progress); err != nil {
		return nil, status.Errorf(codes.Internal, "marshaling app_metadata: %v", err)
	}
	return info, nil
}

// GetSchema implements Flight's GetSchema: the schema of the batches
// GetFlightInfo's endpoints stream for the same descriptor (a CMD holding
// a marshaled FlightCommand), resolved the same way, with the same
// authorization, without marshaling a ticket per block. As Flight's
// SchemaResult has it, the schema is an IPC schema message (what pyarrow's
// get_schema decodes).
func (f *flightService) GetSchema(ctx context.Context, d *flightpb.FlightDescriptor) (*flightpb.SchemaResult, error) {
	r, err := f.resolve(ctx, d)
	if err != nil {
		return nil, err
	}
	return &flightpb.SchemaResult{Schema: flight.SerializeSchema(r.schema, memory.DefaultAllocator)}, nil
}

// resolved is a descriptor resolved: the pipeline's read solution at
// sigd, its units and their batches' schema.
type resolved struct {
	sol    *sigv1.ReadSolution
	units  []*readerv1.WorkUnit
	schema *arrow.Schema
}

// resolve authorizes the caller and resolves descriptor d (GetFlightInfo's
// and GetSchema's): its FlightCommand, the read solution from sigd with the
// caller's own token, the units, the batch schema. Errors are gRPC
// statuses.
func (f *flightService) resolve(ctx context.Context, d *flightpb.FlightDescriptor) (*resolved, error) {
	s := f.s
	if s.cfg.Tokens != nil {
		if _, err := auth.Require(ctx, auth.RoleTrainer, auth.RoleOperator); err != nil {
			return nil, err
		}
	}
	cmd, err := flightCommand(d)
	if err != nil {
		return nil, Status(err).Err()
	}
	if s.cfg.Tokens != nil {
		if _, err := auth.RequireClient(ctx, cmd.Client); err != nil {
			return nil, err
		}
	}
	if s.cfg.Solutions == nil {
		return nil, status.Error(codes.FailedPrecondition,
			"this reader resolves no read solutions (start it with --sigd); DoGet takes tickets built elsewhere")
	}
	// The caller's token goes to sigd as it came (forwardAuth); the
	// call is bounded even when the caller set no deadline.
	sctx, cancel := context.WithTimeout(forwardAuth(ctx), 30*time.Second)
	defer cancel()
	sol, err := s.cfg.Solutions.GetReadSolution(sctx, &sigv1.GetReadSolutionRequest{Client: cmd.Client, Pipeline: cmd.Pipeline, Range: cmd.Range})
	if err != nil {
		// sigd's code as it is (NotFound for an unknown pipeline,
		// PermissionDenied, Unavailable when sigd is unreachable,
		// InvalidArgument naming range for a bad range).
		st := status.Convert(err)
		return nil, status.Errorf(st.Code(), "sigd: %s", st.Message())
	}
	opts := UnitOptions{Labels: cmd.LabelColumns, BatchRows: int(cmd.BatchRows)}
	switch cmd.Mode {
	case readerv1.FlightMode_FLIGHT_MODE_LOCAL:
		opts.Mode = func(*sigv1.InputSolution, *sigv1.BlockRead) readerv1.InputMode {
			return readerv1.InputMode_INPUT_MODE_LOCAL
		}
	case readerv1.FlightMode_FLIGHT_MODE_READY_ELSE_LOCAL:
		opts.Mode = ModeReadyElseLocal
	}
	units, err := UnitsFromSolution(sol, opts)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "sigd's read solution: %v", err)
	}
	schema, err := s.batchSchema(sol, opts, units)
	if err != nil {
		return nil, Status(err).Err()
	}
	return &resolved{sol: sol, units: units, schema: schema}, nil
}

// ListFlights is not served: a reader has no list of flights to give. A
// flight is a pipeline's read over an event range, which sigd keeps per
// client and resolves on request, and sigd has no call listing them; an
// empty list would say there is nothing to read. The message names what
// to call instead.
func (f *flightService) ListFlights(*flightpb.Criteria, flightpb.FlightService_ListFlightsServer) error {
	return status.Error(codes.Unimplemented, "readers do not list flights: call GetFlightInfo (or GetSchema) with a CMD descriptor "+
		"holding a marshaled sig.reader.v1.FlightCommand {client, pipeline, range} of a pipeline submitted to sigd, "+
		"then DoGet each endpoint's ticket (README, \"Plain Arrow Flight clients\")")
}

// ListActions lists the reader's actions: none (Flight's convention for a
// server without DoAction: an empty list, not an error).
func (f *flightService) ListActions(*flightpb.Empty, flightpb.FlightService_ListActionsServer) error {
	return nil
}

// DoAction: there are no actions (ListActions lists none).
func (f *flightService) DoAction(a *flightpb.Action, _ flightpb.FlightService_DoActionServer) error {
	return status.Errorf(codes.Unimplemented, "action %q: readers have no actions (ListActions lists none); "+
		"read with GetFlightInfo and DoGet", trunc(a.GetType()))
}

// Handshake is not needed: every call carries its bearer token.
func (f *flightService) Handshake(flightpb.FlightService_HandshakeServer) error {
	return status.Error(codes.Unimplemented, "readers need no handshake: send the header \"authorization: Bearer <token>\" with every call")
}

// DoPut and DoExchange: readers only read.
func (f *flightService) DoPut(flightpb.FlightService_DoPutServer) error {
	return status.Error(codes.Unimplemented, "readers are read-only: submit graphs to sigd (sig.v1.SIG/SubmitGraph), read with GetFlightInfo and DoGet")
}

func (f *flightService) DoExchange(flightpb.FlightService_DoExchangeServer) error {
	return status.Error(codes.Unimplemented, "readers are read-only: read with GetFlightInfo and DoGet")
}

// PollFlightInfo: GetFlightInfo answers at once (a pipeline whose memo
// data is pending is a solution in progress, its app_metadata says how
// far), so there is nothing to poll.
func (f *flightService) PollFlightInfo(context.Context, *flightpb.FlightDescriptor) (*flightpb.PollInfo, error) {
	return nil, status.Error(codes.Unimplemented, "call GetFlightInfo: it answers at once, with the read solution's progress in app_metadata")
}

// flightCommand parses a descriptor's FlightCommand; errors name the field.
func flightCommand(d *flightpb.FlightDescriptor) (*readerv1.FlightCommand, error) {
	if d.GetType() != flightpb.FlightDescriptor_CMD {
		return nil, invalid("descriptor.type", "%s; want CMD, a sig.reader.v1.FlightCommand (marshaled, or as JSON)", d.GetType())
	}
	cmd := &readerv1.FlightCommand{}
	if raw, isJSON := jsonCommand(d.GetCmd()); isJSON {
		// The command as JSON (protobuf's JSON mapping of FlightCommand),
		// so that a Flight client in any language needs no generated
		// code (README, "Plain Arrow Flight clients").
		if err := protojson.Unmarshal(raw, cmd); err != nil {
			return nil, invalid("descriptor.cmd", "not a sig.reader.v1.FlightCommand in JSON: %v", err)
		}
	} else if err := proto.Unmarshal(d.GetCmd(), cmd); err != nil {
		return nil, invalid("descriptor.cmd", "not a marshaled sig.reader.v1.FlightCommand, nor one in JSON: %v", err)
	}
	if err := checkName("descriptor.cmd.client", cmd.Client, false); err != nil {
		return nil, err
	}
	if err := checkName("descriptor.cmd.pipeline", cmd.Pipeline, false); err != nil {
		return nil, err
	}
	if _, ok := readerv1.FlightMode_name[int32(cmd.Mode)]; !ok {
		return nil, invalid("descriptor.cmd.mode", "unknown mode %d", cmd.Mode)
	}
	return cmd, nil
}

// jsonCommand reports whether cmd is a FlightCommand in JSON, and returns
// it without its leading whitespace. A marshaled FlightCommand starts with
// a field's tag: never '{' (field 15 as a group, which FlightCommand does
// not have), nor ' ', '\t' or '\r' (fields 4 and 1 in wire types its
// fields do not use), but '\n' is client's tag, followed by the name's
// length, which is '{' for a name of 123 bytes. So a command starting with
// '\n' is JSON only if it is no marshaled FlightCommand.
func jsonCommand(cmd []byte) ([]byte, bool) {
	raw := bytes.TrimLeft(cmd, " \t\r\n")
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false
	}
	if cmd[0] == '\n' && proto.Unmarshal(cmd, &readerv1.FlightCommand{}) == nil {
		return nil, false
	}
	return raw, true
}

// batchSchema returns the schema of the batches of the solution's units:
// the first unit's plan's, or for a solution without blocks that of a unit
// of a placeholder block.
func (s *Server) batchSchema(sol *sigv1.ReadSolution, opts UnitOptions, units []*readerv1.WorkUnit) (*arrow.Schema, error) {
	if len(units) == 0 {
		const id = "schema"
		sol = proto.CloneOf(sol)
		sol.RawBlocks = []*sigv1.BlockRead{{BlockId: id}}
		for _, in := range sol.Inputs {
			k, err := canon.ParseKey(in.ComponentKey)
			if err != nil {
				return nil, fmt.Errorf("%w: sigd's read solution: input %q: %w", ErrInvalidUnit, in.Input, err)
			}
			in.Blocks = []*sigv1.BlockRead{{BlockId: id, MemoObject: block.MemoKey(k, blockref.ParseMemo(id)), State: sigv1.BlockState_BLOCK_STATE_READY}}
		}
		var err error
		if units, err = UnitsFromSolution(sol, opts); err != nil {
			return nil, err
		}
		units[0].RawObject = block.RawKey(units[0].RawSource, blockref.New(id, 1))
	}
	p, err := s.plan(units[0])
	if err != nil {
		return nil, err
	}
	return p.out, nil
}

// forwardAuth returns ctx with the incoming call's authorization header on
// its outgoing calls.
func forwardAuth(ctx context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("authorization"); len(v) > 0 {
		return metadata.AppendToOutgoingContext(ctx, "authorization", v[0])
	}
	return ctx
}
