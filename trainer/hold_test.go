package trainer

import (
	"context"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/workers"
)

// runAsync runs a job in the background; the controller arrives on ch.
func runAsync(t *testing.T, cfg JobConfig) (ctrl <-chan *Controller, addr *atomic.Value, done <-chan Report) {
	t.Helper()
	cc := make(chan *Controller, 1)
	av := &atomic.Value{}
	dc := make(chan Report, 1)
	cfg.OnController = func(c *Controller, a string) {
		av.Store(a)
		cc <- c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	go func() {
		rep, err := RunJob(ctx, cfg)
		if err != nil {
			t.Errorf("RunJob: %v", err)
		}
		dc <- rep
	}()
	return cc, av, dc
}

// waitStatus polls the controller until cond holds.
func waitStatus(t *testing.T, c *Controller, what string, cond func(s snapshot) bool) snapshot {
	t.Helper()
	end := time.Now().Add(60 * time.Second)
	for time.Now().Before(end) {
		if s := c.snapshot(); cond(s) {
			return s
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s (status %s)", what, c.snapshot().status)
	return snapshot{}
}

// TestTransientHoldLiftedByCompletion: the job's memoized data is pending
// (SIG's workers are held back), so the controller places a transient hold
// at epoch planning, releasing its chips (paper VI.A). When the workers
// finish, the completion events (sig.memo.ready and the WatchReadSolution
// stream) lift the hold with no human action — the periodic re-read is set
// to an hour, so only an event can — and the job trains to the end.
func TestTransientHoldLiftedByCompletion(t *testing.T) {
	gate := make(chan struct{})
	var ran atomic.Int64
	e := newEnv(t, 4, 1000, sigd.Options{WrapRunner: func(r workers.Runner) workers.Runner {
		return workers.RunnerFunc(func(ctx context.Context, tk workers.Task) (workers.Result, error) {
			select {
			case <-gate:
			case <-ctx.Done():
				return workers.Result{}, ctx.Err()
			}
			ran.Add(1)
			return r.Run(ctx, tk)
		})
	}})
	cfg := e.jobConfig(t, "held")
	cfg.HoldPollInterval = time.Hour
	ctrl, _, done := runAsync(t, cfg)
	c := <-ctrl
	s := waitStatus(t, c, "a transient hold", func(s snapshot) bool { return s.hold != nil })
	if s.hold.Kind.String() != "transient" || !strings.Contains(s.hold.Reason, "pending") || s.chips != 0 {
		t.Fatalf("hold %+v with %d chips, want a transient hold for pending data and no chips", s.hold, s.chips)
	}
	// The hold stays while the data is pending.
	time.Sleep(300 * time.Millisecond)
	if s := c.snapshot(); s.hold == nil || ran.Load() != 0 {
		t.Fatalf("hold lifted (%v) or tasks ran (%d) before the workers were let go", s.hold, ran.Load())
	}
	close(gate) // the workers memoize; completion events follow
	rep := <-done
	if rep.Exit != "done" {
		t.Fatalf("exit %q", rep.Exit)
	}
	if len(rep.Holds) == 0 || rep.Holds[0].Kind != "transient" || rep.Holds[0].Lifted.IsZero() || rep.Holds[0].LiftedBy != "data ready" {
		t.Fatalf("holds %+v", rep.Holds)
	}
	if rep.Stats.TransientHolds < 1 || rep.Stats.PermanentHolds != 0 {
		t.Fatalf("stats %+v", rep.Stats)
	}
	checkExactlyOnce(t, e, "held")
}

// TestNaNLossPermanentHold: a NaN injected into the loss places a permanent
// hold (paper VI.A): the attempt fails, the chips go back, and nothing but
// a person lifts it — not time, not re-reads of the solution. The trainer's
// own token may not release it; `sigctl hold release` with the client's
// token does, and the job retrains from its last checkpoint to the end,
// every event exactly once.
func TestNaNLossPermanentHold(t *testing.T) {
	e := newEnv(t, 4, 1000, sigd.Options{})
	e.memoize(t, "warm")
	cfg := e.jobConfig(t, "nan")
	cfg.Faults.NaNAtStep = 12 // in the second epoch
	cfg.HoldPollInterval = 50 * time.Millisecond
	var entries []auth.Entry
	for _, p := range sigdtest.Principals {
		entries = append(entries, auth.Entry{Token: e.sigd.Tokens[p.Name], Principal: p})
	}
	toks, err := auth.New(entries)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tokens = toks
	ctrl, addr, done := runAsync(t, cfg)
	c := <-ctrl
	s := waitStatus(t, c, "a permanent hold", func(s snapshot) bool { return s.hold != nil })
	if s.hold.Kind.String() != "permanent" || !strings.Contains(s.hold.Reason, "not finite") || s.chips != 0 {
		t.Fatalf("hold %+v with %d chips", s.hold, s.chips)
	}
	sigctl := sigdtest.BuildCommand(t, "cmd/sigctl")
	run := func(token string, args ...string) (string, error) {
		out, err := exec.Command(sigctl, append([]string{"hold"}, append(args, "--trainer", addr.Load().(string), "--token", token)...)...).CombinedOutput()
		return string(out), err
	}
	out, err := run(e.sigd.Tokens["trainer"], "list")
	if err != nil || !strings.Contains(out, "permanent") || !strings.Contains(out, "not finite") {
		t.Fatalf("sigctl hold list: %v\n%s", err, out)
	}
	// It stays: many ticks and solution re-reads later it is still there.
	time.Sleep(time.Second)
	if s := c.snapshot(); s.hold == nil || s.status.String() != "held" {
		t.Fatalf("the permanent hold did not stay: %+v", s)
	}
	if out, err := run(e.sigd.Tokens["trainer"], "release"); err == nil || !strings.Contains(out, "PermissionDenied") {
		t.Fatalf("the trainer's own token released the hold: %v\n%s", err, out)
	}
	if out, err := run(e.sigd.Tokens["ctr"], "release", "--reason", "fixed the learning rate"); err != nil || !strings.Contains(out, "released hold") {
		t.Fatalf("sigctl hold release: %v\n%s", err, out)
	}
	rep := <-done
	if rep.Exit != "done" || rep.Stats.PermanentHolds != 1 || rep.Stats.FailedAttempts < 1 {
		t.Fatalf("exit %q, stats %+v", rep.Exit, rep.Stats)
	}
	if h := rep.Holds[len(rep.Holds)-1]; h.Kind != "permanent" || h.LiftedBy != "released" {
		t.Fatalf("holds %+v", rep.Holds)
	}
	checkExactlyOnce(t, e, "nan")
}

// TestPermanentHoldsOnBadConfig: a graph SIG does not compile
// (InvalidArgument from SubmitGraph) and embedding tables that do not fit
// the slice's HBM (the partitioner's out of memory) are permanent errors
// (paper VI.A): each places a permanent hold, holding no chips, that stays.
func TestPermanentHoldsOnBadConfig(t *testing.T) {
	e := newEnv(t, 2, 500, sigd.Options{})
	cases := []struct {
		name, reason string
		change       func(*JobConfig)
	}{
		{"compile-error", "InvalidArgument", func(c *JobConfig) { c.Graph = "input x = no_such_op(col(\"query\"))\n" }},
		{"out-of-memory", "out of memory", func(c *JobConfig) { c.HBMBytesPerChip = 1 << 10 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := e.jobConfig(t, "bad-"+tc.name)
			tc.change(&cfg)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cc := make(chan *Controller, 1)
			cfg.OnController = func(c *Controller, _ string) { cc <- c }
			done := make(chan Report, 1)
			go func() {
				rep, _ := RunJob(ctx, cfg)
				done <- rep
			}()
			c := <-cc
			s := waitStatus(t, c, "a permanent hold", func(s snapshot) bool { return s.hold != nil })
			if s.hold.Kind.String() != "permanent" || !strings.Contains(s.hold.Reason, tc.reason) || s.chips != 0 {
				t.Fatalf("hold %+v with %d chips, want a permanent hold naming %q", s.hold, s.chips, tc.reason)
			}
			time.Sleep(300 * time.Millisecond)
			if s := c.snapshot(); s.hold == nil || s.status.String() != "held" {
				t.Fatalf("the hold did not stay: %+v", s)
			}
			cancel()
			if rep := <-done; rep.Exit != "stopped" || rep.Stats.PermanentHolds != 1 || rep.Steps != 0 {
				t.Fatalf("report %+v", rep.Stats)
			}
		})
	}
}
