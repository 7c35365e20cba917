package sigd

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/matching"
	"github.com/sigdata/sig/matching/insertion"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/transform/graphpb"
)

// sigService implements sigv1.SIGServer.
type sigService struct {
	sigv1.UnimplementedSIGServer
	s *Server
}

func (h *sigService) SubmitGraph(ctx context.Context, req *sigv1.SubmitGraphRequest) (*sigv1.SubmitGraphResponse, error) {
	p, err := auth.Require(ctx, auth.RoleClient, auth.RoleOperator, auth.RoleTrainer)
	if err != nil {
		return nil, err
	}
	if _, err := auth.RequireClient(ctx, req.GetClient()); err != nil {
		return nil, err
	}
	_ = p
	g, err := graphFromSpec(req.GetGraph())
	if err != nil {
		return nil, grpcError(err)
	}
	r := req.GetRange()
	if r == nil {
		return nil, status.Error(codes.InvalidArgument, "range: missing")
	}
	var memoize map[string]insertion.Override
	for name, v := range req.GetMemoize() {
		o, err := insertion.ParseOverride(v)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "memoize[%q]: %v", name, err)
		}
		if memoize == nil {
			memoize = map[string]insertion.Override{}
		}
		memoize[name] = o
	}
	res, err := h.s.frontend.Submit(matching.SubmitRequest{
		Client: req.GetClient(), Pipeline: req.GetPipeline(), Priority: req.GetPriority(),
		Source: req.GetGraph().GetRawSource(), Graph: g, From: r.GetStartMicros(), To: r.GetEndMicros(),
		Memoize: memoize,
	})
	if err != nil {
		return nil, grpcError(err)
	}
	h.s.metrics.observeSubmit(res)
	return &sigv1.SubmitGraphResponse{
		Solution: h.s.solutionProto(res.Solution), Components: uint32(res.Components),
		ComponentHits: uint32(res.ComponentHits), BlockHits: uint32(res.BlockHits),
		BlockMisses: uint32(res.BlockMisses), TasksEnqueued: uint32(res.TasksEnqueued),
	}, nil
}

// graphFromSpec reads a graph given as a message or as DSL text.
func graphFromSpec(spec *sigv1.GraphSpec) (*transform.Graph, error) {
	if spec == nil {
		return nil, &matching.InputError{Field: "graph", Err: errMissing}
	}
	switch g := spec.Spec.(type) {
	case *sigv1.GraphSpec_Graph:
		return graphpb.FromProto(g.Graph, transform.Limits{})
	case *sigv1.GraphSpec_Dsl:
		out, err := transform.Parse([]byte(g.Dsl), "", transform.Limits{})
		if err != nil {
			return nil, &matching.InputError{Field: "graph.dsl", Err: err}
		}
		return out, nil
	}
	return nil, &matching.InputError{Field: "graph", Err: errMissing}
}

type constErr string

func (e constErr) Error() string { return string(e) }

const errMissing = constErr("missing: give graph or dsl")

// errShuttingDown ends watch streams and lease waits when sigd stops; the
// caller retries against the restarted (or another) sigd.
var errShuttingDown = status.Error(codes.Unavailable, "sigd is shutting down: call again")

func (h *sigService) GetReadSolution(ctx context.Context, req *sigv1.GetReadSolutionRequest) (*sigv1.ReadSolution, error) {
	if _, err := auth.RequireClient(ctx, req.GetClient()); err != nil {
		return nil, err
	}
	sol, err := h.s.frontend.ReadSolutionAt(req.GetClient(), req.GetPipeline(), req.GetRange().GetStartMicros(), req.GetRange().GetEndMicros(), req.GetSnapshot())
	if err != nil {
		return nil, grpcError(err)
	}
	return h.s.solutionProto(sol), nil
}

