package matching

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/ready"
)

// The memo entry's side of a worker task (paper IV.A: "misses are
// scheduled ... workers compute and memoize them"). A pending entry is a
// task in the work queues; Memos says what that task computes (Describe),
// what its completion does to the entry (Complete) and mirrors what the
// queues decide about it (Quarantined, Released). The queues, the workers
// and the RPCs carrying all of this are sigd's wiring; the decisions are
// here, beside the entries they change.

// RawVersions lists the catalogued versions of one raw block, oldest first
// (the warehouse catalog). A memo entry is for an input version, and any
// catalogued version with that input version for the component's columns
// holds its data (RawVersion).
type RawVersions interface {
	Versions(source, id string) ([]block.Meta, error)
}

// Announcer publishes that a memo block is ready (warehouse/ready's
// Publisher on sig.memo.ready).
type Announcer interface {
	Publish(ctx context.Context, e ready.Event) error
}

// ObjectStat reports whether an object exists (nil) or not (an error): the
// object store's Stat.
type ObjectStat func(ctx context.Context, key string) error

// Memos is the memo entries' lifecycle around the work queues. It holds no
// state of its own: everything is in the matching cache (Frontend) and the
// catalog (Versions).
type Memos struct {
	Frontend *Frontend
	Versions RawVersions
	// Stat checks that a pack exists before its entries are switched to
	// it, and that a remotely computed object of one component does before
	// its entry is marked ready (CompletePack, Complete). Nil checks
	// nothing (tests of the entries alone).
	Stat ObjectStat
	// Repack makes Describe list the ready columns already in packs of a
	// task's raw block version (TaskSpec.Repack), at most a pack's bound
	// of them (block.DefaultPackBytes), so that workers copy them into the
	// packs they write (issue 28).
	Repack bool
	// RepackBelow, when positive, lists only the columns of packs holding
	// fewer live bytes than it (a size tier, as LSM compaction merges
	// small files and leaves large ones): a column is copied until it
	// sits in a pack of RepackBelow, then stays, so a block's columns are
	// rewritten a bounded number of times however many batches follow.
	RepackBelow int64
	// Delete, if set, deletes a pack none of whose members' entries was
	// switched to it (CompletePack: they were evicted or recomputed while
	// the worker computed them), so that a worker racing evictions leaves
	// no pack behind; without it such a pack waits for the evictor's
	// sweep of unnamed packs.
	Delete ObjectStat
	// Announce, if set, publishes each block that became ready; Bucket is
	// the object store's bucket the events name.
	Announce Announcer
	Bucket   string
	Clock    clock.Clock
	Logger   *slog.Logger
	// Done, if set, is told how long each task that marked its entry ready
	// took from its enqueue (sigd's latency metric).
	Done func(took time.Duration)
}

// MemoInput is a memo node of a task's cone, ready in the task's raw
// version: the worker reads it instead of computing it, from its entry's
// object and column (Column "": an object of the node alone).
type MemoInput struct {
	Key    canon.Key
	Object string
	Column string
}

// TaskSpec is what a worker computes for one memo entry.
type TaskSpec struct {
	Component canon.Key
	Block     blockref.Memo
	// DSL is the component's canonical DSL over Source's raw Columns.
	DSL     string
	Source  string
	Columns []string
	// Raw is the raw block version to compute from and RawObject its
	// object: the newest catalogued version with the entry's input version
	// for Columns.
	Raw       blockref.Ref
	RawObject string
	// MemoObject is where a worker that predates packs writes the
	// entry's object (block.MemoKey; issue 28): a worker now writes a
	// new pack instead and names it in its completion (Completion.Object).
	MemoObject string
	// Gen is the generation of the pending entry the worker computes; 0
	// when there is nothing to compute (the entry is ready or gone, no
	// pipeline's cover names it any more, or no catalogued version holds
	// its data).
	Gen uint64
	// MemoInputs are the memo nodes inside the cone ready for this raw
	// version (only when Gen != 0).
	MemoInputs []MemoInput
	// Repack are ready entries of other components whose columns are in
	// packs of Raw (only when Gen != 0 and Memos.Repack): a worker may copy
	// them into the pack it writes and report them moved (Moved), so that
	// the block's memo columns end up in one object however many batches
	// computed them, and a pack's dead columns are not carried (issue 28,
	// "reclaim at the next pack"). Bounded by block.DefaultPackBytes.
	Repack []PackedEntry
}

