package workers

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sigdata/sig/internal/clock"
)

// TestQueueMetrics: depths and counters reach the registry passed in, with
// names that pass Prometheus' lint.
func TestQueueMetrics(t *testing.T) {
	q := openTest(t, t.TempDir(), clock.NewFake(t0), func(o *Options) { o.MaxAttempts = 1 })
	defer q.Close()
	reg := prometheus.NewRegistry()
	if err := RegisterQueueMetrics(reg, q); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(req("a", "1", "ads", "p", 7), req("a", "2", "ads", "p", 7), req("a", "3", "research", "r", 1)); err != nil {
		t.Fatal(err)
	}
	l, _, _ := q.TryLease("w")
	if err := q.Complete(context.Background(), l.ID, Result{}); err != nil {
		t.Fatal(err)
	}
	l, _, _ = q.TryLease("w")
	if _, err := q.Fail(context.Background(), l.ID, "x"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.BanBuild("v1", "wrong values"); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if err := lintName(mf.GetName(), mf.GetType().String()); err != nil {
			t.Error(err)
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, lp.GetName()+"="+lp.GetValue())
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			got[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	want := map[string]float64{
		"sig_quarantined_tasks{}":                                  1,
		"sig_tasks_completed_total{}":                              1,
		"sig_task_failures_total{}":                                1,
		"sig_tasks_quarantined_total{}":                            1,
		"sig_queue_tasks{client=research,priority=1,state=queued}": 1,
		"sig_queue_tasks{client=research,priority=1,state=leased}": 0,
		"sig_banned_worker_builds{}":                               1,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if _, ok := got["sig_queue_tasks{client=ads,priority=7,state=queued}"]; ok {
		t.Error("a drained queue still reports a series")
	}
	if err := RegisterQueueMetrics(reg, q); err == nil {
		t.Error("registering twice succeeded")
	}
}

// lintName checks the naming conventions this project follows: a sig_
// prefix, and _total on counters only.
func lintName(name, typ string) error {
	switch {
	case !strings.HasPrefix(name, "sig_"):
		return fmt.Errorf("%s: no sig_ prefix", name)
	case typ == "COUNTER" && !strings.HasSuffix(name, "_total"):
		return fmt.Errorf("%s: counter without _total", name)
	case typ != "COUNTER" && strings.HasSuffix(name, "_total"):
		return fmt.Errorf("%s: %s named like a counter", name, typ)
	}
	return nil
}