// WatchReadSolution streams the solution, then changes of its blocks, and a
// final full solution when it is complete (completeness monitoring, paper
// IV.A). A watcher that falls behind gets a fresh full solution.
func (h *sigService) WatchReadSolution(req *sigv1.WatchReadSolutionRequest, stream sigv1.SIG_WatchReadSolutionServer) error {
	ctx := stream.Context()
	if _, err := auth.RequireClient(ctx, req.GetClient()); err != nil {
		return err
	}
	from, to := req.GetRange().GetStartMicros(), req.GetRange().GetEndMicros()
	for {
		sol, err := h.s.frontend.ReadSolutionAt(req.GetClient(), req.GetPipeline(), from, to, req.GetSnapshot())
		if err != nil {
			return grpcError(err)
		}
		ch, cancel := h.s.frontend.Watch(sol.MemoKeys())
		// Re-read after subscribing so no change between the read and the
		// subscription is missed.
		sol, err = h.s.frontend.ReadSolutionAt(req.GetClient(), req.GetPipeline(), from, to, req.GetSnapshot())
		if err != nil {
			cancel()
			return grpcError(err)
		}
		if err := stream.Send(&sigv1.ReadSolutionUpdate{Solution: h.s.solutionProto(sol)}); err != nil {
			cancel()
			return err
		}
		if sol.Complete() {
			cancel()
			return nil
		}
		resync, err := h.watchLoop(ctx, stream, ch, sol, req.GetSnapshot() == 0)
		cancel()
		if err != nil || !resync {
			return err
		}
	}
}

// watchLoop forwards changes of the solution's blocks. It returns false
// when the solution is complete (after sending it whole) and true when the
// watcher must resynchronize: the subscription overflowed, a block was
// evicted, or the periodic full re-read is due.
//
// A watch that follows the catalog (follow: no snapshot) also resyncs when
// an entry of one of its blocks appears at another input version: a new
// version of the block changed a column the component reads
// (Frontend.BlockChanged), so the next read names the new entry.
func (h *sigService) watchLoop(ctx context.Context, stream sigv1.SIG_WatchReadSolutionServer, ch <-chan matching.MemoEntry, sol *matching.Solution, follow bool) (bool, error) {
	state := map[matching.Task]matching.MemoState{}
	blocks := map[string]bool{}
	for _, b := range sol.Raw {
		blocks[b.Ref.ID()] = true
	}
	notReady := 0
	sol.EachMemo(func(k canon.Key, b *matching.BlockSolution) {
		id := matching.Task{Component: k, Block: b.Memo}
		if _, dup := state[id]; dup {
			return
		}
		state[id] = b.State
		if b.State != matching.MemoReady {
			notReady++
		}
	})
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case e, ok := <-ch:
			if !ok {
				return true, nil
			}
			id := matching.Task{Component: e.Component, Block: e.Block}
			old, in := state[id]
			if !in {
				if follow && blocks[e.Block.ID()] {
					return true, nil
				}
				continue
			}
			// The entry's memo block is the block and its input version.
			up := &sigv1.ReadSolutionUpdate{Changes: []*sigv1.BlockUpdate{{
				ComponentKey: e.Component.String(),
				Block: &sigv1.BlockRead{BlockId: e.Block.ID(), MemoObject: e.Object, MemoColumn: e.Column, State: stateToProto(e.State),
					Reason: e.Error, Rows: e.Rows, Bytes: e.Bytes, Version: e.Block.InputVersion()},
			}}}
			if err := stream.Send(up); err != nil {
				return false, err
			}
			if e.State == 0 {
				return true, nil // evicted: re-read, which re-creates it pending
			}
			state[id] = e.State
			if old != matching.MemoReady && e.State == matching.MemoReady {
				notReady--
			} else if old == matching.MemoReady && e.State != matching.MemoReady {
				notReady++
			}
			if notReady == 0 {
				return true, nil // the next full read confirms completion and ends the stream
			}
		case <-h.s.stopping:
			return false, errShuttingDown
		case <-tick.C:
			// A periodic full re-read catches anything a lost notification
			// would otherwise delay.
			return true, nil
		}
	}
}

func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
