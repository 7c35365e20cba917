package workers

import (
	"bytes"
	"container/heap"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The queue's state machine. state holds every task and index (per-client
// heaps, the pipeline index, leases, quarantine, fairness, counters) and
// knows every rule: scheduling, priorities, leases, attempts, quarantine.
// It has no Pebble, no locks and no clock: the time of a change comes in
// with it. Its only mutator is apply, which performs one op and returns
// the records the change writes and deletes, in the store's layout
// (layout.go), and the events it causes. The store (queue.go) takes the
// locks, reads the clock, calls apply, writes the records in one Pebble
// batch and emits the events; on Open it replays the stored records
// through apply too (opRestore, see "restore" below), so the code that
// changes the state at run time is the code that rebuilds it. This is
// tf.data service's dispatcher state ("all state modifications must be
// done via Apply", the journal kept apart and replayed through Apply at
// start) and etcd raft's pure state machine whose caller does the I/O;
// testdata/state drives it alone.

// stateConfig is what the state's rules depend on besides the ops.
type stateConfig struct {
	LeaseTTL    time.Duration
	MaxAttempts int
	// CostSmoothing is the weight of the newest duration in MeanTaskSeconds.
	CostSmoothing float64
	// Nonce starts every lease id: a per-Open random value, so that a lease
	// id is never reused across restarts (lease ids are nonce-counter).
	Nonce uint64
}

// opKind says what an op does.
type opKind uint8

const (
	opEnqueue        opKind = iota + 1 // reqs
	opSetPriority                      // client, pipeline, priority
	opRemovePipeline                   // client, pipeline
	opCancel                           // id
	opRelease                          // id
	opLease                            // worker, build, maxTasks
	opHeartbeat                        // lease
	opComplete                         // lease
	opFail                             // lease, cause
	opReturn                           // lease
	opExpire                           // due
	opTakePeak                         // (nothing: resets the queued peak)
	opRestore                          // key, value: one stored record, at Open
	opRestoreEnd                       // (nothing: the replay is over; checks it)
	opBan                              // build, cause
	opLift                             // build
	opQuarantine                       // id, cause
)

// op is one change to the state, with everything it depends on: its
// arguments, and the time it happens (now; the store's clock).
type op struct {
	kind     opKind
	now      time.Time
	reqs     []Request
	id       TaskID
	client   string
	pipeline string
	priority int32
	worker   string
	// build: the worker build leasing (lease; "" for one that does not
	// say), banned (ban) or let lease again (lift).
	build string
	lease string
	cause string
	// maxTasks: the most tasks a lease takes (lease; below 1: one): the
	// task the scheduler picks and queued tasks of its raw block (a batch).
	maxTasks int
	// due: leases whose deadline is not after it expire.
	due time.Time
	// key, value: a stored record being restored. The state copies what it
	// keeps, so the store may pass its iterator's buffers.
	key, value []byte
}

// write is one record the change writes: key set to value, or deleted.
type write struct {
	key, value []byte
	del        bool
}

// result is what apply returns: the answer to the op, and the change to
// make durable.
type result struct {
	// n: tasks created (enqueue), moved (set-priority), cancelled
	// (remove-pipeline), leases expired (expire), the queued peak
	// (take-peak), leases revoked (ban).
	n int
	// ok: the task existed (cancel), was quarantined (release), a task
	// was leased (lease), the build was not banned before (ban), or was
	// (lift), a queued task was quarantined (quarantine).
	ok    bool
	lease Lease // lease: the first of batch
	// batch: every task the lease took (lease), the scheduler's pick
	// first, each with its own lease.
	batch       []Lease
	deadline    time.Time // heartbeat
	quarantined bool      // fail
	// err refuses the op (ErrLeaseLost, ErrCancelled, a BannedError), or says a restored
	// record is unreadable or disagrees with the others (ErrCorrupt,
	// ErrFormat); the state may still have changed in memory (a cancelled
	// lease is forgotten once its holder has heard), but there is nothing
	// to write.
	err error
	// writes are the records to write, in order. They are the state's
	// buffer: valid until the next apply.
	writes []write
	// events are the notifications the change causes, to emit once the
	// writes are durable.
	events []Event
	// wake: a task was queued; waiting leasers should look again.
	wake bool
}

// task is one task record and its places in the indexes.
type task struct {
	id    TaskID
	sid   storedID // id as the store holds it; the value of its q and l keys
	rec   record
	items []*qitem // when queued: one per requesting client
	// blockPos is the task's index in state.blocks of its raw block, when
	// queued.
	blockPos int
	lease    *lease // when leased
}

type lease struct {
	id string
	t  *task
	// cancelled: the task was cancelled while leased. The record is gone;
	// the lease lingers in memory so that its holder learns ErrCancelled.
	cancelled bool
}

type pipeKey struct{ client, pipeline string }

type state struct {
	cfg        stateConfig
	tasks      map[TaskID]*task
	queues     map[string]*clientQueue // non-empty queues only
	pipelines  map[pipeKey]map[TaskID]*task
	leases     map[string]*lease
	quarantine map[TaskID]*task
	// blocks holds the queued tasks by raw block id (TaskID.Block's ID,
	// whatever the input version), in no order (task.blockPos is each
	// one's index): where a batch lease finds the tasks that join the one
	// the scheduler picked. Memory only: it is what the task records say,
	// and placing them at a replay rebuilds it. A slice rather than a set
	// keeps the common block of one queued task to one small allocation.
	blocks map[string][]*task
	// bans are the worker builds refused leases, by build.
	bans   map[string]Ban
	fair   Fairness
	seq    uint64
	leaseN uint64
	// leasePrefix is the nonce part of every lease id.
	leasePrefix string
	nQueued     int
	nLeased     int // leases not cancelled
	// peakQueued is the largest nQueued since the last opTakePeak.
	peakQueued int
	// stats holds the counters; Queued, Leased and Quarantined are filled
	// in by statsSnapshot.
	stats    Stats
	haveCost bool
	heads    []Head // scratch

	// restoring checks a replay of the store's records (opRestore) until
	// opRestoreEnd; nil at other times.
	restoring *restoreCheck
	// changed: an op other than a restore has been applied, so the state
	// is no longer what the records alone say and a replay may not start.
	changed bool

	// The change being applied.
	now    time.Time
	writes []write
	events []Event
	wake   bool
}

func newState(cfg stateConfig) *state {
	return &state{
		cfg:         cfg,
		tasks:       make(map[TaskID]*task),
		queues:      make(map[string]*clientQueue),
		pipelines:   make(map[pipeKey]map[TaskID]*task),
		leases:      make(map[string]*lease),
		quarantine:  make(map[TaskID]*task),
		blocks:      make(map[string][]*task),
		bans:        make(map[string]Ban),
		fair:        Fairness{Last: make(map[int32]string)},
		leasePrefix: fmt.Sprintf("%016x-", cfg.Nonce),
	}
}

// apply performs one op: the only way the state changes.
func (s *state) apply(o *op) result {
	// A replay comes first and whole: a change applied in the middle of it
	// would act on half-built indexes, and records replayed after a change
	// would describe a state that is gone. Either is a bug in the store.
	switch o.kind {
	case opRestore, opRestoreEnd:
		if s.changed {
			panic("workers: restoring records into a state that has changed since")
		}
	default:
		if s.restoring != nil {
			panic("workers: a change applied during the replay of the store")
		}
		s.changed = true
	}
	s.now = o.now
	s.writes = s.writes[:0]
	s.events = nil // handed to the store, which emits them after unlocking
	s.wake = false
	var r result
	switch o.kind {
	case opEnqueue:
		r.n = s.enqueue(o.reqs)
	case opSetPriority:
		r.n = s.setPriority(o.client, o.pipeline, o.priority)
	case opRemovePipeline:
		r.n = s.removePipeline(o.client, o.pipeline)
	case opCancel:
		r.ok = s.cancel(o.id)
	case opRelease:
		r.ok = s.release(o.id)
	case opLease:
		r.batch, r.err = s.lease(o.worker, o.build, o.maxTasks)
		if r.ok = len(r.batch) > 0; r.ok {
			r.lease = r.batch[0]
		}
	case opHeartbeat:
		r.deadline, r.err = s.heartbeat(o.lease)
	case opComplete:
		r.err = s.complete(o.lease)
	case opFail:
		r.quarantined, r.err = s.fail(o.lease, o.cause)
	case opReturn:
		r.err = s.giveBack(o.lease)
	case opExpire:
		r.n = s.expire(o.due)
	case opTakePeak:
		r.n = max(s.peakQueued, s.nQueued)
		s.peakQueued = s.nQueued
	case opRestore:
		r.err = s.restore(o.key, o.value)
	case opRestoreEnd:
		r.err = s.endRestore()
	case opBan:
		r.ok, r.n = s.ban(o.build, o.cause)
	case opLift:
		r.ok = s.lift(o.build)
	case opQuarantine:
		r.ok = s.quarantineNow(o.id, o.cause)
	default:
		panic(fmt.Sprintf("workers: unknown op %d", o.kind))
	}
	r.writes, r.events, r.wake = s.writes, s.events, s.wake
	return r
}

// ------------------------------------------------------------ records

func (s *state) set(k, v []byte) { s.writes = append(s.writes, write{key: k, value: v}) }
func (s *state) del(k []byte)    { s.writes = append(s.writes, write{key: k, del: true}) }

func (s *state) putRecord(t *task) { s.set(taskKey(t.sid), t.rec.encode()) }

func (s *state) nextSeq() uint64 {
	s.seq++
	return s.seq
}

// ------------------------------------------------------------ indexes

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
func (s *state) enqueueItems(t *task) {
	for _, h := range clientPriorities(t.rec.requesters) {
		s.pushItem(t, h.Client, h.Priority)
	}
	b := t.id.Block.ID()
	t.blockPos = len(s.blocks[b])
	s.blocks[b] = append(s.blocks[b], t)
	s.nQueued++
	s.peakQueued = max(s.peakQueued, s.nQueued)
}

func (s *state) pushItem(t *task, client string, prio int32) {
	cq := s.queues[client]
	if cq == nil {
		cq = &clientQueue{}
		s.queues[client] = cq
	}
	it := &qitem{t: t, client: client, prio: prio}
	heap.Push(cq, it)
	t.items = append(t.items, it)
	s.set(queueKey(client, prio, t.rec.seq), t.sid)
	s.wake = true
}

func (s *state) removeItem(it *qitem) {
	cq := s.queues[it.client]
	heap.Remove(cq, it.idx)
	if cq.Len() == 0 {
		delete(s.queues, it.client)
	}
	s.del(queueKey(it.client, it.prio, it.t.rec.seq))
}

// dequeueItems takes a queued task out of every client queue.
func (s *state) dequeueItems(t *task) {
	for _, it := range t.items {
		s.removeItem(it)
	}
	t.items = nil
	b := t.id.Block.ID()
	ts := s.blocks[b]
	last := ts[len(ts)-1]
	ts[t.blockPos], last.blockPos = last, t.blockPos
	ts[len(ts)-1] = nil
	if ts = ts[:len(ts)-1]; len(ts) == 0 {
		delete(s.blocks, b)
	} else {
		s.blocks[b] = ts
	}
	s.nQueued--
}

// syncClient makes t's place in client's queue match its requesters after
// they changed; it reports whether the place moved.
func (s *state) syncClient(t *task, client string) bool {
	want, ok := clientPriority(t.rec.requesters, client)
	for i, it := range t.items {
		if it.client != client {
			continue
		}
		if !ok {
			s.removeItem(it)
			t.items = append(t.items[:i], t.items[i+1:]...)
			return true
		}
		if it.prio == want {
			return false
		}
		s.del(queueKey(client, it.prio, t.rec.seq))
		it.prio = want
		heap.Fix(s.queues[client], it.idx)
		s.set(queueKey(client, want, t.rec.seq), t.sid)
		return true
	}
	if ok {
		s.pushItem(t, client, want)
		return true
	}
	return false
}

func (s *state) addPipe(t *task, client, pipeline string) {
	pk := pipeKey{client, pipeline}
	m := s.pipelines[pk]
	if m == nil {
		m = make(map[TaskID]*task)
		s.pipelines[pk] = m
	}
	m[t.id] = t
	s.set(pipelineKey(client, pipeline, t.sid), nil)
}

func (s *state) delPipe(t *task, client, pipeline string) {
	pk := pipeKey{client, pipeline}
	if m := s.pipelines[pk]; m != nil {
		delete(m, t.id)
		if len(m) == 0 {
			delete(s.pipelines, pk)
		}
	}
	s.del(pipelineKey(client, pipeline, t.sid))
}

// dropTask deletes a task that is out of its queues, lease and quarantine.
func (s *state) dropTask(t *task) {
	for _, r := range t.rec.requesters {
		s.delPipe(t, r.Client, r.Pipeline)
	}
	delete(s.tasks, t.id)
	s.del(taskKey(t.sid))
}

// cancelTask removes a task in any state.
func (s *state) cancelTask(t *task) {
	switch t.rec.state {
	case StateQueued:
		s.dequeueItems(t)
	case StateLeased:
		t.lease.cancelled = true
		s.del(leaseKey(t.rec.deadline, t.lease.id))
		s.nLeased--
	case StateQuarantined:
		s.leaveQuarantine(t)
	}
	s.dropTask(t)
}

// holdLease enters the lease of a task whose record says it is leased
// (lease, restore): the lease index, by id in memory and by deadline in
// the store.
func (s *state) holdLease(l *lease) {
	t := l.t
	t.lease = l
	s.leases[l.id] = l
	s.nLeased++
	s.set(leaseKey(t.rec.deadline, l.id), t.sid)
}

// enterQuarantine enters a task whose record says it is quarantined
// (failLeased, restore) in the quarantine index; leaveQuarantine takes it
// out.
func (s *state) enterQuarantine(t *task) {
	s.quarantine[t.id] = t
	s.set(quarantineKey(t.sid), nil)
}

func (s *state) leaveQuarantine(t *task) {
	delete(s.quarantine, t.id)
	s.del(quarantineKey(t.sid))
}

// endLease forgets a lease (not cancelled) whose task stays.
func (s *state) endLease(l *lease) {
	t := l.t
	delete(s.leases, l.id)
	s.del(leaseKey(t.rec.deadline, l.id))
	s.nLeased--
	t.lease = nil
	t.rec.leaseID, t.rec.worker, t.rec.client, t.rec.build = "", "", "", ""
	t.rec.priority = 0
	t.rec.deadline, t.rec.leasedAt = time.Time{}, time.Time{}
}

// failLeased counts a failed attempt of a leased task and requeues or
// quarantines it. A requeued task goes to the back of its priority: a task
// that keeps failing must not starve the tasks behind it.
func (s *state) failLeased(l *lease, cause string) (quarantined bool) {
	t := l.t
	s.endLease(l)
	t.rec.attempts++
	t.rec.err = clip(cause)
	t.rec.since = s.now
	s.stats.Failures++
	if t.rec.attempts >= s.cfg.MaxAttempts {
		t.rec.state = StateQuarantined
		s.enterQuarantine(t)
		s.stats.Quarantines++
		s.events = append(s.events, Event{Kind: EventQuarantined, Task: t.snapshot()})
	} else {
		t.rec.state = StateQueued
		t.rec.seq = s.nextSeq()
		s.enqueueItems(t)
	}
	s.putRecord(t)
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
	return Lease{ID: l.id, Task: l.t.snapshot(), Worker: r.worker, Build: r.build, Client: r.client, Priority: r.priority, Deadline: r.deadline}
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
		// The order of their keys (layout.go): the memo block's name.
		return a.Block.String() < b.Block.String()
	})
	return out
}

