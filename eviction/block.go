package eviction

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/randid"
	"github.com/sigdata/sig/matching"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/objstore"
)

// One block at a time: an operator evicts or recomputes a single
// (component, block), and a reader that found a memo object corrupt reports
// it (ReportCorrupt), which sigd checks itself before it recomputes
// anything.

var (
	// ErrQuarantined: the block's task is quarantined; an operator releases
	// it (ReleaseQuarantine) rather than recomputing it.
	ErrQuarantined = errors.New("eviction: the block's memoization task is quarantined")
	// ErrVerify: sigd could not read a reported memo object to check it (the
	// object store failed); the report changed nothing and may be repeated.
	ErrVerify = errors.New("eviction: could not verify the memo object")
)

// maxVerifications bounds the reported memo objects read at once: a report
// makes sigd read a whole object, and reports come from readers and
// clients. A client could make readers read the same objects anyway; the
// bound keeps a burst of reports from taking sigd's memory and bandwidth.
const maxVerifications = 4

// BlockImpact is what a single-block operation did.
type BlockImpact struct {
	Component canon.Key
	Block     blockref.Memo
	// Pipelines using the component (client/pipeline).
	Pipelines []string
	// Bytes of the memo object the entry named before.
	Bytes int64
	// Objects deleted (0 or 1).
	Objects int
	// State of the entry afterwards: pending when it is being recomputed,
	// 0 when it was evicted (the next read of a solution re-creates it),
	// failed when its task was quarantined (mismatch.go).
	State   matching.MemoState
	AuditID string
	// BannedBuild is the worker build a confirmed mismatch banned (issue
	// 27; mismatch.go), or "".
	BannedBuild string

	gen uint64 // the entry's generation after a recompute
}

// Finding is sigd's answer to a report of a corrupt memo object.
type Finding struct {
	// Corrupt: sigd's own check found the object corrupt or missing.
	Corrupt bool
	// What sigd's check found, or why it did not check.
	What string
	// Entry is the block's memo entry after the report.
	Entry matching.MemoEntry
	// Repair is what was done when the report was confirmed (AuditID set).
	Repair BlockImpact
}

func checkBlockID(id blockref.Memo) error {
	if err := block.ValidateName("block id", id.ID()); err != nil {
		return &matching.InputError{Field: "block_id", Err: err}
	}
	return nil
}

func checkReason(why string) error {
	if strings.TrimSpace(why) == "" {
		return &matching.InputError{Field: "reason", Err: errors.New("a reason is required")}
	}
	if len(why) > 4096 {
		return &matching.InputError{Field: "reason", Err: errors.New("longer than 4096 bytes")}
	}
	return nil
}

// blockImpact is what an operation on block id of component k starts
// from: the block and the pipelines that read k (whose solutions it
// changes).
func (e *Evictor) blockImpact(k canon.Key, id blockref.Memo) (BlockImpact, error) {
	im := BlockImpact{Component: k, Block: id}
	var err error
	im.Pipelines, err = e.pipelines(k)
	return im, err
}

// lockBlock starts an operation that changes block id of k: its impact so
// far (blockImpact), with blockMu held until unlock.
func (e *Evictor) lockBlock(k canon.Key, id blockref.Memo) (im BlockImpact, unlock func(), err error) {
	if im, err = e.blockImpact(k, id); err != nil {
		return im, nil, err
	}
	e.blockMu.Lock()
	return im, e.blockMu.Unlock, nil
}

func blockWhat(verb string, k canon.Key, id blockref.Memo) string {
	return fmt.Sprintf("%sblock %s of component %s", verb, id, k)
}

