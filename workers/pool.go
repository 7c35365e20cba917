package workers

import (
	"cmp"
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
	// LeaseBatch waits for work until ctx is done, then leases up to
	// maxTasks tasks (at least one) of one raw block: the scheduler's
	// pick first, then other queued tasks of its block (issue 28; see
	// Queue.LeaseBatchAs). Each task has a lease of its own.
	LeaseBatch(ctx context.Context, workerID string, maxTasks int) ([]Lease, error)
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

// StagedRunner is a Runner whose run is three stages that load different
// resources: Read fetches the raw block's columns (mostly the object
// store's time and the network's), Transform runs the component's ops (the
// worker's CPU), and Write encodes and stores the memo object (the object
// store's time again). A Pool whose Runner implements it pipelines each
// worker: while one task is transformed, the next is read and the previous
// ones written (PoolOptions.Writers at once), so a worker's throughput is
// bounded by its slowest stage rather than by the sum of the three (issue
// 4's memoization throughput per worker; bench/sigd.txt). See Pool for the
// guarantees.
//
// Run stays: a StagedRunner still serves a caller that wants one task run
// start to finish (RunStages implements it from the stages).
type StagedRunner interface {
	Runner
	// Read fetches what the task's transform needs. The StagedTask it
	// returns carries the task through the other two stages.
	Read(ctx context.Context, t Task) (StagedTask, error)
}

// StagedTask is one task of a StagedRunner between its stages. The pool
// calls a task's Transform, then its Write, each at most once and never
// concurrently, and then Release; a stage that fails ends the task (Release
// still comes). Different tasks of one worker are in different stages at
// once, and up to PoolOptions.Writers of them in Write.
type StagedTask interface {
	// Transform runs the component's ops on what Read fetched and builds
	// the memo object's record.
	Transform(ctx context.Context) error
	// Write stores the memo object whole and reports what it wrote.
	Write(ctx context.Context) (Result, error)
	// Release frees what the task holds (Arrow buffers). The pool calls it
	// exactly once, after Write or when the task ends early: a stage
	// failed or panicked, the lease was lost, or the pool stopped hard.
	Release()
}

// RunStages runs one task's stages one after the other: the Run of a
// StagedRunner.
func RunStages(ctx context.Context, r StagedRunner, t Task) (Result, error) {
	st, err := r.Read(ctx, t)
	if err != nil {
		return Result{}, err
	}
	defer st.Release()
	if err := st.Transform(ctx); err != nil {
		return Result{}, err
	}
	return st.Write(ctx)
}

// BatchRunner is a Runner that runs the tasks of one raw block together
// (issue 28): it reads the block's raw columns once, can run the union of
// the tasks' canonical graphs so that a subexpression shared across
// components runs once, and can write their memo columns into one object.
// A Pool whose Runner implements it, with PoolOptions.BatchTasks above 1,
// hands each batch it leases to RunBatch; any other Runner gets the
// batch's tasks one by one (through its stages, for a StagedRunner). A
// runner that is both is run by batches, one batch at a time per worker:
// the pool does not pipeline batches (overlapping one batch's reads and
// writes with another's transform is the BatchRunner's to do, if any).
type BatchRunner interface {
	Runner
	// RunBatch runs tasks, all of one raw block (their TaskID.Block has
	// one ID; input versions may differ, and each task's description
	// names the raw version it reads), and returns one Outcome per task,
	// in the order of tasks. The pool completes or fails each task with
	// its own outcome once RunBatch has returned: a task whose memo
	// column is not yet stored must not be reported done (its entry would
	// be ready without its object). ctx is cancelled when the lease of
	// every task is lost or the pool stops hard; a task whose lease alone
	// is lost is not told, and its outcome is dropped.
	RunBatch(ctx context.Context, tasks []Task) []Outcome
}

// Outcome is what running one task of a batch gave: its Result, or Err.
type Outcome struct {
	Result Result
	Err    error
}

// RunEach runs tasks one after the other through r: RunBatch for a
// runner that has nothing to share among them. A panic fails that task
// only, as in a pool.
func RunEach(ctx context.Context, r Runner, tasks []Task) []Outcome {
	out := make([]Outcome, len(tasks))
	for i, t := range tasks {
		if err := ctx.Err(); err != nil {
			out[i].Err = err
			continue
		}
		out[i].Result, out[i].Err = safely(func() (Result, error) { return r.Run(ctx, t) })
	}
	return out
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
	// Writers is how many tasks one worker of a StagedRunner writes at
	// once. A write mostly waits (for the object store to take the memo
	// object, then for Complete), so with one writer the transform stage
	// stalls whenever a write outlasts the next transform, which tasks of
	// uneven size make frequent; a second writer absorbs that. Default
	// DefaultWriters.
	Writers int
	// BatchTasks is the most tasks a worker leases at once, all of one
	// raw block (Leaser.LeaseBatch; issue 28). A BatchRunner runs them
	// together; any other Runner runs them one by one, every one
	// heartbeated from its lease on. Default 1: no batches.
	BatchTasks int
}

// DefaultWriters is PoolOptions.Writers' default. With one writer the
// memoizing worker of bench/sigd.sh kept its transform stage busy 71-77% of
// the time; with two, 83-84%.
const DefaultWriters = 2

// DefaultPipelineDepth is TasksPerWorker of a pool of a StagedRunner with
// the default Writers and no batches.
const DefaultPipelineDepth = stagedTasks + DefaultWriters

// StagedTasksHeld is TasksHeld of a pool of a StagedRunner (not a
// BatchRunner) with the default Writers and batches of batchTasks: sigd
// sizes its remote workers with it.
func StagedTasksHeld(batchTasks int) int {
	return max(batchTasks, 1)/2 + DefaultPipelineDepth
}

// stagedTasks are the tasks a worker of a StagedRunner holds besides those
// being written: one being read and one being transformed.
const stagedTasks = 2

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
	if o.Writers <= 0 {
		o.Writers = DefaultWriters
	}
	o.BatchTasks = min(max(o.BatchTasks, 1), MaxBatchTasks)
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
//
// If the Runner is a StagedRunner, each worker is a pipeline of its three
// stages instead, holding up to TasksPerWorker tasks: it leases the next
// task as soon as its read stage has handed the last one on, while earlier
// tasks are transformed and written. Per worker:
//
//   - the read and transform stages run one task at a time, in lease
//     order, and the write stage up to PoolOptions.Writers at once (one
//     goroutine per slot, handing tasks on over unbuffered channels, so a
//     task waiting for the next stage still counts against the depth);
//     writes may therefore complete out of lease order;
//   - every task in flight has its own context and heartbeat, exactly as a
//     plain run: a lost lease or cancelled task cancels that task only
//     (dropped at once if it was waiting between stages), and the others go
//     on;
//   - a stage that fails or panics fails its own task, as a failed Run does
//     (Fail: retry, then quarantine; a panic is ErrPanic);
//   - Complete comes after the task's Write returned, never before;
//   - a stopped worker (Resize down, Close) leases nothing more and exits
//     once the tasks it holds are through the pipeline; a hard stop cancels
//     them and leaves their leases to expire.
//
// With PoolOptions.BatchTasks above 1, a worker leases batches: up to
// that many tasks of one raw block at once (issue 28). Every task of a
// batch gets its context and heartbeat at the lease, so one waiting for
// its turn keeps its lease as the running one does, and each is completed
// or failed on its own. A BatchRunner is handed the batch whole
// (RunBatch), and its tasks are reported once it returns; any other
// Runner gets the tasks one by one, in lease order, into its stages if it
// is a StagedRunner (testdata/pipeline/batch.txt). A task of a batch
// whose lease is lost before its turn is dropped without being run.
//
// The pool's size still counts workers; each holds up to TasksPerWorker
// leases, which the autoscaler takes into account through
// ScaleConfig.TasksPerWorker.
type Pool struct {
	leaser Leaser
	runner Runner
	staged StagedRunner // runner, when it is one
	// batcher is runner when it is a BatchRunner and workers lease
	// batches: each batch then goes to RunBatch whole.
	batcher BatchRunner
	opts    PoolOptions
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
	sr, _ := r.(StagedRunner)
	br, _ := r.(BatchRunner)
	if opts.BatchTasks < 2 {
		br = nil // batches of one go through the stages, pipelined
	}
	return &Pool{leaser: l, runner: r, staged: sr, batcher: br, opts: opts, runCtx: ctx, cancelRun: cancel}
}

// TasksPerWorker is the most tasks one worker holds at once: a batch
// (PoolOptions.BatchTasks) for a BatchRunner or a plain Runner; for a
// StagedRunner, one being read, one transformed and PoolOptions.Writers
// written (a task waiting for the next stage holds its place in the one it
// finished), and the rest of its batch waiting to be read.
func (p *Pool) TasksPerWorker() int {
	if p.staged != nil && p.batcher == nil {
		return p.opts.BatchTasks - 1 + stagedTasks + p.opts.Writers
	}
	return p.opts.BatchTasks
}

// TasksHeld is how many tasks a busy worker holds on average: what its
// lease-to-completion time spans (Little's law: tasks held = throughput x
// time held), and so what the autoscaler divides the measured task cost
// by (ScaleConfig.TasksPerWorker). A BatchRunner holds its whole batch
// until RunBatch returns. A batch run one task after another drains as it
// runs, from the whole batch to its last task: (BatchTasks+1)/2 held on
// average by a plain Runner, and for a StagedRunner its pipeline's tasks
// (stagedTasks + Writers, kept full from one batch to the next) and half
// the batch's rest, rounded up. Without batches it is TasksPerWorker.
func (p *Pool) TasksHeld() int {
	switch {
	case p.batcher != nil:
		return p.opts.BatchTasks
	case p.staged != nil:
		return p.opts.BatchTasks/2 + stagedTasks + p.opts.Writers
	}
	return (p.opts.BatchTasks + 1) / 2
}

// Resize sets the number of workers. Shrinking is graceful: a stopped
// worker finishes the tasks it holds first.
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

// Size is the number of workers alive, including stopped ones still
// finishing their tasks: the actual replica count.
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

// Close stops every worker after the tasks it holds and waits for them. If
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
	switch {
	case p.batcher != nil:
		for {
			ts, ok := p.lease(w, log)
			if !ok {
				return
			}
			p.runBatch(ts)
		}
	case p.staged != nil:
		p.pipeline(w, log)
	default:
		for {
			ts, ok := p.lease(w, log)
			if !ok {
				return
			}
			// A batch's tasks one by one; those waiting are heartbeated
			// all along (lease). A stopped worker still runs what it
			// holds.
			for _, t := range ts {
				if err := cmp.Or(p.runCtx.Err(), t.ctx.Err()); err != nil {
					p.finish(t, Result{}, err)
					continue
				}
				res, err := safely(func() (Result, error) { return p.runner.Run(t.ctx, t.l.Task) })
				p.finish(t, res, err)
			}
		}
	}
}

