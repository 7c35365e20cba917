package reader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	flightpb "github.com/apache/arrow/go/v15/arrow/flight/gen/flight"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/internal/auth"
	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/objstore"
)

// ErrCompute: computing a LOCAL input failed on this block's data (an op
// refused a row, or a kernel panicked). Retrying does not help.
var ErrCompute = errors.New("computing local inputs failed")

// DefaultGCPercent is the garbage collector setting cmd/reader runs with
// (its --gc-percent; GOGC overrides it). A reader's live heap is a few
// blocks, and in SIG mode nearly every byte it allocates is input read
// once: collecting at 4x the live heap rather than Go's default 2x halves
// the collector's share of a reader's CPU for a few blocks' more memory.
const DefaultGCPercent = 400

// Config configures a Server. Zero fields take defaults (EnsureDefaults).
type Config struct {
	// Store is the warehouse bucket (an *objstore.Store); the reader only
	// reads it. Required.
	Store objstore.Reader
	// Registry holds the ops LOCAL inputs run. Default transform.Default().
	Registry *transform.Registry
	// Limits bound the units the server accepts.
	Limits Limits
	// Tokens authenticate callers; only roles trainer (for its own client)
	// and operator may Read. Nil disables authentication: in-process tests
	// and benchmarks only (cmd/reader always sets it).
	Tokens *auth.Tokens
	// MaxConcurrentUnits bounds the units served at once (each holds one
	// block in memory); further calls wait. Default 4 × GOMAXPROCS.
	MaxConcurrentUnits int
	// ExactAlignment makes every MEMO input fetch and compare its memo
	// object's event_id column with the raw block's. By default equal
	// lengths and CRC-32Cs of the two event_id segments in the objects'
	// footers suffice (see memoColumn), which saves reading a fifth of a
	// typical unit's bytes.
	ExactAlignment bool
	// MaxRequestBytes bounds a ReadRequest on the wire. Default 4 MiB.
	MaxRequestBytes int
	// Logger receives one line per failed unit. Default: discard.
	Logger *slog.Logger
	// Reporter, if set, is told of every memo object found corrupt, or
	// missing though the unit said it was ready (report.go), so that sigd
	// recomputes the block. cmd/reader sets it with --sigd.
	Reporter Reporter
	// Registerer, if set, gets the server's metrics (metrics.go; cmd/reader
	// serves them on --metrics).
	Registerer prometheus.Registerer
	// Solutions resolves read solutions for Arrow Flight's GetFlightInfo
	// (flight.go): sigd's SIG service (cmd/reader --sigd), called with the
	// caller's own bearer token, forwarded, so that sigd decides what the
	// caller may see. Its connection must not add a token of its own. Nil:
	// GetFlightInfo fails with FailedPrecondition; DoGet still serves
	// tickets.
	Solutions SolutionResolver
	// FlightLocations are the Flight locations (URIs such as
	// grpc+tcp://host:port) of the readers that serve this one's tickets,
	// given with every endpoint of GetFlightInfo (cmd/reader
	// --flight-locations, default its own address). Any reader serves any
	// ticket.
	FlightLocations []string
	// GuardSampleRows is how many rows of each MEMO input a unit
	// recomputes from the raw block and compares with the memo object (the
	// shared-fate guard, guard.go): 0 takes DefaultGuardSampleRows, a
	// negative number turns the guard off (cmd/reader --guard-sample-rows,
	// where 0 turns it off).
	GuardSampleRows int
	// GuardEvery, above 1, guards each MEMO input in one unit of
	// GuardEvery rather than in every unit (chosen from the same seed as
	// the rows: a unit read again is guarded again), dividing the guard's
	// cost, mostly fetching raw columns, by about as much (cmd/reader
	// --guard-every). 0 and 1: every unit.
	GuardEvery int
	// ReadLimits are the planned reads' hole limit, range limit and
	// speculative tail read (block.ReadLimits; zero fields take the
	// package's defaults, block.HoleLimit and the rest; cmd/reader
	// --read-hole-limit, --read-tail): bench/fleet-reads.txt measures
	// the requests and bytes they trade at the fleet.
	ReadLimits block.ReadLimits
	// FooterCacheEntries bounds the footers of raw blocks and memo objects
	// the server keeps, so that a unit of a block read before fetches its
	// columns without reading the footer first (fetch.go; a footer is a
	// few KiB). 0 takes DefaultFooterCacheEntries; negative keeps none.
	FooterCacheEntries int
	// PlanCacheEntries bounds the input sets whose plans the server keeps
	// (plancache.go): a unit of an input set planned before is only
	// checked against its block. 0 takes DefaultPlanCacheEntries; negative
	// keeps none.
	PlanCacheEntries int
	// GuardOnError says what to do with a unit whose guard could not
	// recompute its sample: serve it unchecked (GuardServe, the default)
	// or fail it (GuardFail; cmd/reader --guard-on-error). Either way it is
	// logged and counted (MetricGuardErrors).
	GuardOnError GuardOnError
}

