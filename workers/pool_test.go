package workers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/warehouse/blockref"
)

// countingLeaser counts heartbeats passing through to the queue and keeps
// the last deadline granted.
type countingLeaser struct {
	Leaser
	heartbeats atomic.Int64
	deadline   atomic.Int64 // unix nanos
}

func (c *countingLeaser) Heartbeat(ctx context.Context, id string) (time.Time, error) {
	d, err := c.Leaser.Heartbeat(ctx, id)
	if err == nil {
		c.deadline.Store(d.UnixNano())
	}
	c.heartbeats.Add(1)
	return d, err
}

// TestPoolPanicIsolated: a component whose op panics fails its own task
// (three times, then quarantine with the panic), while the same workers go
// on completing every other task.
func TestPoolPanicIsolated(t *testing.T) {
	clk := clock.NewFake(t0)
	q := openTest(t, t.TempDir(), clk)
	defer q.Close()
	var good atomic.Int64
	runner := RunnerFunc(func(ctx context.Context, tk Task) (Result, error) {
		if keyName(tk.ID.Component) == "bad" {
			var m map[string]int
			m["boom"]++ // a real runtime panic: assignment to entry in nil map
		}
		if keyName(tk.ID.Component) == "err" {
			return Result{}, errors.New("column price missing")
		}
		good.Add(1)
		return Result{Rows: 5}, nil
	})
	pool := NewPool(q, runner, PoolOptions{Clock: clk})
	defer pool.Close(context.Background())
	pool.Resize(2)
	reqs := []Request{req("bad", "b", "c", "p", 9), req("err", "b", "c", "p", 9)}
	for i := 0; i < 30; i++ {
		reqs = append(reqs, req("ok", fmt.Sprint(i), "c", "p", 1))
	}
	if _, err := q.Enqueue(reqs...); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "all tasks settled", func() bool { return q.Backlog() == 0 })
	// The pool counts a completion just after the queue records it.
	waitFor(t, "the last completion counted", func() bool { return pool.Stats().Completed == 30 })
	if good.Load() != 30 {
		t.Errorf("%d good tasks ran, want 30", good.Load())
	}
	qs := q.ListQuarantine()
	if len(qs) != 2 {
		t.Fatalf("quarantine %+v, want bad and err", qs)
	}
	if keyName(qs[0].ID.Component) != "bad" || !strings.Contains(qs[0].Err, "panicked") || !strings.Contains(qs[0].Err, "nil map") || qs[0].Attempts != 3 {
		t.Errorf("bad: %+v", qs[0])
	}
	if keyName(qs[1].ID.Component) != "err" || qs[1].Err != "column price missing" {
		t.Errorf("err: %+v", qs[1])
	}
	if s := pool.Stats(); s.Panics != 3 || s.Failed != 6 || s.Completed != 30 {
		t.Errorf("pool stats %+v", s)
	}
	if pool.Size() != 2 {
		t.Errorf("pool lost workers to panics: size %d", pool.Size())
	}
}

// TestPoolHeartbeatKeepsLease: a task running far longer than the lease
// TTL keeps its lease through heartbeats; expiry passes find nothing.
func TestPoolHeartbeatKeepsLease(t *testing.T) {
	clk := clock.NewFake(t0)
	q := openTest(t, t.TempDir(), clk, func(o *Options) { o.LeaseTTL = 30 * time.Second })
	defer q.Close()
	gate := make(chan struct{})
	started := make(chan struct{})
	runner := RunnerFunc(func(ctx context.Context, tk Task) (Result, error) {
		close(started)
		<-gate
		return Result{}, nil
	})
	cl := &countingLeaser{Leaser: q}
	pool := NewPool(cl, runner, PoolOptions{Clock: clk})
	defer pool.Close(context.Background())
	pool.Resize(1)
	if _, err := q.Enqueue(req("long", "b", "c", "p", 1)); err != nil {
		t.Fatal(err)
	}
	<-started
	cl.deadline.Store(t0.Add(30 * time.Second).UnixNano())
	for i := int64(1); i <= 12; i++ { // about 4 TTLs of fake time
		// The worker heartbeats a third of the way to its deadline, 20s
		// before it. Step the clock a second at a time, never past 5s
		// before the deadline, so the test cannot outrun the heartbeat.
		waitFor(t, "the heartbeat timer", func() bool {
			if cl.heartbeats.Load() >= i {
				return true
			}
			if clk.Now().Add(time.Second).Before(time.Unix(0, cl.deadline.Load()).Add(-5 * time.Second)) {
				clk.Advance(time.Second)
			}
			return false
		})
		if n, err := q.ExpireLeases(clk.Now()); n != 0 || err != nil {
			t.Fatalf("after %d heartbeats, %d leases expired (%v)", i, n, err)
		}
	}
	close(gate)
	waitFor(t, "completion", func() bool { return pool.Stats().Completed == 1 })
	if s := q.Stats(); s.Expired != 0 || s.Failures != 0 || s.Completed != 1 {
		t.Errorf("queue stats %+v", s)
	}
}