// PackedEntry is a ready entry's column in a pack: its component and memo
// block, the pack and column holding it, and the column's bytes there.
type PackedEntry struct {
	Component canon.Key
	Block     blockref.Memo
	Object    string
	Column    string
	Bytes     int64
}

// RawVersion is the newest catalogued version of m's block whose input
// version for columns is m's (ok false, with the newest version, when none
// is: GC dropped every version of that data). This is the one rule mapping
// a memo entry to the raw block it is computed from: workers compute from
// it (Describe) and the evictor checks and recomputes reported objects
// against it.
func RawVersion(vs RawVersions, source string, m blockref.Memo, columns []string) (block.Meta, bool, error) {
	ms, err := vs.Versions(source, m.ID())
	if err != nil {
		return block.Meta{}, false, err
	}
	if len(ms) == 0 {
		return block.Meta{}, false, fmt.Errorf("%w: block %s of source %s", ErrNotFound, m.ID(), source)
	}
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Ref().Memo(ms[i].InputVersion(columns)) == m {
			return ms[i], true, nil
		}
	}
	return ms[len(ms)-1], false, nil
}

// Describe says what the task of (k, m) computes. The entry's generation
// is taken now: a worker marks only the incarnation it was told of.
func (l *Memos) Describe(k canon.Key, m blockref.Memo) (TaskSpec, error) {
	f := l.Frontend
	rec, err := f.cfg.Cache.Component(k)
	if err != nil {
		return TaskSpec{}, err
	}
	gen, pending, err := f.Begin(k, m)
	if err != nil {
		return TaskSpec{}, err
	}
	if pending {
		// A memo node no pipeline's cover names any more (its pipelines
		// re-submitted under other covers) is not computed.
		if pending, err = f.Needed(k); err != nil {
			return TaskSpec{}, err
		}
	}
	if !pending {
		gen = 0
	}
	raw, ok, err := RawVersion(l.Versions, rec.Source, m, rec.Columns)
	if err != nil {
		return TaskSpec{}, fmt.Errorf("block %s: %w", m.ID(), err)
	}
	if !ok {
		gen = 0 // GC dropped every version of this data: nothing to compute
	}
	t := TaskSpec{Component: k, Block: m, DSL: rec.DSL, Source: rec.Source, Columns: rec.Columns,
		Raw: raw.Ref(), RawObject: raw.Key, MemoObject: block.MemoKey(k, m), Gen: gen}
	if gen == 0 {
		return t, nil
	}
	// Memo nodes inside the cone, ready for this block version: the worker
	// computes only what is above them (a nested subexpression memoized for
	// other covers is not computed again). Each node's entry is the one of
	// its own input version in that raw version. Any node kind may be one
	// (a node constant folding made, a node with two users): the worker
	// runs the residual above it (canon.Residual, transform.Program).
	for _, nk := range rec.NodeKeys {
		if nk == k {
			continue
		}
		nrec, err := f.cfg.Cache.Component(nk)
		if err != nil {
			continue // not a memoized node
		}
		if nrec.BareColumn() {
			// A bare column is memoized when it is a model input's whole
			// component (`input dev = col("device")`, the paper's SIG
			// memoizes every component, IV.A), but another task does not
			// read it in place of the raw column (issue 27): memoizing
			// saves computing, and a column computes nothing, while its
			// memo object costs a footer and an object read for bytes the
			// task's raw block holds (which the block's tasks share,
			// block.SegmentCache) and makes the task depend on another
			// entry's object. The insertion policy never makes one a cover's
			// memo node for the same reason (matching/insertion).
			continue
		}
		if e, err := f.cfg.Cache.Memo(nk, raw.Ref().Memo(raw.InputVersion(nrec.Columns))); err == nil && e.State == MemoReady {
			t.MemoInputs = append(t.MemoInputs, MemoInput{Key: nk, Object: e.Object, Column: e.Column})
		}
	}
	if l.Repack {
		if t.Repack, err = l.repack(k, rec.Source, raw.Ref()); err != nil {
			return TaskSpec{}, err
		}
	}
	return t, nil
}

