package sigd

import (
	"context"
	"slices"
	"sort"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/matching"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/workers"
)

// SetPriority re-prioritizes a pipeline and its queued work. Clients may
// change only their own pipelines; operators any.
func (h *sigService) SetPriority(ctx context.Context, req *sigv1.SetPriorityRequest) (*sigv1.SetPriorityResponse, error) {
	if _, err := auth.Require(ctx, auth.RoleClient, auth.RoleOperator); err != nil {
		return nil, err
	}
	if _, err := auth.RequireClient(ctx, req.GetClient()); err != nil {
		return nil, err
	}
	moved, err := h.s.setPriority("", req.GetClient(), req.GetPipeline(), req.GetPriority())
	if err != nil {
		return nil, grpcError(err)
	}
	return &sigv1.SetPriorityResponse{TasksReprioritized: uint32(moved)}, nil
}

// setPriority sets a pipeline's priority and moves its queued work (the
// RPC, and the web UI's trainer page for an operator, who).
func (s *Server) setPriority(who, client, pipeline string, priority int32) (int, error) {
	if err := matching.CheckPriority(priority); err != nil {
		return 0, err
	}
	if _, err := s.cache.SetPipelinePriority(client, pipeline, priority); err != nil {
		return 0, err
	}
	moved, err := s.queue.SetPriority(client, pipeline, priority)
	if err != nil {
		return 0, err
	}
	if who != "" {
		s.log.Info("priority set", "who", who, "client", client, "pipeline", pipeline, "priority", priority, "moved", moved)
	}
	return moved, nil
}

func depthsToProto(ds []workers.Depth) []*sigv1.QueueDepth {
	out := make([]*sigv1.QueueDepth, 0, len(ds))
	for _, d := range ds {
		out = append(out, &sigv1.QueueDepth{Client: d.Client, Priority: d.Priority, Queued: uint32(d.Queued), Leased: uint32(d.Leased)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Client != out[j].Client {
			return out[i].Client < out[j].Client
		}
		return out[i].Priority > out[j].Priority
	})
	return out
}

// visibleDepths filters queue depths to what the caller may see: clients
// see their own queues, operators all.
func visibleDepths(ctx context.Context, ds []workers.Depth) []workers.Depth {
	p := auth.FromContext(ctx)
	if p.IsOperator() {
		return ds
	}
	var out []workers.Depth
	for _, d := range ds {
		if p != nil && d.Client == p.Client {
			out = append(out, d)
		}
	}
	return out
}

func (h *sigService) ListQueues(ctx context.Context, _ *sigv1.ListQueuesRequest) (*sigv1.ListQueuesResponse, error) {
	if _, err := auth.Require(ctx, auth.RoleClient, auth.RoleOperator, auth.RoleTrainer); err != nil {
		return nil, err
	}
	return &sigv1.ListQueuesResponse{Queues: depthsToProto(visibleDepths(ctx, h.s.queue.Depths()))}, nil
}

func (h *sigService) ListQuarantine(ctx context.Context, _ *sigv1.ListQuarantineRequest) (*sigv1.ListQuarantineResponse, error) {
	p, err := auth.Require(ctx, auth.RoleClient, auth.RoleOperator, auth.RoleTrainer)
	if err != nil {
		return nil, err
	}
	out := &sigv1.ListQuarantineResponse{}
	for _, t := range h.s.queue.ListQuarantine() {
		clients := t.Clients()
		if !p.IsOperator() && !slices.Contains(clients, p.Client) {
			continue
		}
		client := p.Client // a client sees its own name, not another's
		if p.IsOperator() && len(clients) > 0 {
			client = clients[0]
		}
		out.Tasks = append(out.Tasks, &sigv1.QuarantinedTask{ComponentKey: t.ID.Component.String(), BlockId: t.ID.Block.String(),
			Error: t.Err, Attempts: uint32(t.Attempts), Since: timestamp(t.Since), Client: client})
	}
	return out, nil
}

// ReleaseQuarantine gives a quarantined task another chance (operators).
func (h *sigService) ReleaseQuarantine(ctx context.Context, req *sigv1.ReleaseQuarantineRequest) (*sigv1.ReleaseQuarantineResponse, error) {
	if _, err := auth.Require(ctx, auth.RoleOperator); err != nil {
		return nil, err
	}
	k, err := canon.ParseKey(req.GetComponentKey())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "component_key: %v", err)
	}
	ok, err := h.s.queue.Release(workers.TaskID{Component: k, Block: blockref.ParseMemo(req.GetBlockId())})
	if err != nil {
		return nil, grpcError(err)
	}
	return &sigv1.ReleaseQuarantineResponse{Released: ok}, nil
}