// EvictBlock removes one memo entry and its object, cancels its task,
// tells watchers and records an audit entry: the block is recomputed when a
// pipeline next reads its solution, like an evicted component's. The order
// is Evict's, for one block, under the component's eviction mark.
func (e *Evictor) EvictBlock(ctx context.Context, k canon.Key, id blockref.Memo, who, why string) (BlockImpact, error) {
	if err := checkReason(why); err != nil {
		return BlockImpact{}, err
	}
	if err := checkBlockID(id); err != nil {
		return BlockImpact{}, err
	}
	im, unlock, err := e.lockBlock(k, id)
	if err != nil {
		return im, err
	}
	defer unlock()
	dctx := context.WithoutCancel(ctx)
	removed := false
	err = e.Frontend.Evicting([]canon.Key{k}, func() error {
		m, err := e.Frontend.Cache().Memo(k, id)
		if err != nil {
			return err
		}
		if err := e.Frontend.Cache().DeleteMemo(k, id); err != nil {
			return err
		}
		removed, im.Bytes = true, m.Bytes
		if e.Queue != nil {
			if err := e.Queue.Cancel(k, id); err != nil {
				return err
			}
		}
		// Its object goes with it: the component's own, or its pack once
		// no other entry names it (issue 28: the other members stay ready
		// in it, and its column is dead weight until the pack goes).
		im.Objects, err = e.deleteUnnamed(dctx, []matching.MemoEntry{m})
		return err
	})
	if !removed {
		return im, err
	}
	e.Frontend.Notify(matching.MemoEntry{Component: k, Block: id}) // state 0: gone
	e.evicted.Add(1)
	e.mu.Lock()
	if e.toSweep == nil {
		e.toSweep = map[canon.Key]time.Time{}
	}
	e.toSweep[k] = e.clock().Now() // an object a racing worker writes after the deletion
	e.mu.Unlock()
	what := blockWhat("", k, id)
	entry := e.blockAudit(im, who, what, why)
	if err != nil {
		entry.Why = fmt.Sprintf("%s [failed after deleting %d objects: %v]", why, im.Objects, err)
	}
	im.AuditID = entry.ID
	if aerr := e.Frontend.Cache().AppendAudit(entry); aerr != nil {
		return im, errors.Join(err, aerr)
	}
	if err != nil {
		e.log().Warn("block eviction failed", "what", what, "who", who, "why", why, "err", err)
		return im, err
	}
	e.log().Info("evicted block", "what", what, "who", who, "why", why, "objects", im.Objects)
	return im, nil
}

// RecomputeBlock turns one ready block pending and schedules it now, at the
// highest priority of the pipelines using its component: its object is
// deleted, its entry gets a new generation (so that no worker's earlier
// incarnation can be marked ready) and watchers see it pending, then ready
// again. A pending block is only scheduled again (Enqueue is idempotent);
// a quarantined one is ErrQuarantined.
func (e *Evictor) RecomputeBlock(ctx context.Context, k canon.Key, id blockref.Memo, who, why string) (BlockImpact, error) {
	if err := checkReason(why); err != nil {
		return BlockImpact{}, err
	}
	if err := checkBlockID(id); err != nil {
		return BlockImpact{}, err
	}
	m, err := e.Frontend.Cache().Memo(k, id)
	if err != nil {
		return BlockImpact{}, err
	}
	switch m.State {
	case matching.MemoFailed:
		return BlockImpact{}, fmt.Errorf("%w (%s): release it instead", ErrQuarantined, m.Error)
	case matching.MemoPending:
		im, err := e.blockImpact(k, id)
		im.State = m.State
		if err != nil {
			return im, err
		}
		_, err = e.Frontend.Schedule(k, id)
		return im, err
	}
	return e.recompute(ctx, m, who, blockWhat("recompute ", k, id), why,
		fmt.Sprintf("recomputing at the request of %s: %s", who, why), "")
}