// TestPoolCancelStopsRun: cancelling a running task (eviction) reaches the
// runner through the next heartbeat, which cancels its context.
func TestPoolCancelStopsRun(t *testing.T) {
	clk := clock.NewFake(t0)
	q := openTest(t, t.TempDir(), clk)
	defer q.Close()
	started := make(chan struct{})
	stopped := make(chan error, 1)
	runner := RunnerFunc(func(ctx context.Context, tk Task) (Result, error) {
		close(started)
		<-ctx.Done()
		stopped <- ctx.Err()
		return Result{}, ctx.Err()
	})
	pool := NewPool(q, runner, PoolOptions{Clock: clk})
	defer pool.Close(context.Background())
	pool.Resize(1)
	if _, err := q.Enqueue(req("evicted", "b", "c", "p", 1)); err != nil {
		t.Fatal(err)
	}
	<-started
	if ok, err := q.Cancel(TaskID{nameKey("evicted"), blockref.ParseMemo("b")}); !ok || err != nil {
		t.Fatal(ok, err)
	}
	var err error
	waitFor(t, "the runner to be cancelled", func() bool {
		select {
		case err = <-stopped:
			return true
		default:
			clk.Advance(10 * time.Second)
			return false
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("runner context: %v", err)
	}
	waitFor(t, "the lost lease to be counted", func() bool { return pool.Stats().LeaseLost == 1 })
	q.mu.Lock()
	n := len(q.st.leases)
	q.mu.Unlock()
	if n != 0 || pool.Stats().Failed != 0 {
		t.Errorf("%d leases linger, stats %+v", n, pool.Stats())
	}
}

// TestPoolShrinkIsGraceful: shrinking stops workers only after their
// current task; no task is abandoned.
func TestPoolShrinkIsGraceful(t *testing.T) {
	clk := clock.NewFake(t0)
	q := openTest(t, t.TempDir(), clk)
	defer q.Close()
	gate := make(chan struct{})
	var running atomic.Int64
	runner := RunnerFunc(func(ctx context.Context, tk Task) (Result, error) {
		running.Add(1)
		<-gate
		return Result{}, nil
	})
	pool := NewPool(q, runner, PoolOptions{Clock: clk})
	defer pool.Close(context.Background())
	pool.Resize(3)
	if _, err := q.Enqueue(req("a", "1", "c", "p", 1), req("a", "2", "c", "p", 1), req("a", "3", "c", "p", 1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "three running tasks", func() bool { return running.Load() == 3 })
	pool.Resize(1)
	if pool.Target() != 1 || pool.Size() != 3 {
		t.Errorf("right after shrinking: target %d size %d, want 1 and 3 (busy workers finish first)", pool.Target(), pool.Size())
	}
	close(gate)
	waitFor(t, "shrink", func() bool { return pool.Size() == 1 })
	waitFor(t, "completions", func() bool { return pool.Stats().Completed == 3 })
	if s := q.Stats(); s.Completed != 3 || s.Leased != 0 || s.Queued != 0 {
		t.Errorf("queue stats %+v", s)
	}
}

// TestPoolHardClose: when Close's context ends, running tasks are
// cancelled and not failed: their leases are left to expire.
func TestPoolHardClose(t *testing.T) {
	clk := clock.NewFake(t0)
	q := openTest(t, t.TempDir(), clk)
	defer q.Close()
	started := make(chan struct{})
	pool := NewPool(q, RunnerFunc(func(ctx context.Context, tk Task) (Result, error) {
		close(started)
		<-ctx.Done()
		return Result{}, ctx.Err()
	}), PoolOptions{Clock: clk})
	pool.Resize(1)
	if _, err := q.Enqueue(req("a", "1", "c", "p", 1)); err != nil {
		t.Fatal(err)
	}
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := pool.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Close = %v", err)
	}
	if pool.Size() != 0 {
		t.Errorf("size %d after Close", pool.Size())
	}
	if tk, _ := q.Get(TaskID{nameKey("a"), blockref.ParseMemo("1")}); tk.State != StateLeased || tk.Attempts != 0 {
		t.Errorf("interrupted task %+v, want still leased with no attempt counted", tk)
	}
	pool.Resize(3)
	if pool.Size() != 0 {
		t.Error("a closed pool grew")
	}
}

// TestPoolRetriesLeaseErrors: a Leaser that fails (sigd unreachable) is
// retried after RetryInterval on the pool's clock, not in a hot loop.
func TestPoolRetriesLeaseErrors(t *testing.T) {
	clk := clock.NewFake(t0)
	fl := &flakyLeaser{}
	pool := NewPool(fl, RunnerFunc(func(context.Context, Task) (Result, error) { return Result{}, nil }),
		PoolOptions{Clock: clk, RetryInterval: time.Second})
	defer pool.Close(context.Background())
	pool.Resize(1)
	waitFor(t, "first attempt", func() bool { return fl.calls.Load() == 1 })
	time.Sleep(20 * time.Millisecond) // without clock advance, no retry may happen
	if n := fl.calls.Load(); n != 1 {
		t.Fatalf("%d Lease calls without the clock moving: a hot loop", n)
	}
	waitFor(t, "retry", func() bool {
		clk.Advance(time.Second)
		return fl.calls.Load() >= 3
	})
}

type flakyLeaser struct{ calls atomic.Int64 }

func (f *flakyLeaser) Lease(ctx context.Context, _ string) (Lease, error) {
	f.calls.Add(1)
	return Lease{}, errors.New("connection refused")
}
func (f *flakyLeaser) Heartbeat(context.Context, string) (time.Time, error) { return time.Time{}, nil }
func (f *flakyLeaser) Complete(context.Context, string, Result) error       { return nil }
func (f *flakyLeaser) Fail(context.Context, string, string) (bool, error)   { return false, nil }