// EnsureDefaults fills zero fields.
func (c *Config) EnsureDefaults() {
	if c.Registry == nil {
		c.Registry = transform.Default()
	}
	c.Limits = c.Limits.EnsureDefaults()
	if c.MaxConcurrentUnits <= 0 {
		c.MaxConcurrentUnits = 4 * runtime.GOMAXPROCS(0)
	}
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = 4 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.FooterCacheEntries == 0 {
		c.FooterCacheEntries = DefaultFooterCacheEntries
	}
	if c.PlanCacheEntries == 0 {
		c.PlanCacheEntries = DefaultPlanCacheEntries
	}
}

// DefaultFooterCacheEntries is Config.FooterCacheEntries's default: the
// footers of the raw blocks and memo objects of a few thousand blocks,
// some MiB, which covers the blocks a reader serves while the jobs of many
// pipelines read the same stretch of a stream.
const DefaultFooterCacheEntries = 4096

// Server is a stateless input reader (paper IV.B). It holds no state about
// units between calls: everything it needs is in the ReadRequest.
type Server struct {
	readerv1.UnimplementedReaderServer
	cfg     Config
	slots   chan struct{}
	reports *reports // nil without Config.Reporter
	metrics *serverMetrics
	// guardMetrics count the guard's work (guard.go).
	guardMetrics *guardMetrics
	// guardNonce draws each read's guard nonce (guard.go, readSeed):
	// rand.Uint64; tests replay reads with chosen nonces.
	guardNonce func() uint64

	// objects reads every object of a unit with planned requests, keeping
	// footers (fetch.go); requests counts them, countRaw and countMemo
	// add to it.
	objects             *block.ObjectReader
	requests            requestCounts
	countRaw, countMemo func(block.RequestKind, int64)
	// plans keeps the shapes of the input sets planned last.
	plans *planCache

	units, rows, batches, bytes, pending, failures atomic.Int64
	memoInputs, localInputs                        atomic.Int64
	memoNodes                                      atomic.Int64
	// localNanos and guardNanos are the CPU time of the transform
	// programs run for LOCAL inputs and for the guard's samples
	// (MetricTransform).
	localNanos, guardNanos atomic.Int64
}

// NewServer returns a Server reading from cfg.Store.
func NewServer(cfg Config) (*Server, error) {
	cfg.EnsureDefaults()
	if cfg.Store == nil {
		return nil, errors.New("reader: Config.Store is required")
	}
	s := &Server{cfg: cfg, slots: make(chan struct{}, cfg.MaxConcurrentUnits), reports: newReports(cfg), guardMetrics: newGuardMetrics(),
		guardNonce: rand.Uint64, objects: &block.ObjectReader{Store: cfg.Store, Footers: block.NewFooterCache(cfg.FooterCacheEntries), Limits: cfg.ReadLimits}}
	s.countRaw, s.countMemo = s.requests.counter(objectRaw), s.requests.counter(objectMemo)
	s.plans = newPlanCache(cfg.PlanCacheEntries)
	s.metrics = newServerMetrics(s)
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(s.metrics); err != nil {
			return nil, fmt.Errorf("reader: metrics: %w", err)
		}
	}
	return s, nil
}