// ---------------------------------------------------------- producers

// enqueue: see Queue.Enqueue.
func (s *state) enqueue(reqs []Request) (created int) {
	for _, r := range reqs {
		t := s.tasks[r.Task]
		if t == nil {
			t = &task{id: r.Task, sid: storeID(r.Task), rec: record{
				state:      StateQueued,
				seq:        s.nextSeq(),
				since:      s.now,
				requesters: []Requester{{Client: r.Client, Pipeline: r.Pipeline, Priority: r.Priority}},
			}}
			s.tasks[r.Task] = t
			s.addPipe(t, r.Client, r.Pipeline)
			s.putRecord(t)
			s.enqueueItems(t)
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
			s.addPipe(t, r.Client, r.Pipeline)
		}
		s.putRecord(t)
		if t.rec.state == StateQueued {
			s.syncClient(t, r.Client)
		}
	}
	return created
}

// setPriority: see Queue.SetPriority.
func (s *state) setPriority(client, pipeline string, priority int32) (moved int) {
	for _, t := range sortedTasks(s.pipelines[pipeKey{client, pipeline}]) {
		i := findRequester(t.rec.requesters, client, pipeline)
		if t.rec.requesters[i].Priority == priority {
			continue
		}
		t.rec.requesters[i].Priority = priority
		s.putRecord(t)
		if t.rec.state == StateQueued && s.syncClient(t, client) {
			moved++
		}
	}
	return moved
}

