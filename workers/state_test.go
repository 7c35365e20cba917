package workers

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestStateData runs testdata/state: ops applied to the queue's pure state
// (no Pebble, no lock, no clock: the harness keeps the time), printing what
// each answers, the records it writes ("set"/"del", decoded) and the events
// it emits. The harness keeps the records in a map, as the store keeps
// them in Pebble, and after every op rebuilds a second state from that map
// by replaying the records through apply, as Open does, and fails if the
// two differ: the records a change returns are the whole change, and the
// replay rebuilds what the changes built. It replays in key order, as the
// store does (most index records before the task records that imply
// them), and with the task records first, which must give the same state.
//
// Commands (tasks are named as in testdata/schedule: "t1" is block "b"):
//
//	enqueue TASK... client=C pipeline=P priority=N
//	lease [worker=W] [build=B] [batch=N]
//	                             up to N tasks of one raw block (default 1)
//	heartbeat|complete|return TASK
//	fail TASK err=CAUSE|err=(MORE WORDS)
//	cancel|release TASK
//	set-priority client=C pipeline=P priority=N
//	remove-pipeline client=C pipeline=P
//	ban build=B reason=(WORDS)   refuse B leases, take back its tasks
//	lift build=B
//	quarantine TASK reason=(WORDS)  quarantine a queued task now
//	expire                       leases due now
//	advance by=DURATION
//	peak                         take the queued peak
//	dump                         the whole state
//	restart                      replay the records into a new state (a
//	                             new lease nonce, as a new Open has), check
//	                             it equals the state before, dump it, and
//	                             go on with it; unlike Open it expires
//	                             nothing, so a script shows that apart
func TestStateData(t *testing.T) {
	datadriven.Walk(t, "testdata/state", func(t *testing.T, path string) {
		h := &stateHarness{
			cfg:    stateConfig{LeaseTTL: 30 * time.Second, MaxAttempts: 3, CostSmoothing: 0.2},
			now:    t0,
			store:  map[string][]byte{},
			leases: map[TaskID]string{},
		}
		h.s = newState(h.cfg)
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			out := strings.TrimRight(h.run(t, td), "\n")
			if err := h.s.checkBlocks(); err != nil {
				t.Fatalf("%s: %v", td.Pos, err)
			}
			for _, tasksFirst := range []bool{true, false} {
				if rebuilt := h.rebuild(t, h.cfg, h.keys(tasksFirst)).dump(idName); rebuilt != h.s.dump(idName) {
					t.Fatalf("%s: the state rebuilt from the records (task records first: %v) differs:\n--- state\n%s--- rebuilt\n%s", td.Pos, tasksFirst, h.s.dump(idName), rebuilt)
				}
			}
			return out
		})
	})
}

type stateHarness struct {
	cfg    stateConfig
	s      *state
	now    time.Time
	store  map[string][]byte // the records written so far
	leases map[TaskID]string // the last lease id of each task
}

func (h *stateHarness) apply(o op) result {
	o.now = h.now
	r := h.s.apply(&o)
	for _, w := range r.writes {
		if w.del {
			delete(h.store, string(w.key))
		} else {
			h.store[string(w.key)] = append([]byte(nil), w.value...)
		}
	}
	return r
}

// keys lists the stored keys in key order (the store's), or with the task
// records first if tasksFirst.
func (h *stateHarness) keys(tasksFirst bool) []string {
	keys := make([]string, 0, len(h.store))
	for k := range h.store {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if ti, tj := keys[i][0] == pfxTask, keys[j][0] == pfxTask; tasksFirst && ti != tj {
			return ti
		}
		return keys[i] < keys[j]
	})
	return keys
}

// rebuild builds a state from the stored records alone, replaying those
// named by keys, in that order, through apply as Open does. A replay
// writes, emits and wakes nothing; a refused record fails the test.
func (h *stateHarness) rebuild(t *testing.T, cfg stateConfig, keys []string) *state {
	t.Helper()
	s, err := replayRecords(cfg, h.store, keys)
	if err != nil {
		t.Fatalf("rebuilding the state from its records: %v", err)
	}
	return s
}