// ServerStats counts a Server's work since NewServer.
type ServerStats struct {
	// Units counts completed streams; Rows, Batches and Bytes what they sent
	// (Bytes: arrow_ipc payload).
	Units, Rows, Batches, Bytes int64
	// MemoInputs and LocalInputs count input columns served per mode.
	MemoInputs, LocalInputs int64
	// MemoNodes counts the memo node columns LOCAL inputs were computed
	// from (covers).
	MemoNodes int64
	// MemoPending counts calls refused because memo data was pending;
	// Failures counts every other failed call.
	MemoPending, Failures int64
	// ObjectRequests counts the object store requests of every unit's
	// reads, served or not (MetricObjectRequests; a retry the store makes
	// on its own is not another).
	ObjectRequests int64
	// WantedBytes counts the bytes of the segments those reads wanted, of
	// raw blocks and of memo objects (MetricObjectWantedBytes).
	WantedBytes struct{ Raw, Memo int64 }
	// Footers counts the footer cache's lookups, Plans the plan cache's.
	Footers block.FooterCacheStats
	Plans   PlanCacheStats
	// Transform is the CPU time spent running transform programs: for
	// LOCAL inputs (Local) and to recompute and compare the guard's
	// sampled rows (Guard) (MetricTransform).
	Transform struct{ Local, Guard time.Duration }
}

// Stats returns the counters.
func (s *Server) Stats() ServerStats {
	return ServerStats{Units: s.units.Load(), Rows: s.rows.Load(), Batches: s.batches.Load(),
		Bytes: s.bytes.Load(), MemoInputs: s.memoInputs.Load(), LocalInputs: s.localInputs.Load(), MemoNodes: s.memoNodes.Load(),
		MemoPending: s.pending.Load(), Failures: s.failures.Load(), ObjectRequests: s.requests.total(),
		WantedBytes: struct{ Raw, Memo int64 }{s.requests.wanted[objectRaw].Load(), s.requests.wanted[objectMemo].Load()}, Footers: s.objects.Footers.Stats(),
		Plans: s.plans.stats(), Transform: struct{ Local, Guard time.Duration }{time.Duration(s.localNanos.Load()), time.Duration(s.guardNanos.Load())}}
}

// StreamServerOptions tune a gRPC server for streaming bulk responses: a
// 1 MiB write buffer, so that a batch goes out in a few large writes rather
// than one system call per 32 KiB; a buffer pool that does not zero the
// buffers messages are received and marshaled into (see dirtyPool), used by
// the transport and by the proto codec (serverCodec); and keepalive pings,
// so that a unit whose host vanished without closing its connection frees
// its slot.
func StreamServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.WriteBufferSize(1 << 20), experimental.BufferPool(readerBufferPool),
		grpc.ForceServerCodecV2(serverCodec{}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second})}
}

// GRPCServer returns a gRPC server with the Reader service and the Arrow
// Flight service (FlightService) registered, the StreamServerOptions and
// the request size limit (opts may override them), then the serverCodec,
// which stays (Read sends batches marshaled already, batchMessage, which
// only it can send), the metrics' interceptors and (when Config.Tokens is
// set) the auth interceptors, in that order after any interceptor of opts.
func (s *Server) GRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	opts = append(append(StreamServerOptions(), grpc.MaxRecvMsgSize(s.cfg.MaxRequestBytes)), opts...)
	opts = append(opts, grpc.ForceServerCodecV2(serverCodec{}))
	// The metrics see each call first and its outcome last, whatever
	// refused it.
	unary, stream := s.metrics.interceptors()
	unaries, streams := []grpc.UnaryServerInterceptor{unary}, []grpc.StreamServerInterceptor{stream}
	if s.cfg.Tokens != nil {
		unaries = append(unaries, s.cfg.Tokens.UnaryInterceptor())
		streams = append(streams, s.cfg.Tokens.StreamInterceptor())
	}
	opts = append(opts, grpc.ChainUnaryInterceptor(unaries...), grpc.ChainStreamInterceptor(streams...))
	gs := grpc.NewServer(opts...)
	readerv1.RegisterReaderServer(gs, s)
	flightpb.RegisterFlightServiceServer(gs, s.FlightService())
	return gs
}

