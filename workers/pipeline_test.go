package workers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/warehouse/blockref"
)

// TestPipelineData runs testdata/pipeline: a Pool of workers whose Runner
// is a scripted StagedRunner over a real Queue on the fake clock. Every
// stage of every task blocks until the script lets it return (ok, fail or
// panic), so the script decides the interleaving and each observation
// (state, stats, closed) waits until the pool reaches the state written in
// the file; the bound on that wait only turns a hang into a failure.
//
// Besides what the script prints, the harness checks invariants on every
// event and fails the test on any breach: never two tasks of one worker in
// one stage (the write stage: more than the pool's Writers), never more
// than TasksPerWorker leases held by one worker,
// Complete only after the task's Write returned, every staged task released
// exactly once, no stage run for a task after its lease was given up.
//
// Commands:
//
//	start workers=N [writers=W] [batch=B] [runner=plain]
//	                                 a fresh queue and pool (W writers a
//	                                 worker, default 1 here; leases of up
//	                                 to B tasks, default 1, all tasks being
//	                                 of one block; plain: the same stages
//	                                 behind a plain Runner)
//	enqueue a b ...                  tasks named a, b, ... (priority 1)
//	ok|fail|panic TASK stage=STAGE [msg=MSG|msg=(MORE WORDS)]
//	                                 wait until TASK is in STAGE (read,
//	                                 transform, write), then let it return
//	cancel TASK                      evict TASK (its lease is lost at its
//	                                 next heartbeat)
//	resize workers=N                 Pool.Resize
//	close [hard]                     Pool.Close in the background (hard:
//	                                 with a context already cancelled)
//	state [tick=D]                   every task: where it is (advancing the
//	                                 fake clock by D per poll, to make
//	                                 heartbeats happen)
//	stats                            pool, queue and peak counters
//	closed                           whether Close has returned, and what
//	                                 the workers held when it did
//	heartbeats rounds=N              step the clock until every leased
//	                                 task has heartbeated N more times, then
//	                                 run an expiry pass
func TestPipelineData(t *testing.T) {
	datadriven.Walk(t, "testdata/pipeline", func(t *testing.T, path string) {
		var h *pipeHarness
		defer func() {
			if h != nil {
				h.stop()
			}
		}()
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			if td.Cmd == "start" {
				if h != nil {
					h.stop()
				}
				var n int
				td.ScanArgs(t, "workers", &n)
				writers := 1
				td.MaybeScanArgs(t, "writers", &writers)
				var runner string
				td.MaybeScanArgs(t, "runner", &runner)
				batch := 1
				td.MaybeScanArgs(t, "batch", &batch)
				h = newPipeHarness(t, n, writers, batch, runner == "plain")
				return ""
			}
			if h == nil {
				td.Fatalf(t, "%s: no start", td.Cmd)
			}
			// The observations wait for the expected output; under -rewrite
			// there is none, and they wait for the answer to settle instead.
			expected := ""
			if !td.Rewrite {
				expected = strings.TrimRight(td.Expected, "\n")
			}
			return strings.TrimRight(h.do(td, expected), "\n")
		})
	})
}

type pipeStage int

const (
	stageRead pipeStage = iota
	stageTransform
	stageWrite
)

var (
	stageNames = [...]string{"read", "transform", "write"}
	stageVerbs = [...]string{"reading", "transforming", "writing"}
	stageDone  = [...]string{"read, waiting", "transformed, waiting", "written"}
)

type verdict struct {
	err   error
	panic string
}

type gate struct {
	stage pipeStage
	ch    chan verdict
}

