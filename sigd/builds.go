package sigd

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/internal/randid"
	"github.com/sigdata/sig/matching"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/workers"
)

// Worker builds banned (issue 27; paper VIII.E's shared-fate risk): when a
// block a worker build computed wrong is computed wrong again by it, the
// evictor bans the build from leasing and fails the block
// (eviction/mismatch.go) rather than recompute it for ever. The bans are
// the work queue's (workers.Queue.BanBuild, durable); sigd lists them to
// everyone (ListWorkerBuildBans, the web UI's overview) and lets operators
// alone lift one (LiftWorkerBuildBan, `sigctl builds lift BUILD`, the web
// UI's Lift button), auditing who did.

// queueBuilds adapts the work queues to the evictor.
type queueBuilds struct{ q *workers.Queue }

func (b queueBuilds) BanBuild(build, reason string) (bool, int, error) {
	return b.q.BanBuild(build, reason)
}

func (b queueBuilds) Quarantine(k canon.Key, block blockref.Memo, reason string) (bool, error) {
	return b.q.Quarantine(workers.TaskID{Component: k, Block: block}, reason)
}

// bans lists the banned builds for the API and the UI.
func (s *Server) bans() []*sigv1.WorkerBuildBan {
	var out []*sigv1.WorkerBuildBan
	for _, b := range s.queue.Bans() {
		out = append(out, &sigv1.WorkerBuildBan{Build: b.Build, Reason: b.Reason, Since: timestamp(b.Since)})
	}
	return out
}

// liftBan lifts the ban of build for operator who, and audits it. It
// reports whether the build was banned.
func (s *Server) liftBan(who, build string) (bool, error) {
	if build == "" {
		return false, &matching.InputError{Field: "build", Err: fmt.Errorf("empty")}
	}
	ban, banned := s.queue.Banned(build)
	lifted, err := s.queue.LiftBan(build)
	if err != nil || !lifted {
		return lifted, err
	}
	if !banned {
		ban.Reason = "(lifted meanwhile)"
	}
	entry := matching.AuditEntry{ID: randid.Hex(8), Who: who, When: s.clock.Now(),
		What: fmt.Sprintf("lift the ban of worker build %q", build),
		Why:  fmt.Sprintf("banned since %s because %s; its workers lease again (failed blocks stay failed until released)", ban.Since.UTC().Format("2006-01-02 15:04:05Z"), ban.Reason)}
	if err := s.frontend.Cache().AppendAudit(entry); err != nil {
		return true, err
	}
	s.log.Info("worker build ban lifted", "build", build, "who", who)
	return true, nil
}

// ListWorkerBuildBans lists the banned worker builds (every role that
// reads the queues: a build is no client's secret).
func (h *sigService) ListWorkerBuildBans(ctx context.Context, _ *sigv1.ListWorkerBuildBansRequest) (*sigv1.ListWorkerBuildBansResponse, error) {
	if _, err := auth.Require(ctx, auth.RoleClient, auth.RoleOperator, auth.RoleTrainer); err != nil {
		return nil, err
	}
	return &sigv1.ListWorkerBuildBansResponse{Bans: h.s.bans()}, nil
}

// LiftWorkerBuildBan lets a banned worker build lease again (operators).
func (h *sigService) LiftWorkerBuildBan(ctx context.Context, req *sigv1.LiftWorkerBuildBanRequest) (*sigv1.LiftWorkerBuildBanResponse, error) {
	p, err := auth.Require(ctx, auth.RoleOperator)
	if err != nil {
		return nil, err
	}
	if req.GetBuild() == "" {
		return nil, status.Error(codes.InvalidArgument, "build: empty")
	}
	lifted, err := h.s.liftBan(p.Name, req.GetBuild())
	if errors.Is(err, workers.ErrInvalid) {
		return nil, status.Errorf(codes.InvalidArgument, "build: %v", err)
	}
	if err != nil {
		return nil, grpcError(err)
	}
	return &sigv1.LiftWorkerBuildBanResponse{Lifted: lifted}, nil
}
