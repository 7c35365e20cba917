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

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sigdata/sig/internal/auth"
	trainerv1 "github.com/sigdata/sig/proto/trainer/v1"
	"github.com/sigdata/sig/trainer/buffer"
	"github.com/sigdata/sig/trainer/control"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// The hosts' side of the controller: one Session stream per TPU host
// worker (Hello, then the controller's messages in, the host's out), each
// host message turned into an event of the machine, and what the
// controller sends every host.

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
	if hello.GetHostId() == control.ScopeJob {
		// A preemption notice's scope is a host's id or ScopeJob: a host
		// of that name would turn its own notice into the whole job's.
		return status.Errorf(codes.InvalidArgument, "session: host_id %q is reserved: a preemption notice's scope %q means the whole job", hello.GetHostId(), control.ScopeJob)
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

// fromHost turns a host's message into an event. A unit id from the host
// is parsed into its block version here, where it enters the controller.
func (s *service) fromHost(sess *session, m *trainerv1.HostMessage) error {
	c := s.c
	ev := control.Event{Host: sess.id, Incarnation: sess.incarnation}
	switch x := m.Msg.(type) {
	case *trainerv1.HostMessage_Request:
		ev.Kind, ev.Attempt, ev.Max = control.EvUnitsRequested, x.Request.GetAttempt(), int(x.Request.GetMax())
	case *trainerv1.HostMessage_UnitRead:
		ev.Kind, ev.Attempt, ev.Unit, ev.Rows = control.EvUnitRead, x.UnitRead.GetAttempt(), blockref.Parse(x.UnitRead.GetUnitId()), x.UnitRead.GetRows()
	case *trainerv1.HostMessage_UnitFailed:
		ev.Kind, ev.Attempt, ev.Unit = control.EvUnitFailed, x.UnitFailed.GetAttempt(), blockref.Parse(x.UnitFailed.GetUnitId())
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
	case *trainerv1.HostMessage_ReaderWait:
		return c.stalls.readerWait(sess.id, x.ReaderWait)
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

func (c *Controller) broadcast(m *trainerv1.ControllerMessage) {
	for _, s := range c.sessions {
		s.send(m)
	}
}

func (c *Controller) welcome(s *session) {
	w := &trainerv1.Welcome{Job: c.cfg.Job, ControllerIncarnation: c.incarnation, ReaderAddresses: c.cfg.Readers,
		BatchSize: uint32(c.cfg.BatchSize), BufferExamples: uint32(c.cfg.BufferExamples),
		MinInFlight: uint32(c.cfg.InFlight.Min), MaxInFlight: uint32(c.cfg.InFlight.Max),
		Credits: uint32(c.cfg.Credits), Inputs: inputsToProto(c.feats), LabelColumn: c.cfg.LabelColumn}
	s.send(&trainerv1.ControllerMessage{Msg: &trainerv1.ControllerMessage_Welcome{Welcome: w}})
}

// tellHosts sends the hosts what the machine decided for them: an attempt
// starts or aborts, units to read, no more units, a preemption notice, exit.
func (c *Controller) tellHosts(a control.Action) {
	switch a.Kind {
	case control.ActStartAttempt:
		c.broadcast(&trainerv1.ControllerMessage{Msg: &trainerv1.ControllerMessage_Start{Start: &trainerv1.StartAttempt{Attempt: a.Attempt, Phase: a.Phase.String()}}})
	case control.ActAbort:
		c.broadcast(&trainerv1.ControllerMessage{Msg: &trainerv1.ControllerMessage_Abort{Abort: &trainerv1.Abort{Attempt: a.Attempt, Reason: a.Reason}}})
	case control.ActAssign:
		s := c.sessions[a.Host]
		if s == nil {
			return
		}
		as := &trainerv1.Assign{Attempt: a.Attempt}
		for _, ref := range a.Units {
			u, err := c.sol.unit(&c.cfg, ref, a.Phase)
			if err != nil {
				c.log.Error("build work unit", "unit", ref.String(), "err", err)
				s.kill()
				return
			}
			as.Units = append(as.Units, u)
			if rs := a.Skips[ref]; len(rs) > 0 {
				sk := &trainerv1.UnitSkip{UnitId: u.GetUnitId()}
				for _, r := range rs {
					sk.Starts, sk.Ends = append(sk.Starts, r.Start), append(sk.Ends, r.End)
				}
				as.Skips = append(as.Skips, sk)
			}
		}
		s.send(&trainerv1.ControllerMessage{Msg: &trainerv1.ControllerMessage_Assign{Assign: as}})
	case control.ActDrain:
		if s := c.sessions[a.Host]; s != nil {
			s.send(&trainerv1.ControllerMessage{Msg: &trainerv1.ControllerMessage_Drain{Drain: &trainerv1.Drain{Attempt: c.m.Attempt(), Reason: a.Reason}}})
		}
	case control.ActBroadcastPreempt:
		c.broadcast(&trainerv1.ControllerMessage{Msg: &trainerv1.ControllerMessage_Preempt{Preempt: &trainerv1.PreemptNotice{Deadline: timestamppb.New(a.Deadline), Scope: a.Scope}}})
	case control.ActExitHost, control.ActRejectHost:
		if s := c.sessions[a.Host]; s != nil {
			s.send(&trainerv1.ControllerMessage{Msg: &trainerv1.ControllerMessage_Exit{Exit: &trainerv1.Exit{Reason: a.Reason}}})
			s.closeAfterFlush()
		}
	}
}
