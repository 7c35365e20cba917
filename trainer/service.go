package trainer

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sigdata/sig/internal/auth"
	trainerv1 "github.com/sigdata/sig/proto/trainer/v1"
	"github.com/sigdata/sig/trainer/control"
)

// The controller's gRPC service besides the hosts' Session stream
// (sessions.go): preemption notices, training holds and status, for
// operators, clients and the trainer's own processes.

// GRPCServer returns a gRPC server with the Controller service registered
// and, when the config has tokens, authentication; opts come last.
func (c *Controller) GRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	var all []grpc.ServerOption
	if c.cfg.Tokens != nil {
		all = append(all, grpc.ChainUnaryInterceptor(c.cfg.Tokens.UnaryInterceptor()),
			grpc.ChainStreamInterceptor(c.cfg.Tokens.StreamInterceptor()))
	}
	all = append(all, grpc.MaxRecvMsgSize(256<<20))
	gs := grpc.NewServer(append(all, opts...)...)
	trainerv1.RegisterControllerServer(gs, &service{c: c})
	return gs
}

// service serves the Controller API (proto/trainer/v1) for c.
type service struct {
	trainerv1.UnimplementedControllerServer
	c *Controller
}

// allow checks the caller's role when authentication is on.
func (s *service) allow(ctx context.Context, roles ...auth.Role) error {
	if s.c.cfg.Tokens == nil {
		return nil
	}
	p, err := auth.Require(ctx, roles...)
	if err != nil {
		return err
	}
	if !p.MayActFor(s.c.cfg.Client) {
		return status.Errorf(codes.PermissionDenied, "%s may not act for client %q", p.Name, s.c.cfg.Client)
	}
	return nil
}

func (s *service) Preempt(ctx context.Context, req *trainerv1.PreemptRequest) (*trainerv1.PreemptResponse, error) {
	if err := s.allow(ctx, auth.RoleTrainer, auth.RoleClient, auth.RoleOperator); err != nil {
		return nil, err
	}
	if req.GetNotice().AsDuration() < 0 {
		return nil, status.Error(codes.InvalidArgument, "notice must not be negative")
	}
	scope := req.GetScope()
	if scope == "" {
		scope = control.ScopeJob
	}
	d := s.c.Preempt(req.GetNotice().AsDuration(), scope)
	return &trainerv1.PreemptResponse{Deadline: timestamppb.New(d)}, nil
}

func (c *Controller) holdInfo(h control.Hold) *trainerv1.HoldInfo {
	return &trainerv1.HoldInfo{Id: h.ID, Kind: h.Kind.String(), Reason: h.Reason, Since: timestamppb.New(h.Since),
		Job: c.cfg.Job, Pipeline: c.cfg.Pipeline}
}

func (s *service) ListHolds(ctx context.Context, _ *trainerv1.ListHoldsRequest) (*trainerv1.ListHoldsResponse, error) {
	if err := s.allow(ctx, auth.RoleTrainer, auth.RoleClient, auth.RoleOperator); err != nil {
		return nil, err
	}
	out := &trainerv1.ListHoldsResponse{}
	if h := s.c.snapshot().hold; h != nil {
		out.Holds = append(out.Holds, s.c.holdInfo(*h))
	}
	return out, nil
}

func (s *service) ReleaseHold(ctx context.Context, req *trainerv1.ReleaseHoldRequest) (*trainerv1.ReleaseHoldResponse, error) {
	// A person releases a hold: the job's client or an operator, not the
	// trainer's own token (paper VI.A: "the hold is not removed
	// automatically").
	if err := s.allow(ctx, auth.RoleClient, auth.RoleOperator); err != nil {
		return nil, err
	}
	h, err := s.c.ReleaseHold(req.GetId())
	if err != nil {
		return nil, status.Error(codes.NotFound, err.Error())
	}
	who := "unauthenticated"
	if p := auth.FromContext(ctx); p != nil {
		who = p.Name
	}
	s.c.log.Info("hold release requested", "id", h.ID, "by", who, "reason", req.GetReason())
	return &trainerv1.ReleaseHoldResponse{Released: s.c.holdInfo(h)}, nil
}

func (s *service) Status(ctx context.Context, _ *trainerv1.StatusRequest) (*trainerv1.StatusResponse, error) {
	if err := s.allow(ctx, auth.RoleTrainer, auth.RoleClient, auth.RoleOperator); err != nil {
		return nil, err
	}
	return s.c.Status(), nil
}
