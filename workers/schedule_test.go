package workers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sigdata/sig/internal/clock"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// queueHarness drives a Queue from data-driven commands.
type queueHarness struct {
	t      *testing.T
	dir    string
	clk    *clock.Fake
	opts   Options
	q      *Queue
	leases map[TaskID]string // lease id of each leased task
}

func newQueueHarness(t *testing.T) *queueHarness {
	h := &queueHarness{t: t, dir: t.TempDir(), clk: clock.NewFake(t0), leases: map[TaskID]string{}}
	h.opts = Options{Clock: h.clk, LeaseTTL: 30 * time.Second, MaxAttempts: 3}
	h.open()
	t.Cleanup(func() { h.q.Close() })
	return h
}

func (h *queueHarness) open() {
	q, err := Open(h.dir, h.opts)
	if err != nil {
		h.t.Fatal(err)
	}
	h.q = q
}

// parseTask reads "t1" (block "b") or "t1/b7".
func parseTask(s string) TaskID {
	if c, b, ok := strings.Cut(s, "/"); ok {
		return TaskID{Component: c, Block: b}
	}
	return TaskID{Component: s, Block: "b"}
}

func atoi32(t *testing.T, s string) int32 {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		t.Fatalf("bad number %q", s)
	}
	return int32(n)
}