func (h *sigService) Stats(ctx context.Context, _ *sigv1.StatsRequest) (*sigv1.StatsResponse, error) {
	if _, err := auth.Require(ctx, auth.RoleClient, auth.RoleOperator, auth.RoleTrainer); err != nil {
		return nil, err
	}
	st, err := h.s.StatsSnapshot()
	if err != nil {
		return nil, grpcError(err)
	}
	st.Queues = depthsToProto(visibleDepths(ctx, h.s.queue.Depths()))
	return st, nil
}

// ReportTrainerStatus keeps a trainer job's status (package trainers).
func (h *sigService) ReportTrainerStatus(ctx context.Context, req *sigv1.TrainerStatus) (*sigv1.ReportTrainerStatusResponse, error) {
	if _, err := auth.Require(ctx, auth.RoleTrainer, auth.RoleOperator, auth.RoleClient); err != nil {
		return nil, err
	}
	// A report names its job's client, and a caller may report only for a
	// client it acts for, as with every other call that names a client.
	if _, err := auth.RequireClient(ctx, req.GetClient()); err != nil {
		return nil, err
	}
	if err := h.s.trainers.Report(req); err != nil {
		return nil, grpcError(err)
	}
	return &sigv1.ReportTrainerStatusResponse{}, nil
}

func (h *sigService) ListTrainerStatus(ctx context.Context, _ *sigv1.ListTrainerStatusRequest) (*sigv1.ListTrainerStatusResponse, error) {
	p, err := auth.Require(ctx, auth.RoleTrainer, auth.RoleOperator, auth.RoleClient)
	if err != nil {
		return nil, err
	}
	return &sigv1.ListTrainerStatusResponse{Trainers: h.s.trainers.List(p)}, nil
}

// workersAuth admits only the worker (and operator) role to the lease
// protocol.
type workersAuth struct {
	sigv1.UnimplementedWorkersServer
	inner    sigv1.WorkersServer
	stopping <-chan struct{}
}

// LeaseTask long-polls; a shutting-down sigd ends the wait with
// Unavailable, which remote workers retry.
func (w *workersAuth) LeaseTask(ctx context.Context, r *sigv1.LeaseTaskRequest) (*sigv1.LeaseTaskResponse, error) {
	if _, err := auth.Require(ctx, auth.RoleWorker, auth.RoleOperator); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-w.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	resp, err := w.inner.LeaseTask(ctx, r)
	select {
	case <-w.stopping:
		if err != nil {
			return nil, errShuttingDown
		}
	default:
	}
	return resp, err
}

func (w *workersAuth) Heartbeat(ctx context.Context, r *sigv1.HeartbeatRequest) (*sigv1.HeartbeatResponse, error) {
	if _, err := auth.Require(ctx, auth.RoleWorker, auth.RoleOperator); err != nil {
		return nil, err
	}
	return w.inner.Heartbeat(ctx, r)
}

func (w *workersAuth) CompleteTask(ctx context.Context, r *sigv1.CompleteTaskRequest) (*sigv1.CompleteTaskResponse, error) {
	if _, err := auth.Require(ctx, auth.RoleWorker, auth.RoleOperator); err != nil {
		return nil, err
	}
	return w.inner.CompleteTask(ctx, r)
}

func (w *workersAuth) FailTask(ctx context.Context, r *sigv1.FailTaskRequest) (*sigv1.FailTaskResponse, error) {
	if _, err := auth.Require(ctx, auth.RoleWorker, auth.RoleOperator); err != nil {
		return nil, err
	}
	return w.inner.FailTask(ctx, r)
}