// replayRecords builds a state from records, replaying those named by keys
// in that order, then ending the replay.
func replayRecords(cfg stateConfig, records map[string][]byte, keys []string) (*state, error) {
	s := newState(cfg)
	check := func(r result) error {
		if len(r.writes) > 0 || len(r.events) > 0 || r.wake {
			return fmt.Errorf("a restore wrote %d records, emitted %d events, woke leasers: %v", len(r.writes), len(r.events), r.wake)
		}
		return r.err
	}
	for _, k := range keys {
		if err := check(s.apply(&op{kind: opRestore, key: []byte(k), value: records[k]})); err != nil {
			return nil, err
		}
	}
	return s, check(s.apply(&op{kind: opRestoreEnd}))
}

func (h *stateHarness) run(t *testing.T, td *datadriven.TestData) string {
	f := operands(td)
	task := func() TaskID {
		if len(f) != 1 {
			td.Fatalf(t, "%s takes one task", td.Cmd)
		}
		return parseTask(f[0])
	}
	var r result
	var answer string
	switch td.Cmd {
	case "enqueue":
		var reqs []Request
		for _, s := range f {
			reqs = append(reqs, Request{Task: parseTask(s), Client: arg(t, td, "client"), Pipeline: arg(t, td, "pipeline"), Priority: atoi32(t, arg(t, td, "priority"))})
		}
		r = h.apply(op{kind: opEnqueue, reqs: reqs})
		answer = fmt.Sprintf("created %d", r.n)
	case "lease":
		w, build, batch := "w", "", 1
		td.MaybeScanArgs(t, "worker", &w)
		td.MaybeScanArgs(t, "build", &build)
		td.MaybeScanArgs(t, "batch", &batch)
		r = h.apply(op{kind: opLease, worker: w, build: build, maxTasks: batch})
		if !r.ok {
			answer = "none"
			break
		}
		var lines []string
		for _, l := range r.batch {
			h.leases[l.Task.ID] = l.ID
			lines = append(lines, fmt.Sprintf("leased %s from %s@%d: lease %s until %s", taskName(l.Task.ID), l.Client, l.Priority, l.ID, h.at(l.Deadline)))
		}
		answer = strings.Join(lines, "\n")
	case "heartbeat":
		r = h.apply(op{kind: opHeartbeat, lease: h.leases[task()]})
		answer = "deadline " + h.at(r.deadline)
	case "complete":
		r = h.apply(op{kind: opComplete, lease: h.leases[task()]})
		answer = "ok"
	case "return":
		r = h.apply(op{kind: opReturn, lease: h.leases[task()]})
		answer = "ok"
	case "fail":
		r = h.apply(op{kind: opFail, lease: h.leases[task()], cause: argText(td, "err")})
		answer = "requeued"
		if r.quarantined {
			answer = "quarantined"
		}
	case "cancel":
		r = h.apply(op{kind: opCancel, id: task()})
		answer = fmt.Sprintf("cancelled %v", r.ok)
	case "release":
		r = h.apply(op{kind: opRelease, id: task()})
		answer = fmt.Sprintf("released %v", r.ok)
	case "set-priority":
		r = h.apply(op{kind: opSetPriority, client: arg(t, td, "client"), pipeline: arg(t, td, "pipeline"), priority: atoi32(t, arg(t, td, "priority"))})
		answer = fmt.Sprintf("moved %d", r.n)
	case "remove-pipeline":
		r = h.apply(op{kind: opRemovePipeline, client: arg(t, td, "client"), pipeline: arg(t, td, "pipeline")})
		answer = fmt.Sprintf("cancelled %d", r.n)
	case "ban":
		r = h.apply(op{kind: opBan, build: arg(t, td, "build"), cause: argText(td, "reason")})
		answer = fmt.Sprintf("added %v, revoked %d", r.ok, r.n)
	case "lift":
		r = h.apply(op{kind: opLift, build: arg(t, td, "build")})
		answer = fmt.Sprintf("lifted %v", r.ok)
	case "quarantine":
		r = h.apply(op{kind: opQuarantine, id: task(), cause: argText(td, "reason")})
		answer = fmt.Sprintf("quarantined %v", r.ok)
	case "expire":
		r = h.apply(op{kind: opExpire, due: h.now})
		answer = fmt.Sprintf("expired %d", r.n)
	case "peak":
		r = h.apply(op{kind: opTakePeak})
		answer = fmt.Sprintf("peak %d", r.n)
	case "advance":
		var d time.Duration
		td.ScanArgs(t, "by", &d)
		h.now = h.now.Add(d)
		return "now " + h.at(h.now)
	case "dump":
		return h.s.dump(idName)
	case "explain":
		// explain T... [client=C]: where each task stands (Queue.Explain).
		client := ""
		td.MaybeScanArgs(t, "client", &client)
		var ids []TaskID
		for _, s := range f {
			ids = append(ids, parseTask(s))
		}
		var lines []string
		for i, p := range h.s.explain(client, ids) {
			line := taskName(ids[i]) + ": "
			switch p.State {
			case 0:
				line += "not queued"
			case StateQueued:
				line += fmt.Sprintf("queued in %s@%d behind", p.Client, p.Priority)
				if len(p.Ahead) == 0 {
					line += " nothing"
				}
				for _, a := range p.Ahead {
					line += fmt.Sprintf(" %s@%d:%d", a.Client, a.Priority, a.Tasks)
				}
			case StateLeased:
				line += fmt.Sprintf("leased by %s since %s from %s@%d", p.Worker, h.at(p.Since), p.Client, p.Priority)
			default:
				line += fmt.Sprintf("%s since %s attempts=%d: %s", p.State, h.at(p.Since), p.Attempts, p.Err)
			}
			lines = append(lines, line)
		}
		return strings.Join(lines, "\n")
	case "restart":
		before := h.s.dump(idName)
		h.cfg.Nonce++
		h.s = h.rebuild(t, h.cfg, h.keys(false))
		if after := h.s.dump(idName); after != before {
			td.Fatalf(t, "the restarted state differs:\n--- before\n%s--- after\n%s", before, after)
		}
		return fmt.Sprintf("restored %d records\n%s", len(h.store), h.s.dump(idName))
	default:
		td.Fatalf(t, "unknown command %q", td.Cmd)
	}
	if r.err != nil {
		answer = "error: " + r.err.Error()
		for id := range h.leases { // errors name tasks by key: print names
			answer = strings.ReplaceAll(answer, id.String(), taskName(id))
		}
	}
	out := []string{answer}
	for _, w := range r.writes {
		out = append(out, h.describeWrite(t, w))
	}
	for _, e := range r.events {
		out = append(out, fmt.Sprintf("event %s %s attempts=%d err=%q", e.Kind, taskName(e.Task.ID), e.Task.Attempts, e.Task.Err))
	}
	if r.wake {
		out = append(out, "wake")
	}
	return strings.Join(out, "\n")
}

