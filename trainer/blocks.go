package trainer

import (
	"context"
	"fmt"
	"hash/crc32"

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
//
// The solution is read at a catalog snapshot the job pins first (issue 21):
// the pin keeps the snapshot's block versions, and their memo entries, from
// sigd's garbage collection until the job pins another or exits, so every
// unit of an epoch reads the versions it was planned with. A watcher's
// refresh still in flight when an epoch starts moves the pin on; the
// controller, which does not take that solution, pins the epoch's snapshot
// again (Controller.pin). A sigd without snapshots
// (Unimplemented), or a pin refused, is read at "now": units check their
// block's version (solution.unit), so a version collected meanwhile fails
// its unit and the attempt, never trains another version.
func (c *Controller) refreshBlocks(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	req := &sigv1.GetReadSolutionRequest{Client: c.cfg.Client, Pipeline: c.cfg.Pipeline, Range: c.eventRange()}
	pin, err := c.sig.PinSnapshot(rctx, &sigv1.PinSnapshotRequest{Name: c.pinName()})
	switch {
	case err == nil:
		req.Snapshot = pin.GetSnapshot()
	case status.Code(err) != codes.Unimplemented:
		c.log.Warn("pin snapshot: reading the solution unpinned", "pin", c.pinName(), "err", err)
	}
	ps, err := c.sig.GetReadSolution(rctx, req)
	if err != nil {
		c.log.Warn("read solution", "err", err)
		c.post(msg{ev: control.Event{Kind: control.EvBlocks, Err: err.Error()}})
		return
	}
	c.post(msg{ev: control.Event{Kind: control.EvBlocks, Snapshot: ps.GetSnapshot()}, sol: newSolution(ps)})
}

// pinName is the job's snapshot pin at sigd: "<client>:<pipeline>", the
// pipeline's characters outside the names sigd accepts for pins replaced
// by '_' (with a hash of the name then, so two pipelines never share one).
func (c *Controller) pinName() string {
	p := []byte(c.cfg.Pipeline)
	changed := false
	for i, b := range p {
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '.' || b == '_' || b == '-') {
			p[i], changed = '_', true
		}
	}
	name := c.cfg.Client + ":" + string(p)
	if changed {
		name += fmt.Sprintf("-%08x", crc32.ChecksumIEEE([]byte(c.cfg.Pipeline)))
	}
	if len(name) > 128 {
		name = fmt.Sprintf("%s:%08x", c.cfg.Client, crc32.ChecksumIEEE([]byte(c.cfg.Pipeline)))
	}
	return name
}

// pin moves the job's pin back to snapshot snap (that of the epoch in
// flight), after a refresh whose solution the controller did not take had
// moved it on.
func (c *Controller) pin(ctx context.Context, snap int64) {
	rctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	if _, err := c.sig.PinSnapshot(rctx, &sigv1.PinSnapshotRequest{Name: c.pinName(), Snapshot: snap}); err != nil && status.Code(err) != codes.Unimplemented {
		c.log.Warn("pin snapshot of the epoch in flight", "snapshot", snap, "err", err)
	}
}

// unpin drops the job's pin when it is done: nothing it trains on needs
// old versions kept any more.
func (c *Controller) unpin(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	if _, err := c.sig.UnpinSnapshot(rctx, &sigv1.UnpinSnapshotRequest{Name: c.pinName()}); err != nil && status.Code(err) != codes.Unimplemented {
		c.log.Warn("unpin snapshot", "err", err)
	}
}

// syncWatcher runs the completion watcher while the job waits for data: a
// transient hold (paper VI.A: lifted "once the data has become available")
// or a caught-up job at the head of the stream.
func (c *Controller) syncWatcher(ctx context.Context) {
	st := c.m.Status()
	h, held := c.m.Hold()
	want := (st == control.StHeld && held && h.Kind == control.Transient) || st == control.StWaitingData || st == control.StStalled
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
					c.log.Debug("completion event", "component", e.ComponentKey, "block", e.Block.String())
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
