package workers

import (
	"bytes"
	"container/heap"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sigdata/sig/internal/clock"
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

// EventKind says what happened to a task.
type EventKind uint8

const (
	// EventQuarantined: the task failed MaxAttempts times; Task.Err says why.
	EventQuarantined EventKind = iota + 1
	// EventReleased: an operator released the task from quarantine; it is
	// queued again.
	EventReleased
)

func (k EventKind) String() string {
	switch k {
	case EventQuarantined:
		return "quarantined"
	case EventReleased:
		return "released"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is a notification from the queue.
type Event struct {
	Kind EventKind
	Task Task
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

// task is the in-memory mirror of one task record and its indexes.
type task struct {
	id    TaskID
	rec   record
	items []*qitem // when queued: one per requesting client
	lease *lease   // when leased
}

type lease struct {
	id string
	t  *task
	// cancelled: the task was cancelled while leased. The record is gone;
	// the lease lingers in memory so that its holder learns ErrCancelled.
	cancelled bool
}

type pipeKey struct{ client, pipeline string }

// Queue holds SIG's memoization tasks: per-client prioritized queues, leases
// and quarantine, persisted in Pebble and mirrored in memory. All methods
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

	mu         sync.Mutex
	closed     bool
	broken     error // a failed write: memory and store may differ
	tasks      map[TaskID]*task
	queues     map[string]*clientQueue // non-empty queues only
	pipelines  map[pipeKey]map[TaskID]*task
	leases     map[string]*lease
	quarantine map[TaskID]*task
	fair       Fairness
	seq        uint64
	nonce      uint64
	leaseN     uint64
	wake       chan struct{} // closed and replaced when work is queued
	nQueued    int
	nLeased    int // leases not cancelled
	// peakQueued is the largest nQueued since the last QueuedPeak.
	peakQueued int
	stats      Stats
	haveCost   bool
	heads      []Head // scratch
}

// Open opens (creating if needed) the queue store in dir and rebuilds the
// in-memory queues from it. Leases found in the store stay leased until
// their deadline, so a remote worker that outlives a sigd restart can still
// heartbeat and complete; leases already past their deadline are returned
// to the queues at once, counting an attempt (see doc.go).
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
		opts:       opts,
		clock:      opts.Clock,
		db:         db,
		tasks:      make(map[TaskID]*task),
		queues:     make(map[string]*clientQueue),
		pipelines:  make(map[pipeKey]map[TaskID]*task),
		leases:     make(map[string]*lease),
		quarantine: make(map[TaskID]*task),
		wake:       make(chan struct{}),
		nonce:      binary.LittleEndian.Uint64(nb[:]),
	}
	if err := q.checkFormat(); err != nil {
		db.Close()
		return nil, fmt.Errorf("workers: %s: %w", dir, err)
	}
	if err := q.load(); err != nil {
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

// scan calls fn for every key with prefix p, in key order.
func (q *Queue) scan(p byte, fn func(k, v []byte) error) error {
	it, err := q.db.NewIter(prefixBounds(p))
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return err
		}
		if err := fn(it.Key(), v); err != nil {
			it.Close()
			return err
		}
	}
	return it.Close()
}

// load rebuilds memory from the store: task records first, then each index,
// checking that every index agrees with the records.
func (q *Queue) load() error {
	err := q.scan(pfxTask, func(k, v []byte) error {
		id, err := parseID(k[1:])
		if err != nil {
			return err
		}
		rec, err := decodeRecord(v)
		if err != nil {
			return fmt.Errorf("task %s: %w", id, err)
		}
		q.tasks[id] = &task{id: id, rec: *rec}
		if rec.seq >= q.seq {
			q.seq = rec.seq
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = q.scan(pfxQueue, func(k, v []byte) error {
		client, prio, seq, err := parseQueueKey(k)
		if err != nil {
			return err
		}
		id, err := parseID(v)
		if err != nil {
			return err
		}
		t := q.tasks[id]
		if t == nil || t.rec.state != StateQueued || t.rec.seq != seq {
			return fmt.Errorf("%w: queue entry %s@%d for %s has no matching queued task", ErrCorrupt, client, prio, id)
		}
		if p, ok := clientPriority(t.rec.requesters, client); !ok || p != prio {
			return fmt.Errorf("%w: queue entry %s@%d for %s disagrees with its requesters", ErrCorrupt, client, prio, id)
		}
		cq := q.queues[client]
		if cq == nil {
			cq = &clientQueue{}
			q.queues[client] = cq
		}
		// Keys arrive in (priority desc, seq asc) order: appending keeps the
		// heap property without sifting.
		it := &qitem{t: t, client: client, prio: prio, idx: len(cq.items)}
		cq.items = append(cq.items, it)
		t.items = append(t.items, it)
		return nil
	})
	if err != nil {
		return err
	}
	nReq := 0
	for _, t := range q.tasks {
		nReq += len(t.rec.requesters)
		if t.rec.state != StateQueued {
			continue
		}
		if len(t.items) != len(clientPriorities(t.rec.requesters)) {
			return fmt.Errorf("%w: queued task %s is missing from a client queue", ErrCorrupt, t.id)
		}
		q.nQueued++
	}
	nPipe := 0
	err = q.scan(pfxPipeline, func(k, _ []byte) error {
		client, pipeline, id, err := parsePipelineKey(k)
		if err != nil {
			return err
		}
		t := q.tasks[id]
		if t == nil || findRequester(t.rec.requesters, client, pipeline) < 0 {
			return fmt.Errorf("%w: pipeline entry %s/%s for %s has no matching requester", ErrCorrupt, client, pipeline, id)
		}
		pk := pipeKey{client, pipeline}
		m := q.pipelines[pk]
		if m == nil {
			m = make(map[TaskID]*task)
			q.pipelines[pk] = m
		}
		m[id] = t
		nPipe++
		return nil
	})
	if err != nil {
		return err
	}
	if nPipe != nReq {
		return fmt.Errorf("%w: %d pipeline entries for %d requesters", ErrCorrupt, nPipe, nReq)
	}
	err = q.scan(pfxLease, func(k, v []byte) error {
		deadline, leaseID, err := parseLeaseKey(k)
		if err != nil {
			return err
		}
		id, err := parseID(v)
		if err != nil {
			return err
		}
		t := q.tasks[id]
		if t == nil || t.rec.state != StateLeased || t.rec.leaseID != leaseID || !t.rec.deadline.Equal(deadline) {
			return fmt.Errorf("%w: lease entry %s for %s has no matching leased task", ErrCorrupt, leaseID, id)
		}
		l := &lease{id: leaseID, t: t}
		t.lease = l
		q.leases[leaseID] = l
		q.nLeased++
		return nil
	})
	if err != nil {
		return err
	}
	err = q.scan(pfxQuarantine, func(k, _ []byte) error {
		id, err := parseID(k[1:])
		if err != nil {
			return err
		}
		t := q.tasks[id]
		if t == nil || t.rec.state != StateQuarantined {
			return fmt.Errorf("%w: quarantine entry for %s has no quarantined task", ErrCorrupt, id)
		}
		q.quarantine[id] = t
		return nil
	})
	if err != nil {
		return err
	}
	q.fair.Last = make(map[int32]string)
	err = q.scan(pfxFairness, func(k, v []byte) error {
		p, err := parseFairnessKey(k)
		if err != nil {
			return err
		}
		q.fair.Last[p] = string(v)
		return nil
	})
	if err != nil {
		return err
	}
	for _, t := range q.tasks {
		if (t.rec.state == StateLeased && t.lease == nil) || (t.rec.state == StateQuarantined && q.quarantine[t.id] == nil) {
			return fmt.Errorf("%w: %s task %s missing from its index", ErrCorrupt, t.rec.state, t.id)
		}
	}
	return nil
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

// ------------------------------------------------------- transactions

// txn is one state change: memory is mutated under q.mu while the same
// change is written to one Pebble batch, so memory and store move together.
type txn struct {
	q      *Queue
	b      *pebble.Batch
	now    time.Time
	events []Event
	wake   bool
}

// begin locks the queue for a change.
func (q *Queue) begin() (*txn, error) {
	q.closeMu.RLock()
	q.mu.Lock()
	switch {
	case q.closed:
		q.mu.Unlock()
		q.closeMu.RUnlock()
		return nil, ErrClosed
	case q.broken != nil:
		err := q.broken
		q.mu.Unlock()
		q.closeMu.RUnlock()
		return nil, err
	}
	return &txn{q: q, b: q.db.NewBatch(), now: q.clock.Now()}, nil
}

// finish commits the batch and unlocks. The batch is applied under the lock,
// so the store sees changes in the order memory did. A caller is answered
// only once its change, and every change before it, is durable (see
// Durability): in DurabilityProcess the commit itself waits for the write
// to the kernel, which is cheap; in DurabilityMachine the batch is applied
// without waiting and the fsync is awaited after the lock is released, so
// concurrent callers share fsyncs (group commit).
func (x *txn) finish() error {
	q := x.q
	var err error
	dirty := !x.b.Empty()
	// In DurabilityProcess a "sync" is a write(2) to the kernel: cheap
	// enough to do under the lock in the one commit. A real fsync waits
	// outside it.
	syncLater := dirty && q.opts.Durability != DurabilityProcess
	if dirty {
		wo := pebble.Sync
		if syncLater {
			wo = pebble.NoSync
		}
		if err = x.b.Commit(wo); err != nil {
			q.broken = fmt.Errorf("workers: store write failed; reopen the queue: %w", err)
			err = q.broken
		}
	}
	if x.wake {
		close(q.wake)
		q.wake = make(chan struct{})
	}
	emit := err == nil && len(x.events) > 0 && q.opts.OnEvent != nil
	if emit {
		q.emitMu.Lock()
	}
	q.mu.Unlock()
	x.b.Close()
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
			for _, e := range x.events {
				q.opts.OnEvent(e)
			}
		}
		q.emitMu.Unlock()
	}
	q.closeMu.RUnlock()
	return err
}

// abort unlocks without writing; only before any mutation.
func (x *txn) abort() {
	x.b.Close()
	x.q.mu.Unlock()
	x.q.closeMu.RUnlock()
}

func (x *txn) putRecord(t *task) { x.b.Set(taskKey(t.id), t.rec.encode(), nil) }

func (x *txn) nextSeq() uint64 {
	x.q.seq++
	return x.q.seq
}

// clientPriorities lists, per distinct requesting client, its highest
// priority: where the task sits in each client's queue.
func clientPriorities(rs []Requester) []Head {
	var out []Head
	for _, r := range rs {
		if n := len(out); n > 0 && out[n-1].Client == r.Client {
			if r.Priority > out[n-1].Priority {
				out[n-1].Priority = r.Priority
			}
			continue
		}
		out = append(out, Head{Client: r.Client, Priority: r.Priority})
	}
	return out
}

func clientPriority(rs []Requester, client string) (int32, bool) {
	var p int32
	ok := false
	for _, r := range rs {
		if r.Client == client && (!ok || r.Priority > p) {
			p, ok = r.Priority, true
		}
	}
	return p, ok
}

func findRequester(rs []Requester, client, pipeline string) int {
	for i, r := range rs {
		if r.Client == client && r.Pipeline == pipeline {
			return i
		}
	}
	return -1
}

// enqueueItems puts a queued task into the queue of each requesting client.
func (x *txn) enqueueItems(t *task) {
	for _, h := range clientPriorities(t.rec.requesters) {
		x.pushItem(t, h.Client, h.Priority)
	}
	x.q.nQueued++
	x.q.peakQueued = max(x.q.peakQueued, x.q.nQueued)
}

func (x *txn) pushItem(t *task, client string, prio int32) {
	cq := x.q.queues[client]
	if cq == nil {
		cq = &clientQueue{}
		x.q.queues[client] = cq
	}
	it := &qitem{t: t, client: client, prio: prio}
	heap.Push(cq, it)
	t.items = append(t.items, it)
	x.b.Set(queueKey(client, prio, t.rec.seq), idValue(t.id), nil)
	x.wake = true
}

func (x *txn) removeItem(it *qitem) {
	cq := x.q.queues[it.client]
	heap.Remove(cq, it.idx)
	if cq.Len() == 0 {
		delete(x.q.queues, it.client)
	}
	x.b.Delete(queueKey(it.client, it.prio, it.t.rec.seq), nil)
}

// dequeueItems takes a queued task out of every client queue.
func (x *txn) dequeueItems(t *task) {
	for _, it := range t.items {
		x.removeItem(it)
	}
	t.items = nil
	x.q.nQueued--
}

// syncClient makes t's place in client's queue match its requesters after
// they changed; it reports whether the place moved.
func (x *txn) syncClient(t *task, client string) bool {
	want, ok := clientPriority(t.rec.requesters, client)
	for i, it := range t.items {
		if it.client != client {
			continue
		}
		if !ok {
			x.removeItem(it)
			t.items = append(t.items[:i], t.items[i+1:]...)
			return true
		}
		if it.prio == want {
			return false
		}
		x.b.Delete(queueKey(client, it.prio, t.rec.seq), nil)
		it.prio = want
		heap.Fix(x.q.queues[client], it.idx)
		x.b.Set(queueKey(client, want, t.rec.seq), idValue(t.id), nil)
		return true
	}
	if ok {
		x.pushItem(t, client, want)
		return true
	}
	return false
}

func (x *txn) addPipe(t *task, client, pipeline string) {
	pk := pipeKey{client, pipeline}
	m := x.q.pipelines[pk]
	if m == nil {
		m = make(map[TaskID]*task)
		x.q.pipelines[pk] = m
	}
	m[t.id] = t
	x.b.Set(pipelineKey(client, pipeline, t.id), nil, nil)
}

func (x *txn) delPipe(t *task, client, pipeline string) {
	pk := pipeKey{client, pipeline}
	if m := x.q.pipelines[pk]; m != nil {
		delete(m, t.id)
		if len(m) == 0 {
			delete(x.q.pipelines, pk)
		}
	}
	x.b.Delete(pipelineKey(client, pipeline, t.id), nil)
}

// dropTask deletes a task that is out of its queues, lease and quarantine.
func (x *txn) dropTask(t *task) {
	for _, r := range t.rec.requesters {
		x.delPipe(t, r.Client, r.Pipeline)
	}
	delete(x.q.tasks, t.id)
	x.b.Delete(taskKey(t.id), nil)
}

// cancelTask removes a task in any state.
func (x *txn) cancelTask(t *task) {
	switch t.rec.state {
	case StateQueued:
		x.dequeueItems(t)
	case StateLeased:
		t.lease.cancelled = true
		x.b.Delete(leaseKey(t.rec.deadline, t.lease.id), nil)
		x.q.nLeased--
	case StateQuarantined:
		delete(x.q.quarantine, t.id)
		x.b.Delete(quarantineKey(t.id), nil)
	}
	x.dropTask(t)
}

// endLease forgets a lease (not cancelled) whose task stays.
func (x *txn) endLease(l *lease) {
	t := l.t
	delete(x.q.leases, l.id)
	x.b.Delete(leaseKey(t.rec.deadline, l.id), nil)
	x.q.nLeased--
	t.lease = nil
	t.rec.leaseID, t.rec.worker, t.rec.client = "", "", ""
	t.rec.priority = 0
	t.rec.deadline, t.rec.leasedAt = time.Time{}, time.Time{}
}

// failLeased counts a failed attempt of a leased task and requeues or
// quarantines it. A requeued task goes to the back of its priority: a task
// that keeps failing must not starve the tasks behind it.
func (x *txn) failLeased(l *lease, cause string) (quarantined bool) {
	t := l.t
	x.endLease(l)
	t.rec.attempts++
	t.rec.err = clip(cause)
	t.rec.since = x.now
	x.q.stats.Failures++
	if t.rec.attempts >= x.q.opts.MaxAttempts {
		t.rec.state = StateQuarantined
		x.q.quarantine[t.id] = t
		x.b.Set(quarantineKey(t.id), nil, nil)
		x.q.stats.Quarantines++
		x.events = append(x.events, Event{Kind: EventQuarantined, Task: t.snapshot()})
	} else {
		t.rec.state = StateQueued
		t.rec.seq = x.nextSeq()
		x.enqueueItems(t)
	}
	x.putRecord(t)
	return t.rec.state == StateQuarantined
}

func (t *task) snapshot() Task {
	return Task{
		ID:         t.id,
		State:      t.rec.state,
		Attempts:   t.rec.attempts,
		Requesters: append([]Requester(nil), t.rec.requesters...),
		Err:        t.rec.err,
		Since:      t.rec.since,
	}
}

func (l *lease) snapshot() Lease {
	r := &l.t.rec
	return Lease{ID: l.id, Task: l.t.snapshot(), Worker: r.worker, Client: r.client, Priority: r.priority, Deadline: r.deadline}
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
	x, err := q.begin()
	if err != nil {
		return 0, err
	}
	for _, r := range reqs {
		t := q.tasks[r.Task]
		if t == nil {
			t = &task{id: r.Task, rec: record{
				state:      StateQueued,
				seq:        x.nextSeq(),
				since:      x.now,
				requesters: []Requester{{Client: r.Client, Pipeline: r.Pipeline, Priority: r.Priority}},
			}}
			q.tasks[r.Task] = t
			x.addPipe(t, r.Client, r.Pipeline)
			x.putRecord(t)
			x.enqueueItems(t)
			created++
			continue
		}
		if i := findRequester(t.rec.requesters, r.Client, r.Pipeline); i >= 0 {
			if t.rec.requesters[i].Priority == r.Priority {
				continue
			}
			t.rec.requesters[i].Priority = r.Priority
		} else {
			t.rec.requesters = append(t.rec.requesters, Requester{Client: r.Client, Pipeline: r.Pipeline, Priority: r.Priority})
			sortRequesters(t.rec.requesters)
			x.addPipe(t, r.Client, r.Pipeline)
		}
		x.putRecord(t)
		if t.rec.state == StateQueued {
			x.syncClient(t, r.Client)
		}
	}
	return created, x.finish()
}

// Room is how many more tasks client may have queued under
// MaxQueuedPerClient (math.MaxInt without a bound). A caller that would
// add fewer needs no Admit.
func (q *Queue) Room(client string) int {
	if q.opts.MaxQueuedPerClient <= 0 {
		return math.MaxInt
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return max(0, q.opts.MaxQueuedPerClient-q.queuedFor(client))
}

// Admit says whether client may ask for the tasks ids: nil, or a
// *QuotaError if those not already in its queue would take it past
// MaxQueuedPerClient. It changes nothing: the caller enqueues after it, so
// concurrent admissions of one client may pass the quota by one of them.
func (q *Queue) Admit(client string, ids []TaskID) error {
	if q.opts.MaxQueuedPerClient <= 0 {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	adding := 0
	seen := make(map[TaskID]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		// A task enters the client's queue unless it is there already,
		// or leased or quarantined (the client becomes a requester only).
		t := q.tasks[id]
		if t == nil || (t.rec.state == StateQueued && !slices.ContainsFunc(t.items, func(it *qitem) bool { return it.client == client })) {
			adding++
		}
	}
	if queued := q.queuedFor(client); queued+adding > q.opts.MaxQueuedPerClient {
		return &QuotaError{Client: client, Queued: queued, Adding: adding, Max: q.opts.MaxQueuedPerClient}
	}
	return nil
}

// queuedFor is the length of client's queue. q.mu is held.
func (q *Queue) queuedFor(client string) int {
	if cq := q.queues[client]; cq != nil {
		return cq.Len()
	}
	return 0
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
	x, err := q.begin()
	if err != nil {
		return 0, err
	}
	for _, t := range sortedTasks(q.pipelines[pipeKey{client, pipeline}]) {
		i := findRequester(t.rec.requesters, client, pipeline)
		if t.rec.requesters[i].Priority == priority {
			continue
		}
		t.rec.requesters[i].Priority = priority
		x.putRecord(t)
		if t.rec.state == StateQueued && x.syncClient(t, client) {
			moved++
		}
	}
	return moved, x.finish()
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
	x, err := q.begin()
	if err != nil {
		return 0, err
	}
	for _, t := range sortedTasks(q.pipelines[pipeKey{client, pipeline}]) {
		if len(t.rec.requesters) == 1 {
			x.cancelTask(t)
			cancelled++
			continue
		}
		i := findRequester(t.rec.requesters, client, pipeline)
		t.rec.requesters = append(t.rec.requesters[:i], t.rec.requesters[i+1:]...)
		x.delPipe(t, client, pipeline)
		x.putRecord(t)
		if t.rec.state == StateQueued {
			x.syncClient(t, client)
		}
	}
	return cancelled, x.finish()
}

// Cancel removes a task whatever its state (eviction). If it is leased, the
// lease's Heartbeat, Complete and Fail report ErrCancelled and change
// nothing. It reports whether the task existed.
func (q *Queue) Cancel(id TaskID) (bool, error) {
	if err := id.validate(); err != nil {
		return false, err
	}
	x, err := q.begin()
	if err != nil {
		return false, err
	}
	t := q.tasks[id]
	if t == nil {
		x.abort()
		return false, nil
	}
	x.cancelTask(t)
	return true, x.finish()
}

func sortedTasks(m map[TaskID]*task) []*task {
	out := make([]*task, 0, len(m))
	for _, t := range m {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].id, out[j].id
		if c := bytes.Compare(a.Component[:], b.Component[:]); c != 0 {
			return c < 0
		}
		return a.Block < b.Block
	})
	return out
}

// ----------------------------------------------------------- consumers

// Lease takes the next task for workerID: the scheduler (Schedule) picks the
// client, the client's queue gives its first task, and the task leaves every
// queue it was in. If no task is queued, Lease waits until one is or ctx is
// done.
func (q *Queue) Lease(ctx context.Context, workerID string) (Lease, error) {
	for {
		l, ok, wake, err := q.tryLease(workerID)
		if err != nil || ok {
			return l, err
		}
		select {
		case <-ctx.Done():
			return Lease{}, ctx.Err()
		case <-wake:
		}
	}
}

// TryLease is Lease without waiting; ok is false when nothing is queued.
func (q *Queue) TryLease(workerID string) (l Lease, ok bool, err error) {
	l, ok, _, err = q.tryLease(workerID)
	return l, ok, err
}

func (q *Queue) tryLease(workerID string) (Lease, bool, <-chan struct{}, error) {
	if err := checkName("worker id", workerID); err != nil {
		return Lease{}, false, nil, err
	}
	x, err := q.begin()
	if err != nil {
		return Lease{}, false, nil, err
	}
	if len(q.queues) == 0 {
		wake := q.wake
		x.abort()
		return Lease{}, false, wake, nil
	}
	heads := q.heads[:0]
	for c, cq := range q.queues {
		heads = append(heads, Head{Client: c, Priority: cq.items[0].prio})
	}
	q.heads = heads
	client, fair, _ := Schedule(heads, q.fair)
	q.fair = fair
	head := q.queues[client].items[0]
	// The round-robin cursor is persisted so a restart does not hand the
	// next turn back to the first client by name.
	x.b.Set(fairnessKey(head.prio), []byte(client), nil)
	t := head.t
	x.dequeueItems(t)
	q.leaseN++
	l := &lease{id: fmt.Sprintf("%016x-%d", q.nonce, q.leaseN), t: t}
	t.lease = l
	t.rec.state = StateLeased
	t.rec.since = x.now
	t.rec.leaseID = l.id
	t.rec.worker = workerID
	t.rec.client = client
	t.rec.priority = head.prio
	t.rec.leasedAt = x.now
	t.rec.deadline = x.now.Add(q.opts.LeaseTTL)
	q.leases[l.id] = l
	q.nLeased++
	x.putRecord(t)
	x.b.Set(leaseKey(t.rec.deadline, l.id), idValue(t.id), nil)
	out := l.snapshot()
	if err := x.finish(); err != nil {
		return Lease{}, false, nil, err
	}
	return out, true, nil, nil
}

// lookup finds a live lease for the lease protocol's calls.
func (q *Queue) lookup(leaseID string) (*lease, error) {
	l := q.leases[leaseID]
	switch {
	case l == nil:
		return nil, fmt.Errorf("%w: %q", ErrLeaseLost, leaseID)
	case l.cancelled:
		return l, fmt.Errorf("%w: %s (lease %s)", ErrCancelled, l.t.id, leaseID)
	}
	return l, nil
}

// LookupLease returns a live lease.
func (q *Queue) LookupLease(leaseID string) (Lease, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l, err := q.lookup(leaseID)
	if err != nil {
		return Lease{}, err
	}
	return l.snapshot(), nil
}

// Heartbeat extends a lease to now + LeaseTTL and returns the new deadline.
// A lease is valid until an expiry pass (ExpireLeases) finds it past its
// deadline, so a late heartbeat still saves it if no pass ran in between.
// ctx is unused; it is there to satisfy Leaser.
func (q *Queue) Heartbeat(_ context.Context, leaseID string) (time.Time, error) {
	x, err := q.begin()
	if err != nil {
		return time.Time{}, err
	}
	l, err := q.lookup(leaseID)
	if err != nil {
		x.abort()
		return time.Time{}, err
	}
	t := l.t
	if d := x.now.Add(q.opts.LeaseTTL); d.After(t.rec.deadline) {
		x.b.Delete(leaseKey(t.rec.deadline, l.id), nil)
		t.rec.deadline = d
		x.b.Set(leaseKey(d, l.id), idValue(t.id), nil)
		x.putRecord(t)
	}
	deadline := t.rec.deadline
	return deadline, x.finish()
}

// Complete finishes a leased task: it is removed for good. The worker has
// already written the memoized object and marked it ready. The result is
// not stored (the matching cache records rows and bytes); ctx is unused.
func (q *Queue) Complete(_ context.Context, leaseID string, res Result) error {
	if res.Rows < 0 || res.Bytes < 0 {
		return fmt.Errorf("%w: negative result %+v", ErrInvalid, res)
	}
	x, err := q.begin()
	if err != nil {
		return err
	}
	l, err := q.lookup(leaseID)
	if err != nil {
		if l != nil {
			delete(q.leases, leaseID) // cancelled: its holder has now heard
		}
		x.abort()
		return err
	}
	t := l.t
	if d := x.now.Sub(t.rec.leasedAt).Seconds(); d > 0 {
		// Lease-to-complete time is what a worker spends per task, whether
		// it runs in process or remotely: the autoscaler's task cost.
		if !q.haveCost {
			q.stats.MeanTaskSeconds, q.haveCost = d, true
		} else {
			a := q.opts.CostSmoothing
			q.stats.MeanTaskSeconds = a*d + (1-a)*q.stats.MeanTaskSeconds
		}
	}
	x.endLease(l)
	x.dropTask(t)
	q.stats.Completed++
	return x.finish()
}

// Fail reports a failed run: the task's attempts grow by one and it is
// requeued, or quarantined with cause once attempts reach MaxAttempts.
// ctx is unused.
func (q *Queue) Fail(_ context.Context, leaseID string, cause string) (quarantined bool, err error) {
	x, err := q.begin()
	if err != nil {
		return false, err
	}
	l, err := q.lookup(leaseID)
	if err != nil {
		if l != nil {
			delete(q.leases, leaseID)
		}
		x.abort()
		return false, err
	}
	quarantined = x.failLeased(l, cause)
	return quarantined, x.finish()
}

// Return gives a leased task back without counting an attempt: it never
// ran (the caller that asked for it went away before receiving it). It goes
// back to its old place in the queues.
func (q *Queue) Return(leaseID string) error {
	x, err := q.begin()
	if err != nil {
		return err
	}
	l, err := q.lookup(leaseID)
	if err != nil {
		if l != nil {
			delete(q.leases, leaseID)
		}
		x.abort()
		return err
	}
	t := l.t
	x.endLease(l)
	t.rec.state = StateQueued
	t.rec.since = x.now
	x.enqueueItems(t)
	x.putRecord(t)
	return x.finish()
}

// ExpireLeases returns every task whose lease deadline is not after now to
// the queues, counting a failed attempt (a task that kills its worker is
// eventually quarantined). Run calls it periodically; tests call it with a
// chosen time. It returns how many leases expired.
func (q *Queue) ExpireLeases(now time.Time) (int, error) {
	x, err := q.begin()
	if err != nil {
		return 0, err
	}
	var due []*lease
	for _, l := range q.leases {
		if !l.t.rec.deadline.After(now) {
			due = append(due, l)
		}
	}
	// Deterministic order: requeued tasks get sequence numbers in deadline
	// order.
	sort.Slice(due, func(i, j int) bool {
		a, b := due[i].t.rec.deadline, due[j].t.rec.deadline
		if !a.Equal(b) {
			return a.Before(b)
		}
		return due[i].id < due[j].id
	})
	n := 0
	for _, l := range due {
		if l.cancelled {
			delete(q.leases, l.id)
			continue
		}
		r := &l.t.rec
		x.failLeased(l, fmt.Sprintf("lease %s expired: worker %s sent no heartbeat by %s", l.id, r.worker, r.deadline.UTC().Format(time.RFC3339Nano)))
		q.stats.Expired++
		n++
	}
	return n, x.finish()
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
	x, err := q.begin()
	if err != nil {
		return false, err
	}
	t := q.quarantine[id]
	if t == nil {
		x.abort()
		return false, nil
	}
	delete(q.quarantine, id)
	x.b.Delete(quarantineKey(id), nil)
	t.rec.state = StateQueued
	t.rec.attempts = 0
	t.rec.err = ""
	t.rec.since = x.now
	t.rec.seq = x.nextSeq()
	x.enqueueItems(t)
	x.putRecord(t)
	x.events = append(x.events, Event{Kind: EventReleased, Task: t.snapshot()})
	return true, x.finish()
}

// ListQuarantine returns the quarantined tasks with their errors, by id.
func (q *Queue) ListQuarantine() []Task {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]Task, 0, len(q.quarantine))
	for _, t := range sortedTasks(q.quarantine) {
		out = append(out, t.snapshot())
	}
	return out
}

// Get returns a task's current snapshot.
func (q *Queue) Get(id TaskID) (Task, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	t := q.tasks[id]
	if t == nil {
		return Task{}, false
	}
	return t.snapshot(), true
}

// Depths returns queued and leased counts per (client, priority), sorted by
// client then priority, highest first. For metrics and ListQueues.
func (q *Queue) Depths() []Depth {
	q.mu.Lock()
	defer q.mu.Unlock()
	type cp struct {
		client string
		prio   int32
	}
	m := make(map[cp]*Depth)
	get := func(c string, p int32) *Depth {
		d := m[cp{c, p}]
		if d == nil {
			d = &Depth{Client: c, Priority: p}
			m[cp{c, p}] = d
		}
		return d
	}
	for c, cq := range q.queues {
		for _, it := range cq.items {
			get(c, it.prio).Queued++
		}
	}
	for _, l := range q.leases {
		if !l.cancelled {
			get(l.t.rec.client, l.t.rec.priority).Leased++
		}
	}
	out := make([]Depth, 0, len(m))
	for _, d := range m {
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Client != out[j].Client {
			return out[i].Client < out[j].Client
		}
		return out[i].Priority > out[j].Priority
	})
	return out
}