// pipeHarness is the Leaser (around a real Queue) and the StagedRunner of
// the pool under test, so it sees every lease, stage and outcome.
type pipeHarness struct {
	t    *testing.T
	clk  *clock.Fake
	q    *Queue
	pool *Pool

	mu       sync.Mutex
	tasks    map[string]bool         // every task enqueued, by name
	status   map[string]string       // runner's view of the task's current lease
	worker   map[string]string       // who leased the task last
	leaseOf  map[string]string       // lease id -> task
	current  map[string]string       // task -> its last lease id
	given    map[string]bool         // lease id -> Complete or Fail called
	gates    map[string]gate         // task -> the stage it is blocked in
	occ      map[string]*[3]int      // worker -> tasks in each stage
	held     map[string]int          // worker -> leases held
	hbs      map[string]int          // lease id -> heartbeats answered
	told     map[string]bool         // lease id -> a heartbeat answered ErrCancelled
	deadline map[string]time.Time    // lease id -> deadline last granted
	outcome  map[string]string       // task -> how its last lease ended, if not by the queue
	staged   map[*fakeStagedTask]int // -> Release calls
	writers  int                     // the pool's PoolOptions.Writers
	peak     struct{ held, stage, busy int }
	bad      []string // invariant breaches

	closeDone chan error
	closeErr  error
	closeHeld int // leases held by the workers when Close returned
}

func newPipeHarness(t *testing.T, workers, writers, batch int, plain bool) *pipeHarness {
	clk := clock.NewFake(t0)
	h := &pipeHarness{
		t: t, clk: clk, q: openTest(t, t.TempDir(), clk),
		tasks: map[string]bool{}, status: map[string]string{}, worker: map[string]string{},
		leaseOf: map[string]string{}, current: map[string]string{}, given: map[string]bool{}, gates: map[string]gate{},
		occ: map[string]*[3]int{}, held: map[string]int{}, hbs: map[string]int{}, told: map[string]bool{},
		deadline: map[string]time.Time{}, outcome: map[string]string{}, staged: map[*fakeStagedTask]int{},
	}
	var r Runner = fakeStagedRunner{h}
	if plain {
		r = RunnerFunc(fakeStagedRunner{h}.Run)
	}
	h.writers = writers
	h.pool = NewPool(h, r, PoolOptions{Clock: clk, Writers: writers, BatchTasks: batch})
	h.pool.Resize(workers)
	return h
}

// stop lets every blocked stage return, closes the pool and the queue, and
// reports invariant breaches.
func (h *pipeHarness) stop() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
			h.mu.Lock()
			for task, g := range h.gates {
				select {
				case g.ch <- verdict{err: errors.New("test over")}:
				default:
				}
				delete(h.gates, task)
			}
			h.mu.Unlock()
		}
	}()
	_ = h.pool.Close(ctx)
	close(done)
	h.q.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	for st, n := range h.staged {
		if n != 1 {
			h.bad = append(h.bad, fmt.Sprintf("staged task %s released %d times", st.task, n))
		}
	}
	for _, b := range h.bad {
		h.t.Errorf("invariant: %s", b)
	}
}

func (h *pipeHarness) breach(format string, args ...any) {
	h.bad = append(h.bad, fmt.Sprintf(format, args...))
}

