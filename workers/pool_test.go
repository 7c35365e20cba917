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

func (f *flakyLeaser) LeaseBatch(context.Context, string, int) ([]Lease, error) {
	f.calls.Add(1)
	return nil, errors.New("connection refused")
}
func (f *flakyLeaser) Heartbeat(context.Context, string) (time.Time, error) { return time.Time{}, nil }
func (f *flakyLeaser) Complete(context.Context, string, Result) error       { return nil }
func (f *flakyLeaser) Fail(context.Context, string, string) (bool, error)   { return false, nil }

// cancelWatch counts heartbeats that found their task cancelled.
type cancelWatch struct {
	Leaser
	cancelled atomic.Int64
}

func (c *cancelWatch) Heartbeat(ctx context.Context, id string) (time.Time, error) {
	d, err := c.Leaser.Heartbeat(ctx, id)
	if errors.Is(err, ErrCancelled) {
		c.cancelled.Add(1)
	}
	return d, err
}

// scriptedBatches is a BatchRunner whose RunBatch hands each batch to the
// test and returns what the test answers.
type scriptedBatches struct {
	batches chan batchCall
}

type batchCall struct {
	ctx   context.Context
	tasks []Task
	reply chan func() []Outcome // called in RunBatch: may panic
}

func (s scriptedBatches) Run(ctx context.Context, t Task) (Result, error) {
	return Result{}, errors.New("Run called on a batch runner")
}

func (s scriptedBatches) RunBatch(ctx context.Context, tasks []Task) []Outcome {
	c := batchCall{ctx: ctx, tasks: tasks, reply: make(chan func() []Outcome)}
	s.batches <- c
	return (<-c.reply)()
}

func names(ts []Task) string {
	var out []string
	for _, t := range ts {
		out = append(out, keyName(t.ID.Component)+"/"+t.ID.Block.String())
	}
	return strings.Join(out, " ")
}

