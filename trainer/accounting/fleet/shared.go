package fleet

import (
	"context"
	"fmt"
	"sync"
)

// Shared is a Scheduler shared by training jobs running for real (it
// implements trainer.Allocator): Acquire blocks until the job's whole slice
// is granted, Release gives it back.
type Shared struct {
	mu      sync.Mutex
	s       *Scheduler
	waiting map[string]chan struct{}
}

// NewShared returns a shared fleet of capacity chips.
func NewShared(capacity int) *Shared {
	return &Shared{s: NewScheduler(capacity), waiting: map[string]chan struct{}{}}
}

// Acquire requests chips for job (priority 0) and waits until they are
// granted or ctx ends; a job that stops waiting leaves the queue.
func (f *Shared) Acquire(ctx context.Context, job string, chips int) error {
	return f.AcquirePriority(ctx, job, chips, 0)
}

// AcquirePriority is Acquire at a priority (higher first).
func (f *Shared) AcquirePriority(ctx context.Context, job string, chips, priority int) error {
	f.mu.Lock()
	if f.s.State(job) == Running {
		// Already holds its slice (Request keeps a running job's place and
		// would start nothing to wake us).
		f.mu.Unlock()
		return nil
	}
	if _, dup := f.waiting[job]; dup {
		f.mu.Unlock()
		return fmt.Errorf("fleet: job %s is already waiting for chips", job)
	}
	ch := make(chan struct{})
	f.waiting[job] = ch
	started, err := f.s.Request(job, chips, priority)
	if err != nil {
		delete(f.waiting, job)
		f.mu.Unlock()
		return err
	}
	f.wake(started)
	f.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		f.mu.Lock()
		defer f.mu.Unlock()
		select {
		case <-ch:
			// Granted just now: give it back.
			f.wake(f.s.Release(job))
		default:
			delete(f.waiting, job)
			f.wake(f.s.Release(job))
		}
		return ctx.Err()
	}
}

func (f *Shared) wake(started []string) {
	for _, j := range started {
		if ch, ok := f.waiting[j]; ok {
			close(ch)
			delete(f.waiting, j)
		}
	}
}

// Release gives job's chips back to the fleet.
func (f *Shared) Release(job string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wake(f.s.Release(job))
}

// Usage returns the fleet's current usage.
func (f *Shared) Usage() Usage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.s.Usage()
}
