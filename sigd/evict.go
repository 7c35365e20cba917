package sigd

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/eviction"
	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/matching"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd/ui"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/workers"
)

// queueCanceler adapts the work queues to the evictor.
type queueCanceler struct{ q *workers.Queue }

func (c queueCanceler) Cancel(k canon.Key, block blockref.Memo) error {
	_, err := c.q.Cancel(workers.TaskID{Component: k, Block: block})
	return err
}

// Evictor returns the server's evictor.
func (s *Server) Evictor() *eviction.Evictor { return s.evictor }

func (s *Server) newEvictor() *eviction.Evictor {
	return &eviction.Evictor{Frontend: s.frontend, Queue: queueCanceler{s.queue}, Store: s.store, Clock: s.clock,
		Policy: eviction.Policy{TTL: s.cfg.EvictTTL, BudgetBytes: s.cfg.EvictBudgetBytes}, Interval: s.cfg.EvictInterval, Log: s.log,
		Versions: s.catalog, Builds: queueBuilds{s.queue}}
}

// ComponentSummary converts a component's info for the API, as p may see
// it: a client learns which of its own pipelines use a component, not which
// other clients' pipelines do (operators see them all).
func ComponentSummary(p *auth.Principal, info matching.ComponentInfo) *sigv1.ComponentSummary {
	cs := &sigv1.ComponentSummary{
		Key: info.Record.Key.String(), CanonicalDsl: info.Record.DSL, Type: info.Record.Type, Columns: info.Record.Columns,
		Ops: info.Record.Ops, Nodes: uint32(info.Record.Nodes), LastRequested: timestamp(info.LastRequested),
		BlocksReady: uint32(info.Ready), BlocksPending: uint32(info.Pending), BlocksFailed: uint32(info.Failed),
		Bytes: info.Bytes, RawSource: info.Record.Source,
	}
	for _, u := range info.Pipelines {
		if p.IsOperator() || u[0] == p.Client {
			cs.Pipelines = append(cs.Pipelines, u[0]+"/"+u[1])
		}
	}
	return cs
}

// visible reports whether p may see a component: operators see all,
// clients the components their pipelines use.
func visible(p *auth.Principal, info matching.ComponentInfo) bool {
	if p.IsOperator() {
		return true
	}
	for _, u := range info.Pipelines {
		if u[0] == p.Client {
			return true
		}
	}
	return false
}

func (h *sigService) SearchComponents(ctx context.Context, req *sigv1.SearchComponentsRequest) (*sigv1.SearchComponentsResponse, error) {
	p, err := auth.Require(ctx, auth.RoleClient, auth.RoleOperator, auth.RoleTrainer)
	if err != nil {
		return nil, err
	}
	q := matching.Query{Column: req.GetColumn(), Op: req.GetOp(), Client: req.GetClient(), Pipeline: req.GetPipeline(),
		KeyPrefix: req.GetKeyPrefix(), Subgraph: req.GetSubgraphDsl(), Source: req.GetRawSource(),
		Limit: int(req.GetLimit()), After: req.GetPageToken()}
	if !p.IsOperator() {
		if q.Client != "" && q.Client != p.Client {
			return nil, status.Errorf(codes.PermissionDenied, "%s may not search client %q", p.Name, q.Client)
		}
		q.Client = p.Client
	}
	res, next, err := h.s.frontend.Search(q)
	if err != nil {
		return nil, grpcError(err)
	}
	out := &sigv1.SearchComponentsResponse{NextPageToken: next}
	for _, info := range res {
		out.Components = append(out.Components, ComponentSummary(p, info))
	}
	return out, nil
}