// Read implements readerv1.ReaderServer.
func (s *Server) Read(req *readerv1.ReadRequest, stream readerv1.Reader_ReadServer) (err error) {
	ctx := stream.Context()
	if err := s.authorize(ctx, req.GetUnit().GetClient()); err != nil {
		return err
	}
	// Batches go out marshaled already (batchMessage, serverCodec): the
	// codec hands the message's buffer to gRPC.
	sendBatch := func(m *batchMessage) error {
		defer m.free() // if gRPC did not take it
		return stream.SendMsg(m)
	}
	err = s.run(ctx, req, readSink{sendBatch, stream.Send})
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		// The caller went away; nothing to tell it.
		return status.FromContextError(ctx.Err()).Err()
	}
	return Status(err).Err()
}

// Serve runs one Read without gRPC: send receives every response in order
// (the batches, then the summary). send must not keep a response's ArrowIpc
// after it returns: the bytes are in a buffer of a pool the process's
// other streams and gRPC's transport share, which Serve returns to it then
// (gRPC's Send has marshaled the message when it returns). Errors wrap the
// package's sentinels; Status maps them to gRPC codes.
func (s *Server) Serve(ctx context.Context, req *readerv1.ReadRequest, send func(*readerv1.ReadResponse) error) error {
	sendBatch := func(m *batchMessage) error {
		defer m.free()
		return send(m.response())
	}
	return s.run(ctx, req, readSink{sendBatch, send})
}

// sink is where a unit's stream goes: Read's ReadResponses (readSink) or
// Flight's FlightData (flightSink). Both send the same batches, encoded by
// the same encoder.
type sink interface {
	// begin is called once the unit's columns are loaded, before its first
	// batch.
	begin(enc *encoder) error
	// batch encodes rows [lo, hi) of cols, of a block of n rows, sends them,
	// and returns the CRC-32C of the arrow_ipc bytes Read sends for them,
	// continued from crc (the call's batches so far, of sent rows), and
	// their length.
	batch(enc *encoder, cols []arrow.Array, lo, hi, n, sent int64, crc uint32) (uint32, int64, error)
	// end sends the summary, if the sink sends it apart, or (Flight) a
	// batch of no rows carrying it when the unit has none (cols are the
	// unit's columns, of no rows then).
	end(enc *encoder, cols []arrow.Array, sum *readerv1.Summary) error
}

// readSink is Read's: batches as marshaled ReadResponses given to
// sendBatch, which owns each message from the call on; the summary to send.
type readSink struct {
	sendBatch func(*batchMessage) error
	send      func(*readerv1.ReadResponse) error
}

func (readSink) begin(*encoder) error { return nil }

func (r readSink) batch(enc *encoder, cols []arrow.Array, lo, hi, _, _ int64, crc uint32) (uint32, int64, error) {
	m, err := enc.encodeMessage(cols, lo, hi)
	if err != nil {
		return crc, 0, err
	}
	crc = crc32.Update(crc, castagnoli, m.ipc) // while the bytes are in cache
	size := int64(len(m.ipc))
	return crc, size, r.sendBatch(m)
}

func (r readSink) end(_ *encoder, _ []arrow.Array, sum *readerv1.Summary) error {
	return r.send(&readerv1.ReadResponse{Summary: sum})
}

// run serves one unit into out and counts it.
func (s *Server) run(ctx context.Context, req *readerv1.ReadRequest, out sink) error {
	err := s.serve(ctx, req, out)
	switch {
	case err == nil:
		s.units.Add(1)
	case errors.Is(err, ErrMemoPending):
		s.pending.Add(1)
	default:
		s.failures.Add(1)
	}
	if err != nil && ctx.Err() == nil {
		level := slog.LevelWarn
		if errors.Is(err, ErrMemoPending) {
			level = slog.LevelInfo // expected while SIG catches up
		}
		s.cfg.Logger.Log(ctx, level, "read failed", "unit", req.GetUnit().GetUnitId(), "block", req.GetUnit().GetBlockId(), "err", err)
	}
	return err
}

