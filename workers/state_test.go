package workers

import (
	"fmt"
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
// (state.load) and fails if the two differ: the records a change returns
// are the whole change.
//
// Commands (tasks are named as in testdata/schedule: "t1" is block "b"):
//
//	enqueue TASK... client=C pipeline=P priority=N
//	lease [worker=W]
//	heartbeat|complete|return TASK
//	fail TASK err=CAUSE|err=(MORE WORDS)
//	cancel|release TASK
//	set-priority client=C pipeline=P priority=N
//	remove-pipeline client=C pipeline=P
//	expire                       leases due now
//	advance by=DURATION
//	peak                         take the queued peak
//	dump                         the whole state
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
			if reloaded := h.reload(t); reloaded != h.s.dump(idName) {
				t.Fatalf("%s: the state rebuilt from the records differs:\n--- state\n%s--- rebuilt\n%s", td.Pos, h.s.dump(idName), reloaded)
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

// reload builds a state from the records alone and dumps it.
func (h *stateHarness) reload(t *testing.T) string {
	s := newState(h.cfg)
	err := s.load(func(p byte, fn func(k, v []byte) error) error {
		var keys []string
		for k := range h.store {
			if k[0] == p {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			if err := fn([]byte(k), h.store[k]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("rebuilding the state from its records: %v", err)
	}
	return s.dump(idName)
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
		w := "w"
		td.MaybeScanArgs(t, "worker", &w)
		r = h.apply(op{kind: opLease, worker: w})
		if !r.ok {
			answer = "none"
			break
		}
		h.leases[r.lease.Task.ID] = r.lease.ID
		answer = fmt.Sprintf("leased %s from %s@%d: lease %s until %s", taskName(r.lease.Task.ID), r.lease.Client, r.lease.Priority, r.lease.ID, h.at(r.lease.Deadline))
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
