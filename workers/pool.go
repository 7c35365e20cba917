package workers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sigdata/sig/internal/clock"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
)

// Leaser is the lease protocol as a worker sees it. *Queue implements it in
// process; RemoteLeaser implements it over gRPC for `sigd worker`, so the
// same worker loop serves both.
type Leaser interface {
	// Lease waits for a task until ctx is done.
	Lease(ctx context.Context, workerID string) (Lease, error)
	// Heartbeat extends the lease; ErrLeaseLost or ErrCancelled mean stop.
	Heartbeat(ctx context.Context, leaseID string) (time.Time, error)
	Complete(ctx context.Context, leaseID string, res Result) error
	Fail(ctx context.Context, leaseID string, cause string) (quarantined bool, err error)
}

// Runner executes one task: read the raw block's columns, run the
// component's ops, write the memoized object whole, mark it ready in the
// matching cache (or leave that to the Complete hook of a remote server),
// and report what it wrote. It should stop when ctx is cancelled: the lease
// was lost or the task cancelled.
type Runner interface {
	Run(ctx context.Context, t Task) (Result, error)
}

// RunnerFunc adapts a function to Runner.
type RunnerFunc func(ctx context.Context, t Task) (Result, error)

// Run calls f.
func (f RunnerFunc) Run(ctx context.Context, t Task) (Result, error) { return f(ctx, t) }

// PoolOptions configure a Pool.
type PoolOptions struct {
	// Clock paces heartbeats and retries. Default clock.Real.
	Clock clock.Clock
	// Name prefixes worker ids: Name-1, Name-2, ... Default "worker".
	Name string
	// Logger receives failures. Default: discard.
	Logger *slog.Logger
	// RetryInterval is the pause after a failed Lease (sigd unreachable).
	// Default 1s.
	RetryInterval time.Duration
	// CallTimeout bounds each Heartbeat, Complete and Fail call. Default 30s.
	CallTimeout time.Duration
}

// EnsureDefaults fills unset options.
func (o *PoolOptions) EnsureDefaults() {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Name == "" {
		o.Name = "worker"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = time.Second
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 30 * time.Second
	}
}

// minHeartbeat keeps a worker whose heartbeats keep failing from spinning.
const minHeartbeat = 100 * time.Millisecond

// PoolStats count what a pool's workers did.
type PoolStats struct {
	Completed uint64
	Failed    uint64 // runs that returned an error or panicked
	Panics    uint64
	LeaseLost uint64 // runs whose lease was lost or task cancelled
}

// Pool runs workers as goroutines. Each loops: lease a task, run it while a
// heartbeat keeps the lease, then Complete or Fail it. A panic in the
// Runner fails that task only (paper IV.A "blast radius" concern; BRIEF
// "Beyond the paper" 4): the worker survives and takes the next task. Its
// size is set by Resize, usually from the Autoscaler.
type Pool struct {
	leaser Leaser
	runner Runner
	opts   PoolOptions
	// runCtx is the parent of every task's context; Close cancels it only
	// when its own context expires (a hard stop).
	runCtx    context.Context
	cancelRun context.CancelFunc

	mu      sync.Mutex
	active  []*poolWorker // in start order; Resize stops the newest
	live    int           // goroutines still running, stopping ones included
	started int
	closed  bool
	wg      sync.WaitGroup

	completed, failed, panics, lost atomic.Uint64
}

type poolWorker struct {
	id string
	// leaseCtx is cancelled to stop the worker: it interrupts a waiting
	// Lease but not a running task (graceful shrink).
	leaseCtx context.Context
	stop     context.CancelFunc
}

// NewPool returns a pool of zero workers.
func NewPool(l Leaser, r Runner, opts PoolOptions) *Pool {
	opts.EnsureDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Pool{leaser: l, runner: r, opts: opts, runCtx: ctx, cancelRun: cancel}
}

// Resize sets the number of workers. Shrinking is graceful: a stopped
// worker finishes its current task first.
func (p *Pool) Resize(n int) {
	if n < 0 {
		n = 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	for len(p.active) < n {
		p.started++
		ctx, stop := context.WithCancel(p.runCtx)
		w := &poolWorker{id: p.opts.Name + "-" + strconv.Itoa(p.started), leaseCtx: ctx, stop: stop}
		p.active = append(p.active, w)
		p.live++
		p.wg.Add(1)
		go p.loop(w)
	}
	for len(p.active) > n {
		w := p.active[len(p.active)-1]
		p.active = p.active[:len(p.active)-1]
		w.stop()
	}
}

// Size is the number of worker goroutines alive, including stopped ones
// still finishing a task: the actual replica count.
func (p *Pool) Size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live
}

// Target is the size last asked for.
func (p *Pool) Target() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.active)
}

// Stats returns the pool's counters.
func (p *Pool) Stats() PoolStats {
	return PoolStats{Completed: p.completed.Load(), Failed: p.failed.Load(), Panics: p.panics.Load(), LeaseLost: p.lost.Load()}
}

// Close stops every worker after its current task and waits for them. If
// ctx ends first, running tasks are cancelled (their leases are left to
// expire) and Close returns ctx's error once the workers have exited.
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	for _, w := range p.active {
		w.stop()
	}
	p.active = nil
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		p.cancelRun()
		return nil
	case <-ctx.Done():
		p.cancelRun()
		<-done
		return ctx.Err()
	}
}