func taskName(id TaskID) string { return keyName(id.Component) + blockSuffix(id) }

// at prints a time as an offset from t0.
func (h *stateHarness) at(tm time.Time) string { return "+" + tm.Sub(t0).String() }

// describeWrite decodes a record for reading.
func (h *stateHarness) describeWrite(t *testing.T, w write) string {
	verb := "set"
	if w.del {
		verb = "del"
	}
	k := w.key
	var what, val string
	switch k[0] {
	case pfxTask:
		id, err := parseID(k[1:])
		if err != nil {
			t.Fatal(err)
		}
		what = "task " + taskName(id)
		if !w.del {
			rec, err := decodeRecord(w.value)
			if err != nil {
				t.Fatal(err)
			}
			var rs []string
			for _, q := range rec.requesters {
				rs = append(rs, fmt.Sprintf("%s/%s@%d", q.Client, q.Pipeline, q.Priority))
			}
			val = fmt.Sprintf("%s seq=%d attempts=%d since=%s requesters=%s", rec.state, rec.seq, rec.attempts, h.at(rec.since), strings.Join(rs, ","))
			if rec.state == StateLeased {
				val += fmt.Sprintf(" lease=%s worker=%s from=%s@%d deadline=%s", rec.leaseID, rec.worker, rec.client, rec.priority, h.at(rec.deadline))
				if rec.build != "" {
					val += " build=" + rec.build
				}
			}
			if rec.err != "" {
				val += fmt.Sprintf(" err=%q", rec.err)
			}
		}
	case pfxQueue:
		client, prio, seq, err := parseQueueKey(k)
		if err != nil {
			t.Fatal(err)
		}
		what = fmt.Sprintf("queue %s@%d #%d", client, prio, seq)
	case pfxPipeline:
		client, pipeline, id, err := parsePipelineKey(k)
		if err != nil {
			t.Fatal(err)
		}
		what = fmt.Sprintf("pipeline %s/%s %s", client, pipeline, taskName(id))
	case pfxLease:
		deadline, id, err := parseLeaseKey(k)
		if err != nil {
			t.Fatal(err)
		}
		what = fmt.Sprintf("lease %s %s", h.at(deadline), id)
	case pfxQuarantine:
		id, err := parseID(k[1:])
		if err != nil {
			t.Fatal(err)
		}
		what = "quarantine " + taskName(id)
	case pfxFairness:
		p, err := parseFairnessKey(k)
		if err != nil {
			t.Fatal(err)
		}
		what = fmt.Sprintf("fairness @%d", p)
		val = string(w.value)
	case pfxBan:
		what = "ban " + string(k[1:])
		if !w.del {
			b, err := decodeBan(k, w.value)
			if err != nil {
				t.Fatal(err)
			}
			val = fmt.Sprintf("since=%s reason=%q", h.at(b.Since), b.Reason)
		}
	default:
		t.Fatalf("write of unknown key %q", k)
	}
	if !w.del && (k[0] == pfxQueue || k[0] == pfxLease) {
		id, err := parseID(w.value)
		if err != nil {
			t.Fatal(err)
		}
		val = taskName(id)
	}
	if val != "" {
		return fmt.Sprintf("%s %s = %s", verb, what, val)
	}
	return verb + " " + what
}

