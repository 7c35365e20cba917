package sigd

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The shared-fate guard's sigd side (issue 21): a reader whose guard found
// a memo object's values differ from a recomputation reports it
// (ReportCorruptMemo, reason MEMO_MISMATCH); the evictor recomputes the
// block from raw (eviction.RecomputeFromRaw) and compares every row before
// it quarantines the entry and schedules its recomputation (eviction,
// mismatch.go). sigd exports what it found.

// MetricMemoMismatches counts the value mismatches sigd confirmed and
// quarantined, by component (hex key).
const MetricMemoMismatches = "sig_memo_mismatches_total"

// MetricMemoReports counts the reports of bad memo objects
// (ReportCorruptMemo) by reason (CORRUPT, MEMO_MISMATCH) and outcome
// (repaired, stale, healthy, not_ready, error).
const MetricMemoReports = "sig_memo_reports_total"

var (
	descMismatches = prometheus.NewDesc(MetricMemoMismatches,
		"Memo entries quarantined because their values differed from a recomputation (reported by a reader's guard), by component.",
		[]string{"component"}, nil)
	descReports = prometheus.NewDesc(MetricMemoReports,
		"Reports of corrupt or mismatching memo objects, by reason and by what sigd's check found.", []string{"reason", "outcome"}, nil)
)

// guardMetrics exports the evictor's confirmed mismatches and its reports.
type guardMetrics struct{ s *Server }

func (m guardMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- descMismatches
	ch <- descReports
}

func (m guardMetrics) Collect(ch chan<- prometheus.Metric) {
	for k, n := range m.s.evictor.Mismatches() {
		ch <- prometheus.MustNewConstMetric(descMismatches, prometheus.CounterValue, float64(n), k.String())
	}
	for r, n := range m.s.evictor.Reports() {
		ch <- prometheus.MustNewConstMetric(descReports, prometheus.CounterValue, float64(n), r.Reason, r.Outcome)
	}
}
