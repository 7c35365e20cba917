package workers

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/internal/pebbleutil"
)

// Options configure a Queue. Every field has a usable zero value; see
// EnsureDefaults.
type Options struct {
	// Clock tells lease deadlines and measures task cost. Default clock.Real.
	Clock clock.Clock
	// LeaseTTL is how long a lease lasts without a heartbeat. Default 30s.
	LeaseTTL time.Duration
	// MaxAttempts is how many failed runs or expired leases quarantine a
	// task. Default 3.
	MaxAttempts int
	// ExpiryInterval is how often Run looks for expired leases. Default 1s.
	ExpiryInterval time.Duration
	// Durability selects which crashes an acknowledged change survives.
	// Default DurabilityProcess.
	Durability Durability
	// CostSmoothing is the weight of the newest task duration in the moving
	// average of task cost that feeds the autoscaler. Default 0.2.
	CostSmoothing float64
	// MaxQueuedPerClient bounds the tasks one client may have waiting in
	// its queue, checked by Admit before new work is accepted; 0 means no
	// bound. Enqueue itself never refuses: work admitted before (a read
	// solution re-read after an eviction, reconciliation at start, a task
	// released from quarantine or retried) is queued whatever the count.
	MaxQueuedPerClient int
	// OnEvent, if set, is told of quarantines and releases after they are
	// durable, in the order they happened, outside the queue's lock. It may
	// read the queue but must not change it (that would wait on itself).
	// It is a notification: a crash may lose one, so the matching cache
	// should reconcile with ListQuarantine when it starts.
	OnEvent func(Event)
}

// EnsureDefaults fills unset options.
func (o *Options) EnsureDefaults() {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 30 * time.Second
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 3
	}
	if o.ExpiryInterval <= 0 {
		o.ExpiryInterval = time.Second
	}
	if o.CostSmoothing <= 0 || o.CostSmoothing > 1 {
		o.CostSmoothing = 0.2
	}
}

// Stats are counters and gauges of a queue.
type Stats struct {
	Queued      int // distinct tasks waiting
	Leased      int // tasks leased to workers
	Quarantined int
	Completed   uint64 // since Open
	Failures    uint64 // failed runs since Open
	Expired     uint64 // expired leases since Open
	Quarantines uint64 // tasks quarantined since Open
	// MeanTaskSeconds is the moving average of lease-to-completion time of
	// successful tasks; 0 before the first one.
	MeanTaskSeconds float64
}

// Durability says which crashes an acknowledged change survives (see
// internal/pebbleutil).
type Durability = pebbleutil.Durability

// Durabilities.
const (
	DurabilityProcess = pebbleutil.DurabilityProcess
	DurabilityMachine = pebbleutil.DurabilityMachine
)

// openDB opens the Pebble store in dir; every change is written with
// pebbleutil.WriteOptions (see there for why).
func openDB(dir string, d Durability) (*pebble.DB, error) {
	return pebbleutil.Open(dir, d, nil)
}

// Queue holds SIG's memoization tasks: per-client prioritized queues, leases
// and quarantine. It is the store around the queue's state machine
// (state.go): it owns the locks, the clock and Pebble, applies each change
// to the state under its lock, writes the records the change returns in one
// Pebble batch, and emits the change's events outside the lock. Every rule
// (scheduling, priorities, leases, quarantine) is the state's. All methods
// are safe for concurrent use.
type Queue struct {
	opts  Options
	clock clock.Clock
	db    *pebble.DB

	// closeMu is held shared by every operation that touches db and
	// exclusively by Close, so db is never used after it is closed.
	closeMu sync.RWMutex
	// emitMu orders OnEvent calls; taken under mu, released after emitting.
	emitMu sync.Mutex

	mu     sync.Mutex
	closed bool
	broken error         // a failed write: memory and store may differ
	wake   chan struct{} // closed and replaced when work is queued
	st     *state
}