func (h *sigService) GetComponent(ctx context.Context, req *sigv1.GetComponentRequest) (*sigv1.GetComponentResponse, error) {
	p, err := auth.Require(ctx, auth.RoleClient, auth.RoleOperator, auth.RoleTrainer)
	if err != nil {
		return nil, err
	}
	k, err := canon.ParseKey(req.GetKey())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "key: %v", err)
	}
	info, err := h.s.frontend.Info(k)
	if err != nil {
		return nil, grpcError(err)
	}
	if !visible(p, info) {
		// NotFound, word for word as for a key nobody uses: whether
		// another client caches a graph is not for p to learn.
		return nil, grpcError(fmt.Errorf("%w: component %s", matching.ErrNotFound, k))
	}
	out := &sigv1.GetComponentResponse{Component: ComponentSummary(p, info)}
	memos, err := h.s.cache.Memos(k)
	if err != nil {
		return nil, grpcError(err)
	}
	ids := slices.SortedFunc(maps.Keys(memos), blockref.Memo.Compare)
	for _, id := range ids {
		m := memos[id]
		// The memo block's name: "<id>.v<N>" from input version 2 on.
		out.Blocks = append(out.Blocks, &sigv1.BlockRead{BlockId: id.String(), MemoObject: m.Object, MemoColumn: m.Column, State: stateToProto(m.State),
			Reason: m.Error, Rows: m.Rows, Bytes: m.Bytes})
	}
	by, contains, err := h.s.frontend.Related(k)
	if err != nil {
		return nil, grpcError(err)
	}
	out.ContainedBy, out.Contains = keysToProto(by), keysToProto(contains)
	return out, nil
}

// Evict is operator-only: a dry run lists the impact, a confirmed one
// (with a reason) removes it and records an audit entry.
func (h *sigService) Evict(ctx context.Context, req *sigv1.EvictRequest) (*sigv1.EvictResponse, error) {
	p, err := auth.Require(ctx, auth.RoleOperator)
	if err != nil {
		return nil, err
	}
	t := eviction.Target{Subgraph: req.GetSubgraphDsl(), NodeKey: req.GetNodeKey(), Source: req.GetRawSource()}
	var im eviction.Impact
	if req.GetDryRun() {
		im, err = h.s.evictor.Plan(t)
	} else {
		im, err = h.s.evictor.Evict(ctx, t, p.Name, req.GetReason())
	}
	if err != nil {
		return nil, grpcError(err)
	}
	out := &sigv1.EvictResponse{DryRun: req.GetDryRun(), Pipelines: im.Pipelines, Blocks: uint32(im.Blocks),
		Bytes: im.Bytes, ObjectsDeleted: uint32(im.Objects), AuditId: im.AuditID, Components: keysToProto(im.Components)}
	return out, nil
}

// EvictBlock is operator-only: one block evicted, or recomputed now.
func (h *sigService) EvictBlock(ctx context.Context, req *sigv1.EvictBlockRequest) (*sigv1.EvictBlockResponse, error) {
	p, err := auth.Require(ctx, auth.RoleOperator)
	if err != nil {
		return nil, err
	}
	k, err := canon.ParseKey(req.GetComponentKey())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "component_key: %v", err)
	}
	var im eviction.BlockImpact
	if req.GetRecompute() {
		im, err = h.s.evictor.RecomputeBlock(ctx, k, blockref.ParseMemo(req.GetBlockId()), p.Name, req.GetReason())
	} else {
		im, err = h.s.evictor.EvictBlock(ctx, k, blockref.ParseMemo(req.GetBlockId()), p.Name, req.GetReason())
	}
	if err != nil {
		return nil, blockError(err)
	}
	return &sigv1.EvictBlockResponse{ComponentKey: k.String(), BlockId: req.GetBlockId(), State: stateToProto(im.State),
		Pipelines: im.Pipelines, Bytes: im.Bytes, ObjectsDeleted: uint32(im.Objects), AuditId: im.AuditID}, nil
}

// maxReportDetail bounds what a report's detail adds to the audit log.
const maxReportDetail = 1024