// removePipeline: see Queue.RemovePipeline.
func (s *state) removePipeline(client, pipeline string) (cancelled int) {
	for _, t := range sortedTasks(s.pipelines[pipeKey{client, pipeline}]) {
		if len(t.rec.requesters) == 1 {
			s.cancelTask(t)
			cancelled++
			continue
		}
		i := findRequester(t.rec.requesters, client, pipeline)
		t.rec.requesters = append(t.rec.requesters[:i], t.rec.requesters[i+1:]...)
		s.delPipe(t, client, pipeline)
		s.putRecord(t)
		if t.rec.state == StateQueued {
			s.syncClient(t, client)
		}
	}
	return cancelled
}

// cancel: see Queue.Cancel.
func (s *state) cancel(id TaskID) bool {
	t := s.tasks[id]
	if t == nil {
		return false
	}
	s.cancelTask(t)
	return true
}

// ---------------------------------------------------------- consumers

// lease takes the next task for worker, running build, and with it, when
// maxTasks > 1, up to maxTasks-1 other queued tasks of the same raw block:
// a batch, which a worker runs reading the block's raw columns once (issue
// 28). It returns nothing when nothing is queued; a banned build is
// refused (a BannedError) whatever is queued.
//
// The first task is the one a lease of one task would take: the
// scheduler (Schedule) picks the client, the client's queue gives its
// first task. Its priority is the highest of any queued task (Schedule
// serves the highest head, and a head is its queue's highest), so the
// batch is leased at the highest priority among its tasks. The others
// join whatever their clients and priorities: the raw columns they need
// are being read anyway. They join highest priority first, then oldest
// (as a queue serves them), when more are queued than fit.
//
// Fairness is counted in leases, as without batches: the lease is one
// turn of the first task's client, whose cursor moves as before, and
// tasks of other clients that join ride along without using their
// clients' turns (they lose nothing by being served early). So a client
// with many tasks of one block takes at most maxTasks of them in a turn,
// and the next lease goes to the next client in the round
// (testdata/schedule/batch.txt). A batch's tasks leave every queue they
// were in.
//
// Each task gets a lease of its own, recorded as a lease of one task is:
// heartbeats, completions, failures and expiries stay per task, so a
// worker killed mid-batch leaves leases that expire one by one and every
// task is leased again; nothing in the store says which tasks were
// leased together, and nothing needs to.
func (s *state) lease(worker, build string, maxTasks int) ([]Lease, error) {
	if b, ok := s.bans[build]; ok && build != "" {
		return nil, &BannedError{Ban: b}
	}
	if len(s.queues) == 0 {
		return nil, nil
	}
	heads := s.heads[:0]
	for c, cq := range s.queues {
		heads = append(heads, Head{Client: c, Priority: cq.items[0].prio})
	}
	s.heads = heads
	client, fair, _ := Schedule(heads, s.fair)
	s.fair = fair
	head := s.queues[client].items[0]
	// The round-robin cursor is persisted so a restart does not hand the
	// next turn back to the first client by name.
	s.set(fairnessKey(head.prio), []byte(client))
	batch := []Lease{s.leaseTask(head.t, worker, build, client, head.prio)}
	if maxTasks > 1 {
		for _, t := range s.joiners(head.t.id.Block.ID(), maxTasks-1) {
			best := bestItem(t.items)
			batch = append(batch, s.leaseTask(t, worker, build, best.client, best.prio))
		}
	}
	return batch, nil
}