// ReportCorrupt handles a report that the memo object of (k, id) is
// corrupt, or missing although its entry is ready. The report is a hint:
// sigd reads the object itself and checks it as readers do (the object's
// checksum, its footer and every segment's, that it is this component's
// block with the component's type, row-aligned with the raw block). A
// healthy object changes nothing. A corrupt one is recomputed as by
// RecomputeBlock, provided the entry is still the incarnation checked, and
// the repair is audited under the reporter's name with what it saw and
// what sigd found. Which components a caller may report on is sigd's
// decision (its clients report only their own).
//
// A report of reason ReasonMemoMismatch (a reader's guard recomputed
// sampled rows and found other values) is checked further: when the object
// is sound, sigd recomputes the block's column from the raw block and
// compares every row (checkValues). A confirmed mismatch quarantines the
// entry: its object is deleted and it turns pending with a new generation
// (the wrong incarnation can never be served or marked ready again), its
// reason says MEMO_MISMATCH with the first differing row, and the block
// is recomputed as a corrupt one is.
func (e *Evictor) ReportCorrupt(ctx context.Context, k canon.Key, id blockref.Memo, who, reason, detail string) (Finding, error) {
	if err := checkBlockID(id); err != nil {
		return Finding{}, err
	}
	switch reason {
	case "":
		reason = ReasonCorrupt
	case ReasonCorrupt, ReasonMemoMismatch:
	default:
		return Finding{}, &matching.InputError{Field: "reason", Err: fmt.Errorf("%q: want %s or %s", clip(reason), ReasonCorrupt, ReasonMemoMismatch)}
	}
	f, err := e.reportCorrupt(ctx, k, id, who, reason, detail)
	e.countReport(reason, f, err)
	return f, err
}

func (e *Evictor) reportCorrupt(ctx context.Context, k canon.Key, id blockref.Memo, who, reason, detail string) (Finding, error) {
	cache := e.Frontend.Cache()
	m, err := cache.Memo(k, id)
	if err != nil {
		return Finding{}, err
	}
	if m.State != matching.MemoReady {
		return Finding{Entry: m, What: fmt.Sprintf("the block is %s: nothing to repair", m.State)}, nil
	}
	rec, err := cache.Component(k)
	if err != nil {
		return Finding{}, err
	}
	e.verifyOnce.Do(func() { e.verifySlots = make(chan struct{}, maxVerifications) })
	select {
	case e.verifySlots <- struct{}{}:
	case <-ctx.Done():
		return Finding{}, fmt.Errorf("%w: waiting for a verification slot: %w", ErrVerify, ctx.Err())
	}
	what, corrupt, err := e.verify(ctx, m, rec)
	mismatch := false
	if err == nil && !corrupt && reason == ReasonMemoMismatch {
		what, mismatch, err = e.checkValues(ctx, m, rec)
	}
	<-e.verifySlots
	if err != nil {
		return Finding{}, fmt.Errorf("%w %s: %w", ErrVerify, m.Object, err)
	}
	if !corrupt && !mismatch {
		e.log().Info("reported memo object is healthy", "component", k.String(), "block", id.String(), "who", who, "reason", reason, "detail", detail, "found", what)
		return Finding{What: what, Entry: m}, nil
	}
	why := fmt.Sprintf("reported by %s: %s; sigd found: %s", who, detail, what)
	var im BlockImpact
	if mismatch {
		im, err = e.repairMismatch(ctx, m, who, why, what) // mismatch.go
	} else {
		im, err = e.recompute(ctx, m, who, blockWhat("recompute corrupt ", k, id), why, "corrupt memo object, recomputing: "+what, "")
	}
	f := Finding{Corrupt: true, What: what, Repair: im}
	if errors.Is(err, matching.ErrStale) {
		// Evicted, recomputed or repaired after the check: the object
		// checked is no longer what the entry stands for.
		f.What += "; the block changed meanwhile, so nothing was done"
		f.Entry, err = cache.Memo(k, id)
		if errors.Is(err, matching.ErrNotFound) {
			err = nil
		}
		return f, err
	}
	if err != nil {
		return f, err
	}
	f.Entry, err = cache.Memo(k, id)
	return f, err
}

