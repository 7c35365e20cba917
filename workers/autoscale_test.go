package workers

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/warehouse/blockref"
)

// TestDecideData runs testdata/autoscale: a config, then observations with
// the decision after each.
func TestDecideData(t *testing.T) {
	datadriven.Walk(t, "testdata/autoscale", func(t *testing.T, path string) {
		var cfg ScaleConfig
		var st ScaleState
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			dur := func(k string) time.Duration {
				var d time.Duration
				td.ScanArgs(t, k, &d)
				return d
			}
			num := func(k string) float64 {
				var x float64
				td.MaybeScanArgs(t, k, &x)
				return x
			}
			switch td.Cmd {
			case "config":
				cfg = ScaleConfig{Min: int(num("min")), Max: int(num("max")), TargetDrain: dur("drain"), CoolDown: dur("cooldown"), DefaultTaskSeconds: num("default-cost"), TasksPerWorker: int(num("tasks-per-worker"))}
				st = ScaleState{}
				if err := cfg.Validate(); err != nil {
					return err.Error()
				}
				return "ok"
			case "observe":
				o := Observation{Now: t0.Add(dur("t")), Backlog: int(num("backlog")), TaskSeconds: num("cost")}
				before := st
				var n int
				n, st = cfg.Decide(st, o)
				if again, _ := cfg.Decide(before, o); again != n {
					t.Errorf("Decide is not deterministic: %d then %d", n, again)
				}
				if n != st.Desired {
					t.Errorf("returned %d but state says %d", n, st.Desired)
				}
				if st.LowSince.IsZero() {
					return fmt.Sprintf("desired=%d", n)
				}
				return fmt.Sprintf("desired=%d (cooling since %gs, peak %d)", n, st.LowSince.Sub(t0).Seconds(), st.LowPeak)
			}
			td.Fatalf(t, "unknown command %q", td.Cmd)
			return ""
		})
	})
}

func TestScaleConfigValidate(t *testing.T) {
	for _, c := range []ScaleConfig{{Min: -1, Max: 2}, {Min: 3, Max: 2}, {Min: 0, Max: 0}} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if _, err := NewAutoscaler(ScaleConfig{Min: 2, Max: 1}, nil, nil, AutoscalerOptions{}); err == nil {
		t.Error("NewAutoscaler accepted min > max")
	}
}

// waitFor polls cond; the bound only turns a hang into a failure.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s not found", name)
	return math.NaN()
}