// Open opens (creating if needed) the queue store in dir and rebuilds the
// state from it, replaying its records through the state's apply. Leases
// found in the store stay leased until their deadline, so a remote worker
// that outlives a sigd restart can still heartbeat and complete; leases
// already past their deadline are returned to the queues at once,
// counting an attempt (see doc.go).
func Open(dir string, opts Options) (*Queue, error) {
	opts.EnsureDefaults()
	db, err := openDB(dir, opts.Durability)
	if err != nil {
		return nil, fmt.Errorf("workers: open %s: %w", dir, err)
	}
	var nb [8]byte
	if _, err := rand.Read(nb[:]); err != nil {
		db.Close()
		return nil, fmt.Errorf("workers: lease nonce: %w", err)
	}
	q := &Queue{
		opts:  opts,
		clock: opts.Clock,
		db:    db,
		wake:  make(chan struct{}),
		st: newState(stateConfig{
			LeaseTTL:      opts.LeaseTTL,
			MaxAttempts:   opts.MaxAttempts,
			CostSmoothing: opts.CostSmoothing,
			Nonce:         binary.LittleEndian.Uint64(nb[:]),
		}),
	}
	if err := q.checkFormat(); err != nil {
		db.Close()
		return nil, fmt.Errorf("workers: %s: %w", dir, err)
	}
	if err := q.restore(); err != nil {
		db.Close()
		return nil, fmt.Errorf("workers: %s: %w", dir, err)
	}
	if _, err := q.ExpireLeases(q.clock.Now()); err != nil {
		db.Close()
		return nil, err
	}
	return q, nil
}

func (q *Queue) checkFormat() error {
	v, closer, err := q.db.Get(keyFormat)
	if err == nil {
		got := string(v)
		closer.Close()
		if got == formatV1 {
			return q.db.Set(keyFormat, []byte(FormatVersion), pebble.Sync)
		}
		if got != FormatVersion {
			return fmt.Errorf("%w: format %q, want %q", ErrFormat, got, FormatVersion)
		}
		return nil
	}
	if !errors.Is(err, pebble.ErrNotFound) {
		return err
	}
	it, err := q.db.NewIter(nil)
	if err != nil {
		return err
	}
	nonEmpty := it.First()
	if err := it.Close(); err != nil {
		return err
	}
	if nonEmpty {
		return fmt.Errorf("%w: no format key in a non-empty store", ErrFormat)
	}
	return q.db.Set(keyFormat, []byte(FormatVersion), pebble.Sync)
}

// restore rebuilds the state from the store: every record, in key order,
// replayed through the state's apply (opRestore), then the end of the
// replay (opRestoreEnd), which checks that the index records are those
// the task records imply (see state.go, "restore"). There is no lock to
// take: the queue is not shared yet.
func (q *Queue) restore() error {
	it, err := q.db.NewIter(nil)
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		v, err := it.ValueAndErr()
		if err == nil {
			err = q.st.apply(&op{kind: opRestore, key: it.Key(), value: v}).err
		}
		if err != nil {
			it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	return q.st.apply(&op{kind: opRestoreEnd}).err
}

// Close closes the store. Blocked Lease calls return ErrClosed.
func (q *Queue) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	close(q.wake)
	q.mu.Unlock()
	q.closeMu.Lock()
	defer q.closeMu.Unlock()
	return q.db.Close()
}

// PebbleMetrics returns the store's Pebble figures, for
// pebbleutil.Collector; empty once the queue is closed.
func (q *Queue) PebbleMetrics() *pebble.Metrics {
	q.closeMu.RLock()
	defer q.closeMu.RUnlock()
	q.mu.Lock()
	closed := q.closed
	q.mu.Unlock()
	if closed {
		return &pebble.Metrics{}
	}
	return q.db.Metrics()
}

// ------------------------------------------------------------ changes

