package sigd_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
)

// TestStatsWalkBoundedUnderSubmits: Stats's reuse figures come from a walk
// of the whole matching cache, which every submit makes stale. Polled
// between submits (as a fleet's autoscaler polls every second, the web
// UI's sampler too), Stats used to walk the cache on every call, so at a
// million components sigd spent most of its time walking
// (bench/scale.txt). Now a walk of 5 ms or more begins no sooner than ten
// of its durations after the last one: a Stats call waits for that (up to
// 2 s) and still counts the submit just before it, and the walks take a
// small share of the time.
func TestStatsWalkBoundedUnderSubmits(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 8, RowsPerBlock: 10})
	srv := sigdtest.Start(t, w, sigd.Config{RemoteWorkers: true}, sigd.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, op := srv.SIG(t, "ctr"), srv.SIG(t, "operator")

	// 4,000 components over 8 blocks: 32,000 memo entries to walk, well
	// over 5 ms.
	pipelines := 0
	for p := range 20 {
		var g strings.Builder
		for i := range 200 {
			fmt.Fprintf(&g, "input c%d = hash(col(\"query\"), buckets=%d)\n", i, 1000+200*p+i)
		}
		if _, err := c.SubmitGraph(ctx, sigdtest.Submit("ctr", fmt.Sprintf("fill-%d", p), 10, g.String(), w.All())); err != nil {
			t.Fatal(err)
		}
		pipelines++
	}
	stats := func() *sigv1.StatsResponse {
		t.Helper()
		st, err := op.Stats(ctx, &sigv1.StatsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := stats(); int(st.Pipelines) != pipelines || st.Components != 4000 {
		t.Fatalf("Stats after the fill: %d pipelines, %d components; want %d, 4000", st.Pipelines, st.Components, pipelines)
	}
	walks := func() (n, seconds float64) {
		return gauge(t, srv, "sig_reuse_walks_total"), gauge(t, srv, "sig_reuse_walk_seconds_total")
	}
	n0, s0 := walks()
	if n0 < 1 || s0/n0 < 0.005 {
		t.Fatalf("%v walks in %v s after a Stats: want at least one, of 5 ms or more", n0, s0)
	}

	// Submit and poll: ten times, and for a second at least.
	calls, fresh := 0, 0
	t0 := time.Now()
	for time.Since(t0) < time.Second || calls < 10 {
		if _, err := c.SubmitGraph(ctx, sigdtest.Submit("ctr", fmt.Sprintf("poll-%d", calls), 10, hashGraph(7), w.All())); err != nil {
			t.Fatal(err)
		}
		pipelines++
		calls++
		if int(stats().Pipelines) == pipelines {
			fresh++
		}
	}
	elapsed := time.Since(t0)
	n1, s1 := walks()
	walked, mean := s1-s0, (s1-s0)/max(1, n1-n0)
	t.Logf("%d submits, each followed by Stats, in %v: %d answers counted the submit; %.0f walks of %.3f s on average, %.3f s walking",
		calls, elapsed.Round(time.Millisecond), fresh, n1-n0, mean, walked)
	// Walks take at most 1/11 of the time, give or take one walk a loaded
	// machine stretched: well under a third, where walking on every call
	// took most of it.
	if walked > 0.3*elapsed.Seconds() {
		t.Errorf("%.3f s of %.3f s walking the cache (%.0f walks for %d Stats calls)", walked, elapsed.Seconds(), n1-n0, calls)
	}
	// Walks under 200 ms: each Stats waited for its walk and counted the
	// submit before it. (A longer walk answers the last walk's figures.)
	if mean < 0.2 && fresh != calls {
		t.Errorf("%d of %d Stats answers after a submit counted it, with walks of %.3f s", fresh, calls, mean)
	}
}

// gauge is an unlabelled metric's value from the server's registry.
func gauge(tb testing.TB, srv *sigdtest.Server, name string) float64 {
	tb.Helper()
	mfs, err := srv.Registry().Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	tb.Fatalf("no metric %s", name)
	return 0
}

// TestUISamplerDoesNotWalk: the web UI's charts sample hit rate, workers
// and queues every 5 s from the moment sigd serves; they plot none of the
// reuse figures, and used to walk the whole cache for them anyway: at a
// million components that walk (10 s) started with sigd and took one of
// the machine's two cores while the first submits waited (bench/scale.txt).
func TestUISamplerDoesNotWalk(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 2, RowsPerBlock: 10})
	srv := sigdtest.Start(t, w, sigd.Config{RemoteWorkers: true}, sigd.Options{UISampleEvery: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := srv.SIG(t, "ctr").SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 10, hashGraph(7), w.All())); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // some 15 samples, since the submit too
	// This gather's own collection of the reuse gauges walks once (its
	// counters are sent after the walk); any other walk was the sampler's
	// (it walked at start and again after the submit).
	if n := gauge(t, srv, "sig_reuse_walks_total"); n != 1 {
		t.Errorf("%v walks of the cache, one of them this gather's: the UI's sampler walks", n)
	}
	st, err := srv.SIG(t, "operator").Stats(ctx, &sigv1.StatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Pipelines != 1 || st.Components != 2 || st.Submits != 1 {
		t.Errorf("Stats: %d pipelines, %d components, %d submits; want 1, 2, 1", st.Pipelines, st.Components, st.Submits)
	}
}