// QueuedPeak returns the most distinct tasks that were queued at once since
// its previous call (since Open for the first), and starts the next
// interval at the number queued now. A sampler that reads the depth every
// few seconds misses a burst queued and drained between two reads; one that
// reads QueuedPeak does not. It is for one sampler (the web UI's queue
// chart): a second caller would take the first one's peaks.
func (q *Queue) QueuedPeak() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	p := max(q.peakQueued, q.nQueued)
	q.peakQueued = q.nQueued
	return p
}

// Backlog is the work outstanding: distinct queued tasks plus leased ones.
// It is what the autoscaler sizes the pool for.
func (q *Queue) Backlog() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.nQueued + q.nLeased
}

// MeanTaskSeconds is the moving average of successful tasks' lease-to-
// completion time; 0 before the first.
func (q *Queue) MeanTaskSeconds() float64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.stats.MeanTaskSeconds
}

// Stats returns the queue's counters.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.stats
	s.Queued, s.Leased, s.Quarantined = q.nQueued, q.nLeased, len(q.quarantine)
	return s
}

// dump renders the whole state deterministically, for tests: two queues
// with equal dumps hold the same tasks in the same places.
func (q *Queue) dump() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var b strings.Builder
	clients := make([]string, 0, len(q.queues))
	for c := range q.queues {
		clients = append(clients, c)
	}
	sort.Strings(clients)
	for _, c := range clients {
		items := append([]*qitem(nil), q.queues[c].items...)
		sort.Slice(items, func(i, j int) bool {
			if items[i].prio != items[j].prio {
				return items[i].prio > items[j].prio
			}
			return items[i].t.rec.seq < items[j].t.rec.seq
		})
		fmt.Fprintf(&b, "queue %s:", c)
		for _, it := range items {
			fmt.Fprintf(&b, " %s@%d", it.t.id, it.prio)
		}
		b.WriteByte('\n')
	}
	for _, t := range sortedTasks(q.tasks) {
		r := &t.rec
		fmt.Fprintf(&b, "task %s %s seq=%d attempts=%d since=%d req=%v", t.id, r.state, r.seq, r.attempts, r.since.UnixNano(), r.requesters)
		if r.state == StateLeased {
			fmt.Fprintf(&b, " lease=%s worker=%s from=%s@%d deadline=%d", r.leaseID, r.worker, r.client, r.priority, r.deadline.UnixNano())
		}
		if r.err != "" {
			fmt.Fprintf(&b, " err=%q", r.err)
		}
		b.WriteByte('\n')
	}
	pks := make([]pipeKey, 0, len(q.pipelines))
	for pk := range q.pipelines {
		pks = append(pks, pk)
	}
	sort.Slice(pks, func(i, j int) bool {
		if pks[i].client != pks[j].client {
			return pks[i].client < pks[j].client
		}
		return pks[i].pipeline < pks[j].pipeline
	})
	for _, pk := range pks {
		fmt.Fprintf(&b, "pipeline %s/%s:", pk.client, pk.pipeline)
		for _, t := range sortedTasks(q.pipelines[pk]) {
			fmt.Fprintf(&b, " %s", t.id)
		}
		b.WriteByte('\n')
	}
	prios := make([]int, 0, len(q.fair.Last))
	for p := range q.fair.Last {
		prios = append(prios, int(p))
	}
	sort.Ints(prios)
	b.WriteString("fairness:")
	for _, p := range prios {
		fmt.Fprintf(&b, " %d:%s", p, q.fair.Last[int32(p)])
	}
	b.WriteByte('\n')
	fmt.Fprintf(&b, "counts queued=%d leased=%d quarantined=%d\n", q.nQueued, q.nLeased, len(q.quarantine))
	return b.String()
}