// change applies o to the state and makes it durable: under the lock it
// stamps o with the clock, applies it, and writes the records it returns in
// one Pebble batch, so the store sees changes in the order the state did.
// A caller is answered only once its change, and every change before it,
// is durable (see Durability): in DurabilityProcess the commit itself waits
// for the write to the kernel, which is cheap; in DurabilityMachine the
// batch is applied without waiting and the fsync is awaited after the lock
// is released, so concurrent callers share fsyncs (group commit). Events
// are emitted after that, outside the lock, in the order of the changes.
// wake is the channel that is closed when work is next queued.
func (q *Queue) change(o *op) (r result, wake <-chan struct{}, err error) {
	q.closeMu.RLock()
	q.mu.Lock()
	switch {
	case q.closed:
		err = ErrClosed
	case q.broken != nil:
		err = q.broken
	}
	if err != nil {
		q.mu.Unlock()
		q.closeMu.RUnlock()
		return result{}, nil, err
	}
	o.now = q.clock.Now()
	r = q.st.apply(o)
	var b *pebble.Batch
	// In DurabilityProcess a "sync" is a write(2) to the kernel: cheap
	// enough to do under the lock in the one commit. A real fsync waits
	// outside it.
	syncLater := len(r.writes) > 0 && q.opts.Durability != DurabilityProcess
	if len(r.writes) > 0 {
		b = q.db.NewBatch()
		for _, w := range r.writes {
			if w.del {
				b.Delete(w.key, nil)
			} else {
				b.Set(w.key, w.value, nil)
			}
		}
		wo := pebble.Sync
		if syncLater {
			wo = pebble.NoSync
		}
		if err = b.Commit(wo); err != nil {
			q.broken = fmt.Errorf("workers: store write failed; reopen the queue: %w", err)
			err = q.broken
		}
	}
	if r.wake {
		close(q.wake)
		q.wake = make(chan struct{})
	}
	wake = q.wake
	emit := err == nil && len(r.events) > 0 && q.opts.OnEvent != nil
	if emit {
		q.emitMu.Lock()
	}
	q.mu.Unlock()
	if b != nil {
		b.Close()
	}
	if err == nil && syncLater {
		if err = q.db.LogData(nil, pebble.Sync); err != nil {
			err = fmt.Errorf("workers: store sync failed; reopen the queue: %w", err)
			q.mu.Lock()
			q.broken = err
			q.mu.Unlock()
		}
	}
	if emit {
		if err == nil {
			for _, e := range r.events {
				q.opts.OnEvent(e)
			}
		}
		q.emitMu.Unlock()
	}
	q.closeMu.RUnlock()
	if err == nil {
		err = r.err
	}
	return r, wake, err
}

// read runs fn on the state under the lock; fn must not change it.
func (q *Queue) read(fn func(s *state)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	fn(q.st)
}

// ------------------------------------------------------------ producers

// Enqueue asks for tasks on behalf of pipelines, in one durable change, and
// returns how many tasks it created. It is idempotent and merges
// requesters: a task already queued, leased or quarantined gains the
// requester (a queued task moves up if the requester raises its priority in
// that client's queue); asking again with a new priority updates the
// requester's priority. A task that was completed is gone: the caller knows
// its block is ready and does not ask again.
func (q *Queue) Enqueue(reqs ...Request) (created int, err error) {
	for _, r := range reqs {
		if err := r.validate(); err != nil {
			return 0, err
		}
	}
	r, _, err := q.change(&op{kind: opEnqueue, reqs: reqs})
	return r.n, err
}

// Room is how many more tasks client may have queued under
// MaxQueuedPerClient (math.MaxInt without a bound). A caller that would
// add fewer needs no Admit.
func (q *Queue) Room(client string) (n int) {
	if q.opts.MaxQueuedPerClient <= 0 {
		return math.MaxInt
	}
	q.read(func(s *state) { n = max(0, q.opts.MaxQueuedPerClient-s.queuedFor(client)) })
	return n
}

// Admit says whether client may ask for the tasks ids: nil, or a
// *QuotaError if those not already in its queue would take it past
// MaxQueuedPerClient. It changes nothing: the caller enqueues after it, so
// concurrent admissions of one client may pass the quota by one of them.
func (q *Queue) Admit(client string, ids []TaskID) (err error) {
	if q.opts.MaxQueuedPerClient <= 0 {
		return nil
	}
	q.read(func(s *state) { err = s.admit(client, ids, q.opts.MaxQueuedPerClient) })
	return err
}

// SetPriority changes a pipeline's priority on every task it requested and
// re-prioritizes its queued tasks (paper IV.A: priorities "evolve as models
// are created, refined, and retired"). It returns how many queued tasks
// changed place in their client's queue: a task also requested at a higher
// priority by another pipeline of the same client does not move.
func (q *Queue) SetPriority(client, pipeline string, priority int32) (moved int, err error) {
	if err := checkName("client", client); err != nil {
		return 0, err
	}
	if err := checkName("pipeline", pipeline); err != nil {
		return 0, err
	}
	r, _, err := q.change(&op{kind: opSetPriority, client: client, pipeline: pipeline, priority: priority})
	return r.n, err
}