func (s *Server) serve(ctx context.Context, req *readerv1.ReadRequest, out sink) error {
	p, err := s.plan(req.GetUnit())
	if err != nil {
		return err
	}
	if err := s.planGuard(p); err != nil {
		return err
	}
	if req.StartRow < 0 {
		return invalid("start_row", "%d is negative", req.StartRow)
	}
	// Fail fast, before any I/O, when a memo object cannot be there.
	for _, in := range p.reads() {
		if in.mode != readerv1.InputMode_INPUT_MODE_MEMO {
			continue
		}
		switch in.state {
		case sigv1.BlockState_BLOCK_STATE_READY:
		case sigv1.BlockState_BLOCK_STATE_FAILED:
			return &memoError{Kind: ErrMemoFailed, Input: in.name, Component: in.component, Block: p.unit.BlockId,
				Detail: "its memoization task was quarantined; read the input LOCAL or ask an operator to release it"}
		default:
			return &memoError{Kind: ErrMemoPending, Input: in.name, Component: in.component, Block: p.unit.BlockId,
				Detail: fmt.Sprintf("state %s in the read solution", in.state)}
		}
	}
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	case <-ctx.Done():
		return fmt.Errorf("%w: waiting for a free slot: %v", errCanceled, ctx.Err())
	}
	// The unit's fetch buffers are recycled only when serve returns: the
	// columns are views of them until the last batch is sent (deferred
	// first, this runs last; see unitBuffers).
	bufs := &unitBuffers{}
	defer bufs.release()
	start := time.Now()
	cols, n, err := s.load(ctx, p, bufs.alloc)
	if err != nil {
		return err
	}
	s.metrics.fetched(time.Since(start))
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	if req.StartRow > n {
		return invalid("start_row", "%d is past the unit's %d rows", req.StartRow, n)
	}
	enc, err := newEncoder(p.out)
	if err != nil {
		return err
	}
	if err := out.begin(enc); err != nil {
		return err
	}
	crc := uint32(0)
	sent := int64(0)
	b := int64(p.batchRows)
	for lo := req.StartRow; lo < n; {
		hi := min((lo/b+1)*b, n) // batches are aligned to the block
		var size int64
		crc, size, err = out.batch(enc, cols, lo, hi, n, sent, crc)
		if errors.Is(err, errEncode) {
			return fmt.Errorf("encoding rows [%d, %d) of block %s: %w", lo, hi, p.unit.BlockId, err)
		}
		if err != nil {
			return err
		}
		s.batches.Add(1)
		s.bytes.Add(size)
		s.rows.Add(hi - lo)
		sent += hi - lo
		lo = hi
	}
	return out.end(enc, cols, &readerv1.Summary{Rows: sent, BlockRows: n, Crc32C: crc})
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// load reads the unit's block and returns the batch columns over the
// unit's rows (the whole block's, or with an event range those in it:
// trim.go), in the order of p.out, and their number. The raw block and
// every memo object are read concurrently, each with one planned read
// (fetch.go): in the common case one request per object.
//
// Every segment is fetched into a buffer from alloc; the columns returned
// are views of those buffers (see unitBuffers). load returns only when none
// of its reads is running any more.
func (s *Server) load(ctx context.Context, p *plan, alloc block.Alloc) ([]arrow.Array, int64, error) {
	cols, n, err := s.loadOnce(ctx, p, alloc)
	if errors.Is(err, errStaleRaw) {
		// The raw block's cached footer was stale, and the memo reads
		// relied on it (fetch.go); the stale entry is gone, so this read
		// starts from the object itself.
		cols, n, err = s.loadOnce(ctx, p, alloc)
		if errors.Is(err, errStaleRaw) {
			err = fmt.Errorf("%w: raw block %s changed while it was read", ErrStore, p.unit.RawObject)
		}
	}
	return cols, n, err
}

