package eviction

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/matching"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/objstore"
)

// The reasons of a report (ReportCorrupt), as readers send them
// (reader.ReasonCorrupt, reader.ReasonMemoMismatch).
const (
	// ReasonCorrupt: the object did not read back (checksums, footer,
	// alignment) or is missing.
	ReasonCorrupt = "CORRUPT"
	// ReasonMemoMismatch: the object reads back, but a reader's guard
	// recomputed some of its rows from the raw block and found other
	// values (paper VIII.E's shared-fate risk: a faulty worker's output
	// served to every model reading the component).
	ReasonMemoMismatch = "MEMO_MISMATCH"
)

// checkValues compares the memo object of the ready entry m, row by row
// (transform.SameRow), with the component's column recomputed from the
// raw block the entry was computed from (rawBlock, then
// Evictor.Recompute: from raw columns, never over other memo objects,
// whose values could be the wrong ones). It returns what it
// found and whether the values differ; an error means it could not tell.
// It reads the object and the component's raw columns whole and runs the
// component: a worker's task, spent only on a report.
func (e *Evictor) checkValues(ctx context.Context, m matching.MemoEntry, rec matching.ComponentRecord) (string, bool, error) {
	if e.Recompute == nil || e.Versions == nil {
		return fmt.Sprintf("memo object %s reads back; sigd cannot recompute it to compare values", m.Object), false, nil
	}
	meta, r, err := block.ReadBlock(ctx, e.Store, m.Object)
	if err != nil {
		if errors.Is(err, block.ErrCorrupt) {
			return err.Error(), false, nil // changed since verify: the next report says so
		}
		return "", false, err
	}
	defer r.Release()
	// An incarnation found healthy is not recomputed again for every
	// report (a reader computing wrong would make sigd recompute the
	// block once a minute): the same generation with the same value
	// segment (checksum) compares the same.
	vc, _ := meta.Column(block.MemoColumn)
	seen := checkedKey{m.Component, m.Block, m.Gen, vc.CRC32C, vc.Length}
	e.mu.Lock()
	healthy := e.healthy[seen]
	e.mu.Unlock()
	if healthy {
		return fmt.Sprintf("memo object %s is healthy: its %d rows equal a recomputation from the raw block (generation %d, checked before)",
			m.Object, meta.Rows, m.Gen), false, nil
	}
	raw, err := e.rawBlock(rec, m.Block)
	if err != nil {
		return "", false, fmt.Errorf("raw block %s: %w", m.Block, err)
	}
	want, err := e.Recompute(ctx, rec, raw)
	if err != nil {
		return "", false, fmt.Errorf("recomputing block %s: %w", m.Block, err)
	}
	defer want.Release()
	got := r.Column(1)
	row := transform.FirstDifference(got, want)
	if row < 0 {
		e.mu.Lock()
		if e.healthy == nil || len(e.healthy) >= maxCheckedHealthy {
			e.healthy = map[checkedKey]bool{}
		}
		e.healthy[seen] = true
		e.mu.Unlock()
		return fmt.Sprintf("memo object %s is healthy: its %d rows equal a recomputation from the raw block", m.Object, meta.Rows), false, nil
	}
	ids := r.Column(0).(*array.Int64)
	id := "?"
	if row < ids.Len() {
		id = fmt.Sprint(ids.Value(row))
	}
	return fmt.Sprintf("memo object %s holds wrong values: row %d (event_id %s) is %s, a recomputation from the raw block gives %s (%d rows compared)",
		m.Object, row, id, transform.FormatRow(got, row), transform.FormatRow(want, row), meta.Rows), true, nil
}

// checkedKey names a memo object's incarnation and value segment, as
// checkValues found it healthy.
type checkedKey struct {
	component canon.Key
	block     blockref.Memo
	gen       uint64
	crc       uint32
	length    int64
}

// maxCheckedHealthy bounds the incarnations remembered healthy (all are
// forgotten when it is reached).
const maxCheckedHealthy = 4096