// RemovePipeline withdraws a pipeline's requests (eviction, a retired
// model). Tasks that no other pipeline wants are cancelled, as by Cancel;
// it returns how many.
func (q *Queue) RemovePipeline(client, pipeline string) (cancelled int, err error) {
	if err := checkName("client", client); err != nil {
		return 0, err
	}
	if err := checkName("pipeline", pipeline); err != nil {
		return 0, err
	}
	r, _, err := q.change(&op{kind: opRemovePipeline, client: client, pipeline: pipeline})
	return r.n, err
}

// Cancel removes a task whatever its state (eviction). If it is leased, the
// lease's Heartbeat, Complete and Fail report ErrCancelled and change
// nothing. It reports whether the task existed.
func (q *Queue) Cancel(id TaskID) (bool, error) {
	if err := id.validate(); err != nil {
		return false, err
	}
	r, _, err := q.change(&op{kind: opCancel, id: id})
	return r.ok, err
}

// ----------------------------------------------------------- consumers

// MaxBatchTasks bounds the tasks one lease may take (LeaseBatch): a batch
// is read, run and described in one piece, and its tasks' descriptions
// travel in one LeaseTask answer.
const MaxBatchTasks = 256

// Lease takes the next task for workerID: the scheduler (Schedule) picks the
// client, the client's queue gives its first task, and the task leaves every
// queue it was in. If no task is queued, Lease waits until one is or ctx is
// done. The worker does not say its build (LeaseAs).
func (q *Queue) Lease(ctx context.Context, workerID string) (Lease, error) {
	return q.LeaseAs(ctx, workerID, "")
}

// LeaseAs is Lease for a worker running build (BuildID; "" when it does
// not say): the lease records it, so that what the task computes is known
// to come from that build (Result.Build), and a banned build is refused
// (a *BannedError) rather than left waiting.
func (q *Queue) LeaseAs(ctx context.Context, workerID, build string) (Lease, error) {
	ls, err := q.LeaseBatchAs(ctx, workerID, build, 1)
	if err != nil {
		return Lease{}, err
	}
	return ls[0], nil
}

// LeaseBatch leases a batch for workerID, who does not say its build
// (LeaseBatchAs): it implements Leaser.
func (q *Queue) LeaseBatch(ctx context.Context, workerID string, maxTasks int) ([]Lease, error) {
	return q.LeaseBatchAs(ctx, workerID, "", maxTasks)
}

// LeaseBatchAs leases up to maxTasks tasks of one raw block at once, waiting as
// LeaseAs does until there is work: the task Lease would take first, then
// other queued tasks of its raw block (TaskID.Block's ID, any input
// version), whatever their clients, highest priority then oldest first
// (issue 28: a worker reads the block's raw columns once for them all).
// The lease is one turn of the first task's client in the round-robin;
// joining tasks use no turn of theirs. Each task has a lease of its own,
// heartbeated, completed, failed and expired as any lease (state.go,
// lease). maxTasks is clamped to [1, MaxBatchTasks].
func (q *Queue) LeaseBatchAs(ctx context.Context, workerID, build string, maxTasks int) ([]Lease, error) {
	for {
		ls, wake, err := q.tryLease(workerID, build, maxTasks)
		if err != nil || len(ls) > 0 {
			return ls, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wake:
		}
	}
}

// TryLease is Lease without waiting; ok is false when nothing is queued.
func (q *Queue) TryLease(workerID string) (l Lease, ok bool, err error) {
	return q.TryLeaseAs(workerID, "")
}

// TryLeaseAs is LeaseAs without waiting.
func (q *Queue) TryLeaseAs(workerID, build string) (l Lease, ok bool, err error) {
	ls, _, err := q.tryLease(workerID, build, 1)
	if err != nil || len(ls) == 0 {
		return Lease{}, false, err
	}
	return ls[0], true, nil
}

// TryLeaseBatchAs is LeaseBatchAs without waiting: no leases when nothing
// is queued.
func (q *Queue) TryLeaseBatchAs(workerID, build string, maxTasks int) ([]Lease, error) {
	ls, _, err := q.tryLease(workerID, build, maxTasks)
	return ls, err
}