// TestReplayActsAsApplied: a state rebuilt by replaying the records acts
// as the state that wrote them. Random ops are applied to a live state;
// before each, a second state is rebuilt from the records so far (in a
// random order, and with another lease nonce, as a restart has) and is
// given the same op, and the two must answer, write, emit and end alike.
// The after-op check of TestStateData compares states; this compares what
// they do next, which catches what a dump does not show (the next
// sequence number, the heaps' order, the fairness cursors' effect).
//
// What lives in memory only is left out, as a restart loses it: cancelled
// leases (their holders hear ErrCancelled until the restart, ErrLeaseLost
// after), the queued peak, the counters, and the sequence numbers of
// tasks since deleted (the replayed state is checked to go on from the
// highest a task holds, then given the live state's).
func TestReplayActsAsApplied(t *testing.T) {
	// Eight tasks over three raw blocks, one of them in two input
	// versions, so that batch leases find tasks to join and tasks to leave.
	var tasks []TaskID
	for i := range 8 {
		tasks = append(tasks, parseTask(fmt.Sprintf("r%d/%s", i, []string{"x", "y", "z", "x.v2"}[i%4])))
	}
	clients, pipelines := []string{"a", "b", "c"}, []string{"p", "q"}
	var seen struct {
		moved, released, cancelled, returned int
		revoked, refused, batched            int
		completed, expired, quarantines      uint64
		restoredLeased, restoredQuarantined  int
	}
	for seed := uint64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 26))
		h := &stateHarness{
			cfg:    stateConfig{LeaseTTL: 30 * time.Second, MaxAttempts: 3, CostSmoothing: 0.2},
			now:    t0,
			store:  map[string][]byte{},
			leases: map[TaskID]string{},
		}
		h.s = newState(h.cfg)
		for step := range 150 {
			h.now = h.now.Add(time.Duration(rng.IntN(3)) * 10 * time.Second)
			o := randomOp(rng, h.s, h.now, tasks, clients, pipelines)

			keys := h.keys(false)
			rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			cfg := h.cfg
			cfg.Nonce = 0xb
			restarted, err := replayRecords(cfg, h.store, keys)
			if err != nil {
				t.Fatalf("seed %d step %d: replay: %v", seed, step, err)
			}
			if a, b := h.s.dump(idName), restarted.dump(idName); a != b {
				t.Fatalf("seed %d step %d: the replayed state differs:\n--- live\n%s--- replayed\n%s", seed, step, a, b)
			}
			seen.restoredLeased += restarted.nLeased
			seen.restoredQuarantined += len(restarted.quarantine)
			// The next sequence number: past every one a task holds, which
			// is all order needs. The live state may be further on, having
			// numbered tasks since deleted; those numbers are not stored,
			// so the replayed state is given the live one's to go on alike.
			var held uint64
			for _, tk := range h.s.tasks {
				held = max(held, tk.rec.seq)
			}
			if restarted.seq != held {
				t.Fatalf("seed %d step %d: the replayed state's last sequence number is %d, the highest a task holds %d", seed, step, restarted.seq, held)
			}
			restarted.seq = h.s.seq

			ob := o
			ob.now = h.now
			rb := restarted.apply(&ob)
			ra := h.apply(o)
			for _, st := range []*state{h.s, restarted} {
				if err := st.checkBlocks(); err != nil {
					t.Fatalf("seed %d step %d: op %d: %v", seed, step, o.kind, err)
				}
			}
			// New leases have the restarted state's nonce and counter:
			// their ids are read as the live state's, before the writes
			// are sorted by key (lease keys hold them).
			sameLease := func(s string) string {
				for i, l := range rb.batch {
					if i < len(ra.batch) {
						s = strings.ReplaceAll(s, l.ID, ra.batch[i].ID)
					}
				}
				return s
			}
			a := h.describeResult(t, ra, nil)
			if b := h.describeResult(t, rb, sameLease); a != b {
				t.Fatalf("seed %d step %d: op %d: the live state did\n%s\nthe replayed one\n%s", seed, step, o.kind, a, b)
			}
			if a, b := h.s.dump(idName), sameLease(restarted.dump(idName)); a != b {
				t.Fatalf("seed %d step %d: op %d: the states differ after it:\n--- live\n%s--- replayed\n%s", seed, step, o.kind, a, b)
			}
			switch {
			case o.kind == opSetPriority && ra.n > 0:
				seen.moved++
			case o.kind == opRelease && ra.ok:
				seen.released++
			case o.kind == opCancel && ra.ok:
				seen.cancelled++
			case o.kind == opReturn && ra.err == nil:
				seen.returned++
			case o.kind == opBan:
				seen.revoked += ra.n
			case o.kind == opLease && errors.Is(ra.err, ErrBanned):
				seen.refused++
			case o.kind == opLease && len(ra.batch) > 1:
				seen.batched++
			}
		}
		st := h.s.statsSnapshot()
		seen.completed += st.Completed
		seen.expired += st.Expired
		seen.quarantines += st.Quarantines
	}
	// The random ops must reach every kind of change and of restored
	// task, or agreeing would prove little.
	if seen.moved == 0 || seen.released == 0 || seen.cancelled == 0 || seen.returned == 0 || seen.revoked == 0 || seen.refused == 0 || seen.batched == 0 || seen.completed == 0 || seen.expired == 0 || seen.quarantines == 0 || seen.restoredLeased == 0 || seen.restoredQuarantined == 0 {
		t.Fatalf("the random ops missed a kind of change: %+v", seen)
	}
}