// repack lists the ready entries other than k's whose columns are in packs
// of raw block version raw of source, smallest packs first (the ones a
// merge gains most from: a pack of one column costs a unit a request as a
// pack of fifty does), up to block.DefaultPackBytes of columns.
func (l *Memos) repack(k canon.Key, source string, raw blockref.Ref) ([]PackedEntry, error) {
	es, err := l.Frontend.cfg.Cache.RawPackEntries(source, raw)
	if err != nil {
		return nil, err
	}
	perPack := map[string]int64{}
	for _, e := range es {
		perPack[e.Object] += e.Bytes
	}
	slices.SortStableFunc(es, func(a, b MemoEntry) int {
		return cmp.Or(cmp.Compare(perPack[a.Object], perPack[b.Object]), strings.Compare(a.Object, b.Object))
	})
	const limit = block.DefaultPackBytes
	var out []PackedEntry
	var total int64
	for _, e := range es {
		if e.Component == k || e.State != MemoReady || !e.Packed() || e.Block.InputVersion() > raw.Version() {
			continue
		}
		if l.RepackBelow > 0 && perPack[e.Object] >= l.RepackBelow {
			continue
		}
		if total+e.Bytes > limit {
			break
		}
		total += e.Bytes
		out = append(out, PackedEntry{Component: e.Component, Block: e.Block, Object: e.Object, Column: e.Column, Bytes: e.Bytes})
	}
	return out, nil
}

// Completion is what a worker's finished task reports.
type Completion struct {
	// Object and Column are where the worker wrote the entry's data: a
	// pack and the entry's column in it (block.MemberColumn; "" is taken
	// to be it). Object "" is a worker that predates packs: the entry's
	// own object, block.MemoKey (TaskSpec.MemoObject), column "value".
	Object, Column string
	// Rows are the block's; Bytes the entry's share of storage (its
	// column's segment in a pack, the whole object of one component's).
	Rows, Bytes int64
	// OpNanos is the time the task's kernels took per op class (the
	// insertion policy's measured costs).
	OpNanos map[string]int64
	// Since is when the task was first enqueued.
	Since time.Time
	// Build is the build of the worker that computed it, from its lease
	// (workers.Result.Build), recorded with the entry (MemoEntry.Build).
	Build string
}

// Member is one memo entry whose data a worker wrote into a pack: its
// component, memo block and generation (as for Complete), and what the
// worker reports of it.
type Member struct {
	Component canon.Key
	Block     blockref.Memo
	Gen       uint64
	Completion
}

// Complete marks the entry of (k, m) ready after its worker wrote its data
// whole, records the worker's measurements and announces the block,
// before the task leaves the queue (an error keeps it there: its lease
// expires and it runs again). Data in a pack (c.Object) is completed as
// the pack's only member (CompletePack); ErrStale when the entry is no
// longer the incarnation gen.
//
// gen is the generation the worker computed, from its task description
// (in-process workers carry it). A remote worker's completion names only
// its lease (gen 0): the entry's current generation, if pending, is
// marked. An object of the component alone (a worker that predates packs)
// is checked to exist before the entry is marked, so an eviction that
// deleted it after the worker wrote it either changed the generation
// (the mark is refused) or happened before the check (which then fails,
// and the task runs again).
func (l *Memos) Complete(ctx context.Context, k canon.Key, m blockref.Memo, gen uint64, c Completion) error {
	if c.Object != "" {
		marked, err := l.CompletePack(ctx, c.Object, []Member{{Component: k, Block: m, Gen: gen, Completion: c}})
		if err == nil && !marked[0] && gen != 0 {
			err = ErrStale
		}
		return err
	}
	f := l.Frontend
	object := block.MemoKey(k, m)
	if gen == 0 {
		g, pending, err := f.Begin(k, m)
		if err != nil {
			return err
		}
		if !pending {
			return nil // nothing was left to compute
		}
		if l.Stat != nil {
			if err := l.Stat(ctx, object); err != nil {
				return fmt.Errorf("memo object %s: %w", object, err)
			}
		}
		gen = g
	}
	c.Object, c.Column = object, ""
	marked, err := l.Frontend.markReady([]Member{{Component: k, Block: m, Gen: gen, Completion: c}})
	if err != nil {
		return err
	}
	if !marked[0] {
		return ErrStale
	}
	l.completed(ctx, []Member{{Component: k, Block: m, Gen: gen, Completion: c}}, marked)
	return nil
}