// joiners returns up to n queued tasks of the raw block id, in the order
// they join a batch: highest priority first (a task's highest in any
// client's queue), then oldest.
func (s *state) joiners(id string, n int) []*task {
	if len(s.blocks[id]) == 0 {
		return nil
	}
	ts := slices.Clone(s.blocks[id])
	prio := func(t *task) int32 { return bestItem(t.items).prio }
	sort.Slice(ts, func(i, j int) bool {
		if pi, pj := prio(ts[i]), prio(ts[j]); pi != pj {
			return pi > pj
		}
		return ts[i].rec.seq < ts[j].rec.seq
	})
	return ts[:min(n, len(ts))]
}

// bestItem is the place of a queued task where it ranks highest: its
// highest priority in any client's queue, the first client by name among
// equals. A task that joins a batch is recorded as leased from there.
func bestItem(items []*qitem) *qitem {
	best := items[0]
	for _, it := range items[1:] {
		if it.prio > best.prio || (it.prio == best.prio && it.client < best.client) {
			best = it
		}
	}
	return best
}

// leaseTask leases a queued task to worker, taken from client's queue at
// prio: it leaves every queue it was in and holds a lease of its own
// until now + LeaseTTL.
func (s *state) leaseTask(t *task, worker, build, client string, prio int32) Lease {
	s.dequeueItems(t)
	s.leaseN++
	// The id is "%016x-%d" of nonce and counter, built without fmt: this
	// is the hot path of every task.
	var idb [48]byte
	l := &lease{id: string(strconv.AppendUint(append(idb[:0], s.leasePrefix...), s.leaseN, 10)), t: t}
	t.rec.state = StateLeased
	t.rec.since = s.now
	t.rec.leaseID = l.id
	t.rec.worker = worker
	t.rec.build = build
	t.rec.client = client
	t.rec.priority = prio
	t.rec.leasedAt = s.now
	t.rec.deadline = s.now.Add(s.cfg.LeaseTTL)
	s.putRecord(t)
	s.holdLease(l)
	return l.snapshot()
}