// recompute deletes the object of the ready entry m, cancels any task of
// it and makes the entry pending with a new generation, then schedules it
// and audits. The entry must still be m's incarnation (else ErrStale).
// With quarantine set (a block a banned worker build computed wrong,
// mismatch.go) the task scheduled is quarantined at once with that reason
// and the entry failed, for an operator to release.
//
// An object of the component alone goes before the entry turns pending:
// from then on a worker that predates packs may write the new object, at
// the same key, which must not be deleted. A pack goes after (if no other
// entry names it): the recomputation writes a new pack, never this one. blockMu serializes these
// operations, and the component's eviction mark keeps its entries from
// being re-created meanwhile by a read (a component eviction may still run
// alongside: then the entry is gone and Invalidate says ErrStale). A task
// still leased for the old incarnation (its worker between marking it
// ready and completing) is cancelled, so the task scheduled afterwards is a
// new one and not merged into one about to leave the queue.
func (e *Evictor) recompute(ctx context.Context, m matching.MemoEntry, who, what, why, pendingReason, quarantine string) (BlockImpact, error) {
	k, id := m.Component, m.Block
	im, unlock, err := e.lockBlock(k, id)
	if err != nil {
		return im, err
	}
	defer unlock()
	dctx := context.WithoutCancel(ctx)
	err = e.Frontend.Evicting([]canon.Key{k}, func() error {
		cur, err := e.Frontend.Cache().Memo(k, id)
		if errors.Is(err, matching.ErrNotFound) || err == nil && (cur.State != matching.MemoReady || cur.Gen != m.Gen) {
			return matching.ErrStale
		}
		if err != nil {
			return err
		}
		im.Bytes = cur.Bytes
		if !cur.Packed() {
			// An object of the component alone is where a worker that
			// predates packs writes the recomputation: deleted before
			// the entry turns pending.
			if im.Objects, err = e.deleteObject(dctx, cur.Object); err != nil {
				return err
			}
		}
		if e.Queue != nil {
			if err := e.Queue.Cancel(k, id); err != nil {
				return err
			}
		}
		after, err := e.Frontend.Invalidate(k, id, cur.Gen, pendingReason)
		im.State, im.gen = after.State, after.Gen
		if err != nil || !cur.Packed() {
			return err
		}
		// A pack is left, not rewritten (issue 28): the entry no longer
		// names it, the recomputation writes a new pack, and the old one
		// is deleted once no other member's entry names it.
		im.Objects, err = e.deleteUnnamed(dctx, []matching.MemoEntry{cur})
		return err
	})
	if err != nil {
		return im, err
	}
	// Scheduled after the mark is lifted, like the re-reads of evicted
	// blocks; were this to fail, the next read of a solution, or sigd's
	// start (Reconcile), schedules the pending entry.
	if _, err := e.Frontend.Schedule(k, id); err != nil {
		return im, err
	}
	if quarantine != "" {
		if err := e.quarantine(k, id, quarantine, &im); err != nil {
			return im, err
		}
	}
	entry := e.blockAudit(im, who, what, why)
	im.AuditID = entry.ID
	if err := e.Frontend.Cache().AppendAudit(entry); err != nil {
		return im, err
	}
	e.log().Info("recomputing block", "what", what, "who", who, "why", why, "objects", im.Objects)
	return im, nil
}

func (e *Evictor) blockAudit(im BlockImpact, who, what, why string) matching.AuditEntry {
	return matching.AuditEntry{ID: randid.Hex(8), Who: who, When: e.clock().Now(), What: what, Why: why,
		Components: []canon.Key{im.Component}, Pipelines: im.Pipelines, Blocks: 1, Bytes: im.Bytes, Objects: im.Objects}
}

// pipelines returns the pipelines using k, as client/pipeline, sorted.
func (e *Evictor) pipelines(k canon.Key) ([]string, error) {
	us, err := e.Frontend.Cache().Users(k)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = u[0] + "/" + u[1]
	}
	sort.Strings(out)
	return out, nil
}

// deleteObject deletes one object and returns 1, or 0 if there was none.
func (e *Evictor) deleteObject(ctx context.Context, key string) (int, error) {
	if _, err := e.Store.Stat(ctx, key); errors.Is(err, objstore.ErrNotFound) {
		return 0, nil
	}
	if err := e.Store.Delete(ctx, key); err != nil {
		return 0, err
	}
	return 1, nil
}

