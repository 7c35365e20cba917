package sigd

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

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
	if err := matching.CheckPriority(req.GetPriority()); err != nil {
		return nil, grpcError(err)
	}
	if _, err := h.s.cache.SetPipelinePriority(req.GetClient(), req.GetPipeline(), req.GetPriority()); err != nil {
		return nil, grpcError(err)
	}
	moved, err := h.s.queue.SetPriority(req.GetClient(), req.GetPipeline(), req.GetPriority())
	if err != nil {
		return nil, grpcError(err)
	}
	return &sigv1.SetPriorityResponse{TasksReprioritized: uint32(moved)}, nil
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

func (h *sigService) ReportTrainerStatus(ctx context.Context, req *sigv1.TrainerStatus) (*sigv1.ReportTrainerStatusResponse, error) {
	if _, err := auth.Require(ctx, auth.RoleTrainer, auth.RoleOperator, auth.RoleClient); err != nil {
		return nil, err
	}
	// A report names its job's client, and a caller may report only for a
	// client it acts for, as with every other call that names a client.
	if _, err := auth.RequireClient(ctx, req.GetClient()); err != nil {
		return nil, err
	}
	if err := cleanTrainerStatus(req); err != nil {
		return nil, grpcError(err)
	}
	if err := h.s.reportTrainer(req, time.Now()); err != nil {
		return nil, err
	}
	return &sigv1.ReportTrainerStatusResponse{}, nil
}

// Bounds on trainer reports: every field a client sends is kept in memory,
// exported as metrics and drawn in the operator overview.
const (
	maxTrainersPerClient = 64
	maxTrainers          = 1024
	// trainerStatusTTL: a job that has not reported for this long is
	// forgotten (trainers report every few seconds while they run).
	trainerStatusTTL = 24 * time.Hour
	maxHoldText      = 1024
	maxChipKinds     = 32
)

// cleanTrainerStatus checks a report's fields (names as names, text
// printable, numbers finite and non-negative) and cleans its hold reason:
// an error message of the trainer's, clipped and its control characters
// blanked rather than refused, so that a held job still shows.
// A NaN loss is kept: it is what a NaN-loss hold looks like.
func cleanTrainerStatus(t *sigv1.TrainerStatus) error {
	if err := matching.ValidateName("job", t.GetJob()); err != nil {
		return err
	}
	if err := matching.ValidateName("client", t.GetClient()); err != nil {
		return err
	}
	for _, f := range []struct{ field, v string }{{"pipeline", t.GetPipeline()}, {"phase", t.GetPhase()}} {
		if f.v == "" {
			continue
		}
		if err := matching.ValidatePipelineName(f.field, f.v); err != nil {
			return err
		}
	}
	t.Hold = clipText(t.GetHold(), maxHoldText)
	for _, f := range []struct {
		field string
		v     float64
	}{{"scheduling_goodput", t.GetSchedulingGoodput()}, {"runtime_goodput", t.GetRuntimeGoodput()},
		{"program_goodput", t.GetProgramGoodput()}, {"mpg", t.GetMpg()},
		{"tensorcore_ns_per_step", t.GetTensorcoreNsPerStep()}, {"sparsecore_ns_per_step", t.GetSparsecoreNsPerStep()},
		{"device_ns_per_step", t.GetDeviceNsPerStep()}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			return fieldErr(f.field, "must be finite and non-negative, got %v", f.v)
		}
	}
	if t.GetChips() < 0 {
		return fieldErr("chips", "must not be negative, got %d", t.GetChips())
	}
	if len(t.GetChipSeconds()) > maxChipKinds {
		return fieldErr("chip_seconds", "at most %d categories, got %d", maxChipKinds, len(t.GetChipSeconds()))
	}
	for k, v := range t.GetChipSeconds() {
		if err := matching.ValidateName("chip_seconds key", k); err != nil {
			return err
		}
		if !(v >= 0) || math.IsInf(v, 0) {
			return fieldErr("chip_seconds", "%s: must be finite and non-negative, got %v", k, v)
		}
	}
	return nil
}

// clipText returns s cut to at most n bytes (at a rune boundary), invalid
// UTF-8 and control characters replaced by spaces.
func clipText(s string, n int) string {
	var b strings.Builder
	for _, r := range s {
		if r == utf8.RuneError || r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			r = ' '
		}
		if b.Len()+utf8.RuneLen(r) > n {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

func fieldErr(field, format string, args ...any) error {
	return &matching.InputError{Field: field, Err: fmt.Errorf(format, args...)}
}

// trainerKey names a trainer job: job names are a client's own, so two
// clients may both run a job "train" without one replacing the other's.
type trainerKey struct{ client, job string }

type trainerEntry struct {
	status *sigv1.TrainerStatus
	seen   time.Time
}

// reportTrainer keeps t as its job's latest status, first forgetting jobs
// silent for trainerStatusTTL; a client at maxTrainersPerClient jobs (or a
// server at maxTrainers) cannot add another.
func (s *Server) reportTrainer(t *sigv1.TrainerStatus, now time.Time) error {
	s.trainersMu.Lock()
	defer s.trainersMu.Unlock()
	k := trainerKey{t.GetClient(), t.GetJob()}
	if _, ok := s.trainers[k]; !ok {
		s.forgetSilentTrainers(now)
		perClient := 0
		for ok := range s.trainers {
			if ok.client == k.client {
				perClient++
			}
		}
		if perClient >= maxTrainersPerClient || len(s.trainers) >= maxTrainers {
			return status.Errorf(codes.ResourceExhausted, "client %q reports %d trainer jobs (at most %d per client, %d in all); reuse job names",
				k.client, perClient, maxTrainersPerClient, maxTrainers)
		}
	}
	s.trainers[k] = trainerEntry{status: t, seen: now}
	s.metrics.trainerReport(t)
	return nil
}

// forgetSilentTrainers drops the jobs silent for trainerStatusTTL and
// their metric series. s.trainersMu is held.
func (s *Server) forgetSilentTrainers(now time.Time) {
	for k, e := range s.trainers {
		if now.Sub(e.seen) > trainerStatusTTL {
			delete(s.trainers, k)
			s.metrics.trainerForget(k.client, k.job)
		}
	}
}

func (h *sigService) ListTrainerStatus(ctx context.Context, _ *sigv1.ListTrainerStatusRequest) (*sigv1.ListTrainerStatusResponse, error) {
	p, err := auth.Require(ctx, auth.RoleTrainer, auth.RoleOperator, auth.RoleClient)
	if err != nil {
		return nil, err
	}
	return &sigv1.ListTrainerStatusResponse{Trainers: h.s.TrainerStatuses(p)}, nil
}

// TrainerStatuses returns the latest report of every trainer p may see,
// by client then job.
func (s *Server) TrainerStatuses(p *auth.Principal) []*sigv1.TrainerStatus {
	s.trainersMu.Lock()
	defer s.trainersMu.Unlock()
	s.forgetSilentTrainers(time.Now())
	var out []*sigv1.TrainerStatus
	for _, e := range s.trainers {
		if p.IsOperator() || e.status.Client == p.Client {
			out = append(out, e.status)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Client != out[j].Client {
			return out[i].Client < out[j].Client
		}
		return out[i].Job < out[j].Job
	})
	return out
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