// lookup finds a live lease for the lease protocol's calls. It changes
// nothing.
func (s *state) lookup(leaseID string) (*lease, error) {
	l := s.leases[leaseID]
	switch {
	case l == nil:
		return nil, fmt.Errorf("%w: %q", ErrLeaseLost, leaseID)
	case l.cancelled:
		return l, fmt.Errorf("%w: %s (lease %s)", ErrCancelled, l.t.id, leaseID)
	}
	return l, nil
}

// finishing looks up a lease its holder is finishing (Complete, Fail,
// Return). A cancelled lease is forgotten: its holder has now heard.
func (s *state) finishing(leaseID string) (*lease, error) {
	l, err := s.lookup(leaseID)
	if err != nil && l != nil {
		delete(s.leases, leaseID)
	}
	return l, err
}

// heartbeat extends a lease to now + LeaseTTL. A lease is valid until an
// expiry finds it past its deadline, so a late heartbeat still saves it if
// no expiry ran in between.
func (s *state) heartbeat(leaseID string) (time.Time, error) {
	l, err := s.lookup(leaseID)
	if err != nil {
		return time.Time{}, err
	}
	t := l.t
	if d := s.now.Add(s.cfg.LeaseTTL); d.After(t.rec.deadline) {
		s.del(leaseKey(t.rec.deadline, l.id))
		t.rec.deadline = d
		s.set(leaseKey(d, l.id), t.sid)
		s.putRecord(t)
	}
	return t.rec.deadline, nil
}

// complete removes a leased task for good, and feeds its lease-to-complete
// time to the task cost.
func (s *state) complete(leaseID string) error {
	l, err := s.finishing(leaseID)
	if err != nil {
		return err
	}
	t := l.t
	if d := s.now.Sub(t.rec.leasedAt).Seconds(); d > 0 {
		// Lease-to-complete time is what a worker spends per task, whether
		// it runs in process or remotely: the autoscaler's task cost.
		if !s.haveCost {
			s.stats.MeanTaskSeconds, s.haveCost = d, true
		} else {
			a := s.cfg.CostSmoothing
			s.stats.MeanTaskSeconds = a*d + (1-a)*s.stats.MeanTaskSeconds
		}
	}
	s.endLease(l)
	s.dropTask(t)
	s.stats.Completed++
	return nil
}

// fail counts a failed run: requeued, or quarantined at MaxAttempts.
func (s *state) fail(leaseID, cause string) (quarantined bool, err error) {
	l, err := s.finishing(leaseID)
	if err != nil {
		return false, err
	}
	return s.failLeased(l, cause), nil
}

// giveBack returns a leased task that never ran to its old place in the
// queues, without counting an attempt.
func (s *state) giveBack(leaseID string) error {
	l, err := s.finishing(leaseID)
	if err != nil {
		return err
	}
	s.requeueLeased(l)
	return nil
}