// CompletePack switches the entries of a pack's members to it, after a
// worker wrote the pack whole (paper IV.A: "store results back in the
// warehouse"; issue 28): each member's entry turns ready naming the pack
// and its column, only the incarnation the member was computed for (its
// Gen; 0, a remote worker's, the current one) and only while pending, all
// in one batch of the matching cache (Cache.UpdateMemos), so a pack is
// named by every member that was still wanted or by none. It returns which
// members were marked; a member not marked was evicted or recomputed
// meanwhile (its column in the pack is dead weight until the pack goes).
//
// The pack is written first and switched to second: a crash in between
// leaves the entries pending (recomputed after the restart into a new
// pack) and the pack unnamed, which the evictor's sweep deletes. The pack
// must be one of the members' block (its key says so) and must exist when
// the entries switch to it: Stat checks it while the sweep of unnamed
// packs is held off (Frontend.SweepingPacks), so no entry is ever switched
// to a pack the sweep deleted. The members of one pack are completed in one
// call: a pack with some entries is deleted when the last of them goes,
// and must not gain others after.
func (l *Memos) CompletePack(ctx context.Context, object string, members []Member) ([]bool, error) {
	return l.completePack(ctx, object, members, false)
}

// completePack is CompletePack, creating missing entries ready when create
// is set (CompleteConcatenated).
func (l *Memos) completePack(ctx context.Context, object string, members []Member, create bool) ([]bool, error) {
	f := l.Frontend
	source, raw, ok := block.ParsePackKey(object)
	if !ok {
		return nil, fmt.Errorf("%w: %q is no pack key", ErrInvalidCompletion, object)
	}
	for i := range members {
		mb := &members[i]
		want := block.MemberColumn(mb.Component)
		if mb.Column == "" {
			mb.Column = want
		}
		if mb.Column != want || mb.Block.ID() != raw.ID() || mb.Block.InputVersion() > raw.Version() {
			return nil, fmt.Errorf("%w: pack %s of block %s holding column %.80q for component %s of block %s",
				ErrInvalidCompletion, object, raw, mb.Column, mb.Component.Short(), mb.Block)
		}
		rec, err := f.cfg.Cache.Component(mb.Component)
		if err != nil {
			return nil, err
		}
		if rec.Source != source {
			return nil, fmt.Errorf("%w: pack %s of source %s for component %s of source %s",
				ErrInvalidCompletion, object, source, mb.Component.Short(), rec.Source)
		}
		mb.Object = object
	}
	f.packMu.RLock()
	if err := l.statPack(ctx, object); err != nil {
		f.packMu.RUnlock()
		return nil, err
	}
	marked, err := l.Frontend.markReadyOrCreate(members, create)
	f.packMu.RUnlock()
	if err != nil {
		return nil, err
	}
	if !slices.Contains(marked, true) && l.Delete != nil {
		// No entry took it: delete it now, as the sweep would later, and
		// under the sweep's side of the lock, so that a completion of the
		// same pack that did switch entries (a retried one) is seen.
		err := f.SweepingPacks(func() error {
			named, err := f.cfg.Cache.PackNamed(object)
			if err != nil || named {
				return err
			}
			return l.Delete(ctx, object)
		})
		if err != nil {
			l.log().Warn("deleting a pack no entry took", "pack", object, "err", err)
		}
	}
	l.completed(ctx, members, marked)
	return marked, nil
}