func (s *Server) loadOnce(ctx context.Context, p *plan, alloc block.Alloc) ([]arrow.Array, int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// One read per memo object: a MEMO input's, or a memo node's a LOCAL
	// input reads; inputs whose columns are in one object share its read.
	reads := p.reads()
	memos := make([]memoRead, len(reads))
	// The raw block's footer decides how memo objects are read
	// (readMemoObject), so memo reads wait for it: at once when it is
	// cached, after the raw block's tail read when it is not.
	var rawMeta block.Meta
	rawReady := make(chan struct{})
	rawPublished := false
	closeRaw := sync.OnceFunc(func() { close(rawReady) })
	var wg sync.WaitGroup
	for _, o := range memoObjects(reads) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-rawReady:
			case <-ctx.Done():
			}
			err := ctx.Err()
			if err == nil {
				err = s.readMemoObject(ctx, reads, o, memos, rawMeta, alloc)
			}
			if err != nil {
				for _, i := range o.members {
					memos[i].err = err
				}
			}
			for _, i := range o.members {
				if memos[i].err != nil {
					cancel() // the unit fails; stop the other reads
				}
			}
		}()
	}
	raw, rawErr := s.readRaw(ctx, p, alloc, func(m block.Meta) {
		if !rawPublished {
			rawMeta, rawPublished = m, true
			closeRaw()
		}
	})
	if rawErr != nil {
		cancel() // before the memo reads are let go: they need not start
	}
	closeRaw()
	wg.Wait()

	// Report a pending memo first: it is the error a caller acts on (a
	// transient training hold), whatever else went wrong meanwhile. Reads
	// cut short because another one failed come last.
	var firstErr error
	rank := -1
	consider := func(err error) {
		r := 1
		switch {
		case errors.Is(err, ErrMemoPending):
			r = 3
		case errors.Is(err, context.Canceled) && ctx.Err() != nil:
			r = 0
		}
		if r > rank {
			firstErr, rank = err, r
		}
	}
	for i, m := range memos {
		if m.err == nil {
			continue
		}
		in := reads[i]
		s.noteMemoError(p, in, m.err)
		switch {
		case errors.Is(m.err, ErrCorrupt):
			consider(m.err)
		case errors.Is(m.err, objstore.ErrNotFound):
			consider(&memoError{Kind: ErrMemoPending, Input: in.name, Component: in.component, Block: p.unit.BlockId,
				Detail: fmt.Sprintf("object %s is missing (evicted, or not written yet)", in.memo)})
		case errors.Is(m.err, block.ErrCorrupt), errors.Is(m.err, block.ErrNoColumn):
			consider(fmt.Errorf("%w: memo object of input %q: %w", ErrCorrupt, in.name, m.err))
		default:
			consider(fmt.Errorf("%w: reading memo object %s: %w", ErrStore, in.memo, m.err))
		}
	}
	if rawErr != nil {
		consider(rawErr)
	}
	if firstErr == nil && rawPublished && !sameColumn(rawMeta, raw.meta, transform.ColEventID) {
		firstErr = errStaleRaw
	}
	if firstErr != nil {
		if raw != nil {
			raw.rec.Release()
		}
		return nil, 0, firstErr
	}
	defer raw.rec.Release()

	n := raw.rec.NumRows()
	cols := make([]arrow.Array, 0, len(p.out.Fields()))
	fail := func(err error) ([]arrow.Array, int64, error) {
		for _, c := range cols {
			c.Release()
		}
		return nil, 0, err
	}
	// event_id and the labels come from the raw block (raw.rec holds
	// event_id, then p.rawColumns in order).
	for i := 0; i <= len(p.labels); i++ {
		c := raw.rec.Column(i)
		c.Retain()
		cols = append(cols, c)
	}
	eventIDs := raw.rec.Column(0).(*array.Int64).Int64Values()

	var local []arrow.Array
	if p.local != nil {
		// The memo nodes' columns are given: only the residual above them
		// runs.
		given := make(map[int]arrow.Array, len(p.nodes))
		releaseGiven := func() {
			for _, c := range given {
				c.Release()
			}
		}
		for j, nd := range p.nodes {
			c, err := memoColumn(p, nd, &memos[len(p.inputs)+j], raw.eventIDSeg, eventIDs, alloc)
			if err != nil {
				s.noteMemoError(p, nd, err)
				releaseGiven()
				return fail(err)
			}
			if err := s.guardNode(p, j, raw.rec, c); err != nil {
				c.Release()
				releaseGiven()
				return fail(err)
			}
			given[p.nodeIdx[j]] = c
			s.memoNodes.Add(1)
		}
		var out []arrow.Array
		var err error
		s.localNanos.Add(int64(onThreadCPU(func() { out, err = p.local.Run(raw.rec, given) })))
		releaseGiven()
		if errors.Is(err, transform.ErrColumn) {
			return fail(fmt.Errorf("%w: raw block %s: %v", ErrCorrupt, p.unit.RawObject, err))
		}
		if err != nil {
			return fail(fmt.Errorf("%w: block %s: %v", ErrCompute, p.unit.BlockId, err))
		}
		local = out
	}
	nextLocal := 0
	for i, in := range p.inputs {
		if in.mode == readerv1.InputMode_INPUT_MODE_LOCAL {
			c := local[nextLocal]
			nextLocal++
			want := p.out.Field(1 + len(p.labels) + i).Type
			if !arrow.TypeEqual(c.DataType(), want) || int64(c.Len()) != n {
				c.Release()
				return fail(fmt.Errorf("%w: input %q: computed %s of %d rows, want %s of %d", ErrCompute, in.name, c.DataType(), c.Len(), want, n))
			}
			cols = append(cols, c)
			s.localInputs.Add(1)
			continue
		}
		c, err := memoColumn(p, in, &memos[i], raw.eventIDSeg, eventIDs, alloc)
		if err != nil {
			s.noteMemoError(p, in, err)
			for _, c := range local[nextLocal:] {
				c.Release()
			}
			return fail(err)
		}
		cols = append(cols, c)
		s.memoInputs.Add(1)
	}
	// The shared-fate guard: sampled rows of the MEMO inputs recomputed
	// from the raw block (guard.go).
	if err := s.guard(p, raw.rec, cols); err != nil {
		return fail(err)
	}
	// Every memo object read back: a block reported while its object was
	// bad is forgotten once sigd is replacing it (report.go, readOK).
	s.noteMemoReads(p)
	if p.trim {
		// The unit's rows are selected from the batch columns of the whole
		// block, whatever mode made each column, so SIG, LIG and mixed
		// units of one range send the same bytes as they do whole.
		return trimRows(raw.rec, cols, p.events)
	}
	return cols, n, nil
}

