package sigd

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/sigdata/sig/matching"
	"github.com/sigdata/sig/workers"
)

// completing wraps the in-process leaser so that Complete first marks the
// memo entry ready, exactly like the remote protocol's completion hook. It
// remembers each lease (its task with its description, and the build it
// was leased as) for the hook.
type completing struct {
	workers.Leaser // described: leased tasks carry their Spec
	q              *workers.Queue
	hook           func(ctx context.Context, t workers.Task, res workers.Result) error
	leases         sync.Map // lease id -> workers.Lease
}

func (c *completing) LeaseBatch(ctx context.Context, workerID string, maxTasks int) ([]workers.Lease, error) {
	ls, err := c.Leaser.LeaseBatch(ctx, workerID, maxTasks)
	for _, l := range ls {
		// Every task of a batch, each completed with its own lease.
		c.leases.Store(l.ID, l)
	}
	return ls, err
}

func (c *completing) Complete(ctx context.Context, leaseID string, res workers.Result) error {
	v, ok := c.leases.LoadAndDelete(leaseID)
	if !ok {
		return fmt.Errorf("lease %s: %w", leaseID, workers.ErrLeaseLost)
	}
	l := v.(workers.Lease)
	res.Build = l.Build // who computed it: the lease's, as the remote protocol's server sets it
	if err := c.hook(ctx, l.Task, res); err != nil {
		if errors.Is(err, matching.ErrStale) {
			// The entry was evicted and re-created meanwhile: run again for
			// the new incarnation, without counting an attempt.
			return c.q.Return(leaseID)
		}
		return err
	}
	return c.Leaser.Complete(ctx, leaseID, res)
}

func (c *completing) Fail(ctx context.Context, leaseID, cause string) (bool, error) {
	c.leases.Delete(leaseID)
	return c.Leaser.Fail(ctx, leaseID, cause)
}
