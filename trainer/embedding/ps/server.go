package ps

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	psv1 "github.com/sigdata/sig/proto/ps/v1"
)

// Config configures a Server.
type Config struct {
	// Shard is this server's index in [0, Shards).
	Shard, Shards int
	// Store keeps checkpoints; nil means Checkpoint and Restore fail and a
	// restarted server starts empty.
	Store Store
	// Keep is how many checkpoints are retained (the newest ones). Default 3.
	Keep int
	// Logger receives a line per configuration, checkpoint and restore.
	// Default: discard.
	Logger *slog.Logger
}

// EnsureDefaults fills zero fields.
func (c *Config) EnsureDefaults() {
	if c.Keep == 0 {
		c.Keep = 3
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// shardVar is one variable's rows held by this server.
type shardVar struct {
	dim  int
	rows int64     // local rows
	w    []float32 // rows × dim
	acc  []float32 // Adagrad accumulators, rows × dim; nil for SGD
	// The step's summed gradients: slot[i] is 1 + the index in touched of
	// local row i, or 0 when the step has not touched it.
	slot    []int32
	touched []int64
	grad    []float32 // len(touched) × dim
}

// Server is one parameter server: the rows g ≡ Shard (mod Shards) of every
// variable, their optimizer state, and the step they are at.
type Server struct {
	psv1.UnimplementedParameterServerServer
	cfg Config

	ckMu sync.Mutex // serializes checkpoint writes and restores

	mu          sync.RWMutex
	layout      *Layout // nil until configured
	vars        []*shardVar
	step        int64
	pending     *pendingStep
	checkpoints []ckEntry // retained, oldest first

	lookupRPCs, applyRPCs atomic.Int64
}

// pendingStep collects the parts of the next step until all have arrived.
type pendingStep struct {
	step  int64
	parts []*psv1.ApplyRequest
	n     int
	done  chan struct{}
	err   error
}

// NewServer returns a server; if cfg.Store holds a checkpoint of this shard
// it is restored (tables, values, optimizer state and step).
func NewServer(ctx context.Context, cfg Config) (*Server, error) {
	cfg.EnsureDefaults()
	if cfg.Shards < 1 || cfg.Shards > maxShards || cfg.Shard < 0 || cfg.Shard >= cfg.Shards {
		return nil, fmt.Errorf("%w: shard %d of %d", ErrInvalid, cfg.Shard, cfg.Shards)
	}
	s := &Server{cfg: cfg}
	if cfg.Store == nil {
		return s, nil
	}
	m, err := readManifest(ctx, cfg.Store, cfg.Shard, cfg.Shards)
	if errors.Is(err, ErrNotFound) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	s.checkpoints = m.Checkpoints
	if len(m.Checkpoints) == 0 {
		return s, nil
	}
	if err := s.restoreLocked(ctx, m.Checkpoints[len(m.Checkpoints)-1]); err != nil {
		return nil, err
	}
	return s, nil
}

// Stats are a server's RPC counters.
type Stats struct{ LookupRPCs, ApplyRPCs int64 }

// Stats returns the RPCs served so far.
func (s *Server) Stats() Stats {
	return Stats{LookupRPCs: s.lookupRPCs.Load(), ApplyRPCs: s.applyRPCs.Load()}
}

// Step returns the step the shard is at.
func (s *Server) Step() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.step
}

// install allocates the shard's rows of l's variables, zeroed: decodeLocked
// fills them from a checkpoint, initialize with the initial values.
func (s *Server) install(l *Layout) {
	s.layout = l
	s.vars = make([]*shardVar, len(l.Variables))
	for i := range l.Variables {
		v := &l.Variables[i]
		n := localRows(v.Rows, s.cfg.Shard, s.cfg.Shards)
		sv := &shardVar{dim: v.Dim, rows: n, w: make([]float32, n*int64(v.Dim)), slot: make([]int32, n)}
		if v.opt == Adagrad {
			sv.acc = make([]float32, len(sv.w))
		}
		s.vars[i] = sv
	}
}

// initialize sets every installed row and accumulator to its initial value.
func (s *Server) initialize() {
	l := s.layout
	for vi, sv := range s.vars {
		v := &l.Variables[vi]
		for j := range sv.acc {
			sv.acc[j] = v.initAcc
		}
		// Initial values, table by table.
		for k, t := range v.Tables {
			vocab := l.Tables[t].Vocab
			off := v.Offsets[k]
			// First variable row of this table on this shard.
			g := off + (int64(s.cfg.Shard)-off%int64(s.cfg.Shards)+int64(s.cfg.Shards))%int64(s.cfg.Shards)
			for ; g < off+vocab; g += int64(s.cfg.Shards) {
				i := g / int64(s.cfg.Shards)
				initRow(sv.w[i*int64(v.Dim):(i+1)*int64(v.Dim)], v.tableSeed[k], v.tableScale[k], g-off)
			}
		}
	}
}

// Configure installs the tables (see the proto).
func (s *Server) Configure(_ context.Context, req *psv1.ConfigureRequest) (*psv1.ConfigureResponse, error) {
	if int(req.GetShard()) != s.cfg.Shard || int(req.GetShards()) != s.cfg.Shards {
		return nil, status.Errorf(codes.FailedPrecondition, "this server is shard %d of %d, the client expects %d of %d",
			s.cfg.Shard, s.cfg.Shards, req.GetShard(), req.GetShards())
	}
	l, err := NewLayout(tablesFromProto(req.GetTables()), req.GetStacking(), s.cfg.Shards)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.layout != nil {
		if !sameConfig(s.layout, l) {
			return nil, status.Errorf(codes.FailedPrecondition, "already configured with other tables (step %d)", s.step)
		}
		return &psv1.ConfigureResponse{Step: s.step, Variables: s.layout.variablesProto()}, nil
	}
	s.install(l)
	s.initialize()
	s.cfg.Logger.Info("ps configured", "shard", s.cfg.Shard, "shards", s.cfg.Shards, "tables", len(l.Tables), "variables", len(l.Variables))
	return &psv1.ConfigureResponse{Step: s.step, Variables: l.variablesProto()}, nil
}

// checkPacket validates a packet's segments against the layout and this
// shard, returning the number of floats it carries.
func (s *Server) checkPacket(vars []int32, counts []uint32, rows []int64) (int, error) {
	if len(vars) != len(counts) {
		return 0, status.Errorf(codes.InvalidArgument, "%d variables but %d counts", len(vars), len(counts))
	}
	var nrows, nfloats int
	for i, v := range vars {
		if v < 0 || int(v) >= len(s.vars) {
			return 0, status.Errorf(codes.InvalidArgument, "segment %d: no variable %d", i, v)
		}
		sv := s.vars[v]
		c := int(counts[i])
		if nrows+c > len(rows) {
			return 0, status.Errorf(codes.InvalidArgument, "segments name %d+ rows, the packet has %d", nrows+c, len(rows))
		}
		for _, g := range rows[nrows : nrows+c] {
			if g < 0 || g%int64(s.cfg.Shards) != int64(s.cfg.Shard) || g/int64(s.cfg.Shards) >= sv.rows {
				return 0, status.Errorf(codes.InvalidArgument, "segment %d: row %d of variable %d is not on shard %d of %d", i, g, v, s.cfg.Shard, s.cfg.Shards)
			}
		}
		nrows += c
		nfloats += c * sv.dim
	}
	if nrows != len(rows) {
		return 0, status.Errorf(codes.InvalidArgument, "segments name %d rows, the packet has %d", nrows, len(rows))
	}
	return nfloats, nil
}

// Lookup returns the requested rows, segment after segment.
func (s *Server) Lookup(_ context.Context, req *psv1.LookupRequest) (*psv1.LookupResponse, error) {
	s.lookupRPCs.Add(1)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.layout == nil {
		return nil, status.Error(codes.FailedPrecondition, "not configured")
	}
	n, err := s.checkPacket(req.GetVariables(), req.GetCounts(), req.GetRows())
	if err != nil {
		return nil, err
	}
	out := make([]float32, 0, n)
	rows := req.GetRows()
	shards := int64(s.cfg.Shards)
	for i, v := range req.GetVariables() {
		sv := s.vars[v]
		d := int64(sv.dim)
		c := int(req.GetCounts()[i])
		for _, g := range rows[:c] {
			j := g / shards
			out = append(out, sv.w[j*d:(j+1)*d]...)
		}
		rows = rows[c:]
	}
	return &psv1.LookupResponse{Values: out}, nil
}

// Apply collects one part of a step and answers when the step is applied.
func (s *Server) Apply(ctx context.Context, req *psv1.ApplyRequest) (*psv1.ApplyResponse, error) {
	s.applyRPCs.Add(1)
	s.mu.Lock()
	if s.layout == nil {
		s.mu.Unlock()
		return nil, status.Error(codes.FailedPrecondition, "not configured")
	}
	if req.GetStep() <= s.step {
		step := s.step
		s.mu.Unlock()
		return &psv1.ApplyResponse{Step: step}, nil // a retry of an applied step
	}
	if req.GetStep() != s.step+1 {
		step := s.step
		s.mu.Unlock()
		return nil, status.Errorf(codes.FailedPrecondition, "step %d: the server is at step %d (restored from a checkpoint?)", req.GetStep(), step)
	}
	n, err := s.checkPacket(req.GetVariables(), req.GetCounts(), req.GetRows())
	if err == nil && n != len(req.GetGrads()) {
		err = status.Errorf(codes.InvalidArgument, "segments need %d gradient floats, the packet has %d", n, len(req.GetGrads()))
	}
	if err == nil && (req.GetParts() == 0 || req.GetPart() >= req.GetParts()) {
		err = status.Errorf(codes.InvalidArgument, "part %d of %d", req.GetPart(), req.GetParts())
	}
	p := s.pending
	if err == nil && p != nil && len(p.parts) != int(req.GetParts()) {
		err = status.Errorf(codes.InvalidArgument, "step %d has %d parts, this request says %d", req.GetStep(), len(p.parts), req.GetParts())
	}
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	if p == nil {
		p = &pendingStep{step: req.GetStep(), parts: make([]*psv1.ApplyRequest, req.GetParts()), done: make(chan struct{})}
		s.pending = p
	}
	if p.parts[req.GetPart()] == nil {
		p.n++
	}
	p.parts[req.GetPart()] = req // a part sent again replaces the first copy
	if p.n == len(p.parts) {
		s.applyStep(p)
		s.step = p.step
		s.pending = nil
		close(p.done)
	}
	s.mu.Unlock()
	select {
	case <-p.done:
		if p.err != nil {
			return nil, p.err
		}
		return &psv1.ApplyResponse{Step: p.step}, nil
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// applyStep sums each row's gradients over the parts in part order, then
// applies the optimizer to every touched row. The sum starts from zero and
// adds the parts' contributions in order, exactly as the coalescing client
// sums the TPU cores' gradients before sending one part, so both modes
// produce the same bits.
func (s *Server) applyStep(p *pendingStep) {
	shards := int64(s.cfg.Shards)
	for _, req := range p.parts {
		rows, grads := req.GetRows(), req.GetGrads()
		for i, v := range req.GetVariables() {
			sv := s.vars[v]
			d := sv.dim
			c := int(req.GetCounts()[i])
			for k, g := range rows[:c] {
				j := g / shards
				slot := sv.slot[j]
				if slot == 0 {
					sv.touched = append(sv.touched, j)
					slot = int32(len(sv.touched))
					sv.slot[j] = slot
					for range d {
						sv.grad = append(sv.grad, 0)
					}
				}
				dst := sv.grad[int(slot-1)*d : int(slot)*d]
				src := grads[k*d : (k+1)*d]
				for e := range dst {
					dst[e] += src[e]
				}
			}
			rows, grads = rows[c:], grads[c*d:]
		}
	}
	for vi, sv := range s.vars {
		v := &s.layout.Variables[vi]
		d := int64(sv.dim)
		for t, j := range sv.touched {
			g := sv.grad[int64(t)*d : int64(t+1)*d]
			w := sv.w[j*d : (j+1)*d]
			switch v.opt {
			case SGD:
				// The product is rounded to float32 before the
				// subtraction (the conversion forbids a fused
				// multiply-add), as trainer/model's slice does: tables
				// trained on either give the same bits.
				for e := range w {
					w[e] -= float32(v.lr * g[e])
				}
			case Adagrad:
				a := sv.acc[j*d : (j+1)*d]
				for e := range w {
					a[e] += g[e] * g[e]
					w[e] -= v.lr * g[e] / float32(math.Sqrt(float64(a[e])))
				}
			}
			sv.slot[j] = 0
		}
		sv.touched = sv.touched[:0]
		sv.grad = sv.grad[:0]
	}
}

// Assign overwrites rows and sets the step (see the proto).
func (s *Server) Assign(_ context.Context, req *psv1.AssignRequest) (*psv1.AssignResponse, error) {
	if req.GetStep() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "step %d: must be >= 0", req.GetStep())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.layout == nil {
		return nil, status.Error(codes.FailedPrecondition, "not configured")
	}
	n, err := s.checkPacket(req.GetVariables(), req.GetCounts(), req.GetRows())
	if err == nil && n != len(req.GetValues()) {
		err = status.Errorf(codes.InvalidArgument, "segments need %d value floats, the packet has %d", n, len(req.GetValues()))
	}
	if err != nil {
		return nil, err
	}
	for _, x := range req.GetValues() {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, status.Errorf(codes.InvalidArgument, "values: %v is not finite", x)
		}
	}
	if p := s.pending; p != nil {
		p.err = status.Errorf(codes.Aborted, "step %d abandoned: rows were assigned at step %d", p.step, req.GetStep())
		close(p.done)
		s.pending = nil
	}
	rows, vals := req.GetRows(), req.GetValues()
	shards := int64(s.cfg.Shards)
	for i, v := range req.GetVariables() {
		sv := s.vars[v]
		d := int64(sv.dim)
		c := int(req.GetCounts()[i])
		initAcc := s.layout.Variables[v].initAcc
		for k, g := range rows[:c] {
			j := g / shards
			copy(sv.w[j*d:(j+1)*d], vals[int64(k)*d:int64(k+1)*d])
			if sv.acc != nil {
				for e := j * d; e < (j+1)*d; e++ {
					sv.acc[e] = initAcc
				}
			}
		}
		rows, vals = rows[c:], vals[int64(c)*d:]
	}
	s.step = req.GetStep()
	return &psv1.AssignResponse{Step: s.step}, nil
}

// Checkpoint writes the shard at the request's step.
func (s *Server) Checkpoint(ctx context.Context, req *psv1.CheckpointRequest) (*psv1.CheckpointResponse, error) {
	if s.cfg.Store == nil {
		return nil, status.Error(codes.FailedPrecondition, "this server has no checkpoint store")
	}
	s.ckMu.Lock()
	defer s.ckMu.Unlock()
	s.mu.RLock()
	if s.layout == nil {
		s.mu.RUnlock()
		return nil, status.Error(codes.FailedPrecondition, "not configured")
	}
	if req.GetStep() != s.step {
		step := s.step
		s.mu.RUnlock()
		return nil, status.Errorf(codes.FailedPrecondition, "checkpoint of step %d asked, the server is at step %d", req.GetStep(), step)
	}
	data := s.encodeLocked()
	step := s.step
	s.mu.RUnlock()
	key, err := s.writeCheckpoint(ctx, step, data)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "checkpoint of step %d: %v", step, err)
	}
	s.cfg.Logger.Info("ps checkpoint", "shard", s.cfg.Shard, "step", step, "bytes", len(data))
	return &psv1.CheckpointResponse{Step: step, Manifest: key}, nil
}

