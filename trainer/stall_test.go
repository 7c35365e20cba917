package trainer

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/reader"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/trainer/accounting/goodput"
	"github.com/sigdata/sig/trainer/accounting/stall"
	"github.com/sigdata/sig/workers"
)

// measuredStall is the job's input stall as goodput measured it, in wall
// time: each phase's input-stall chip-seconds over the phase's chips.
func measuredStall(t *testing.T, rep Report, chips map[string]int) time.Duration {
	t.Helper()
	var s float64
	for _, j := range rep.Goodput.Jobs {
		if j.Job != rep.Job {
			continue
		}
		for _, p := range j.Phases {
			s += p.ChipSeconds[goodput.InputStall] / float64(chips[p.Phase])
		}
	}
	return time.Duration(s * float64(time.Second))
}

func within1pct(t *testing.T, led stall.Ledger, measured time.Duration) {
	t.Helper()
	got := led.Charged()
	if measured <= 0 {
		t.Fatalf("no input stall measured (ledger %v)", got)
	}
	if d := got - measured; d > measured/100 || -d > measured/100 {
		t.Fatalf("attributed stall %v, measured input stall %v: more than 1%% apart\n%s", got, measured, led.Text())
	}
	t.Logf("attributed stall %v, measured input stall %v (%.3f%%)", got, measured, 100*float64(got-measured)/float64(measured))
}