func (h *queueHarness) run(t *testing.T, cmd string) string {
	f := strings.Fields(cmd)
	q := h.q
	errOut := func(err error) string {
		// Lease ids contain a random nonce: name sentinel errors instead.
		for _, e := range []error{ErrLeaseLost, ErrCancelled, ErrInvalid, ErrClosed} {
			if errors.Is(err, e) {
				return "error: " + strings.TrimPrefix(e.Error(), "workers: ")
			}
		}
		return "error: " + err.Error()
	}
	switch f[0] {
	case "enqueue": // enqueue CLIENT PIPELINE PRIORITY TASK...
		var reqs []Request
		for _, s := range f[4:] {
			reqs = append(reqs, Request{Task: parseTask(s), Client: f[1], Pipeline: f[2], Priority: atoi32(t, f[3])})
		}
		n, err := q.Enqueue(reqs...)
		if err != nil {
			return errOut(err)
		}
		return fmt.Sprintf("created %d", n)
	case "lease": // lease [N]: lease up to N tasks, printing client@priority task
		n := 1
		if len(f) > 1 {
			n = int(atoi32(t, f[1]))
		}
		var out []string
		for i := 0; i < n; i++ {
			l, ok, err := q.TryLease("w")
			if err != nil {
				return errOut(err)
			}
			if !ok {
				out = append(out, "none")
				break
			}
			h.leases[l.Task.ID] = l.ID
			out = append(out, fmt.Sprintf("%s@%d %s", l.Client, l.Priority, l.Task.ID.Component+blockSuffix(l.Task.ID)))
		}
		return strings.Join(out, "\n")
	case "set-priority": // set-priority CLIENT PIPELINE PRIORITY
		n, err := q.SetPriority(f[1], f[2], atoi32(t, f[3]))
		if err != nil {
			return errOut(err)
		}
		return fmt.Sprintf("moved %d", n)
	case "complete": // complete TASK
		if err := q.Complete(context.Background(), h.leases[parseTask(f[1])], Result{}); err != nil {
			return errOut(err)
		}
		return "ok"
	case "complete-all": // complete every lease the harness holds
		ids := make([]TaskID, 0, len(h.leases))
		for id := range h.leases {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i].String() < ids[j].String() })
		n := 0
		for _, id := range ids {
			if err := q.Complete(context.Background(), h.leases[id], Result{}); err == nil {
				n++
			}
			delete(h.leases, id)
		}
		return fmt.Sprintf("completed %d", n)
	case "fail": // fail TASK CAUSE...
		id := parseTask(f[1])
		quarantined, err := q.Fail(context.Background(), h.leases[id], strings.Join(f[2:], " "))
		if err != nil {
			return errOut(err)
		}
		tk, _ := q.Get(id)
		if quarantined {
			return fmt.Sprintf("quarantined attempts=%d", tk.Attempts)
		}
		return fmt.Sprintf("requeued attempts=%d", tk.Attempts)
	case "return": // return TASK: give a lease back unrun
		if err := q.Return(h.leases[parseTask(f[1])]); err != nil {
			return errOut(err)
		}
		return "ok"
	case "heartbeat": // heartbeat TASK
		d, err := q.Heartbeat(context.Background(), h.leases[parseTask(f[1])])
		if err != nil {
			return errOut(err)
		}
		return "deadline +" + d.Sub(t0).String()
	case "advance": // advance DURATION
		d, err := time.ParseDuration(f[1])
		if err != nil {
			t.Fatal(err)
		}
		h.clk.Advance(d)
		return "now +" + h.clk.Now().Sub(t0).String()
	case "expire":
		n, err := q.ExpireLeases(h.clk.Now())
		if err != nil {
			return errOut(err)
		}
		return fmt.Sprintf("expired %d", n)
	case "cancel": // cancel TASK
		ok, err := q.Cancel(parseTask(f[1]))
		if err != nil {
			return errOut(err)
		}
		return fmt.Sprintf("cancelled %v", ok)
	case "remove-pipeline": // remove-pipeline CLIENT PIPELINE
		n, err := q.RemovePipeline(f[1], f[2])
		if err != nil {
			return errOut(err)
		}
		return fmt.Sprintf("cancelled %d", n)
	case "release": // release TASK
		ok, err := q.Release(parseTask(f[1]))
		if err != nil {
			return errOut(err)
		}
		return fmt.Sprintf("released %v", ok)
	case "quarantine":
		var out []string
		for _, tk := range q.ListQuarantine() {
			out = append(out, fmt.Sprintf("%s attempts=%d err=%q", tk.ID.Component+blockSuffix(tk.ID), tk.Attempts, tk.Err))
		}
		if len(out) == 0 {
			return "empty"
		}
		return strings.Join(out, "\n")
	case "task": // task TASK: state, priority and requesters
		tk, ok := q.Get(parseTask(f[1]))
		if !ok {
			return "absent"
		}
		var rs []string
		for _, r := range tk.Requesters {
			rs = append(rs, fmt.Sprintf("%s/%s@%d", r.Client, r.Pipeline, r.Priority))
		}
		return fmt.Sprintf("%s priority=%d attempts=%d requesters=%s", tk.State, tk.Priority(), tk.Attempts, strings.Join(rs, ","))
	case "depths":
		var out []string
		for _, d := range q.Depths() {
			out = append(out, fmt.Sprintf("%s@%d queued=%d leased=%d", d.Client, d.Priority, d.Queued, d.Leased))
		}
		s := q.Stats()
		out = append(out, fmt.Sprintf("backlog=%d queued=%d leased=%d quarantined=%d", q.Backlog(), s.Queued, s.Leased, s.Quarantined))
		return strings.Join(out, "\n")
	case "reopen":
		// Close and reopen the store: the rebuilt queue must be identical.
		before := q.dump()
		if err := q.Close(); err != nil {
			return errOut(err)
		}
		h.open()
		if after := h.q.dump(); after != before {
			return "reopened state differs:\n--- before\n" + before + "--- after\n" + after
		}
		return "identical"
	case "quota": // quota N: reopen with MaxQueuedPerClient N
		if err := q.Close(); err != nil {
			return errOut(err)
		}
		h.opts.MaxQueuedPerClient = int(atoi32(t, f[1]))
		h.open()
		return "ok"
	case "admit": // admit CLIENT TASK...: may CLIENT ask for the tasks?
		var ids []TaskID
		for _, s := range f[2:] {
			ids = append(ids, parseTask(s))
		}
		if err := q.Admit(f[1], ids); err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprintf("ok; room %d", q.Room(f[1]))
	case "schedule": // schedule HEADS [LAST]: the pure decision
		return runSchedule(t, f[1:])
	}
	t.Fatalf("unknown command %q", cmd)
	return ""
}

func blockSuffix(id TaskID) string {
	if id.Block == "b" {
		return ""
	}
	return "/" + id.Block
}

