package trainer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sigdata/sig/internal/auth"
	trainerv1 "github.com/sigdata/sig/proto/trainer/v1"
	"github.com/sigdata/sig/trainer/accounting/goodput"
	"github.com/sigdata/sig/trainer/buffer"
	"github.com/sigdata/sig/trainer/control"
	"github.com/sigdata/sig/warehouse/block"
)

// session is one host's Session stream.
type session struct {
	id, incarnation string
	out             chan *trainerv1.ControllerMessage
	done            chan struct{}
	once            sync.Once
	flush           chan struct{}
	flushOnce       sync.Once
	// draining: the controller said its last word; the host's remaining
	// messages are read and dropped until it hangs up.
	draining atomic.Bool
}

func newSession(id, inc string) *session {
	return &session{id: id, incarnation: inc, out: make(chan *trainerv1.ControllerMessage, 4096),
		done: make(chan struct{}), flush: make(chan struct{})}
}

// send queues a message; a host too slow to take 4096 messages is cut off
// (the controller never blocks on one host).
func (s *session) send(m *trainerv1.ControllerMessage) {
	select {
	case <-s.done:
	case s.out <- m:
	default:
		s.kill()
	}
}

func (s *session) kill() { s.once.Do(func() { close(s.done) }) }

// closeAfterFlush ends the session once the queued messages are sent.
func (s *session) closeAfterFlush() { s.flushOnce.Do(func() { close(s.flush) }) }

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

func (s *service) Session(stream trainerv1.Controller_SessionServer) error {
	if err := s.allow(stream.Context(), auth.RoleTrainer, auth.RoleOperator); err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	hello := first.GetHello()
	if hello == nil {
		return status.Error(codes.InvalidArgument, "session: the first message must be hello")
	}
	if err := block.ValidateName("host_id", hello.GetHostId()); err != nil || hello.GetIncarnation() == "" || strings.ContainsAny(hello.GetHostId(), " #") {
		return status.Errorf(codes.InvalidArgument, "session: host_id %q and a non-empty incarnation are required", hello.GetHostId())
	}
	c := s.c
	sess := newSession(hello.GetHostId(), hello.GetIncarnation())
	c.post(msg{ev: control.Event{Kind: control.EvHostJoined, Host: sess.id, Incarnation: sess.incarnation}, sess: sess})
	defer c.post(msg{ev: control.Event{Kind: control.EvHostLost, Host: sess.id, Incarnation: sess.incarnation}})

	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	sendErr := make(chan error, 1)
	go func() {
		for {
			select {
			case <-ctx.Done():
				sendErr <- ctx.Err()
				return
			case <-sess.done:
				sendErr <- errors.New("session cut off")
				return
			case m := <-sess.out:
				if err := stream.Send(m); err != nil {
					sendErr <- err
					return
				}
			case <-sess.flush:
				for {
					select {
					case m := <-sess.out:
						if err := stream.Send(m); err != nil {
							sendErr <- err
							return
						}
						continue
					default:
					}
					break
				}
				sendErr <- nil
				return
			}
		}
	}()
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			if sess.draining.Load() {
				continue
			}
			if err := s.fromHost(sess, m); err != nil && !sess.draining.Load() {
				recvErr <- err
				return
			}
		}
	}()
	select {
	case err := <-sendErr:
		if err != nil {
			sess.kill()
			return status.Error(codes.Aborted, err.Error())
		}
		// Everything is sent. Keep reading until the host hangs up, so
		// that a controller exiting right after does not reset the
		// connection under messages the host has not read yet.
		sess.draining.Store(true)
		select {
		case <-recvErr:
		case <-time.After(3 * time.Second):
		}
		return nil
	case err := <-recvErr:
		sess.kill()
		if err == io.EOF {
			return nil
		}
		return err
	}
}