// randomOp picks an op to apply to s. Lease ops name a live lease (or a
// lost one), never a cancelled one, which lives in memory only.
func randomOp(rng *rand.Rand, s *state, now time.Time, tasks []TaskID, clients, pipelines []string) op {
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	var live []string
	for id, l := range s.leases {
		if !l.cancelled {
			live = append(live, id)
		}
	}
	sort.Strings(live)
	leaseID := "0000000000000000-999" // lost
	if len(live) > 0 && rng.IntN(10) > 0 {
		leaseID = live[rng.IntN(len(live))]
	}
	switch n := rng.IntN(100); {
	case n < 30:
		var reqs []Request
		for range 1 + rng.IntN(3) {
			reqs = append(reqs, Request{Task: tasks[rng.IntN(len(tasks))], Client: pick(clients), Pipeline: pick(pipelines), Priority: int32(rng.IntN(4))})
		}
		return op{kind: opEnqueue, reqs: reqs}
	case n < 36:
		return op{kind: opSetPriority, client: pick(clients), pipeline: pick(pipelines), priority: int32(rng.IntN(4))}
	case n < 39:
		return op{kind: opRemovePipeline, client: pick(clients), pipeline: pick(pipelines)}
	case n < 42:
		return op{kind: opCancel, id: tasks[rng.IntN(len(tasks))]}
	case n < 47:
		return op{kind: opRelease, id: tasks[rng.IntN(len(tasks))]}
	case n < 62:
		return op{kind: opLease, worker: pick([]string{"w1", "w2"}), build: pick([]string{"", "b1", "b2"}), maxTasks: 1 + rng.IntN(3)}
	case n < 64:
		return op{kind: opBan, build: pick([]string{"b1", "b2"}), cause: "wrong values"}
	case n < 65:
		if rng.IntN(2) == 0 {
			return op{kind: opQuarantine, id: tasks[rng.IntN(len(tasks))], cause: "banned build"}
		}
		return op{kind: opLift, build: pick([]string{"b1", "b2"})}
	case n < 72:
		return op{kind: opHeartbeat, lease: leaseID}
	case n < 80:
		return op{kind: opComplete, lease: leaseID}
	case n < 90:
		return op{kind: opFail, lease: leaseID, cause: "boom"}
	case n < 94:
		return op{kind: opReturn, lease: leaseID}
	default:
		return op{kind: opExpire, due: now}
	}
}