// verify reads the memo object of the ready entry m whole and checks it as
// a reader would: the object's checksum (objstore), its trailer, footer and
// every segment's checksum and decoding (block.Decode), the footer as
// readers check it (block.CheckMemo: this component's block at its input
// version, event_id and a value of the component's type, the rows the
// worker recorded), and that its rows and event ids are the raw block's. Sharing the readers' footer check is what makes every footer a
// reader refuses one sigd repairs (issue 27). It returns what it found and
// whether that is corruption; an error means it could not tell (the object
// store failed).
func (e *Evictor) verify(ctx context.Context, m matching.MemoEntry, rec matching.ComponentRecord) (string, bool, error) {
	meta, r, err := e.readMemo(ctx, m, rec.Type)
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		return fmt.Sprintf("memo object %s is missing", m.Object), true, nil
	case errors.Is(err, block.ErrCorrupt):
		return err.Error(), true, nil
	case err != nil:
		return "", false, err
	}
	defer r.Release()
	bad := func(format string, args ...any) (string, bool, error) {
		return fmt.Sprintf("memo object %s: ", m.Object) + fmt.Sprintf(format, args...), true, nil
	}
	if e.Versions != nil {
		raw, err := e.rawBlock(rec, m.Block)
		if err != nil {
			return "", false, fmt.Errorf("raw block %s: %w", m.Block, err)
		}
		if meta.Rows != raw.Rows {
			return bad("%d rows, raw block has %d: not row-aligned", meta.Rows, raw.Rows)
		}
		// A memo object's event_id segment is the raw block's, written by
		// the same encoder: equal lengths and checksums show alignment, as
		// for readers; otherwise the ids themselves must be equal.
		if !block.SameSegment(raw, meta, transform.ColEventID) {
			ids, err := block.ReadColumns(ctx, e.Store, raw, nil)
			if err != nil {
				return "", false, fmt.Errorf("raw block %s: %w", m.Block, err)
			}
			defer ids.Release()
			want := ids.Column(0).(*array.Int64).Int64Values()
			got := r.Column(0).(*array.Int64).Int64Values()
			for i := range got {
				if got[i] != want[i] {
					return bad("not row-aligned with the raw block: row %d has event_id %d, raw has %d", i, got[i], want[i])
				}
			}
		}
	}
	what := "object"
	if m.Packed() {
		what = "column " + m.Column[:min(len(m.Column), 12)] + " of pack"
	}
	return fmt.Sprintf("memo %s %s is healthy: %d rows, checksums, footer and alignment with the raw block hold", what, m.Object, meta.Rows), false, nil
}

// readMemo reads the data of the ready entry m as a reader would and
// checks it: the footer as readers check it (block.CheckMember: this
// component's column of its block at its input version, of type typ, the
// rows the worker recorded), checksums and decoding. It returns the
// footer and a record of event_id and the entry's column. An object of
// the component alone is read whole, its object checksum too
// (objstore.Get, block.Decode); of a pack (issue 28) the footer, event_id
// and the entry's column only: its other columns are other entries', and
// a fault there is theirs to report. Sharing the readers' footer check is
// what makes every footer a reader refuses one sigd repairs (issue 27).
// The error is objstore.ErrNotFound for a missing object, ErrCorrupt for a
// bad one.
func (e *Evictor) readMemo(ctx context.Context, m matching.MemoEntry, typ string) (block.Meta, arrow.Record, error) {
	if !m.Packed() {
		data, _, err := e.Store.Get(ctx, m.Object)
		if err != nil {
			return block.Meta{}, nil, err
		}
		meta, r, err := block.Decode(m.Object, data)
		if err != nil {
			return block.Meta{}, nil, err
		}
		if _, err := block.CheckMember(meta, "", m.Component, m.Block, typ, m.Rows); err != nil {
			r.Release()
			return block.Meta{}, nil, err
		}
		return meta, r, nil
	}
	meta, err := block.ReadFooter(ctx, e.Store, m.Object)
	if err != nil {
		return block.Meta{}, nil, err
	}
	c, err := block.CheckMember(meta, m.Column, m.Component, m.Block, typ, m.Rows)
	if err != nil {
		return block.Meta{}, nil, err
	}
	r, err := block.ReadColumns(ctx, e.Store, meta, []string{c.Name})
	return meta, r, err
}

// deleteUnnamed deletes the objects that removed entries left without an
// entry naming them (matching.Cache.Unnamed: an object of one component
// with its entry, a pack with its last entry) and returns how many it
// deleted.
func (e *Evictor) deleteUnnamed(ctx context.Context, removed []matching.MemoEntry) (int, error) {
	objs, err := e.Frontend.Cache().Unnamed(removed)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, o := range objs {
		d, err := e.deleteObject(ctx, o)
		n += d
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