// TestPoolBatchRunner: a pool of a BatchRunner hands it each batch it
// leases whole (the tasks of one raw block, the scheduler's pick first)
// and completes or fails each task with its own outcome once RunBatch
// returns; a panic or outcomes that do not match the tasks fail the whole
// batch; a task whose lease alone is lost does not stop the batch, and the
// batch's context ends when every task's lease is lost.
func TestPoolBatchRunner(t *testing.T) {
	clk := clock.NewFake(t0)
	q := openTest(t, t.TempDir(), clk, func(o *Options) { o.MaxAttempts = 5 })
	defer q.Close()
	r := scriptedBatches{batches: make(chan batchCall)}
	hb := &cancelWatch{Leaser: q}
	pool := NewPool(hb, r, PoolOptions{Clock: clk, BatchTasks: 3})
	defer pool.Close(context.Background())
	if n := pool.TasksPerWorker(); n != 3 {
		t.Errorf("TasksPerWorker = %d, want the batch, 3", n)
	}
	if _, err := q.Enqueue(req("k1", "x", "c", "p", 1), req("k2", "x", "c", "p", 1), req("y1", "y", "c", "p", 1),
		req("k3", "x.v2", "c", "p", 1), req("k4", "x", "c", "p", 1)); err != nil {
		t.Fatal(err)
	}
	pool.Resize(1)
	next := func(want string) batchCall {
		t.Helper()
		select {
		case c := <-r.batches:
			if got := names(c.tasks); got != want {
				t.Fatalf("batch %q, want %q", got, want)
			}
			return c
		case <-time.After(10 * time.Second):
			t.Fatalf("no batch; want %q", want)
		}
		return batchCall{}
	}
	// One outcome each: k2's failure requeues k2 alone.
	c := next("k1/x k2/x k3/x.v2")
	c.reply <- func() []Outcome {
		return []Outcome{{Result: Result{Rows: 1}}, {Err: errors.New("k2 broke")}, {Result: Result{Rows: 3}}}
	}
	c = next("y1/y")
	waitFor(t, "the first batch's outcomes", func() bool { s := pool.Stats(); return s.Completed == 2 && s.Failed == 1 })
	if tk, _ := q.Get(parseTask("k2/x")); tk.State != StateQueued || tk.Attempts != 1 || tk.Err != "k2 broke" {
		t.Errorf("k2 after its failure: %+v", tk)
	}
	c.reply <- func() []Outcome { return []Outcome{{}} }
	waitFor(t, "y1's completion", func() bool { return pool.Stats().Completed == 3 })
	// A panic fails every task of the batch; so do outcomes that do not
	// match the tasks.
	c = next("k4/x k2/x")
	c.reply <- func() []Outcome { panic("union graph") }
	c = next("k4/x k2/x")
	c.reply <- func() []Outcome { return []Outcome{{}} }
	waitFor(t, "the failures counted", func() bool { return pool.Stats().Failed == 5 })
	if s := pool.Stats(); s.Panics != 2 || s.Completed != 3 {
		t.Errorf("pool stats %+v", s)
	}
	// k4 is evicted mid-batch: the batch goes on, k2 completes, k4's
	// outcome is dropped.
	c = next("k4/x k2/x")
	if _, err := q.Cancel(parseTask("k4/x")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "k4's heartbeat to find it cancelled", func() bool {
		clk.Advance(time.Second)
		return hb.cancelled.Load() > 0
	})
	if c.ctx.Err() != nil {
		t.Fatal("the batch's context ended with one of its two tasks lost")
	}
	c.reply <- func() []Outcome { return []Outcome{{}, {}} }
	waitFor(t, "k2 completed, k4 dropped", func() bool { s := pool.Stats(); return s.Completed == 4 && s.LeaseLost == 1 })
	// Every task of a batch lost: its context ends.
	if _, err := q.Enqueue(req("k5", "z", "c", "p", 1), req("k6", "z", "c", "p", 1)); err != nil {
		t.Fatal(err)
	}
	c = next("k5/z k6/z")
	q.Cancel(parseTask("k5/z"))
	q.Cancel(parseTask("k6/z"))
	waitFor(t, "the batch's context to end", func() bool {
		clk.Advance(time.Second)
		return c.ctx.Err() != nil
	})
	c.reply <- func() []Outcome { return []Outcome{{Err: c.ctx.Err()}, {Err: c.ctx.Err()}} }
	waitFor(t, "both dropped", func() bool { return pool.Stats().LeaseLost == 3 })
	if s := q.Stats(); s.Queued != 0 || s.Leased != 0 || s.Completed != 4 {
		t.Errorf("queue stats %+v", s)
	}
}

// TestTasksHeld: the most tasks a worker holds, and how many it holds on
// average while busy (what the autoscaler divides the task cost by), for
// each kind of runner, with and without batches.
func TestTasksHeld(t *testing.T) {
	plain := RunnerFunc(func(context.Context, Task) (Result, error) { return Result{}, nil })
	staged := fakeStagedRunner{}
	batcher := scriptedBatches{}
	cases := []struct {
		name        string
		r           Runner
		batch       int
		most, held  int
		stagedsHeld int // StagedTasksHeld(batch), for staged runners
	}{
		{"plain", plain, 1, 1, 1, 0},
		{"plain batches", plain, 32, 32, 16, 0},
		{"plain batches, odd", plain, 5, 5, 3, 0},
		{"staged", staged, 1, 4, 4, 4},
		{"staged batches", staged, 32, 35, 20, 20},
		{"staged batches, odd", staged, 5, 8, 6, 6},
		{"batch runner without batches", batcher, 1, 1, 1, 0},
		{"batch runner", batcher, 32, 32, 32, 0},
	}
	for _, c := range cases {
		p := NewPool(nil, c.r, PoolOptions{BatchTasks: c.batch})
		if most, held := p.TasksPerWorker(), p.TasksHeld(); most != c.most || held != c.held {
			t.Errorf("%s: TasksPerWorker %d, TasksHeld %d; want %d, %d", c.name, most, held, c.most, c.held)
		}
		if c.stagedsHeld != 0 && StagedTasksHeld(c.batch) != c.stagedsHeld {
			t.Errorf("%s: StagedTasksHeld %d, want %d", c.name, StagedTasksHeld(c.batch), c.stagedsHeld)
		}
	}
}
