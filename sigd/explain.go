package sigd

import (
	"context"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/matching"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/workers"
)

// Limits of ExplainPending's answer.
const (
	defaultExplainLimit = 100
	maxExplainLimit     = 1000
)

// ExplainPending says why a pipeline's memo entries are not ready (issue
// 30): the entry's state in the matching cache and its task's place in
// the work queue (workers.Queue.Explain), as the pipeline's client sees
// it. It reads the pipeline's current solution as GetReadSolution does
// (so a missing entry is created pending and scheduled, as any read
// would), and changes nothing else.
func (h *sigService) ExplainPending(ctx context.Context, req *sigv1.ExplainPendingRequest) (*sigv1.ExplainPendingResponse, error) {
	if _, err := auth.Require(ctx, auth.RoleClient, auth.RoleOperator, auth.RoleTrainer); err != nil {
		return nil, err
	}
	if req.GetClient() == "" {
		return nil, status.Error(codes.InvalidArgument, "client: missing")
	}
	if req.GetPipeline() == "" {
		return nil, status.Error(codes.InvalidArgument, "pipeline: missing")
	}
	if _, err := auth.RequireClient(ctx, req.GetClient()); err != nil {
		return nil, err
	}
	limit := int(req.GetLimit())
	switch {
	case limit == 0:
		limit = defaultExplainLimit
	case limit > maxExplainLimit:
		return nil, status.Errorf(codes.InvalidArgument, "limit: %d is more than %d", limit, maxExplainLimit)
	}
	if n := len(req.GetBlockIds()); n > maxExplainLimit {
		return nil, status.Errorf(codes.InvalidArgument, "block_ids: %d ids, more than %d", n, maxExplainLimit)
	}
	for i, b := range req.GetBlockIds() {
		if b == "" || strings.ContainsAny(b, "/ \t\n") {
			return nil, status.Errorf(codes.InvalidArgument, "block_ids[%d]: %q is not a block id", i, b)
		}
	}
	out, err := h.s.explainPending(req.GetClient(), req.GetPipeline(), req.GetBlockIds(), limit)
	if err != nil {
		return nil, grpcError(err)
	}
	return out, nil
}

// explainPending answers ExplainPending for checked arguments (the RPC's
// and the web UI's trainer page).
func (s *Server) explainPending(client, pipeline string, blockIDs []string, limit int) (*sigv1.ExplainPendingResponse, error) {
	want := map[string]bool{}
	for _, b := range blockIDs {
		want[b] = true
	}
	sol, err := s.frontend.ReadSolution(client, pipeline, 0, 0)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	out := &sigv1.ExplainPendingResponse{At: timestamppb.New(now)}

	// The entries not ready, each once, with the inputs reading it.
	type found struct {
		e      *sigv1.PendingEntry
		id     workers.TaskID
		state  matching.MemoState
		reason string
	}
	var entries []*found
	byTask := map[workers.TaskID]*found{}
	add := func(name, dsl string, b matching.BlockSolution, k workers.TaskID) {
		if b.State == matching.MemoReady || len(want) > 0 && !want[b.Block.Ref.ID()] {
			return
		}
		if f := byTask[k]; f != nil {
			if !slices.Contains(f.e.Inputs, name) {
				f.e.Inputs = append(f.e.Inputs, name)
			}
			return
		}
		f := &found{id: k, state: b.State, reason: b.Error, e: &sigv1.PendingEntry{
			Inputs: []string{name}, ComponentKey: k.Component.String(), ComponentDsl: dsl,
			BlockId: b.Block.Ref.ID(), Version: uint64(b.Memo.InputVersion())}}
		byTask[k] = f
		entries = append(entries, f)
	}
	for _, in := range sol.SortedInputs() {
		if !in.Computed {
			for _, b := range in.Blocks {
				add(in.Name, in.DSL, b, workers.TaskID{Component: in.Component, Block: b.Memo})
			}
		}
		for _, n := range in.MemoNodes {
			for _, b := range n.Blocks {
				add(in.Name, n.DSL, b, workers.TaskID{Component: n.Key, Block: b.Memo})
			}
		}
	}
	out.NotReady = uint32(len(entries))
	if len(entries) > limit {
		entries = entries[:limit]
	}
	ids := make([]workers.TaskID, len(entries))
	for i, f := range entries {
		ids[i] = f.id
	}
	for i, p := range s.queue.Explain(client, ids) {
		f := entries[i]
		e := f.e
		e.Attempts, e.Priority = uint32(p.Attempts), p.Priority
		switch {
		case f.state == matching.MemoFailed:
			e.Kind, e.Detail = sigv1.PendingKind_PENDING_KIND_FAILED, f.reason
		case p.State == workers.StateQuarantined:
			e.Kind, e.Detail = sigv1.PendingKind_PENDING_KIND_FAILED, "quarantined: "+p.Err
		case p.State == workers.StateLeased:
			e.Kind, e.Worker = sigv1.PendingKind_PENDING_KIND_RUNNING, p.Worker
			e.RunningMs = now.Sub(p.Since).Milliseconds()
		default:
			// Queued, or not in the queue yet (a client's queue full: its
			// read solutions enqueue what fits, the rest at a later read).
			e.Kind = sigv1.PendingKind_PENDING_KIND_QUEUED
			if p.State == 0 {
				e.Detail = "not in the work queue yet (the client's queue is full)"
			}
			for _, a := range p.Ahead {
				e.Ahead = append(e.Ahead, &sigv1.QueuedAhead{Client: a.Client, Priority: a.Priority, Tasks: uint32(a.Tasks)})
				e.TasksAhead += uint32(a.Tasks)
			}
		}
		// An entry invalidated after it was ready keeps the reason (a
		// corrupt or mismatching object, a repair): its recomputation.
		if f.reason != "" && f.state == matching.MemoPending && e.Kind != sigv1.PendingKind_PENDING_KIND_FAILED {
			if e.Kind == sigv1.PendingKind_PENDING_KIND_QUEUED {
				e.Kind = sigv1.PendingKind_PENDING_KIND_RECOMPUTING
			}
			e.Detail = strings.TrimSpace(e.Detail + " recomputing: " + f.reason)
		}
		out.Entries = append(out.Entries, e)
	}
	// Blocks asked for that the catalog does not have: still to be
	// ingested (or outside the pipeline's range).
	have := map[string]bool{}
	for _, b := range sol.Raw {
		have[b.Ref.ID()] = true
	}
	for _, b := range blockIDs {
		if !have[b] && len(out.Entries) < limit {
			have[b] = true // each id once
			out.Entries = append(out.Entries, &sigv1.PendingEntry{BlockId: b, Kind: sigv1.PendingKind_PENDING_KIND_INGESTION,
				Detail: "the block is not in the catalog in the pipeline's range"})
		}
	}
	return out, nil
}