// runBatch runs one batch through the BatchRunner and reports each task's
// outcome. The batch's context ends when every task's has (each task's
// lease lost) or on a hard stop.
func (p *Pool) runBatch(ts []*inflight) {
	ctx, cancel := context.WithCancel(p.runCtx)
	defer cancel()
	var left atomic.Int64
	left.Store(int64(len(ts)))
	tasks := make([]Task, len(ts))
	for i, t := range ts {
		tasks[i] = t.l.Task
		stop := context.AfterFunc(t.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	outs, err := safely(func() ([]Outcome, error) { return p.batcher.RunBatch(ctx, tasks), nil })
	if err == nil && len(outs) != len(ts) {
		err = fmt.Errorf("workers: the batch runner returned %d outcomes for %d tasks", len(outs), len(ts))
	}
	for i, t := range ts {
		if err != nil {
			// A panic, or outcomes that cannot be matched to tasks: every
			// task of the batch fails with it.
			p.finish(t, Result{}, err)
			continue
		}
		p.finish(t, outs[i].Result, outs[i].Err)
	}
}

// lease takes the worker's next batch (PoolOptions.BatchTasks tasks at
// most) and starts every task's context and heartbeat at once: a task
// waiting for its turn in the batch holds a lease like the one running,
// and its lease must not expire meanwhile (else another worker would run
// it too, and a worker killed mid-batch would leave some of its tasks
// expired before the kill; TestRemoteWorkerKilledMidBatch). It retries a
// failing Leaser every RetryInterval and reports false once the worker is
// stopped.
func (p *Pool) lease(w *poolWorker, log *slog.Logger) ([]*inflight, bool) {
	banned := false
	for w.leaseCtx.Err() == nil {
		ls, err := p.leaser.LeaseBatch(w.leaseCtx, w.id, p.opts.BatchTasks)
		if err == nil && len(ls) == 0 {
			err = errors.New("workers: the leaser answered with no task")
		}
		if err == nil {
			if banned {
				log.Info("the worker build's ban was lifted: leasing again")
			}
			ts := make([]*inflight, len(ls))
			for i, l := range ls {
				ts[i] = p.start(log, l)
			}
			return ts, true
		}
		if w.leaseCtx.Err() != nil || errors.Is(err, ErrClosed) {
			return nil, false
		}
		switch {
		case errors.Is(err, ErrBanned):
			// Asked again at every RetryInterval until an operator lifts
			// the ban (issue 27); said once.
			if !banned {
				log.Error("this worker's build is banned from leasing: it computed wrong values; waiting for an operator to lift the ban", "err", err)
			}
			banned = true
		default:
			log.Warn("lease failed", "err", err)
		}
		select {
		case <-w.leaseCtx.Done():
			return nil, false
		case <-p.opts.Clock.After(p.opts.RetryInterval):
		}
	}
	return nil, false
}

// pipeline is the loop of a StagedRunner's worker: this goroutine leases
// and reads, one more transforms and Writers more write, each handing a task
// to the next over an unbuffered channel (see Pool). Closing the channels
// in turn drains the pipeline when the worker stops.
func (p *Pool) pipeline(w *poolWorker, log *slog.Logger) {
	toTransform := make(chan *inflight)
	toWrite := make(chan *inflight)
	var stages sync.WaitGroup
	stages.Add(1 + p.opts.Writers)
	go func() {
		defer stages.Done()
		defer close(toWrite)
		for t := range toTransform {
			// A hard stop cancels runCtx before the tasks' own contexts:
			// checking it too starts no stage once the stop began.
			if err := cmp.Or(p.runCtx.Err(), t.ctx.Err()); err != nil {
				p.finish(t, Result{}, err)
				continue
			}
			_, err := safely(func() (struct{}, error) { return struct{}{}, t.staged.Transform(t.ctx) })
			if err != nil {
				p.finish(t, Result{}, err)
				continue
			}
			p.handOff(t, toWrite)
		}
	}()
	for range p.opts.Writers {
		go func() {
			defer stages.Done()
			for t := range toWrite {
				if err := cmp.Or(p.runCtx.Err(), t.ctx.Err()); err != nil {
					p.finish(t, Result{}, err)
					continue
				}
				res, err := safely(func() (Result, error) { return t.staged.Write(t.ctx) })
				p.finish(t, res, err)
			}
		}()
	}
	for {
		ts, ok := p.lease(w, log)
		if !ok {
			break
		}
		// A batch's tasks enter the pipeline one by one, in lease order.
		for _, t := range ts {
			if err := cmp.Or(p.runCtx.Err(), t.ctx.Err()); err != nil {
				p.finish(t, Result{}, err)
				continue
			}
			st, err := safely(func() (StagedTask, error) { return p.staged.Read(t.ctx, t.l.Task) })
			if err != nil {
				p.finish(t, Result{}, err)
				continue
			}
			t.staged = st
			p.handOff(t, toTransform)
		}
	}
	close(toTransform)
	stages.Wait()
}

// handOff passes t to the next stage once that stage is free. A task whose
// lease is lost (or the pool stopped hard) while it waits ends at once.
func (p *Pool) handOff(t *inflight, next chan<- *inflight) {
	select {
	case next <- t:
	case <-t.ctx.Done():
		p.finish(t, Result{}, t.ctx.Err())
	}
}

// inflight is one leased task on its way through a worker.
type inflight struct {
	l      Lease
	log    *slog.Logger
	ctx    context.Context // cancelled when the lease is lost or on a hard stop
	cancel context.CancelFunc
	lost   atomic.Bool   // the heartbeat found the lease lost or the task cancelled
	stopHB chan struct{} // closed to stop the heartbeat
	hbDone chan struct{} // closed when the heartbeat has stopped
	staged StagedTask    // after a successful Read (StagedRunner only)
}

// start gives a leased task its context and heartbeat.
func (p *Pool) start(log *slog.Logger, l Lease) *inflight {
	ctx, cancel := context.WithCancel(p.runCtx)
	t := &inflight{l: l, log: log.With("task", l.Task.ID.String(), "lease", l.ID), ctx: ctx, cancel: cancel,
		stopHB: make(chan struct{}), hbDone: make(chan struct{})}
	go func() {
		defer close(t.hbDone)
		if p.heartbeat(l, t.stopHB) {
			t.lost.Store(true)
			cancel()
		}
	}()
	return t
}

// finish ends a task: it stops the heartbeat, releases what the task holds
// and reports the outcome, Complete if err is nil and Fail otherwise.
func (p *Pool) finish(t *inflight, res Result, err error) {
	defer t.cancel()
	close(t.stopHB)
	<-t.hbDone
	if t.staged != nil {
		p.release(t)
	}
	log, l := t.log, t.l
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
		case t.lost.Load() || errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrCancelled):
			p.lost.Add(1)
			log.Info("finished a task whose lease was lost", "err", err)
		default:
			log.Warn("complete failed; the lease will expire", "err", err)
		}
		return
	}
	if t.lost.Load() {
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

// release calls the staged task's Release; a panic there is logged, not
// allowed to take the worker down.
func (p *Pool) release(t *inflight) {
	st := t.staged
	t.staged = nil
	if _, err := safely(func() (struct{}, error) { st.Release(); return struct{}{}, nil }); err != nil {
		t.log.Warn("release failed", "err", err)
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

// safely turns a panic in the Runner into an error, so that one bad
// component fails its own task and nothing else.
func safely[T any](f func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v\n%s", ErrPanic, r, debug.Stack())
		}
	}()
	return f()
}

// Describe wraps a Leaser so that every leased task carries its Spec (the
// canonical DSL, objects and schema that the matching cache knows), as
// tasks leased over gRPC do; one Runner then serves in-process and remote
// workers alike. A task that cannot be described is failed (counting an
// attempt, so a task whose component vanished ends in quarantine rather
// than looping) and left out of its batch; when none of a batch is left,
// the next batch is leased.
func Describe(l Leaser, describe func(TaskID) (*sigv1.Task, error)) Leaser {
	return describing{Leaser: l, describe: describe}
}

type describing struct {
	Leaser
	describe func(TaskID) (*sigv1.Task, error)
}

func (d describing) LeaseBatch(ctx context.Context, workerID string, maxTasks int) ([]Lease, error) {
	for {
		ls, err := d.Leaser.LeaseBatch(ctx, workerID, maxTasks)
		if err != nil {
			return nil, err
		}
		out := ls[:0]
		for _, l := range ls {
			spec, err := describeLease(d.describe, l)
			if err != nil {
				if _, ferr := d.Leaser.Fail(ctx, l.ID, err.Error()); ferr != nil && !errors.Is(ferr, ErrLeaseLost) && !errors.Is(ferr, ErrCancelled) {
					return nil, ferr
				}
				continue
			}
			l.Task.Spec = spec
			out = append(out, l)
		}
		if len(out) > 0 {
			return out, nil
		}
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
	spec.ComponentKey = l.Task.ID.Component.String()
	spec.BlockId = l.Task.ID.Block.String()
	spec.Attempt = uint32(l.Task.Attempts)
	spec.Priority = l.Priority
	spec.Client = l.Client
	return spec, nil
}
