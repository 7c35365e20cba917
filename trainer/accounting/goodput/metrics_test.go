package goodput

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
)

// gathered indexes a scrape by metric name and label values in label order.
func gathered(t *testing.T, reg *prometheus.Registry) map[string]map[[3]string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if problems, err := promlint.NewWithMetricFamilies(mfs).Lint(); err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %+v", err, problems)
	}
	out := map[string]map[[3]string]float64{}
	for _, mf := range mfs {
		if mf.GetType() != dto.MetricType_GAUGE {
			t.Errorf("%s is %v, want a gauge", mf.GetName(), mf.GetType())
		}
		m := map[[3]string]float64{}
		for _, x := range mf.GetMetric() {
			var key [3]string
			for i, l := range x.GetLabel() {
				key[i] = l.GetName() + "=" + l.GetValue()
			}
			m[key] = x.GetGauge().GetValue()
		}
		out[mf.GetName()] = m
	}
	return out
}

// TestMetrics exports the hand-checked fleet_queued case and reads back the
// values derived by hand there.
func TestMetrics(t *testing.T) {
	rep := testdataReport(t, "fleet_queued.txt")
	reg := prometheus.NewRegistry()
	if err := RegisterMetrics(reg, func() (Report, error) { return rep, nil }); err != nil {
		t.Fatal(err)
	}
	got := gathered(t, reg)

	// Labels come sorted by name: kind, phase, training_job.
	ratio := func(job, phase, kind string) float64 {
		v, ok := got[MetricRatio][[3]string{"kind=" + kind, "phase=" + phase, "training_job=" + job}]
		if !ok {
			t.Errorf("no %s{training_job=%q,phase=%q,kind=%q}", MetricRatio, job, phase, kind)
		}
		return v
	}
	secs := func(job, phase, cat string) float64 {
		v, ok := got[MetricChipSeconds][[3]string{"category=" + cat, "phase=" + phase, "training_job=" + job}]
		if !ok {
			t.Errorf("no %s{training_job=%q,phase=%q,category=%q}", MetricChipSeconds, job, phase, cat)
		}
		return v
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"fleet SG", ratio("*", "*", KindScheduling), 0.8},
		{"fleet RG", ratio("*", "*", KindRuntime), 0.9375},
		{"fleet MPG", ratio("*", "*", KindMPG), 0.5},
		{"a PG", ratio("a", "*", KindProgram), 0.5},
		{"b initial SG", ratio("b", "initial", KindScheduling), 0.6},
		{"b unmet demand", secs("b", "*", "unmet_demand"), 160},
		{"fleet unallocated", secs("*", "*", "unallocated"), 160},
		{"c initial unmet demand", secs("c", "initial", "unmet_demand"), 800},
		{"capacity", got[MetricCapacity][[3]string{}], 800},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	// Rows: fleet, fleet/initial, and a, b, c each total and initial = 8.
	if n := len(got[MetricRatio]); n != 8*4 {
		t.Errorf("%d ratio series, want 32", n)
	}
	if n := len(got[MetricChipSeconds]); n != 8*NumCategories {
		t.Errorf("%d chip-seconds series, want %d", n, 8*NumCategories)
	}
}

// TestMetricsSnapshotError: a report that cannot be computed fails the scrape
// instead of exporting stale or zero values.
func TestMetricsSnapshotError(t *testing.T) {
	reg := prometheus.NewRegistry()
	boom := errors.New("boom")
	if err := RegisterMetrics(reg, func() (Report, error) { return Report{}, boom }); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err == nil {
		t.Error("Gather succeeded with a failing snapshot")
	}
	if err := RegisterMetrics(reg, func() (Report, error) { return Report{}, nil }); err == nil {
		t.Error("registering twice on one registry succeeded")
	}
}