// Moved switches entries a worker copied into pack object (TaskSpec.Repack,
// issue 28) to it: each entry that is still ready and still names the pack
// the member was copied from (Object) and its column turns to name object,
// with the member's Bytes there, all in one batch, after checking object
// exists while the sweep of unnamed packs is held off (as CompletePack
// does). An entry evicted, recomputed or moved by another worker meanwhile
// is left alone: its column in object is dead weight until object goes.
// It returns which were moved. The packs they were moved from are left to
// the evictor's sweep of unnamed packs (SweepPacks), not deleted here: a
// unit a reader planned before the move still names the old pack, and the
// sweep's period is its grace.
func (l *Memos) Moved(ctx context.Context, object string, moved []PackedEntry) ([]bool, error) {
	f := l.Frontend
	_, raw, ok := block.ParsePackKey(object)
	if !ok {
		return nil, fmt.Errorf("%w: %q is no pack key", ErrInvalidCompletion, object)
	}
	ids := make([]Task, len(moved))
	for i, mv := range moved {
		if mv.Block.ID() != raw.ID() || mv.Block.InputVersion() > raw.Version() || mv.Column != block.MemberColumn(mv.Component) || mv.Object == object {
			return nil, fmt.Errorf("%w: pack %s of block %s taking column %.80q of component %s of block %s from %s",
				ErrInvalidCompletion, object, raw, mv.Column, mv.Component.Short(), mv.Block, mv.Object)
		}
		ids[i] = Task{Component: mv.Component, Block: mv.Block}
	}
	f.packMu.RLock()
	defer f.packMu.RUnlock()
	if err := l.statPack(ctx, object); err != nil {
		return nil, err
	}
	done := make([]bool, len(moved))
	es, err := f.cfg.Cache.UpdateMemos(ids, func(i int, e *MemoEntry, ok bool) bool {
		mv := moved[i]
		if !ok || e.State != MemoReady || e.Object != mv.Object || e.Column != mv.Column {
			return false
		}
		e.Object, e.Bytes = object, mv.Bytes
		done[i] = true
		return true
	})
	if err != nil {
		return nil, err
	}
	for i, e := range es {
		if done[i] {
			f.watch.notify(e.Component, e) // watchers' solutions name the new pack
		}
	}
	return done, nil
}

// statPack checks that pack object exists, with f.packMu held for reading:
// a pack some entry names already does (only a holder of packMu for
// writing deletes a pack, and only one no entry names), so the object
// store is asked only for a pack's first completion, not for each of a
// batch's members (one HEAD a task, issue 28).
func (l *Memos) statPack(ctx context.Context, object string) error {
	if l.Stat == nil {
		return nil
	}
	if named, err := l.Frontend.cfg.Cache.PackNamed(object); err == nil && named {
		return nil
	}
	if err := l.Stat(ctx, object); err != nil {
		return fmt.Errorf("pack %s: %w", object, err)
	}
	return nil
}

// ErrInvalidCompletion: a completion named an object that cannot hold its
// entries' data (not a pack of their block and source, or another
// component's column).
var ErrInvalidCompletion = errors.New("matching: completion names no object of its entries")

// markReady turns the pending entries of members ready in one batch, each
// only at its member's generation (0: any), naming the member's object
// and column, and tells watchers. It returns which were marked.
func (f *Frontend) markReady(members []Member) ([]bool, error) {
	return f.markReadyOrCreate(members, false)
}