// runSchedule: heads as client:priority,... and last as priority:client,...
// ("-" for none). Prints the client served and the new fairness state.
func runSchedule(t *testing.T, args []string) string {
	var heads []Head
	if args[0] != "-" {
		for _, s := range strings.Split(args[0], ",") {
			c, p, _ := strings.Cut(s, ":")
			heads = append(heads, Head{Client: c, Priority: atoi32(t, p)})
		}
	}
	f := Fairness{Last: map[int32]string{}}
	if len(args) > 1 && args[1] != "-" {
		for _, s := range strings.Split(args[1], ",") {
			p, c, _ := strings.Cut(s, ":")
			f.Last[atoi32(t, p)] = c
		}
	}
	before := fmt.Sprint(f.Last)
	client, next, ok := Schedule(heads, f)
	if fmt.Sprint(f.Last) != before {
		t.Errorf("Schedule modified its input state")
	}
	if !ok {
		return "none"
	}
	var ps []int
	for p := range next.Last {
		ps = append(ps, int(p))
	}
	sort.Sort(sort.Reverse(sort.IntSlice(ps)))
	var last []string
	for _, p := range ps {
		last = append(last, fmt.Sprintf("%d:%s", p, next.Last[int32(p)]))
	}
	return fmt.Sprintf("serve %s; last %s", client, strings.Join(last, ","))
}

// TestScheduleData runs testdata/schedule: sequences of enqueue, lease,
// set-priority and failure commands with the expected lease order. Each
// file gets a fresh queue on disk.
func TestScheduleData(t *testing.T) {
	for _, path := range ddFiles(t, "schedule") {
		t.Run(strings.TrimSuffix(path[strings.LastIndex(path, "/")+1:], ".txt"), func(t *testing.T) {
			h := newQueueHarness(t)
			runDD(t, path, h.run)
		})
	}
}

// TestScheduleOrderIndependent: the decision depends on the set of heads,
// not on the order the queue happens to list them in (it iterates a map).
func TestScheduleOrderIndependent(t *testing.T) {
	heads := []Head{{"c", 5}, {"a", 5}, {"d", 3}, {"b", 5}, {"e", 9}, {"f", 9}}
	for _, last := range []map[int32]string{nil, {9: "e"}, {9: "f"}, {5: "b"}} {
		want, _, _ := Schedule(heads, Fairness{Last: last})
		for i := 0; i < 50; i++ {
			perm := append([]Head(nil), heads...)
			// A deterministic shuffle.
			for j := len(perm) - 1; j > 0; j-- {
				k := (i*7 + j*13) % (j + 1)
				perm[j], perm[k] = perm[k], perm[j]
			}
			if got, _, _ := Schedule(perm, Fairness{Last: last}); got != want {
				t.Fatalf("last %v: order %v served %s, want %s", last, perm, got, want)
			}
		}
	}
}

// TestFairnessLongRun: with equal priorities, every client with work is
// served once per round, however unequal their backlogs.
func TestFairnessLongRun(t *testing.T) {
	h := newQueueHarness(t)
	sizes := map[string]int{"a": 300, "b": 10, "c": 100}
	for c, n := range sizes {
		var reqs []Request
		for i := 0; i < n; i++ {
			reqs = append(reqs, Request{Task: TaskID{Component: c, Block: fmt.Sprint(i)}, Client: c, Pipeline: "p", Priority: 1})
		}
		if _, err := h.q.Enqueue(reqs...); err != nil {
			t.Fatal(err)
		}
	}
	served := map[string]int{}
	for i := 0; i < 30; i++ { // ten full rounds of three clients
		l, ok, err := h.q.TryLease("w")
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		served[l.Client]++
	}
	for c := range sizes {
		if served[c] != 10 {
			t.Errorf("client %s served %d times in 10 rounds, want 10 (%v)", c, served[c], served)
		}
	}
	// b runs out after 10: then a and c alternate.
	served = map[string]int{}
	for i := 0; i < 40; i++ {
		l, _, _ := h.q.TryLease("w")
		served[l.Client]++
	}
	if served["a"] != 20 || served["c"] != 20 || served["b"] != 0 {
		t.Errorf("after b drained: %v, want a and c 20 each", served)
	}
}
