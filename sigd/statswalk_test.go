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
// between submits (as a fleet's autoscaler polls every second, the web UI
// every 5 s), Stats used to walk the cache on every call, so at a million
// components sigd spent most of its time walking (bench/scale.txt). Now a
// walk of 5 ms or more waits ten of its durations after the last: with a
// cache whose walk takes tens of milliseconds, most answers between
// submits are the last walk's,
// the walks take a small share of the time, and the figures catch up once
// the submits stop.
func TestStatsWalkBoundedUnderSubmits(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 8, RowsPerBlock: 10})
	srv := sigdtest.Start(t, w, sigd.Config{RemoteWorkers: true}, sigd.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, op := srv.SIG(t, "ctr"), srv.SIG(t, "operator")

	// 4,000 components over 8 blocks: 32,000 memo entries to walk, well
	// over reuseWalkFree.
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

	// Submit and poll, for a second and ten submits at least.
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
	t.Logf("%d submits, each followed by Stats, in %v: %d answers with the submit counted, %.0f walks, %.3f s walking",
		calls, elapsed.Round(time.Millisecond), fresh, n1-n0, s1-s0)
	if fresh > calls/2 || n1-n0 > float64(calls)/2 {
		t.Errorf("%d of %d Stats answers after a submit counted it (%.0f walks): the cache is walked on every call", fresh, calls, n1-n0)
	}
	// Walks take at most 1/11 of the time, give or take one walk whose
	// duration a loaded machine stretched: well under a third, where
	// walking on every call took most of it.
	if walked := s1 - s0; walked > 0.3*elapsed.Seconds() {
		t.Errorf("%.3f s of %.3f s walking the cache", walked, elapsed.Seconds())
	}
	waitFor(t, 30*time.Second, "Stats to count every pipeline", func() bool { return int(stats().Pipelines) == pipelines })
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