// describeResult prints all of an op's result. Its writes are sorted by
// key, keeping the order of the writes to one key: a batch is applied
// whole, so the order of writes to distinct keys is no part of what an op
// does (and it differs: a task lists its queue entries in the order its
// clients asked for it, a restored task by client name).
//
// rename, if set, rewrites the result's text, and the writes' keys as
// they are sorted.
func (h *stateHarness) describeResult(t *testing.T, r result, rename func(string) string) string {
	if rename == nil {
		rename = func(s string) string { return s }
	}
	out := []string{fmt.Sprintf("n=%d ok=%v quarantined=%v err=%v", r.n, r.ok, r.quarantined, r.err)}
	if !r.deadline.IsZero() {
		out = append(out, "deadline "+h.at(r.deadline))
	}
	for _, l := range r.batch {
		out = append(out, fmt.Sprintf("lease %s of %s to %s from %s@%d until %s", l.ID, taskName(l.Task.ID), l.Worker, l.Client, l.Priority, h.at(l.Deadline)))
	}
	writes := slices.Clone(r.writes)
	slices.SortStableFunc(writes, func(a, b write) int {
		return strings.Compare(rename(string(a.key)), rename(string(b.key)))
	})
	for _, w := range writes {
		out = append(out, h.describeWrite(t, w))
	}
	for _, e := range r.events {
		out = append(out, fmt.Sprintf("event %s %s attempts=%d err=%q", e.Kind, taskName(e.Task.ID), e.Task.Attempts, e.Task.Err))
	}
	return rename(strings.Join(out, "\n") + fmt.Sprintf("\nwake=%v", r.wake))
}