func (e *Evictor) countMismatch(k canon.Key) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mismatches == nil {
		e.mismatches = map[canon.Key]int64{}
	}
	e.mismatches[k]++
}

// Report outcomes (Reports): the object was bad and is being recomputed;
// it was bad but changed meanwhile; it was healthy; the block was not
// ready; sigd could not tell (ErrVerify, or the entry or component is not
// there). A report of an invalid block id or reason is not counted.
const (
	OutcomeRepaired = "repaired"
	OutcomeStale    = "stale"
	OutcomeHealthy  = "healthy"
	OutcomeNotReady = "not_ready"
	OutcomeError    = "error"
)

// ReportCount keys Reports: a report's reason and outcome.
type ReportCount struct{ Reason, Outcome string }

func (e *Evictor) countReport(reason string, f Finding, err error) {
	outcome := OutcomeHealthy
	switch {
	case err != nil:
		outcome = OutcomeError
	case f.Corrupt && f.Repair.AuditID != "":
		outcome = OutcomeRepaired
	case f.Corrupt:
		outcome = OutcomeStale
	case f.Entry.State != matching.MemoReady:
		outcome = OutcomeNotReady
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.reports == nil {
		e.reports = map[ReportCount]int64{}
	}
	e.reports[ReportCount{reason, outcome}]++
}

// Reports returns the reports ReportCorrupt took since the Evictor
// started, by reason and outcome (sigd exports them as
// sig_memo_reports_total): many healthy MEMO_MISMATCH reports point at
// the readers sending them (a reader computing wrong), not at the memo
// objects.
func (e *Evictor) Reports() map[ReportCount]int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.reports)
}

// Mismatches returns, per component, the value mismatches ReportCorrupt
// confirmed and quarantined since the Evictor started (sigd exports them
// as sig_memo_mismatches_total).
func (e *Evictor) Mismatches() map[canon.Key]int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.mismatches)
}

// clip shortens a string for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// rawBlock is the raw block version the memo entry of m for component rec
// is computed from: matching.RawVersion, the rule workers are given their
// raw version by, so a check compares with what a worker read.
func (e *Evictor) rawBlock(rec matching.ComponentRecord, m blockref.Memo) (block.Meta, error) {
	raw, ok, err := matching.RawVersion(e.Versions, rec.Source, m, rec.Columns)
	if err != nil {
		return raw, err
	}
	if !ok {
		return raw, fmt.Errorf("no catalogued version of block %s holds input version %d of %v (collected)", m.ID(), m.InputVersion(), rec.Columns)
	}
	return raw, nil
}

// RecomputeFromRaw is an Evictor.Recompute over the object store: it
// computes component rec's column over raw block raw (the version the memo
// entry was computed from, rawBlock) from its raw columns, as a worker
// computes a block from raw, never over memo nodes, whose values could be
// the wrong ones. The component's transform.Program conforms the columns
// first, as the worker's does, so that a block another Arrow producer
// wrote is computed exactly as the worker computed it. schema returns a
// raw source's schema.
func RecomputeFromRaw(store objstore.Reader, schema func(source string) (*transform.Schema, error)) func(context.Context, matching.ComponentRecord, block.Meta) (arrow.Array, error) {
	return func(ctx context.Context, rec matching.ComponentRecord, raw block.Meta) (arrow.Array, error) {
		sc, err := schema(rec.Source)
		if err != nil {
			return nil, err
		}
		prog, err := transform.CompileDSL([]byte(rec.DSL), "component", sc, transform.Default(), transform.Limits{})
		if err != nil {
			return nil, fmt.Errorf("component %s: %w", rec.Key.Short(), err)
		}
		if n := len(prog.Graph().Inputs); n != 1 {
			return nil, fmt.Errorf("component %s: DSL has %d model inputs, want 1", rec.Key.Short(), n)
		}
		cols, err := block.ReadColumns(ctx, store, raw, rec.Columns)
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
}