// markReadyOrCreate is markReady creating a member's missing entry ready
// when create is set, unless its component is being evicted (the check
// and the batch hold evictMu, as createMissing's do).
func (f *Frontend) markReadyOrCreate(members []Member, create bool) ([]bool, error) {
	if create {
		f.evictMu.Lock()
		defer f.evictMu.Unlock()
	}
	ids := make([]Task, len(members))
	for i, mb := range members {
		ids[i] = Task{Component: mb.Component, Block: mb.Block}
	}
	marked := make([]bool, len(members))
	now := f.cfg.Clock.Now()
	es, err := f.cfg.Cache.UpdateMemos(ids, func(i int, e *MemoEntry, ok bool) bool {
		mb := &members[i]
		if !ok && create && f.evicting[mb.Component] == 0 {
			*e = newPending(mb.Component, mb.Block, now)
			ok = true
		}
		if !ok || e.State != MemoPending || mb.Gen != 0 && e.Gen != mb.Gen {
			return false
		}
		e.State, e.Rows, e.Bytes, e.Error, e.Updated, e.Build = MemoReady, mb.Rows, mb.Bytes, "", now, mb.Build
		e.Object, e.Column = mb.Object, mb.Column
		marked[i] = true
		return true
	})
	if err != nil {
		return nil, err
	}
	for i, e := range es {
		if marked[i] {
			f.watch.notify(e.Component, e)
			// The node's measured size, for the insertion policy: a
			// statistic, so failing to record it fails nothing.
			_ = f.cfg.Cache.AddSize(e.Component, e.Bytes, e.Rows)
		}
	}
	return marked, nil
}

// completed records the measurements of the marked members and announces
// their blocks.
func (l *Memos) completed(ctx context.Context, members []Member, marked []bool) {
	f := l.Frontend
	now := l.clock().Now()
	for i := range members {
		if !marked[i] {
			continue
		}
		c := &members[i].Completion
		k, m := members[i].Component, members[i].Block
		// The workers' measurements, for the insertion policy: statistics,
		// so a failure to keep them fails nothing.
		if len(c.OpNanos) > 0 && c.Rows > 0 {
			ops := make(map[string]OpStat, len(c.OpNanos))
			for class, ns := range c.OpNanos {
				ops[class] = OpStat{Nanos: ns, Rows: c.Rows}
			}
			if err := f.cfg.Cache.AddOpStats(ops); err != nil {
				l.log().Warn("op statistics", "err", err)
			}
		}
		if l.Done != nil && !c.Since.IsZero() {
			l.Done(now.Sub(c.Since))
		}
		if l.Announce == nil {
			continue
		}
		source := ""
		if rec, err := f.cfg.Cache.Component(k); err == nil {
			source = rec.Source
		}
		// Completion events are a hint (trainers also watch the gRPC
		// stream and re-read solutions): a lost event delays, never
		// corrupts.
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := l.Announce.Publish(pctx, ready.Event{ComponentKey: k, Block: m, Source: source, Bucket: l.Bucket,
			Key: c.Object, Column: c.Column, Rows: c.Rows, Bytes: c.Bytes, Time: now}); err != nil {
			l.log().Warn("publish "+ready.Topic, "err", err)
		}
		cancel()
	}
}

// Quarantined mirrors a task the queues quarantined into its entry, so
// read solutions show the failure and its reason.
func (l *Memos) Quarantined(k canon.Key, m blockref.Memo, reason string) {
	if err := l.Frontend.MarkFailed(k, m, reason); err != nil {
		l.log().Warn("mark failed", "component", k.String(), "block", m.String(), "err", err)
	}
}

// Released mirrors a quarantine an operator released: the entry is pending
// again, with a new generation.
func (l *Memos) Released(k canon.Key, m blockref.Memo) {
	if err := l.Frontend.MarkPending(k, m); err != nil {
		l.log().Warn("mark pending", "component", k.String(), "block", m.String(), "err", err)
	}
}

// Failed is a task the queues quarantined, with their reason.
type Failed struct {
	Task
	Reason string
}

// Recover brings the entries in line with the queues after a crash, before
// anything is served: quarantined tasks (the queues' record) are mirrored
// into their entries and every pending entry is scheduled again (Reconcile;
// Enqueue is idempotent), so a crash between the two stores loses nothing.
// It returns how many entries were scheduled.
func (l *Memos) Recover(quarantined []Failed) (int, error) {
	for _, t := range quarantined {
		l.Quarantined(t.Component, t.Block, t.Reason)
	}
	return l.Frontend.Reconcile()
}

func (l *Memos) clock() clock.Clock {
	if l.Clock == nil {
		return clock.Real{}
	}
	return l.Clock
}

func (l *Memos) log() *slog.Logger {
	if l.Logger == nil {
		return slog.Default()
	}
	return l.Logger
}