// TestAutoscalerBurst is issue 4's required test: a burst of 1,000 tasks
// scales the in-process pool up to its max, and once the queue has drained
// and the cool-down has passed, back to its min. Time is the fake clock;
// the runner holds every task until the test opens a gate, so "the pool is
// busy" is a state the test observes, not a timing.
func TestAutoscalerBurst(t *testing.T) {
	clk := clock.NewFake(t0)
	q, err := Open(t.TempDir(), Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	gate := make(chan struct{})
	var ran atomic.Int64
	runner := RunnerFunc(func(ctx context.Context, tk Task) (Result, error) {
		select {
		case <-gate:
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
		ran.Add(1)
		return Result{Rows: 1}, nil
	})
	pool := NewPool(q, runner, PoolOptions{Clock: clk})
	defer pool.Close(context.Background())
	reg := prometheus.NewRegistry()
	cfg := ScaleConfig{Min: 1, Max: 8, TargetDrain: 10 * time.Second, CoolDown: time.Minute}
	a, err := NewAutoscaler(cfg, q, pool, AutoscalerOptions{Clock: clk, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}

	if n := a.Tick(); n != cfg.Min {
		t.Fatalf("idle: desired %d, want min %d", n, cfg.Min)
	}
	waitFor(t, "pool at min", func() bool { return pool.Size() == cfg.Min })

	var reqs []Request
	for i := 0; i < 1000; i++ {
		c := fmt.Sprintf("client%d", i%4)
		reqs = append(reqs, Request{Task: TaskID{Component: numKey(i % 10), Block: blockref.ParseMemo(fmt.Sprint(i))}, Client: c, Pipeline: "p", Priority: int32(i % 3)})
	}
	if n, err := q.Enqueue(reqs...); err != nil || n != 1000 {
		t.Fatalf("enqueue: %d, %v", n, err)
	}

	// 1000 tasks x 1s (no cost measured yet) / 10s = 100 > max.
	if n := a.Tick(); n != cfg.Max {
		t.Fatalf("burst: desired %d, want max %d", n, cfg.Max)
	}
	waitFor(t, "every worker of the grown pool holding a task", func() bool {
		return pool.Size() == cfg.Max && q.Stats().Leased == cfg.Max
	})
	if g := gaugeValue(t, reg, "sig_workers_desired"); g != float64(cfg.Max) {
		t.Errorf("sig_workers_desired = %v, want %d", g, cfg.Max)
	}
	if g := gaugeValue(t, reg, "sig_workers_actual"); g != float64(cfg.Max) {
		t.Errorf("sig_workers_actual = %v, want %d", g, cfg.Max)
	}

	close(gate)
	waitFor(t, "the queue to drain", func() bool { return q.Backlog() == 0 })
	waitFor(t, "the last completion to be counted", func() bool { return pool.Stats().Completed == 1000 })
	if ran.Load() != 1000 {
		t.Errorf("runner ran %d times, want 1000 (each task once)", ran.Load())
	}

	// Drained, but the cool-down has not passed: the pool stays.
	if n := a.Tick(); n != cfg.Max {
		t.Errorf("just drained: desired %d, want %d until the cool-down passes", n, cfg.Max)
	}
	clk.Advance(cfg.CoolDown / 2)
	if n := a.Tick(); n != cfg.Max {
		t.Errorf("mid cool-down: desired %d, want %d", n, cfg.Max)
	}
	clk.Advance(cfg.CoolDown / 2)
	if n := a.Tick(); n != cfg.Min {
		t.Fatalf("after cool-down: desired %d, want min %d", n, cfg.Min)
	}
	waitFor(t, "pool back at min", func() bool { return pool.Size() == cfg.Min })
	if g := gaugeValue(t, reg, "sig_workers_desired"); g != float64(cfg.Min) {
		t.Errorf("sig_workers_desired = %v, want %d", g, cfg.Min)
	}
	if g := gaugeValue(t, reg, "sig_workers_actual"); g != float64(cfg.Min) {
		t.Errorf("sig_workers_actual = %v, want %d", g, cfg.Min)
	}
	if s := pool.Stats(); s.Failed != 0 || s.LeaseLost != 0 {
		t.Errorf("pool stats %+v: no task should fail or lose its lease", s)
	}
}

type fakeSource struct {
	mu      sync.Mutex
	backlog int
}

func (s *fakeSource) Backlog() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.backlog
}
func (s *fakeSource) MeanTaskSeconds() float64 { return 0.5 }
func (s *fakeSource) set(n int) {
	s.mu.Lock()
	s.backlog = n
	s.mu.Unlock()
}

type fakeResizer struct{ n atomic.Int64 }

func (r *fakeResizer) Resize(n int) { r.n.Store(int64(n)) }
func (r *fakeResizer) Size() int    { return int(r.n.Load()) }

// TestAutoscalerRun: the loop decides on the injected clock's schedule, and
// the scale-down waits out the cool-down in that clock's time.
func TestAutoscalerRun(t *testing.T) {
	clk := clock.NewFake(t0)
	src := &fakeSource{backlog: 300}
	rs := &fakeResizer{}
	cfg := ScaleConfig{Min: 2, Max: 10, TargetDrain: 10 * time.Second, CoolDown: 30 * time.Second}
	a, err := NewAutoscaler(cfg, src, rs, AutoscalerOptions{Clock: clk, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- a.Run(ctx) }()
	// 300 x 0.5s / 10s = 15 > max: the first tick is immediate.
	waitFor(t, "scale up", func() bool { return rs.Size() == 10 })
	src.set(0)
	dropped := clk.Now()
	waitFor(t, "scale down", func() bool {
		if rs.Size() == cfg.Min {
			return true
		}
		clk.Advance(time.Second)
		return false
	})
	// At least the cool-down passed, plus the tick that saw the drop.
	if el := clk.Now().Sub(dropped); el < cfg.CoolDown {
		t.Errorf("scaled down after %s of fake time, before the %s cool-down", el, cfg.CoolDown)
	}
	if a.Desired() != cfg.Min || a.Actual() != cfg.Min {
		t.Errorf("desired %d actual %d, want %d", a.Desired(), a.Actual(), cfg.Min)
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("Run returned %v", err)
	}
}
