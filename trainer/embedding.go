package trainer

import (
	"context"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/trainer/embedding/fdp"
	"github.com/sigdata/sig/trainer/embedding/placement"
)

// The embedding wing wired into the controller (doc.go, "Feedback-directed
// partitioning" and "Parameter servers"): when each piece of
// trainer/embedding/placement runs and on which goroutine. Setup reads the
// features' statistics; every compile solves the slice's plan
// (device.go); sampled steps are profiled (steps.go, device.go); each
// committed checkpoint publishes the profile (checkpoints.go). The
// parameter servers (trainer/embedding/paramservers) start with Run and
// follow the device's restores, steps and checkpoints (device.go,
// checkpoints.go).

// slice is what the job's slices are planned with besides their chips.
func (c *Controller) slice() placement.Slice {
	return placement.Slice{Chip: c.cfg.Device.Chip, HBMBytesPerChip: c.cfg.HBMBytesPerChip,
		Batch: c.cfg.Hosts * c.cfg.BatchSize, Seed: c.cfg.Seed}
}

// readStatistics gets the statistics of the features from the store. A
// failure is not fatal: the partitioner plans without them.
func (c *Controller) readStatistics(ctx context.Context, keys []canon.Key) map[canon.Key]fdp.Statistics {
	if c.fstats == nil || len(keys) == 0 {
		return nil
	}
	stats, skipped, err := placement.ReadStatistics(ctx, c.fstats, keys)
	if err != nil {
		c.log.Warn("feature statistics: planning without them", "err", err)
		return nil
	}
	for _, err := range skipped {
		c.log.Warn("feature statistics: skipping one", "err", err)
	}
	c.log.Info("feature statistics", "features", len(keys), "found", len(stats))
	return stats
}

// newProfiler profiles the model's sparse inputs (nil without a store).
func (c *Controller) newProfiler() *fdp.Profiler {
	if c.fstats == nil || c.cfg.ProfileRate < 0 || c.dev.model == nil {
		return nil
	}
	return placement.NewProfiler(c.dev.model.Config(), c.fdpFeatures.Keys)
}

// publishStatistics sends what the profiler collected since the last call
// to the store (at a committed checkpoint: paper V.C, "the database of
// statistics is continuously updated"). Called with the device's mutex
// held; the RPC runs in its own goroutine.
func (c *Controller) publishStatistics(ctx context.Context) {
	req, li := placement.PublishRequest(c.dev.prof, c.cfg.Pipeline)
	if req == nil {
		return
	}
	go func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rpcTimeout)
		defer cancel()
		_, err := c.fstats.PutFeatureStatistics(rctx, req)
		if err != nil {
			c.log.Warn("publish feature statistics", "err", err)
			return
		}
		c.log.Info("feature statistics published", "features", len(req.Stats), "batches", req.Stats[0].GetBatches())
		c.post(msg{fn: func() {
			c.fdpRep.Published += len(req.Stats)
			c.fdpRep.ProfiledLoadImbalance = li
		}})
	}()
}
