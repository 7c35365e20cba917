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

	"github.com/cockroachdb/datadriven"

	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/warehouse/blockref"
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
		return TaskID{Component: nameKey(c), Block: blockref.ParseMemo(b)}
	}
	return TaskID{Component: nameKey(s), Block: blockref.ParseMemo("b")}
}

func atoi32(t *testing.T, s string) int32 {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		t.Fatalf("bad number %q", s)
	}
	return int32(n)
}

// operands returns the command's bare words, the tasks it names, in order.
func operands(td *datadriven.TestData) []string {
	var words []string
	for _, a := range td.CmdArgs {
		if len(a.Vals) == 0 {
			words = append(words, a.Key)
		}
	}
	return words
}

// argText returns the text of key=word or key=(some words), "" if the
// argument is absent. datadriven splits a parenthesized value at commas;
// they are put back.
func argText(td *datadriven.TestData, key string) string {
	a, ok := td.Arg(key)
	if !ok {
		return ""
	}
	return strings.Join(a.Vals, ", ")
}

// arg returns the value of key=value; the case fails if it is absent.
func arg(t *testing.T, td *datadriven.TestData, key string) string {
	var v string
	td.ScanArgs(t, key, &v)
	return v
}

func (h *queueHarness) run(t *testing.T, td *datadriven.TestData) string {
	f := operands(td)
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
	switch td.Cmd {
	case "enqueue": // enqueue TASK... client=C pipeline=P priority=N
		var reqs []Request
		for _, s := range f {
			reqs = append(reqs, Request{Task: parseTask(s), Client: arg(t, td, "client"), Pipeline: arg(t, td, "pipeline"), Priority: atoi32(t, arg(t, td, "priority"))})
		}
		n, err := q.Enqueue(reqs...)
		if err != nil {
			return errOut(err)
		}
		return fmt.Sprintf("created %d", n)
	case "lease": // lease [n=N] [batch=M]: N leases of up to M tasks each (default 1), a line each: client@priority task, comma-separated
		n, batch := 1, 1
		td.MaybeScanArgs(t, "n", &n)
		td.MaybeScanArgs(t, "batch", &batch)
		var out []string
		for i := 0; i < n; i++ {
			ls, err := q.TryLeaseBatchAs("w", "", batch)
			if err != nil {
				return errOut(err)
			}
			if len(ls) == 0 {
				out = append(out, "none")
				break
			}
			var line []string
			for _, l := range ls {
				h.leases[l.Task.ID] = l.ID
				line = append(line, fmt.Sprintf("%s@%d %s", l.Client, l.Priority, keyName(l.Task.ID.Component)+blockSuffix(l.Task.ID)))
			}
			out = append(out, strings.Join(line, ", "))
		}
		return strings.Join(out, "\n")
	case "set-priority": // set-priority client=C pipeline=P priority=N
		n, err := q.SetPriority(arg(t, td, "client"), arg(t, td, "pipeline"), atoi32(t, arg(t, td, "priority")))
		if err != nil {
			return errOut(err)
		}
		return fmt.Sprintf("moved %d", n)
	case "complete": // complete TASK
		if err := q.Complete(context.Background(), h.leases[parseTask(f[0])], Result{}); err != nil {
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
	case "fail": // fail TASK err=CAUSE|err=(LONGER CAUSE)
		id := parseTask(f[0])
		quarantined, err := q.Fail(context.Background(), h.leases[id], argText(td, "err"))
		if err != nil {
			return errOut(err)
		}
		tk, _ := q.Get(id)
		if quarantined {
			return fmt.Sprintf("quarantined attempts=%d", tk.Attempts)
		}
		return fmt.Sprintf("requeued attempts=%d", tk.Attempts)
	case "return": // return TASK: give a lease back unrun
		if err := q.Return(h.leases[parseTask(f[0])]); err != nil {
			return errOut(err)
		}
		return "ok"
	case "heartbeat": // heartbeat TASK
		d, err := q.Heartbeat(context.Background(), h.leases[parseTask(f[0])])
		if err != nil {
			return errOut(err)
		}
		return "deadline +" + d.Sub(t0).String()
	case "advance": // advance by=DURATION
		var d time.Duration
		td.ScanArgs(t, "by", &d)
		h.clk.Advance(d)
		return "now +" + h.clk.Now().Sub(t0).String()
	case "expire":
		n, err := q.ExpireLeases(h.clk.Now())
		if err != nil {
			return errOut(err)
		}
		return fmt.Sprintf("expired %d", n)
	case "cancel": // cancel TASK
		ok, err := q.Cancel(parseTask(f[0]))
		if err != nil {
			return errOut(err)
		}
		return fmt.Sprintf("cancelled %v", ok)
	case "remove-pipeline": // remove-pipeline client=C pipeline=P
		n, err := q.RemovePipeline(arg(t, td, "client"), arg(t, td, "pipeline"))
		if err != nil {
			return errOut(err)
		}
		return fmt.Sprintf("cancelled %d", n)
	case "release": // release TASK
		ok, err := q.Release(parseTask(f[0]))
		if err != nil {
			return errOut(err)
		}
		return fmt.Sprintf("released %v", ok)
	case "quarantine":
		var out []string
		for _, tk := range q.ListQuarantine() {
			out = append(out, fmt.Sprintf("%s attempts=%d err=%q", keyName(tk.ID.Component)+blockSuffix(tk.ID), tk.Attempts, tk.Err))
		}
		if len(out) == 0 {
			return "empty"
		}
		return strings.Join(out, "\n")
	case "task": // task TASK: state, priority and requesters
		tk, ok := q.Get(parseTask(f[0]))
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
	case "quota": // quota n=N: reopen with MaxQueuedPerClient N
		if err := q.Close(); err != nil {
			return errOut(err)
		}
		h.opts.MaxQueuedPerClient = int(atoi32(t, arg(t, td, "n")))
		h.open()
		return "ok"
	case "admit": // admit TASK... client=C: may C ask for the tasks?
		var ids []TaskID
		for _, s := range f {
			ids = append(ids, parseTask(s))
		}
		client := arg(t, td, "client")
		if err := q.Admit(client, ids); err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprintf("ok; room %d", q.Room(client))
	case "schedule": // schedule [heads=(...)] [last=(...)]: the pure decision
		var heads, last []string
		td.MaybeScanArgs(t, "heads", &heads)
		td.MaybeScanArgs(t, "last", &last)
		return runSchedule(t, heads, last)
	}
	td.Fatalf(t, "unknown command %q", td.Cmd)
	return ""
}

func blockSuffix(id TaskID) string {
	if id.Block == blockref.NewMemo("b", 1) {
		return ""
	}
	return "/" + id.Block.String()
}

// runSchedule: heads as client:priority and last as priority:client (none
// for none). Prints the client served and the new fairness state.
func runSchedule(t *testing.T, headArgs, lastArgs []string) string {
	var heads []Head
	for _, s := range headArgs {
		c, p, _ := strings.Cut(s, ":")
		heads = append(heads, Head{Client: c, Priority: atoi32(t, p)})
	}
	f := Fairness{Last: map[int32]string{}}
	for _, s := range lastArgs {
		p, c, _ := strings.Cut(s, ":")
		f.Last[atoi32(t, p)] = c
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
	datadriven.Walk(t, "testdata/schedule", func(t *testing.T, path string) {
		h := newQueueHarness(t)
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			return strings.TrimRight(h.run(t, td), "\n")
		})
	})
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
			reqs = append(reqs, Request{Task: TaskID{Component: nameKey(c), Block: blockref.ParseMemo(fmt.Sprint(i))}, Client: c, Pipeline: "p", Priority: 1})
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
