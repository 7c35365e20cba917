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

// Builds is what the Evictor asks of the work queues to stop a worker build
// that computes wrong values (issue 27): sigd's adapter of workers.Queue.
type Builds interface {
	// BanBuild refuses build every lease from now on, with reason
	// (workers.Queue.BanBuild).
	BanBuild(build, reason string) (added bool, revoked int, err error)
	// Quarantine quarantines the queued task of (component, block) with
	// reason, as a task that failed too often is, for an operator to
	// release (workers.Queue.Quarantine); false when it was not queued.
	Quarantine(component canon.Key, block blockref.Memo, reason string) (bool, error)
}

// A confirmed mismatch (paper VIII.E: a memo object shared by many
// models holding wrong values) is first taken for a fault of the moment (a
// bad machine, a bit flipped): the block is recomputed, by whichever
// worker leases it (TestGuardMismatchRepaired). But a misbuilt binary
// computes the same wrong values every time, and if it is the build that
// recomputes the block, catch, quarantine and recompute would loop for
// ever, every reader of the block failing meanwhile (issue 27). So the
// recomputing incarnation is remembered with the build whose output was
// wrong (a strike); if that incarnation too is confirmed wrong and was
// computed by the same build, the output is that build's, not the
// moment's: the build is banned from leasing (Builds.BanBuild: its other
// tasks go to other builds), and the block's task is quarantined and its
// entry failed (the reason names the build), so that it waits for an
// operator, who lifts the ban or runs another build, then releases it. A
// build that computed a block wrong once is not banned: one fault on one
// machine must not stop every worker of the build. Strikes live in memory:
// after a restart of sigd a misbuilt build gets one more recomputation
// before its ban. Without a known build (a worker that does not say it),
// or without Builds, the block is recomputed each time, as before.

// strike is an incarnation recomputing a block whose object a build
// computed wrong.
type strike struct {
	component canon.Key
	block     blockref.Memo
	gen       uint64
}

// maxStrikes bounds the strikes remembered (all are forgotten when it is
// reached).
const maxStrikes = 4096

// repairMismatch takes a confirmed mismatch of the ready entry m out of
// service (sigd found what; why is the audit's): recompute it, or, when
// the build that computed it had computed its previous incarnation wrong
// too, ban the build and fail the block (see above).
func (e *Evictor) repairMismatch(ctx context.Context, m matching.MemoEntry, who, why, found string) (BlockImpact, error) {
	k, id := m.Component, m.Block
	by := "an unknown worker build (it did not say)"
	if m.Build != "" {
		by = fmt.Sprintf("worker build %q", m.Build)
	}
	why = fmt.Sprintf("%s; the object was computed by %s", why, by)
	e.mu.Lock()
	again := m.Build != "" && e.strikes[strike{k, id, m.Gen}] == m.Build
	e.mu.Unlock()
	var im BlockImpact
	var err error
	if again && e.Builds != nil {
		reason := fmt.Sprintf("it computed block %s of component %s wrong twice in a row; sigd's recomputation found: %s", id, k, found)
		if _, _, err := e.Builds.BanBuild(m.Build, reason); err != nil {
			return BlockImpact{Component: k, Block: id}, fmt.Errorf("banning worker build %q: %w", m.Build, err)
		}
		failed := fmt.Sprintf("quarantined (%s): worker build %q computed this block wrong again after its recomputation and is banned from leasing; "+
			"an operator lifts the ban (or runs another build) and releases the block: %s", ReasonMemoMismatch, m.Build, found)
		im, err = e.recompute(ctx, m, who, blockWhat("quarantine mismatching ", k, id)+fmt.Sprintf(" and ban worker build %q", m.Build),
			why+"; that build computed its previous incarnation wrong too, so it is banned from leasing and the block failed until an operator releases it",
			failed, failed)
		im.BannedBuild = m.Build
	} else {
		im, err = e.recompute(ctx, m, who, blockWhat("quarantine mismatching ", k, id), why,
			"quarantined ("+ReasonMemoMismatch+"), recomputing: "+found, "")
		if err == nil && m.Build != "" {
			e.mu.Lock()
			if e.strikes == nil || len(e.strikes) >= maxStrikes {
				e.strikes = map[strike]string{}
			}
			e.strikes[strike{k, id, im.gen}] = m.Build
			e.mu.Unlock()
		}
	}
	if !errors.Is(err, matching.ErrStale) {
		e.countMismatch(k)
	}
	return im, err
}

// quarantine quarantines the task just scheduled for (k, id) and fails its
// entry with reason (the queue's event would too; sigd mirrors it): a
// block a banned build computed wrong waits for an operator. A task leased
// meanwhile (by another build: the banned one is refused) is left to its
// worker.
func (e *Evictor) quarantine(k canon.Key, id blockref.Memo, reason string, im *BlockImpact) error {
	ok, err := e.Builds.Quarantine(k, id, reason)
	if err != nil || !ok {
		return err
	}
	if err := e.Frontend.MarkFailed(k, id, reason); err != nil {
		return err
	}
	im.State = matching.MemoFailed
	return nil
}

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
	meta, r, err := e.readMemo(ctx, m, rec.Type)
	if err != nil {
		if errors.Is(err, block.ErrCorrupt) || errors.Is(err, objstore.ErrNotFound) {
			return err.Error(), false, nil // changed since verify: the next report says so
		}
		return "", false, err
	}
	defer r.Release()
	// An incarnation found healthy is not recomputed again for every
	// report (a reader computing wrong would make sigd recompute the
	// block once a minute): the same generation with the same value
	// segment (checksum) compares the same.
	name := m.Column // a pack's column, or an object of one component's value
	if name == "" {
		name = block.MemoColumn
	}
	vc, _ := meta.Column(name)
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
// it was wrong again, from the build that computed it wrong before, which
// is banned, and the block is quarantined (issue 27); it was bad but
// changed meanwhile; it was healthy; the block was not ready; sigd could
// not tell (ErrVerify, or the entry or component is not there). A report
// of an invalid block id or reason is not counted.
const (
	OutcomeRepaired    = "repaired"
	OutcomeQuarantined = "quarantined"
	OutcomeStale       = "stale"
	OutcomeHealthy     = "healthy"
	OutcomeNotReady    = "not_ready"
	OutcomeError       = "error"
)

// ReportCount keys Reports: a report's reason and outcome.
type ReportCount struct{ Reason, Outcome string }

func (e *Evictor) countReport(reason string, f Finding, err error) {
	outcome := OutcomeHealthy
	switch {
	case err != nil:
		outcome = OutcomeError
	case f.Corrupt && f.Repair.AuditID != "" && f.Repair.BannedBuild != "":
		outcome = OutcomeQuarantined
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