func (p *Pool) loop(w *poolWorker) {
	defer func() {
		w.stop()
		p.mu.Lock()
		p.live--
		p.mu.Unlock()
		p.wg.Done()
	}()
	log := p.opts.Logger.With("worker", w.id)
	for w.leaseCtx.Err() == nil {
		l, err := p.leaser.Lease(w.leaseCtx, w.id)
		if err != nil {
			if w.leaseCtx.Err() != nil || errors.Is(err, ErrClosed) {
				return
			}
			log.Warn("lease failed", "err", err)
			select {
			case <-w.leaseCtx.Done():
				return
			case <-p.opts.Clock.After(p.opts.RetryInterval):
			}
			continue
		}
		p.run(log, l)
	}
}

// run executes one leased task with a heartbeat and reports the outcome.
func (p *Pool) run(log *slog.Logger, l Lease) {
	log = log.With("task", l.Task.ID.String(), "lease", l.ID)
	ctx, cancel := context.WithCancel(p.runCtx)
	defer cancel()
	stopHB := make(chan struct{})
	hbDone := make(chan struct{})
	var lost atomic.Bool
	go func() {
		defer close(hbDone)
		if p.heartbeat(l, stopHB) {
			lost.Store(true)
			cancel()
		}
	}()
	res, err := p.safeRun(ctx, l.Task)
	close(stopHB)
	<-hbDone
	if p.runCtx.Err() != nil {
		// Hard stop: the task was interrupted, not failed. Its lease expires.
		return
	}
	cctx, ccancel := context.WithTimeout(context.Background(), p.opts.CallTimeout)
	defer ccancel()
	if err == nil {
		err = p.leaser.Complete(cctx, l.ID, res)
		switch {
		case err == nil:
			p.completed.Add(1)
		case lost.Load() || errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrCancelled):
			p.lost.Add(1)
			log.Info("finished a task whose lease was lost", "err", err)
		default:
			log.Warn("complete failed; the lease will expire", "err", err)
		}
		return
	}
	if lost.Load() {
		// The run was cancelled because the lease was lost or the task
		// cancelled; telling sigd clears a cancelled lease, nothing more.
		_, _ = p.leaser.Fail(cctx, l.ID, err.Error())
		p.lost.Add(1)
		return
	}
	p.failed.Add(1)
	if errors.Is(err, ErrPanic) {
		p.panics.Add(1)
	}
	quarantined, ferr := p.leaser.Fail(cctx, l.ID, err.Error())
	switch {
	case ferr == nil:
		log.Warn("task failed", "err", err, "quarantined", quarantined)
	case errors.Is(ferr, ErrLeaseLost) || errors.Is(ferr, ErrCancelled):
		p.lost.Add(1)
	default:
		log.Warn("fail failed; the lease will expire", "err", ferr)
	}
}

// heartbeat renews the lease at a third of its remaining time until stop
// closes. It reports true if the lease was lost or the task cancelled.
func (p *Pool) heartbeat(l Lease, stop <-chan struct{}) (lost bool) {
	deadline := l.Deadline
	for {
		wait := deadline.Sub(p.opts.Clock.Now()) / 3
		if wait < minHeartbeat {
			wait = minHeartbeat
		}
		select {
		case <-stop:
			return false
		case <-p.opts.Clock.After(wait):
		}
		ctx, cancel := context.WithTimeout(context.Background(), p.opts.CallTimeout)
		d, err := p.leaser.Heartbeat(ctx, l.ID)
		cancel()
		switch {
		case err == nil:
			deadline = d
		case errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrCancelled):
			return true
		default:
			// Transient (sigd restarting): keep trying; sigd decides when the
			// lease is gone.
			p.opts.Logger.Warn("heartbeat failed", "lease", l.ID, "err", err)
		}
	}
}

// safeRun turns a panic in the Runner into an error, so that one bad
// component fails its own task and nothing else.
func (p *Pool) safeRun(ctx context.Context, t Task) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v\n%s", ErrPanic, r, debug.Stack())
		}
	}()
	return p.runner.Run(ctx, t)
}

// Describe wraps a Leaser so that every leased task carries its Spec (the
// canonical DSL, objects and schema that the matching cache knows), as
// tasks leased over gRPC do; one Runner then serves in-process and remote
// workers alike. A task that cannot be described is failed (counting an
// attempt, so a task whose component vanished ends in quarantine rather
// than looping) and the next one is leased.
func Describe(l Leaser, describe func(TaskID) (*sigv1.Task, error)) Leaser {
	return describing{Leaser: l, describe: describe}
}

type describing struct {
	Leaser
	describe func(TaskID) (*sigv1.Task, error)
}

func (d describing) Lease(ctx context.Context, workerID string) (Lease, error) {
	for {
		l, err := d.Leaser.Lease(ctx, workerID)
		if err != nil {
			return l, err
		}
		spec, err := describeLease(d.describe, l)
		if err != nil {
			if _, ferr := d.Leaser.Fail(ctx, l.ID, err.Error()); ferr != nil && !errors.Is(ferr, ErrLeaseLost) && !errors.Is(ferr, ErrCancelled) {
				return Lease{}, ferr
			}
			continue
		}
		l.Task.Spec = spec
		return l, nil
	}
}

// describeLease builds the wire description of a leased task: what describe
// says about the component, and what the lease says about this run.
func describeLease(describe func(TaskID) (*sigv1.Task, error), l Lease) (*sigv1.Task, error) {
	spec := &sigv1.Task{}
	if describe != nil {
		s, err := describe(l.Task.ID)
		if err != nil {
			return nil, fmt.Errorf("describe %s: %w", l.Task.ID, err)
		}
		if s != nil {
			spec = s
		}
	}
	spec.ComponentKey = l.Task.ID.Component
	spec.BlockId = l.Task.ID.Block
	spec.Attempt = uint32(l.Task.Attempts)
	spec.Priority = l.Priority
	spec.Client = l.Client
	return spec, nil
}