func memoCorrupt(in inputPlan, format string, args ...any) error {
	return fmt.Errorf("%w: memo object %s (input %q): %s", ErrCorrupt, in.memo, in.name, fmt.Sprintf(format, args...))
}

// memoColumn checks that a memo object is row-aligned with the raw block
// (the same event ids in the same order) and decodes its value column.
//
// A memo object's event_id column is the raw block's, written by the same
// encoder, so its segment is byte-identical to the raw block's. Hence the
// check in three steps, cheapest first: the footers' lengths and CRC-32Cs
// of the two segments agree (then the memo's event_id segment was not even
// fetched; Config.ExactAlignment turns this step off); else the segments'
// bytes are equal; else (another encoder wrote one of them) the decoded
// event ids must be equal.
func memoColumn(p *plan, in inputPlan, m *memoRead, rawIDSeg []byte, eventIDs []int64, alloc block.Alloc) (arrow.Array, error) {
	// block.CheckMemo refused other rows already; kept here because the
	// loop below indexes the raw block's ids by the memo's rows.
	if m.meta.Rows != int64(len(eventIDs)) {
		return nil, memoCorrupt(in, "%d rows, raw block has %d: not row-aligned", m.meta.Rows, len(eventIDs))
	}
	if m.ids != nil && !bytes.Equal(m.ids, rawIDSeg) {
		idCol, _ := m.meta.Column(transform.ColEventID) // the read fetched it, so it is there
		arr, err := block.DecodeSegment(in.memo, idCol, m.ids, m.meta.Rows)
		if err != nil {
			return nil, memoCorrupt(in, "%v", err)
		}
		ids := arr.(*array.Int64)
		got := ids.Int64Values()
		for r := range got {
			if got[r] != eventIDs[r] || ids.IsNull(r) {
				arr.Release()
				return nil, memoCorrupt(in, "not row-aligned with the raw block: row %d has event_id %d, raw has %d", r, got[r], eventIDs[r])
			}
		}
		arr.Release()
	}
	c, err := block.DecodeSegmentInto(in.memo, m.col, m.value, m.meta.Rows, alloc)
	if err != nil {
		return nil, memoCorrupt(in, "%v", err)
	}
	return c, nil
}