func (q *Queue) tryLease(workerID, build string, maxTasks int) ([]Lease, <-chan struct{}, error) {
	if err := checkName("worker id", workerID); err != nil {
		return nil, nil, err
	}
	if build != "" {
		if err := checkName("build", build); err != nil {
			return nil, nil, err
		}
	}
	maxTasks = min(MaxBatchTasks, max(maxTasks, 1))
	r, wake, err := q.change(&op{kind: opLease, worker: workerID, build: build, maxTasks: maxTasks})
	if err != nil {
		return nil, nil, err
	}
	return r.batch, wake, nil
}

// LookupLease returns a live lease.
func (q *Queue) LookupLease(leaseID string) (out Lease, err error) {
	q.read(func(s *state) {
		var l *lease
		if l, err = s.lookup(leaseID); err == nil {
			out = l.snapshot()
		}
	})
	return out, err
}

// Heartbeat extends a lease to now + LeaseTTL and returns the new deadline.
// A lease is valid until an expiry pass (ExpireLeases) finds it past its
// deadline, so a late heartbeat still saves it if no pass ran in between.
// ctx is unused; it is there to satisfy Leaser.
func (q *Queue) Heartbeat(_ context.Context, leaseID string) (time.Time, error) {
	r, _, err := q.change(&op{kind: opHeartbeat, lease: leaseID})
	if err != nil {
		return time.Time{}, err
	}
	return r.deadline, nil
}

// Complete finishes a leased task: it is removed for good. The worker has
// already written the memoized object and marked it ready. The result is
// not stored (the matching cache records rows and bytes); ctx is unused.
func (q *Queue) Complete(_ context.Context, leaseID string, res Result) error {
	if res.Rows < 0 || res.Bytes < 0 {
		return fmt.Errorf("%w: negative result %+v", ErrInvalid, res)
	}
	_, _, err := q.change(&op{kind: opComplete, lease: leaseID})
	return err
}

// Fail reports a failed run: the task's attempts grow by one and it is
// requeued, or quarantined with cause once attempts reach MaxAttempts.
// ctx is unused.
func (q *Queue) Fail(_ context.Context, leaseID string, cause string) (quarantined bool, err error) {
	r, _, err := q.change(&op{kind: opFail, lease: leaseID, cause: cause})
	return r.quarantined, err
}

// Return gives a leased task back without counting an attempt: it never
// ran (the caller that asked for it went away before receiving it). It goes
// back to its old place in the queues.
func (q *Queue) Return(leaseID string) error {
	_, _, err := q.change(&op{kind: opReturn, lease: leaseID})
	return err
}

// ExpireLeases returns every task whose lease deadline is not after now to
// the queues, counting a failed attempt (a task that kills its worker is
// eventually quarantined). Run calls it periodically; tests call it with a
// chosen time. It returns how many leases expired.
func (q *Queue) ExpireLeases(now time.Time) (int, error) {
	r, _, err := q.change(&op{kind: opExpire, due: now})
	return r.n, err
}

// Run expires leases every ExpiryInterval of the queue's clock until ctx is
// done (returning ctx's error) or the queue is closed (returning nil).
func (q *Queue) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now := <-q.clock.After(q.opts.ExpiryInterval):
			if _, err := q.ExpireLeases(now); errors.Is(err, ErrClosed) {
				return nil
			} else if err != nil {
				return err
			}
		}
	}
}

// ------------------------------------------------------------ operators

// Release puts a quarantined task back in the queues with its attempts reset
// (an operator fixed the cause). It reports whether the task was quarantined.
func (q *Queue) Release(id TaskID) (bool, error) {
	if err := id.validate(); err != nil {
		return false, err
	}
	r, _, err := q.change(&op{kind: opRelease, id: id})
	return r.ok, err
}

// BanBuild refuses leases to a worker build from now on, durably, and
// takes back the tasks it holds (requeued without counting an attempt;
// their workers hear ErrLeaseLost): sigd does it when its own
// recomputation confirms that a memo object the build computed holds
// wrong values (issue 27), since the build would compute it wrong again.
// reason says why (kept with the ban). It reports whether the build was
// not banned already, and how many leases it revoked. Only an operator
// lifts a ban (LiftBan).
func (q *Queue) BanBuild(build, reason string) (added bool, revoked int, err error) {
	if err := checkName("build", build); err != nil {
		return false, 0, err
	}
	r, _, err := q.change(&op{kind: opBan, build: build, cause: reason})
	return r.ok, r.n, err
}