// ReportCorruptMemo takes a report of a corrupt memo object, or of one
// whose values a reader's guard found wrong (reason MEMO_MISMATCH), as a
// hint: the evictor verifies the object (for a mismatch, recomputes the
// block and compares) and repairs only a block it finds bad. Readers (role
// reader), workers and operators report on any
// component; clients and trainers only on components their pipelines use,
// others answer NotFound as GetComponent does, so that a client can
// neither make sigd read other clients' data nor learn what it caches.
func (h *sigService) ReportCorruptMemo(ctx context.Context, req *sigv1.ReportCorruptMemoRequest) (*sigv1.ReportCorruptMemoResponse, error) {
	p, err := auth.Require(ctx, auth.RoleReader, auth.RoleWorker, auth.RoleOperator, auth.RoleClient, auth.RoleTrainer)
	if err != nil {
		return nil, err
	}
	k, err := canon.ParseKey(req.GetComponentKey())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "component_key: %v", err)
	}
	if p.Role == auth.RoleClient || p.Role == auth.RoleTrainer {
		info, err := h.s.frontend.Info(k)
		if err != nil {
			return nil, grpcError(err)
		}
		if !visible(p, info) {
			return nil, grpcError(fmt.Errorf("%w: component %s", matching.ErrNotFound, k))
		}
	}
	f, err := h.s.evictor.ReportCorrupt(ctx, k, blockref.ParseMemo(req.GetBlockId()), p.Name, req.GetReason(), matching.ClipText(req.GetDetail(), maxReportDetail))
	if err != nil {
		return nil, blockError(err)
	}
	return &sigv1.ReportCorruptMemoResponse{Corrupt: f.Corrupt, Finding: f.What, State: stateToProto(f.Entry.State),
		AuditId: f.Repair.AuditID}, nil
}

// blockError maps the errors of single-block operations.
func blockError(err error) error {
	switch {
	case errors.Is(err, eviction.ErrQuarantined):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, eviction.ErrVerify):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, matching.ErrStale):
		return status.Errorf(codes.Aborted, "the block changed while it was being evicted or recomputed; look again: %v", err)
	}
	return grpcError(err)
}

func (h *sigService) ListAudit(ctx context.Context, req *sigv1.ListAuditRequest) (*sigv1.ListAuditResponse, error) {
	if _, err := auth.Require(ctx, auth.RoleOperator); err != nil {
		return nil, err
	}
	limit := int(req.GetLimit())
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	es, err := h.s.cache.Audit(limit)
	if err != nil {
		return nil, grpcError(err)
	}
	out := &sigv1.ListAuditResponse{}
	for _, e := range es {
		out.Entries = append(out.Entries, &sigv1.AuditEntry{Id: e.ID, Who: e.Who, When: timestamp(e.When), What: e.What,
			Why: e.Why, Components: keysToProto(e.Components), Blocks: uint32(e.Blocks), Bytes: e.Bytes})
	}
	return out, nil
}

// newUI builds the operator web UI over the server.
func (s *Server) newUI(sampleEvery time.Duration) *ui.UI {
	op := &auth.Principal{Role: auth.RoleOperator}
	return ui.New(ui.Config{
		Frontend: s.frontend, Evictor: s.evictor, Tokens: s.tokens, Clock: s.clock, Log: s.log,
		// Secure only when browsers actually use HTTPS: sigd's HTTP
		// listener never serves TLS (--tls-cert is gRPC's).
		SecureCookies: s.cfg.HTTPBehindTLSProxy,
		ReportsDir:    s.cfg.ReportsDir,
		Stats:         s.StatsSnapshot,
		Sample:        func() (*sigv1.StatsResponse, error) { return s.statsSnapshot(false) },
		Quarantine: func() []*sigv1.QuarantinedTask {
			var out []*sigv1.QuarantinedTask
			for _, t := range s.queue.ListQuarantine() {
				client := ""
				if cs := t.Clients(); len(cs) > 0 {
					client = cs[0]
				}
				out = append(out, &sigv1.QuarantinedTask{ComponentKey: t.ID.Component.String(), BlockId: t.ID.Block.String(), Error: t.Err,
					Attempts: uint32(t.Attempts), Since: timestamp(t.Since), Client: client})
			}
			return out
		},
		// The UI's release form names the component as the page showed it,
		// in hex: here it enters the process.
		Release: func(component, block string) (bool, error) {
			k, err := canon.ParseKey(component)
			if err != nil {
				return false, &matching.InputError{Field: "component", Err: err}
			}
			return s.queue.Release(workers.TaskID{Component: k, Block: blockref.ParseMemo(block)})
		},
		Bans:        s.bans,
		LiftBan:     s.liftBan,
		Trainers:    func() []*sigv1.TrainerStatus { return s.trainers.List(op) },
		QueuedPeak:  s.queue.QueuedPeak,
		SampleEvery: sampleEvery,
		Explain: func(client, pipeline string) (*sigv1.ExplainPendingResponse, error) {
			return s.explainPending(client, pipeline, nil, defaultExplainLimit)
		},
		SetPriority: s.setPriority,
	})
}