// requeueLeased ends a live lease and puts its task back in the queues,
// without counting an attempt (giveBack, ban).
func (s *state) requeueLeased(l *lease) {
	t := l.t
	s.endLease(l)
	t.rec.state = StateQueued
	t.rec.since = s.now
	s.enqueueItems(t)
	s.putRecord(t)
}

// ban refuses build every lease from now on (Queue.BanBuild) and takes
// back the tasks it holds, without counting an attempt: a build whose
// output sigd found wrong would write them wrong too (issue 27). Their
// holders hear ErrLeaseLost at their next call. It reports whether the
// build was not banned already (a ban again keeps the first's reason and
// time) and how many leases it revoked.
func (s *state) ban(build, reason string) (added bool, revoked int) {
	if _, ok := s.bans[build]; !ok {
		b := Ban{Build: build, Reason: clip(reason), Since: s.now}
		s.bans[build] = b
		s.set(banKey(build), encodeBan(b))
		added = true
	}
	var held []*lease
	for _, l := range s.leases {
		if !l.cancelled && l.t.rec.build == build {
			held = append(held, l)
		}
	}
	// Deterministic order: the requeued tasks' places follow it.
	sort.Slice(held, func(i, j int) bool { return held[i].id < held[j].id })
	for _, l := range held {
		s.requeueLeased(l)
	}
	return added, len(held)
}

// lift lets a banned build lease again (Queue.LiftBan); it reports
// whether it was banned.
func (s *state) lift(build string) bool {
	if _, ok := s.bans[build]; !ok {
		return false
	}
	delete(s.bans, build)
	s.del(banKey(build))
	return true
}

// expire returns every task whose lease deadline is not after due to the
// queues, counting a failed attempt, and reports how many.
func (s *state) expire(due time.Time) int {
	var overdue []*lease
	for _, l := range s.leases {
		if !l.t.rec.deadline.After(due) {
			overdue = append(overdue, l)
		}
	}
	// Deterministic order: requeued tasks get sequence numbers in deadline
	// order.
	sort.Slice(overdue, func(i, j int) bool {
		a, b := overdue[i].t.rec.deadline, overdue[j].t.rec.deadline
		if !a.Equal(b) {
			return a.Before(b)
		}
		return overdue[i].id < overdue[j].id
	})
	n := 0
	for _, l := range overdue {
		if l.cancelled {
			delete(s.leases, l.id)
			continue
		}
		r := &l.t.rec
		s.failLeased(l, fmt.Sprintf("lease %s expired: worker %s sent no heartbeat by %s", l.id, r.worker, r.deadline.UTC().Format(time.RFC3339Nano)))
		s.stats.Expired++
		n++
	}
	return n
}

// quarantineNow quarantines a queued task with cause, as MaxAttempts
// failures would (Queue.Quarantine). A task leased meanwhile is left to its
// worker; it reports whether it quarantined it.
func (s *state) quarantineNow(id TaskID, cause string) bool {
	t := s.tasks[id]
	if t == nil || t.rec.state != StateQueued {
		return false
	}
	s.dequeueItems(t)
	t.rec.state = StateQuarantined
	t.rec.err = clip(cause)
	t.rec.since = s.now
	s.enterQuarantine(t)
	s.putRecord(t)
	s.stats.Quarantines++
	s.events = append(s.events, Event{Kind: EventQuarantined, Task: t.snapshot()})
	return true
}

// release puts a quarantined task back in the queues with its attempts
// reset.
func (s *state) release(id TaskID) bool {
	t := s.quarantine[id]
	if t == nil {
		return false
	}
	s.leaveQuarantine(t)
	t.rec.state = StateQueued
	t.rec.attempts = 0
	t.rec.err = ""
	t.rec.since = s.now
	t.rec.seq = s.nextSeq()
	s.enqueueItems(t)
	s.putRecord(t)
	s.events = append(s.events, Event{Kind: EventReleased, Task: t.snapshot()})
	return true
}

// ------------------------------------------------------------ queries
//
// These read the state and change nothing.

func (s *state) get(id TaskID) (Task, bool) {
	t := s.tasks[id]
	if t == nil {
		return Task{}, false
	}
	return t.snapshot(), true
}

func (s *state) listQuarantine() []Task {
	out := make([]Task, 0, len(s.quarantine))
	for _, t := range sortedTasks(s.quarantine) {
		out = append(out, t.snapshot())
	}
	return out
}

// listBans returns the bans by build.
func (s *state) listBans() []Ban {
	out := make([]Ban, 0, len(s.bans))
	for _, b := range s.bans {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Build < out[j].Build })
	return out
}