// fromHost turns a host's message into an event.
func (s *service) fromHost(sess *session, m *trainerv1.HostMessage) error {
	c := s.c
	ev := control.Event{Host: sess.id, Incarnation: sess.incarnation}
	switch x := m.Msg.(type) {
	case *trainerv1.HostMessage_Request:
		ev.Kind, ev.Attempt, ev.Max = control.EvUnitsRequested, x.Request.GetAttempt(), int(x.Request.GetMax())
	case *trainerv1.HostMessage_UnitRead:
		ev.Kind, ev.Attempt, ev.Unit, ev.Rows = control.EvUnitRead, x.UnitRead.GetAttempt(), x.UnitRead.GetUnitId(), x.UnitRead.GetRows()
	case *trainerv1.HostMessage_UnitFailed:
		ev.Kind, ev.Attempt, ev.Unit = control.EvUnitFailed, x.UnitFailed.GetAttempt(), x.UnitFailed.GetUnitId()
		ev.Pending, ev.Err = x.UnitFailed.GetPending(), x.UnitFailed.GetError()
	case *trainerv1.HostMessage_Batch:
		b := x.Batch
		// Decoded and checked on the loop: the features belong to it.
		done := make(chan error, 1)
		c.post(msg{fn: func() {
			ex, err := examplesFromProto(c.feats, b.GetExamples())
			if err != nil {
				done <- fmt.Errorf("host %s batch %d: %w", sess.id, b.GetSeq(), err)
				return
			}
			segs, err := segmentsFromProto(b.GetUnitRows(), ex.Len())
			if err != nil {
				done <- fmt.Errorf("host %s batch %d: %w", sess.id, b.GetSeq(), err)
				return
			}
			done <- nil
			c.handle(msg{ev: control.Event{Kind: control.EvBatch, Host: sess.id, Incarnation: sess.incarnation,
				Attempt: b.GetAttempt(), Seq: b.GetSeq(), Examples: ex.Len(), UnitRows: buffer.Rows(segs), Final: b.GetFinal()},
				batch: &pendingBatch{ex: ex, segs: segs}})
		}})
		select {
		case err := <-done:
			if err != nil {
				return status.Error(codes.InvalidArgument, err.Error())
			}
		case <-c.stopped:
			return status.Error(codes.Unavailable, "controller stopped")
		}
		return nil
	case *trainerv1.HostMessage_Preempt:
		scope := x.Preempt.GetScope()
		if scope == "" {
			scope = sess.id
		}
		c.Preempt(x.Preempt.GetNotice().AsDuration(), scope)
		return nil
	default:
		return status.Error(codes.InvalidArgument, "session: unexpected message")
	}
	c.post(msg{ev: ev})
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

// Status returns the job's state and goodput.
func (c *Controller) Status() *trainerv1.StatusResponse {
	sn := c.snapshot()
	out := &trainerv1.StatusResponse{Job: c.cfg.Job, Client: c.cfg.Client, Pipeline: c.cfg.Pipeline,
		Status: sn.status.String(), Phase: sn.phase.String(), Attempt: sn.attempt, Chips: int32(sn.chips),
		Hosts: sn.hosts, CommittedEpochs: uint32(sn.progress.Epochs), CommittedUnits: uint32(len(sn.progress.Units)),
		Steps: sn.steps, LastLoss: sn.loss, PreemptedEpochs: uint32(sn.stats.PreemptedEpochs),
		PreemptedCommitted: uint32(sn.stats.PreemptedCommitted), ChipSeconds: map[string]float64{}}
	if sn.hold != nil {
		out.Hold = c.holdInfo(*sn.hold)
	}
	if r, err := c.rec.Report(c.now()); err == nil {
		if j, ok := c.jobGoodput(r); ok {
			out.SchedulingGoodput, out.RuntimeGoodput, out.ProgramGoodput, out.Mpg = j.Total.SG, j.Total.RG, j.Total.PG, j.Total.MPG
			for cat, v := range j.Total.ChipSeconds {
				if v != 0 {
					out.ChipSeconds[goodput.Category(cat).String()] = v
				}
			}
		}
	}
	return out
}
