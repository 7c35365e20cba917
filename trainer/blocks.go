package trainer

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/trainer/control"
	"github.com/sigdata/sig/warehouse/ready"
)

// The pipeline's blocks as the machine sees them: refreshBlocks answers
// control.ActRefreshBlocks with the read solution; while the job waits for
// data (a transient hold, or a caught-up job at the head of the stream) a
// watcher refreshes it whenever SIG says a block completed.

// refreshBlocks reads the read solution and posts EvBlocks with it (or the
// error: the machine retries).
func (c *Controller) refreshBlocks(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	ps, err := c.sig.GetReadSolution(rctx, &sigv1.GetReadSolutionRequest{Client: c.cfg.Client, Pipeline: c.cfg.Pipeline, Range: c.eventRange()})
	if err != nil {
		c.log.Warn("read solution", "err", err)
		c.post(msg{ev: control.Event{Kind: control.EvBlocks, Err: err.Error()}})
		return
	}
	c.post(msg{ev: control.Event{Kind: control.EvBlocks}, sol: newSolution(ps)})
}

// syncWatcher runs the completion watcher while the job waits for data: a
// transient hold (paper VI.A: lifted "once the data has become available")
// or a caught-up job at the head of the stream.
func (c *Controller) syncWatcher(ctx context.Context) {
	st := c.m.Status()
	h, held := c.m.Hold()
	want := (st == control.StHeld && held && h.Kind == control.Transient) || st == control.StWaitingData
	switch {
	case want && c.watchCancel == nil:
		wctx, cancel := context.WithCancel(ctx)
		c.watchCancel = cancel
		go c.watch(wctx)
	case !want && c.watchCancel != nil:
		c.watchCancel()
		c.watchCancel = nil
	}
}

// watch re-reads the solution whenever a completion event arrives on
// sig.memo.ready (Kafka) or the WatchReadSolution stream, and every
// HoldPollInterval in case an event was lost.
func (c *Controller) watch(ctx context.Context) {
	kick := make(chan struct{}, 1)
	poke := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	if len(c.cfg.KafkaBrokers) > 0 {
		sub, err := ready.NewSubscriber(ready.SubscriberConfig{Brokers: c.cfg.KafkaBrokers})
		if err != nil {
			c.log.Warn("sig.memo.ready subscriber", "err", err)
		} else {
			go func() {
				defer sub.Close()
				for {
					e, err := sub.Next(ctx)
					if err != nil {
						return
					}
					c.log.Debug("completion event", "component", e.ComponentKey, "block", e.BlockID)
					poke()
				}
			}()
		}
	}
	go func() {
		for ctx.Err() == nil {
			stream, err := c.sig.WatchReadSolution(ctx, &sigv1.WatchReadSolutionRequest{Client: c.cfg.Client, Pipeline: c.cfg.Pipeline, Range: c.eventRange()})
			if err == nil {
				first := true
				for {
					up, err := stream.Recv()
					if err != nil {
						break
					}
					if !first || up.GetSolution().GetComplete() {
						poke()
					}
					first = false
				}
			} else if status.Code(err) == codes.Unimplemented {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-c.cfg.Clock.After(c.cfg.RetryDelay):
			}
		}
	}()
	poke() // an event may have come before the subscription
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-c.cfg.Clock.After(c.cfg.HoldPollInterval):
		}
		c.refreshBlocks(ctx)
	}
}
