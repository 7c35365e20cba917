package sigd

import (
	"context"
	"fmt"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sigdata/sig/matching"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
)

// The shared-fate guard's sigd side (issue 21): a reader whose guard found
// a memo object's values differ from a recomputation reports it
// (ReportCorruptMemo, reason MEMO_MISMATCH); the evictor recomputes the
// block with recomputeColumn and compares every row before it quarantines
// the entry and schedules its recomputation (eviction, mismatch.go).

// recomputeColumn computes component rec's column over raw block raw
// (the version the memo entry was computed from, as the evictor resolves
// it) from its raw columns, as a worker computes a block from raw: never
// over memo nodes, whose values could be the wrong ones. The component's
// program conforms the columns first, as the worker's does, so that a
// block another Arrow producer wrote is computed exactly as the worker
// computed it.
func (s *Server) recomputeColumn(ctx context.Context, rec matching.ComponentRecord, raw block.Meta) (arrow.Array, error) {
	sc, ok := s.schemas[rec.Source]
	if !ok {
		return nil, fmt.Errorf("unknown raw source %q", rec.Source)
	}
	prog, err := transform.CompileDSL([]byte(rec.DSL), "component", sc, transform.Default(), transform.Limits{})
	if err != nil {
		return nil, fmt.Errorf("component %s: %w", rec.Key.Short(), err)
	}
	if n := len(prog.Graph().Inputs); n != 1 {
		return nil, fmt.Errorf("component %s: DSL has %d model inputs, want 1", rec.Key.Short(), n)
	}
	cols, err := block.ReadColumns(ctx, s.store, raw, rec.Columns)
	if err != nil {
		return nil, err
	}
	defer cols.Release()
	out, err := prog.Run(cols, nil)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

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