// Restore rolls the shard back to a retained checkpoint.
func (s *Server) Restore(ctx context.Context, req *psv1.RestoreRequest) (*psv1.RestoreResponse, error) {
	if s.cfg.Store == nil {
		return nil, status.Error(codes.FailedPrecondition, "this server has no checkpoint store")
	}
	s.ckMu.Lock()
	defer s.ckMu.Unlock()
	var e *ckEntry
	for i := range s.checkpoints {
		if s.checkpoints[i].Step == req.GetStep() {
			e = &s.checkpoints[i]
		}
	}
	if e == nil {
		return nil, status.Errorf(codes.NotFound, "no retained checkpoint of step %d (have %v)", req.GetStep(), s.checkpointSteps())
	}
	if err := s.restoreLocked(ctx, *e); err != nil {
		return nil, status.Error(codes.DataLoss, err.Error())
	}
	return &psv1.RestoreResponse{Step: req.GetStep()}, nil
}

// Status reports the shard's state.
func (s *Server) Status(context.Context, *psv1.StatusRequest) (*psv1.StatusResponse, error) {
	s.ckMu.Lock()
	steps := s.checkpointSteps()
	s.ckMu.Unlock()
	s.mu.RLock()
	defer s.mu.RUnlock()
	return &psv1.StatusResponse{
		Configured: s.layout != nil, Shard: int32(s.cfg.Shard), Shards: int32(s.cfg.Shards), Step: s.step,
		Checkpoints: steps, LookupRpcs: s.lookupRPCs.Load(), ApplyRpcs: s.applyRPCs.Load(),
	}, nil
}

func (s *Server) checkpointSteps() []int64 {
	steps := make([]int64, len(s.checkpoints))
	for i, c := range s.checkpoints {
		steps[i] = c.Step
	}
	return steps
}