// LiftBan lets a banned build lease again (an operator found the cause:
// sigctl builds lift, the web UI). It reports whether it was banned.
func (q *Queue) LiftBan(build string) (bool, error) {
	if err := checkName("build", build); err != nil {
		return false, err
	}
	r, _, err := q.change(&op{kind: opLift, build: build})
	return r.ok, err
}

// Bans returns the banned builds, by build.
func (q *Queue) Bans() (out []Ban) {
	q.read(func(s *state) { out = s.listBans() })
	return out
}

// Banned returns the ban of build, if it is banned.
func (q *Queue) Banned(build string) (b Ban, ok bool) {
	q.read(func(s *state) { b, ok = s.bans[build] })
	return b, ok && build != ""
}

// ForBuild returns the Leaser of in-process workers running build:
// LeaseBatch is LeaseBatchAs(build), the rest the Queue's.
func (q *Queue) ForBuild(build string) Leaser { return buildLeaser{q, build} }

type buildLeaser struct {
	*Queue
	build string
}

func (b buildLeaser) LeaseBatch(ctx context.Context, workerID string, maxTasks int) ([]Lease, error) {
	return b.LeaseBatchAs(ctx, workerID, b.build, maxTasks)
}

// Quarantine quarantines a queued task now, with reason, as MaxAttempts
// failures would: sigd does it to the recomputation of a block a banned
// build computed wrong (issue 27), so that the block waits for an operator
// (Release) rather than for the next build to compute it. It reports
// whether the task was queued; a task leased meanwhile is left to its
// worker.
func (q *Queue) Quarantine(id TaskID, reason string) (bool, error) {
	if err := id.validate(); err != nil {
		return false, err
	}
	r, _, err := q.change(&op{kind: opQuarantine, id: id, cause: reason})
	return r.ok, err
}

// ListQuarantine returns the quarantined tasks with their errors, by id.
func (q *Queue) ListQuarantine() (out []Task) {
	q.read(func(s *state) { out = s.listQuarantine() })
	return out
}

// Get returns a task's current snapshot.
func (q *Queue) Get(id TaskID) (t Task, ok bool) {
	q.read(func(s *state) { t, ok = s.get(id) })
	return t, ok
}

// Depths returns queued and leased counts per (client, priority), sorted by
// client then priority, highest first. For metrics and ListQueues.
func (q *Queue) Depths() (out []Depth) {
	q.read(func(s *state) { out = s.depths() })
	return out
}

// QueuedPeak returns the most distinct tasks that were queued at once since
// its previous call (since Open for the first), and starts the next
// interval at the number queued now. A sampler that reads the depth every
// few seconds misses a burst queued and drained between two reads; one that
// reads QueuedPeak does not. It is for one sampler (the web UI's queue
// chart): a second caller would take the first one's peaks. It works on a
// closed queue too.
func (q *Queue) QueuedPeak() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	// Not through change: nothing to write, and the chart may sample a
	// queue being closed.
	return q.st.apply(&op{kind: opTakePeak}).n
}

// Backlog is the work outstanding: distinct queued tasks plus leased ones.
// It is what the autoscaler sizes the pool for.
func (q *Queue) Backlog() (n int) {
	q.read(func(s *state) { n = s.nQueued + s.nLeased })
	return n
}

// MeanTaskSeconds is the moving average of successful tasks' lease-to-
// completion time; 0 before the first.
func (q *Queue) MeanTaskSeconds() (v float64) {
	q.read(func(s *state) { v = s.stats.MeanTaskSeconds })
	return v
}

// Stats returns the queue's counters.
func (q *Queue) Stats() (st Stats) {
	q.read(func(s *state) { st = s.statsSnapshot() })
	return st
}

// dump renders the whole state deterministically, for tests.
func (q *Queue) dump() (out string) {
	q.read(func(s *state) { out = s.dump(TaskID.String) })
	return out
}