func (s *state) depths() []Depth {
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
	for c, cq := range s.queues {
		for _, it := range cq.items {
			get(c, it.prio).Queued++
		}
	}
	for _, l := range s.leases {
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

func (s *state) statsSnapshot() Stats {
	st := s.stats
	st.Queued, st.Leased, st.Quarantined = s.nQueued, s.nLeased, len(s.quarantine)
	return st
}

// queuedFor is the length of client's queue.
func (s *state) queuedFor(client string) int {
	if cq := s.queues[client]; cq != nil {
		return cq.Len()
	}
	return 0
}

// admit: see Queue.Admit; limit > 0.
func (s *state) admit(client string, ids []TaskID, limit int) error {
	adding := 0
	seen := make(map[TaskID]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		// A task enters the client's queue unless it is there already,
		// or leased or quarantined (the client becomes a requester only).
		t := s.tasks[id]
		if t == nil || (t.rec.state == StateQueued && !slices.ContainsFunc(t.items, func(it *qitem) bool { return it.client == client })) {
			adding++
		}
	}
	if queued := s.queuedFor(client); queued+adding > limit {
		return &QuotaError{Client: client, Queued: queued, Adding: adding, Max: limit}
	}
	return nil
}

// ------------------------------------------------------------ restore
//
// Open rebuilds the state by replaying the store's records through apply,
// one opRestore each and then opRestoreEnd, as tf.data service's
// dispatcher rebuilds its state by replaying its journal through Apply.
// The records are a snapshot rather than a journal: each says what is,
// not what happened. So a task record is restored by the code that keeps
// the indexes at run time (addPipe, enqueueItems, holdLease,
// enterQuarantine), which places the task in memory and returns the index
// records (q, p, l, x) that placing it writes. Those are not written: they
// are what the store must already hold, and the replay checks that it
// holds exactly those (ErrCorrupt otherwise). Index records are thus never
// read into the state, only compared with what the run-time code would
// write, so the replay and the run-time changes cannot disagree on what a
// task's records are without the store refusing to open. The fairness
// cursors (f) are state of their own: they are read. A replay writes
// nothing and emits nothing.
//
// The check takes constant memory, whatever the order of the records (the
// index records sort before or after the task records that imply them):
// per kind of index record it counts the records implied and stored and
// sums a hash of each implied record less the same hash of each stored
// one. The store holds exactly the implied records when the counts agree
// and the sum is zero; a difference that left both unchanged would need
// hashes that cancel, a chance of 2^-64. Remembering the records instead,
// to name the one that differs, held every index record in memory at once
// and about doubled the time Open takes (BenchmarkOpen), for an error
// that is rare; the error names the kind of record and the counts.

// restoreCheck is a replay's check.
type restoreCheck struct {
	h     maphash.Hash // a random seed per replay
	kinds [4]indexTally
}

// indexKind is a kind of index record.
type indexKind struct {
	prefix byte
	name   string
}

// indexKinds are the kinds of index record a replay checks, in the order
// of restoreCheck.kinds.
var indexKinds = [4]indexKind{{pfxQueue, "queue entries"}, {pfxPipeline, "pipeline entries"}, {pfxLease, "lease entries"}, {pfxQuarantine, "quarantine entries"}}

type indexTally struct {
	implied, stored int
	// sum: the hashes of the implied records less those of the stored.
	sum uint64
}

// restore restores one stored record (opRestore).
func (s *state) restore(k, v []byte) error {
	// The records the run-time code writes while placing a task are the
	// store's already (or, if the record is refused, the store is not
	// opened), and nothing waits for work on a queue not open yet.
	defer func() {
		s.writes = s.writes[:0]
		s.wake = false
	}()
	if s.restoring == nil {
		s.restoring = &restoreCheck{}
	}
	if len(k) == 0 {
		return fmt.Errorf("%w: a record with an empty key", ErrCorrupt)
	}
	switch k[0] {
	case pfxFormat:
		// The store's own: checked before the replay, and written into a
		// new store, by Queue.checkFormat.
		return nil
	case pfxTask:
		return s.restoreTask(k, v)
	case pfxFairness:
		p, err := parseFairnessKey(k)
		if err != nil {
			return err
		}
		s.fair.Last[p] = string(v)
		return nil
	case pfxBan:
		// A state of its own, like the cursors: read.
		b, err := decodeBan(k, v)
		if err != nil {
			return err
		}
		s.bans[b.Build] = b
		return nil
	}
	if !s.restoring.tally(k, v, false) {
		// Not ignored: the state would then not be what the store holds.
		return fmt.Errorf("%w: record %q is of no kind this format has", ErrCorrupt, k)
	}
	return nil
}

// restoreTask restores a task record: the task is placed in the indexes its
// state puts it in, by the code that places it there at run time, and the
// records that code writes are checked against the store's.
func (s *state) restoreTask(k, v []byte) error {
	id, err := parseID(k[1:])
	if err != nil {
		return err
	}
	rec, err := decodeRecord(v)
	if err != nil {
		return fmt.Errorf("task %s: %w", id, err)
	}
	if s.tasks[id] != nil {
		return fmt.Errorf("%w: task %s restored twice", ErrCorrupt, id)
	}
	t := &task{id: id, sid: storeID(id), rec: *rec}
	s.tasks[id] = t
	// The next sequence number is past every one a task holds, so work
	// queued after a restart goes behind the work queued before it (a
	// completed task's number may be given again: nothing refers to it).
	s.seq = max(s.seq, rec.seq)
	for _, r := range rec.requesters {
		s.addPipe(t, r.Client, r.Pipeline)
	}
	switch rec.state {
	case StateQueued:
		// Pushed as Enqueue pushes it: the heaps are in order whatever the
		// order of the records.
		s.enqueueItems(t)
	case StateLeased:
		// Kept until its deadline, so a worker that outlived the restart
		// can still heartbeat and complete it; Open then expires those
		// already past it.
		if other := s.leases[rec.leaseID]; other != nil {
			return fmt.Errorf("%w: lease %s held by tasks %s and %s", ErrCorrupt, rec.leaseID, other.t.id, id)
		}
		s.holdLease(&lease{id: rec.leaseID, t: t})
	case StateQuarantined:
		s.enterQuarantine(t)
	}
	for _, w := range s.writes {
		// Placing a task only adds index records; anything else is a bug
		// in the code above, not in the store.
		if w.del || !s.restoring.tally(w.key, w.value, true) {
			panic(fmt.Sprintf("workers: placing task %s would change %q, no index record it implies", id, w.key))
		}
	}
	return nil
}

// tally counts an index record implied by a task record, or stored. It
// reports false for a record that is no index record.
func (c *restoreCheck) tally(k, v []byte, implied bool) bool {
	i := slices.IndexFunc(indexKinds[:], func(x indexKind) bool { return x.prefix == k[0] })
	if i < 0 {
		return false
	}
	// The key's length first, so that no two records hash the same bytes.
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(k)))
	c.h.Reset()
	c.h.Write(n[:])
	c.h.Write(k)
	c.h.Write(v)
	t := &c.kinds[i]
	if implied {
		t.implied++
		t.sum += c.h.Sum64()
	} else {
		t.stored++
		t.sum -= c.h.Sum64()
	}
	return true
}