// TestReplayRefusesDisagreement: a replay refuses a store whose index
// records are not exactly those its task records imply, or whose records
// it cannot read, and says which kind of record. Each case tampers with
// the records of one state, and is replayed in both orders.
func TestReplayRefusesDisagreement(t *testing.T) {
	// k1 quarantined, k2 leased (shared by a and b), k3 queued.
	h := &stateHarness{
		cfg:    stateConfig{LeaseTTL: 30 * time.Second, MaxAttempts: 1},
		now:    t0,
		store:  map[string][]byte{},
		leases: map[TaskID]string{},
	}
	h.s = newState(h.cfg)
	k1, k2, k3, ghost := parseTask("k1"), parseTask("k2"), parseTask("k3"), parseTask("ghost")
	h.apply(op{kind: opEnqueue, reqs: []Request{{k1, "a", "p", 5}, {k2, "a", "p", 5}, {k3, "a", "p", 5}, {k2, "b", "q", 1}}})
	l1 := h.apply(op{kind: opLease, worker: "w"}).lease
	h.apply(op{kind: opFail, lease: l1.ID, cause: "boom"})
	l2 := h.apply(op{kind: opLease, worker: "w"}).lease
	if l1.Task.ID != k1 || l2.Task.ID != k2 {
		t.Fatalf("leased %v then %v", l1.Task.ID, l2.Task.ID)
	}
	base := h.store
	lease2 := string(leaseKey(l2.Deadline, l2.ID))
	rewrite := func(id TaskID, change func(r *record)) []byte {
		r, err := decodeRecord(base[string(taskKey(storeID(id)))])
		if err != nil {
			t.Fatal(err)
		}
		change(r)
		return r.encode()
	}
	sid := func(id TaskID) []byte { return storeID(id) }
	type edit struct {
		key   string
		value []byte // nil: delete
	}
	cases := []struct {
		name  string
		edits []edit
		want  error
		names string // in the error
	}{
		{"untouched", nil, nil, ""},
		{"missing queue entry", []edit{{string(queueKey("a", 5, 3)), nil}}, ErrCorrupt, "queue entries: 0 stored, 1 implied by the task records"},
		{"orphan queue entry", []edit{{string(queueKey("c", 1, 999)), sid(ghost)}}, ErrCorrupt, "queue entries: 2 stored, 1 implied"},
		{"queue entry at another priority", []edit{{string(queueKey("a", 5, 3)), nil}, {string(queueKey("a", 4, 3)), sid(k3)}}, ErrCorrupt, "queue entries: 1 stored, not those the task records imply"},
		{"queue entry naming another task", []edit{{string(queueKey("a", 5, 3)), sid(k1)}}, ErrCorrupt, "queue entries: 1 stored, not those"},
		{"two tasks queued under one number", []edit{{string(quarantineKey(sid(k1))), nil}, {string(taskKey(sid(k1))), rewrite(k1, func(r *record) {
			r.state, r.seq = StateQueued, 3
		})}}, ErrCorrupt, "queue entries: 1 stored, 2 implied"},
		{"missing pipeline entry", []edit{{string(pipelineKey("b", "q", sid(k2))), nil}}, ErrCorrupt, "pipeline entries: 3 stored, 4 implied"},
		{"orphan pipeline entry", []edit{{string(pipelineKey("a", "nope", sid(k3))), []byte{}}}, ErrCorrupt, "pipeline entries: 5 stored, 4 implied"},
		{"pipeline entry with a value", []edit{{string(pipelineKey("a", "p", sid(k3))), []byte("x")}}, ErrCorrupt, "pipeline entries: 4 stored, not those"},
		{"missing lease entry", []edit{{lease2, nil}}, ErrCorrupt, "lease entries: 0 stored, 1 implied"},
		{"lease entry at another deadline", []edit{{lease2, nil}, {string(leaseKey(l2.Deadline.Add(time.Second), l2.ID)), sid(k2)}}, ErrCorrupt, "lease entries: 1 stored, not those"},
		{"missing quarantine entry", []edit{{string(quarantineKey(sid(k1))), nil}}, ErrCorrupt, "quarantine entries: 0 stored, 1 implied"},
		{"quarantine entry of a queued task", []edit{{string(quarantineKey(sid(k3))), []byte{}}}, ErrCorrupt, "quarantine entries: 2 stored, 1 implied"},
		{"a requester named twice", []edit{{string(taskKey(sid(k3))), rewrite(k3, func(r *record) {
			r.requesters = append(r.requesters, r.requesters[0])
		})}}, ErrCorrupt, "requesters a/p and a/p out of order or repeated"},
		{"one lease held by two tasks", []edit{{string(taskKey(sid(k3))), rewrite(k3, func(r *record) {
			r.state, r.leaseID, r.worker, r.client, r.priority, r.deadline, r.leasedAt = StateLeased, l2.ID, "w", "a", 5, l2.Deadline.Add(time.Second), t0
		})}}, ErrCorrupt, "held by tasks"},
		{"a task record without its indexes' state", []edit{{string(taskKey(sid(k2))), rewrite(k2, func(r *record) {
			r.state = StateQueued
		})}}, ErrCorrupt, "queue entries: 1 stored, 3 implied by the task records; lease entries: 1 stored, 0 implied"},
		{"unreadable task record", []edit{{string(taskKey(sid(k3))), []byte{recordVersion, byte(StateQueued), 9}}}, ErrCorrupt, k3.String()},
		{"task record of another version", []edit{{string(taskKey(sid(k3))), []byte{recordVersion + 1}}}, ErrFormat, k3.String()},
		{"malformed fairness key", []edit{{"f\x00", []byte("a")}}, ErrCorrupt, "fairness"},
		{"a record of no known kind", []edit{{"z", nil}, {"zz", []byte{}}}, ErrCorrupt, `"zz"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h.store = maps.Clone(base)
			for _, e := range c.edits {
				if e.value == nil {
					if _, ok := h.store[e.key]; !ok && e.key != "z" {
						t.Fatalf("deleting %q: not stored", e.key)
					}
					delete(h.store, e.key)
				} else {
					h.store[e.key] = e.value
				}
			}
			for _, tasksFirst := range []bool{true, false} {
				_, err := replayRecords(h.cfg, h.store, h.keys(tasksFirst))
				if !errors.Is(err, c.want) || (err != nil && !strings.Contains(err.Error(), c.names)) {
					t.Errorf("task records first %v: replay = %v, want %v naming %q", tasksFirst, err, c.want, c.names)
				}
			}
		})
	}
}

// checkBlocks checks the index of queued tasks by raw block against the
// tasks: it holds every queued task, at its blockPos, and nothing else.
func (s *state) checkBlocks() error {
	n := 0
	for id, ts := range s.blocks {
		if len(ts) == 0 {
			return fmt.Errorf("block %s: an empty entry", id)
		}
		for i, t := range ts {
			if t.rec.state != StateQueued || t.blockPos != i || t.id.Block.ID() != id || s.tasks[t.id] != t {
				return fmt.Errorf("block %s: %s at %d is %s at %d of block %s", id, t.id, i, t.rec.state, t.blockPos, t.id.Block.ID())
			}
		}
		n += len(ts)
	}
	if n != s.nQueued {
		return fmt.Errorf("%d tasks by block, %d queued", n, s.nQueued)
	}
	return nil
}