// TestStallAttributedToWorkAhead (issue 30): a low-priority job stalls
// because a high-priority client's tasks fill the queue. The job's
// attributed stall names that client and priority, and sums to the
// measured input stall within 1%; raising the job's priority mid-stall
// shortens what is left of it (its tasks run next), and the ledger's
// charges show the change: nothing charged to the other client after it.
func TestStallAttributedToWorkAhead(t *testing.T) {
	var slow atomic.Bool
	const taskTime, maxWorkers = 400 * time.Millisecond, 2 // newEnv's sigd: at most 2 workers
	e := newEnv(t, 6, 200, sigd.Options{WrapRunner: func(r workers.Runner) workers.Runner {
		return workers.RunnerFunc(func(ctx context.Context, tk workers.Task) (workers.Result, error) {
			if slow.Load() {
				select { // a worker slower than the queue is long
				case <-time.After(taskTime):
				case <-ctx.Done():
					return workers.Result{}, ctx.Err()
				}
			}
			return r.Run(ctx, tk)
		})
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The job's first two blocks are memoized; the rest are not.
	ctr := e.sigd.SIG(t, "ctr")
	if _, err := ctr.SubmitGraph(ctx, sigdtest.Submit("ctr", "warm", 0, sigdtest.DSL(t, "ctr_small"), e.w.Range(0, 2))); err != nil {
		t.Fatal(err)
	}
	sigdtest.WaitComplete(ctx, t, ctr, "ctr", "warm")
	// ranking's pipeline at priority 900 fills the queue with every block.
	slow.Store(true)
	if _, err := e.sigd.SIG(t, "ranking").SubmitGraph(ctx, sigdtest.Submit("ranking", "top", 900, sigdtest.DSL(t, "ranking"), e.w.All())); err != nil {
		t.Fatal(err)
	}
	cfg := e.jobConfig(t, "low")
	cfg.Priority, cfg.EpochUnits, cfg.Hosts = 100, 1, 1
	cfg.HoldAfter, cfg.ExplainInterval = 2*time.Minute, 100*time.Millisecond
	ctrl, _, done := runAsync(t, cfg)
	c := <-ctrl
	waitStatus(t, c, "a stall on SIG", func(s snapshot) bool { return s.status.String() == "stalled" })
	time.Sleep(1500 * time.Millisecond) // stalled behind ranking's work
	// What is ahead of the job's pending entries now: ranking's tasks
	// would take at least this long without the raise.
	why, err := ctr.ExplainPending(ctx, &sigv1.ExplainPendingRequest{Client: "ctr", Pipeline: "low"})
	if err != nil {
		t.Fatal(err)
	}
	var ahead uint32
	for _, en := range why.GetEntries() {
		for _, a := range en.GetAhead() {
			if a.GetClient() == "ranking" {
				ahead = max(ahead, a.GetTasks())
			}
		}
	}
	raised := time.Now()
	if _, err := ctr.SetPriority(ctx, &sigv1.SetPriorityRequest{Client: "ctr", Pipeline: "low", Priority: 1000}); err != nil {
		t.Fatal(err)
	}
	rep := <-done
	if rep.Exit != "done" {
		t.Fatalf("exit %q", rep.Exit)
	}
	led := rep.Stall
	t.Logf("\n%s", led.Text())
	within1pct(t, led, measuredStall(t, rep, map[string]int{"initial": cfg.Chips, "caught-up": cfg.CaughtUpChips}))

	// Before the raise: charged to ranking's work at 900, on a block the
	// job waited for; after it, not (explanations come every 100ms).
	var behind time.Duration
	var waited string // the block the job waited on when its priority was raised
	for _, ch := range led.Charges {
		if !ch.Start.After(raised) && ch.End.After(raised) {
			waited = ch.Cause.Block
		}
		if ch.Cause.Kind.SIG() && ch.Cause.Client == "ranking" {
			if ch.Cause.Priority != 900 || ch.Cause.Component == "" || ch.Cause.Block == "" {
				t.Fatalf("charge %+v: want ranking@900 on a component and block", ch)
			}
			behind += ch.End.Sub(ch.Start)
			if ch.End.After(raised.Add(time.Second)) {
				t.Fatalf("charged to ranking's work until %v, %v after the raise", ch.End, ch.End.Sub(raised))
			}
		}
	}
	if behind < time.Second {
		t.Fatalf("%v of stall charged to ranking@900, want the 1.5s waited behind it\n%s", behind, led.Text())
	}
	var lineOK bool
	for _, ln := range led.Lines {
		if ln.Cause.Kind == stall.Queued && ln.Cause.Client == "ranking" && ln.AheadOf > 0 &&
			strings.Contains(ln.Sentence(), "of client ranking at priority 900") {
			lineOK = true
		}
	}
	if !lineOK {
		t.Fatalf("no line queued behind ranking@900:\n%s", led.Text())
	}
	// The stall on the block waited at the raise ended sooner than
	// ranking's tasks then ahead of it could have run.
	var ended time.Time
	for _, ch := range led.Charges {
		if ch.Cause.Block == waited && ch.End.After(ended) {
			ended = ch.End
		}
	}
	floor := time.Duration(ahead) * taskTime / maxWorkers
	t.Logf("the raise at +%v: %d of ranking's tasks ahead (at least %v of work); the stall on block %s ended %v later",
		raised.Sub(led.Charges[0].Start).Round(time.Millisecond), ahead, floor, waited, ended.Sub(raised).Round(time.Millisecond))
	if waited == "" || ahead == 0 || ended.Sub(raised) >= floor {
		t.Fatalf("raising the priority did not shorten the stall on %q: ended %v after the raise, %d tasks (%v) of ranking's were ahead",
			waited, ended.Sub(raised), ahead, floor)
	}
	if !strings.Contains(rep.textOrFail(t), "input stall") {
		t.Fatal("the report's text has no stall by cause")
	}
}

func (r Report) textOrFail(t *testing.T) string {
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// slowProxy forwards TCP connections to a backend; while slow is set it
// holds every chunk the backend sends for delay.
type slowProxy struct {
	lis     net.Listener
	backend string
	slow    atomic.Bool
	delay   time.Duration
	wg      sync.WaitGroup
}

func newSlowProxy(t *testing.T, backend string, delay time.Duration) *slowProxy {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &slowProxy{lis: lis, backend: backend, delay: delay}
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", backend)
			if err != nil {
				c.Close()
				continue
			}
			go func() { _, _ = io.Copy(b, c); b.Close() }()
			go func() {
				defer c.Close()
				buf := make([]byte, 16<<10)
				for {
					n, err := b.Read(buf)
					if n > 0 {
						if p.slow.Load() {
							time.Sleep(p.delay)
						}
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { lis.Close() })
	return p
}

// TestStallChargedToSlowReader (issue 30): every input memoized, the
// job's one reader slowed (a proxy holding its responses): the job's
// stall is charged to the reader, none of it to SIG, and sums to the
// measured input stall within 1%.
func TestStallChargedToSlowReader(t *testing.T) {
	e := newEnv(t, 4, 400, sigd.Options{})
	e.memoize(t, "warm")
	srv, err := reader.NewServer(reader.Config{Store: e.w.Store, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := srv.GRPCServer()
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	proxy := newSlowProxy(t, lis.Addr().String(), 60*time.Millisecond)
	proxy.slow.Store(true)
	cfg := e.jobConfig(t, "slowread")
	cfg.Readers = []string{proxy.lis.Addr().String()}
	reg := prometheus.NewRegistry()
	cfg.Registry = reg
	cfg.HoldAfter, cfg.ExplainInterval = time.Minute, 100*time.Millisecond
	_, _, done := runAsync(t, cfg)
	rep := <-done
	if rep.Exit != "done" {
		t.Fatalf("exit %q", rep.Exit)
	}
	led := rep.Stall
	t.Logf("\n%s", led.Text())
	within1pct(t, led, measuredStall(t, rep, map[string]int{"initial": cfg.Chips, "caught-up": cfg.CaughtUpChips}))
	var readerSide, sigSide time.Duration
	for k, d := range led.ByKind() {
		switch {
		case k.Reader():
			readerSide += d
		case k.SIG():
			sigSide += d
		}
	}
	if sigSide != 0 {
		t.Fatalf("%v charged to SIG with every input memoized:\n%s", sigSide, led.Text())
	}
	if readerSide < led.Stall*8/10 {
		t.Fatalf("%v of %v charged to the reader, want most of it:\n%s", readerSide, led.Stall, led.Text())
	}
	// /metrics: sig_trainer_input_stall_seconds_total by cause kind.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byCause := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "sig_trainer_input_stall_seconds_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "cause" {
					byCause[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	if byCause["reader_fetch"] <= 0 || byCause["queued"] != 0 || len(byCause) != len(stall.Kinds) {
		t.Fatalf("sig_trainer_input_stall_seconds_total by cause: %v", byCause)
	}
}