func (h *pipeHarness) do(td *datadriven.TestData, expected string) string {
	t := h.t
	tasks := operands(td)
	switch td.Cmd {
	case "enqueue":
		var reqs []Request
		h.mu.Lock()
		for _, name := range tasks {
			h.tasks[name] = true
			reqs = append(reqs, req(name, "0", "c", "p", 1))
		}
		h.mu.Unlock()
		if _, err := h.q.Enqueue(reqs...); err != nil {
			t.Fatal(err)
		}
		return ""
	case "ok", "fail", "panic":
		if len(tasks) != 1 {
			td.Fatalf(t, "want one TASK")
		}
		var stage string
		td.ScanArgs(t, "stage", &stage)
		s := -1
		for i, n := range stageNames {
			if n == stage {
				s = i
			}
		}
		if s < 0 {
			td.Fatalf(t, "unknown stage %q", stage)
		}
		msg := argText(td, "msg")
		v := verdict{}
		switch td.Cmd {
		case "fail":
			v.err = errors.New(msg)
		case "panic":
			v.panic = msg
		}
		var g gate
		if !h.await(func() bool {
			h.mu.Lock()
			defer h.mu.Unlock()
			var ok bool
			g, ok = h.gates[tasks[0]]
			return ok && g.stage == pipeStage(s)
		}, 0) {
			return fmt.Sprintf("%s never entered %s:\n%s", tasks[0], stage, h.state())
		}
		g.ch <- v
		return ""
	case "cancel":
		if ok, err := h.q.Cancel(TaskID{nameKey(tasks[0]), blockref.ParseMemo("0")}); !ok || err != nil {
			t.Fatalf("cancel %s: %v %v", tasks[0], ok, err)
		}
		return ""
	case "resize":
		var n int
		td.ScanArgs(t, "workers", &n)
		h.pool.Resize(n)
		return ""
	case "close":
		ctx, cancel := context.WithCancel(context.Background())
		if td.HasArg("hard") {
			cancel()
		}
		h.closeDone = make(chan error, 1)
		go func() {
			defer cancel()
			err := h.pool.Close(ctx)
			h.mu.Lock()
			for _, n := range h.held {
				h.closeHeld += n
			}
			h.mu.Unlock()
			h.closeDone <- err
		}()
		return ""
	case "state":
		var tick time.Duration
		td.MaybeScanArgs(t, "tick", &tick)
		return h.observe(expected, h.state, tick)
	case "stats":
		return h.observe(expected, h.stats, 0)
	case "closed":
		return h.observe(expected, func() string {
			select {
			case h.closeErr = <-h.closeDone:
				h.closeDone = nil
			default:
			}
			if h.closeDone != nil {
				return "closing"
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			return fmt.Sprintf("closed: %v; leases held then: %d", h.closeErr, h.closeHeld)
		}, 0)
	case "heartbeats":
		var rounds int
		td.ScanArgs(t, "rounds", &rounds)
		return h.heartbeats(rounds)
	}
	td.Fatalf(t, "unknown command %q", td.Cmd)
	return ""
}

// await polls cond, advancing the fake clock by tick each time if tick is
// set. The bound only turns a hang into a failure.
func (h *pipeHarness) await(cond func() bool, tick time.Duration) bool {
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			return false
		}
		if tick > 0 {
			h.clk.Advance(tick)
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// observe returns what get says once it says expected. Without an
// expectation (-rewrite) it waits for the answer to stay the same for a
// while instead.
func (h *pipeHarness) observe(expected string, get func() string, tick time.Duration) string {
	var got string
	if expected != "" {
		h.await(func() bool { got = strings.TrimRight(get(), "\n"); return got == expected }, tick)
		return got
	}
	last, since := "", time.Now()
	h.await(func() bool {
		got = get()
		if got != last {
			last, since = got, time.Now()
		}
		return time.Since(since) > 300*time.Millisecond
	}, tick)
	return got
}

// state is one line per task: completed, queued (with its failed
// attempts), quarantined, cancelled, or where it is in a worker.
func (h *pipeHarness) state() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var names []string
	for n := range h.tasks {
		names = append(names, n)
	}
	sort.Strings(names)
	var sb strings.Builder
	for _, n := range names {
		fmt.Fprintf(&sb, "%s: ", n)
		tk, ok := h.q.Get(TaskID{nameKey(n), blockref.ParseMemo("0")})
		switch {
		case !ok && h.outcome[n] != "":
			sb.WriteString(h.outcome[n])
		case !ok:
			told := ""
			if h.told[h.current[n]] {
				told = " (a heartbeat told it)"
			}
			fmt.Fprintf(&sb, "cancelled, still held by %s%s: %s", h.worker[n], told, h.where(n))
		case tk.State == StateQueued && tk.Attempts == 0:
			sb.WriteString("queued")
		case tk.State == StateQueued:
			fmt.Fprintf(&sb, "queued after %d failed attempts, last: %s", tk.Attempts, firstLine(tk.Err))
		case tk.State == StateQuarantined:
			fmt.Fprintf(&sb, "quarantined after %d attempts: %s", tk.Attempts, firstLine(tk.Err))
		case h.status[n] == "":
			fmt.Fprintf(&sb, "leased by %s", h.worker[n])
		default:
			fmt.Fprintf(&sb, "%s (%s)", h.status[n], h.worker[n])
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func (h *pipeHarness) stats() string {
	ps, qs := h.pool.Stats(), h.q.Stats()
	h.mu.Lock()
	defer h.mu.Unlock()
	released := 0
	for _, n := range h.staged {
		released += n
	}
	return fmt.Sprintf("pool: size=%d target=%d completed=%d failed=%d panics=%d lost=%d\n"+
		"queue: queued=%d leased=%d completed=%d failures=%d quarantined=%d\n"+
		"staged tasks: read=%d released=%d\n"+
		"peaks per worker: leases=%d tasks-in-one-stage=%d busy-stages=%d",
		h.pool.Size(), h.pool.Target(), ps.Completed, ps.Failed, ps.Panics, ps.LeaseLost,
		qs.Queued, qs.Leased, qs.Completed, qs.Failures, qs.Quarantined,
		len(h.staged), released, h.peak.held, h.peak.stage, h.peak.busy)
}

// heartbeats steps the fake clock a second at a time, never to within 5s
// of the earliest deadline granted, until every lease held has been
// heartbeated rounds more times; then it runs an expiry pass at that time.
func (h *pipeHarness) heartbeats(rounds int) string {
	h.mu.Lock()
	start := map[string]int{}
	for id, task := range h.leaseOf {
		if !h.given[id] && h.outcome[task] == "" {
			start[id] = h.hbs[id]
		}
	}
	h.mu.Unlock()
	ok := h.await(func() bool {
		h.mu.Lock()
		done, earliest := true, time.Time{}
		for id, n := range start {
			if h.hbs[id] < n+rounds {
				done = false
			}
			if d := h.deadline[id]; earliest.IsZero() || d.Before(earliest) {
				earliest = d
			}
		}
		h.mu.Unlock()
		if !done && h.clk.Now().Add(time.Second).Before(earliest.Add(-5*time.Second)) {
			h.clk.Advance(time.Second)
		}
		return done
	}, 0)
	if !ok {
		return "heartbeats stalled"
	}
	n, err := h.q.ExpireLeases(h.clk.Now())
	return fmt.Sprintf("%d leases heartbeated %d times each; expired: %d %v", len(start), rounds, n, err)
}

// where says where a leased task is in its worker: its stage, or waiting
// for its turn in its batch.
func (h *pipeHarness) where(task string) string {
	if st := h.status[task]; st != "" {
		return st
	}
	return "leased, waiting in its batch"
}

// --- Leaser

func (h *pipeHarness) LeaseBatch(ctx context.Context, w string, maxTasks int) ([]Lease, error) {
	ls, err := h.q.LeaseBatch(ctx, w, maxTasks)
	if err != nil {
		return ls, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, l := range ls {
		task := keyName(l.Task.ID.Component)
		h.worker[task], h.status[task], h.outcome[task] = w, "", ""
		h.leaseOf[l.ID] = task
		h.current[task] = l.ID
		h.deadline[l.ID] = l.Deadline
		h.held[w]++
	}
	if h.held[w] > h.pool.TasksPerWorker() {
		h.breach("%s holds %d leases", w, h.held[w])
	}
	h.peak.held = max(h.peak.held, h.held[w])
	return ls, nil
}

func (h *pipeHarness) Heartbeat(ctx context.Context, id string) (time.Time, error) {
	d, err := h.q.Heartbeat(ctx, id)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.given[id] {
		h.breach("heartbeat of lease %s after Complete or Fail", id)
	}
	h.hbs[id]++
	if err == nil {
		h.deadline[id] = d
	}
	if errors.Is(err, ErrCancelled) {
		h.told[id] = true
	}
	return d, err
}

// giveUp records that the pool let go of a lease.
func (h *pipeHarness) giveUp(id string) string {
	task := h.leaseOf[id]
	if h.given[id] {
		h.breach("lease %s of %s given up twice", id, task)
	}
	h.given[id] = true
	h.held[h.worker[task]]--
	return task
}

func (h *pipeHarness) Complete(ctx context.Context, id string, res Result) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	task := h.giveUp(id)
	if h.status[task] != stageDone[stageWrite] {
		h.breach("Complete of %s while it is %q", task, h.status[task])
	}
	err := h.q.Complete(ctx, id, res)
	switch {
	case err == nil:
		h.outcome[task] = "completed"
	case errors.Is(err, ErrCancelled):
		h.outcome[task] = "cancelled, written and dropped by " + h.worker[task]
	}
	return err
}

func (h *pipeHarness) Fail(ctx context.Context, id, cause string) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	task := h.giveUp(id)
	quarantined, err := h.q.Fail(ctx, id, cause)
	if errors.Is(err, ErrCancelled) {
		h.outcome[task] = fmt.Sprintf("cancelled, dropped by %s after: %s", h.worker[task], h.where(task))
	}
	h.status[task] = ""
	return quarantined, err
}

// --- StagedRunner

type fakeStagedRunner struct{ h *pipeHarness }

func (r fakeStagedRunner) Run(ctx context.Context, t Task) (Result, error) {
	return RunStages(ctx, r, t)
}

func (r fakeStagedRunner) Read(ctx context.Context, t Task) (StagedTask, error) {
	task := keyName(t.ID.Component)
	if err := r.h.stage(ctx, task, stageRead); err != nil {
		return nil, err
	}
	st := &fakeStagedTask{h: r.h, task: task}
	r.h.mu.Lock()
	r.h.staged[st] = 0
	r.h.mu.Unlock()
	return st, nil
}

type fakeStagedTask struct {
	h    *pipeHarness
	task string
}

func (s *fakeStagedTask) Transform(ctx context.Context) error {
	return s.h.stage(ctx, s.task, stageTransform)
}

func (s *fakeStagedTask) Write(ctx context.Context) (Result, error) {
	return Result{Rows: 1}, s.h.stage(ctx, s.task, stageWrite)
}

func (s *fakeStagedTask) Release() {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	s.h.staged[s]++
}

// limit is how many tasks one worker may have in stage s at once.
func (h *pipeHarness) limit(s pipeStage) int {
	if s == stageWrite {
		return h.writers
	}
	return 1
}

// stage blocks task in stage s until the script's verdict (or its
// context's end), keeping count of what each worker runs at once.
func (h *pipeHarness) stage(ctx context.Context, task string, s pipeStage) error {
	h.mu.Lock()
	w := h.worker[task]
	if id := h.current[task]; h.given[id] {
		h.breach("%s of %s after its lease %s was given up", stageNames[s], task, id)
	}
	occ := h.occ[w]
	if occ == nil {
		occ = new([3]int)
		h.occ[w] = occ
	}
	occ[s]++
	if limit := h.limit(s); occ[s] > limit {
		h.breach("%s has %d tasks in %s", w, occ[s], stageNames[s])
	}
	busy := 0
	for _, n := range occ {
		if n > 0 {
			busy++
		}
	}
	h.peak.stage = max(h.peak.stage, occ[s])
	h.peak.busy = max(h.peak.busy, busy)
	g := gate{stage: s, ch: make(chan verdict, 1)}
	h.gates[task] = g
	h.status[task] = stageVerbs[s]
	h.mu.Unlock()

	var v verdict
	select {
	case v = <-g.ch:
	case <-ctx.Done():
		v.err = ctx.Err()
	}

	h.mu.Lock()
	occ[s]--
	if h.gates[task].ch == g.ch {
		delete(h.gates, task)
	}
	switch {
	case v.panic != "":
		h.status[task] = stageNames[s] + " panicked"
	case errors.Is(v.err, context.Canceled):
		h.status[task] = stageNames[s] + " stopped: " + v.err.Error()
	case v.err != nil:
		h.status[task] = stageNames[s] + " failed: " + v.err.Error()
	default:
		h.status[task] = stageDone[s]
	}
	h.mu.Unlock()
	if v.panic != "" {
		panic(v.panic)
	}
	return v.err
}