// endRestore ends a replay (opRestoreEnd): the store must hold exactly the
// index records its task records imply.
func (s *state) endRestore() error {
	c := s.restoring
	s.restoring = nil
	if c == nil {
		return nil
	}
	var bad []string
	for i, t := range c.kinds {
		switch {
		case t.implied != t.stored:
			bad = append(bad, fmt.Sprintf("%s: %d stored, %d implied by the task records", indexKinds[i].name, t.stored, t.implied))
		case t.sum != 0:
			bad = append(bad, fmt.Sprintf("%s: %d stored, not those the task records imply", indexKinds[i].name, t.stored))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrCorrupt, strings.Join(bad, "; "))
	}
	return nil
}

// --------------------------------------------------------------- dump

// dump renders the whole state deterministically, for tests: two states
// with equal dumps hold the same tasks in the same places. name prints a
// task id.
func (s *state) dump(name func(TaskID) string) string {
	var b strings.Builder
	clients := make([]string, 0, len(s.queues))
	for c := range s.queues {
		clients = append(clients, c)
	}
	sort.Strings(clients)
	for _, c := range clients {
		items := append([]*qitem(nil), s.queues[c].items...)
		sort.Slice(items, func(i, j int) bool {
			if items[i].prio != items[j].prio {
				return items[i].prio > items[j].prio
			}
			return items[i].t.rec.seq < items[j].t.rec.seq
		})
		fmt.Fprintf(&b, "queue %s:", c)
		for _, it := range items {
			fmt.Fprintf(&b, " %s@%d", name(it.t.id), it.prio)
		}
		b.WriteByte('\n')
	}
	for _, t := range sortedTasks(s.tasks) {
		r := &t.rec
		fmt.Fprintf(&b, "task %s %s seq=%d attempts=%d since=%d req=%v", name(t.id), r.state, r.seq, r.attempts, r.since.UnixNano(), r.requesters)
		if r.state == StateLeased {
			fmt.Fprintf(&b, " lease=%s worker=%s from=%s@%d deadline=%d", r.leaseID, r.worker, r.client, r.priority, r.deadline.UnixNano())
			if r.build != "" {
				fmt.Fprintf(&b, " build=%s", r.build)
			}
		}
		if r.err != "" {
			fmt.Fprintf(&b, " err=%q", r.err)
		}
		b.WriteByte('\n')
	}
	pks := make([]pipeKey, 0, len(s.pipelines))
	for pk := range s.pipelines {
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
		for _, t := range sortedTasks(s.pipelines[pk]) {
			fmt.Fprintf(&b, " %s", name(t.id))
		}
		b.WriteByte('\n')
	}
	prios := make([]int, 0, len(s.fair.Last))
	for p := range s.fair.Last {
		prios = append(prios, int(p))
	}
	sort.Ints(prios)
	b.WriteString("fairness:")
	for _, p := range prios {
		fmt.Fprintf(&b, " %d:%s", p, s.fair.Last[int32(p)])
	}
	b.WriteByte('\n')
	for _, ban := range s.listBans() {
		fmt.Fprintf(&b, "ban %s since=%d reason=%q\n", ban.Build, ban.Since.UnixNano(), ban.Reason)
	}
	fmt.Fprintf(&b, "counts queued=%d leased=%d quarantined=%d\n", s.nQueued, s.nLeased, len(s.quarantine))
	return b.String()
}
