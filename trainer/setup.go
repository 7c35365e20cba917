package trainer

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/trainer/control"
	"github.com/sigdata/sig/trainer/embedding/placement"
	"github.com/sigdata/sig/trainer/model"
	"github.com/sigdata/sig/trainer/steptime"
)

// Setup (control.ActSetup): submit the job's graph to SIG, read the
// solution's model inputs, build the model and read the statistics
// feedback-directed partitioning plans with.

// rpcTimeout bounds each call to sigd and each journal write.
const rpcTimeout = 30 * time.Second

// eventRange is the job's event range as SIG takes it.
func (c *Controller) eventRange() *sigv1.EventRange {
	return &sigv1.EventRange{StartMicros: c.cfg.From, EndMicros: c.cfg.endMicros()}
}

// setup registers the graph (when the job has one) and builds the model
// from the read solution's inputs. A graph SIG rejects (InvalidArgument:
// the DSL does not compile), inputs the model cannot consume, or an input
// whose component key does not parse are permanent: a person must fix the
// configuration or look at sigd (paper VI.A).
func (c *Controller) setup(ctx context.Context) {
	var feats placement.Features
	done := func(err error, permanent bool, sol *solution, m *model.Model) {
		ev := control.Event{Kind: control.EvSetupDone, Permanent: permanent}
		if err != nil {
			ev.Err = err.Error()
			c.log.Warn("setup failed", "err", err, "permanent", permanent)
		}
		c.post(msg{ev: ev, sol: sol, model: m, fdp: feats})
	}
	rctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	if c.cfg.Graph != "" {
		_, err := c.sig.SubmitGraph(rctx, &sigv1.SubmitGraphRequest{Client: c.cfg.Client, Pipeline: c.cfg.Pipeline,
			Priority: c.cfg.Priority, Range: c.eventRange(),
			Graph: &sigv1.GraphSpec{Spec: &sigv1.GraphSpec_Dsl{Dsl: c.cfg.Graph}, RawSource: c.cfg.RawSource}})
		if err != nil {
			done(fmt.Errorf("submit graph: %w", err), permanentRPC(err), nil, nil)
			return
		}
	}
	ps, err := c.sig.GetReadSolution(rctx, &sigv1.GetReadSolutionRequest{Client: c.cfg.Client, Pipeline: c.cfg.Pipeline, Range: c.eventRange()})
	if err != nil {
		done(fmt.Errorf("read solution: %w", err), permanentRPC(err), nil, nil)
		return
	}
	sol := newSolution(ps)
	f, err := sol.features()
	if err != nil {
		done(err, true, nil, nil)
		return
	}
	m, err := model.New(c.modelConfig(f))
	if err != nil {
		done(err, true, nil, nil)
		return
	}
	// Feedback-directed partitioning (paper V.C): what other models (or
	// earlier runs) measured for these features.
	if feats.Keys, err = placement.FeatureKeys(sol.sol.GetInputs(), f); err != nil {
		done(err, true, nil, nil)
		return
	}
	feats.Stats = c.readStatistics(rctx, feats.Keys)
	done(nil, false, sol, m)
}

func (c *Controller) modelConfig(f model.Features) model.Config {
	return model.Config{Features: f, Vocab: c.cfg.Vocab, Dim: c.cfg.Dim, Hidden: c.cfg.Hidden,
		LearningRate: c.cfg.LearningRate, EmbeddingLearningRate: c.cfg.EmbeddingLearningRate, Seed: c.cfg.Seed,
		Cost: c.cfg.Device, StaleEmbeddingGradients: c.cfg.Device.Mode == steptime.Pipelined}
}

// permanentRPC reports whether a SIG error needs a person: the request is
// wrong (a graph that does not compile, an unknown pipeline, a token that
// may not act for the client), as opposed to sigd being unavailable.
func permanentRPC(err error) bool {
	s, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch s.Code() {
	case codes.InvalidArgument, codes.NotFound, codes.FailedPrecondition, codes.PermissionDenied,
		codes.Unauthenticated, codes.OutOfRange, codes.Unimplemented:
		return true
	}
	return false
}
