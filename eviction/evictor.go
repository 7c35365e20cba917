package eviction

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow/go/v15/arrow"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/internal/randid"
	"github.com/sigdata/sig/matching"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/objstore"
)

// Canceler cancels queued or running memoization tasks (the work queues).
type Canceler interface {
	Cancel(component canon.Key, block blockref.Memo) error
}

// Store is what the Evictor does in the object store: list and delete
// components' memo objects, and read a reported object whole, or a raw
// block's event ids, to check it (objstore.Reader). *objstore.Store
// implements it over S3; objstore/memstore in memory, on which eviction's
// tests check the Evictor's decisions.
type Store interface {
	objstore.Reader
	Stat(ctx context.Context, key string) (objstore.Info, error)
	Delete(ctx context.Context, key string) error
	DeleteMany(ctx context.Context, keys []string) (int, error)
	List(ctx context.Context, prefix string) iter.Seq2[objstore.Info, error]
}

// Evictor removes memoized data.
type Evictor struct {
	Frontend *matching.Frontend
	Queue    Canceler
	Store    Store
	Clock    clock.Clock
	Policy   Policy
	// Interval between last-requested eviction rounds and sweeps. Default
	// 1m.
	Interval time.Duration
	// SweepAfter is how long after an eviction Sweep deletes the evicted
	// components' memo objects that no memo entry names. A worker that was
	// computing a block when its component was evicted writes its object
	// after the eviction deleted the others (its ready mark is refused);
	// such an object is never read, and memoizing the block again
	// overwrites it with the same bytes, but if the component is never
	// requested again it would stay. Default: Interval.
	SweepAfter time.Duration
	// PackSweepEvery is how often SweepPacks lists the packs (issue 28)
	// for ones no memo entry names and older than SweepAfter: a pack
	// written by a worker or sigd that crashed before its entries were
	// switched to it, or whose completion was refused. Listing costs one
	// request per thousand packs, so it runs less often than Sweep.
	// Default: 10 Intervals.
	PackSweepEvery time.Duration
	// Versions lists a raw block's catalogued versions (the catalog):
	// ReportCorrupt checks that a memo object is row-aligned with the raw
	// version its entry is computed from (rawBlock, matching.RawVersion:
	// the one rule workers compute by). Nil skips that check.
	Versions matching.RawVersions
	// Recompute computes a component's column over a raw block (the memo
	// entry's, rawBlock), from raw columns (sigd: transform, as a worker
	// would): ReportCorrupt compares a memo object reported for a value
	// mismatch with it (mismatch.go). Nil, or Versions nil: such reports
	// are checked as corrupt ones only.
	Recompute func(ctx context.Context, rec matching.ComponentRecord, raw block.Meta) (arrow.Array, error)
	// Builds bans worker builds and quarantines tasks (the work queues):
	// a block whose recomputation by the build that computed it wrong is
	// found wrong again bans the build and fails the block, rather than
	// recompute it for ever (mismatch.go, issue 27). Nil: such blocks are
	// recomputed each time.
	Builds Builds
	Log    *slog.Logger

	evicted atomic.Int64 // blocks evicted since start
	swept   atomic.Int64 // objects deleted by sweeps since start

	lastPackSweep time.Time // Run's, when SweepPacks last ran

	mu         sync.Mutex
	toSweep    map[canon.Key]time.Time // evicted components, when
	mismatches map[canon.Key]int64     // confirmed value mismatches since start
	healthy    map[checkedKey]bool     // incarnations checkValues found healthy
	reports    map[ReportCount]int64   // ReportCorrupt's reports by reason and outcome
	// strikes: incarnations recomputing a block whose object sigd found
	// wrong, by the build that computed that object (mismatch.go).
	strikes map[strike]string

	blockMu     sync.Mutex    // serializes single-block operations (block.go)
	verifyOnce  sync.Once     // makes verifySlots
	verifySlots chan struct{} // reported objects being verified
}

// Target names what to evict: a faulty subgraph as a DSL expression, or a
// node key (everything containing the node), or explicit components.
type Target struct {
	Subgraph   string
	Source     string
	NodeKey    string
	Components []canon.Key
}

func (t Target) String() string {
	switch {
	case t.Subgraph != "":
		return "subgraph " + t.Subgraph
	case t.NodeKey != "":
		return "node " + t.NodeKey
	}
	ks := make([]string, len(t.Components))
	for i, k := range t.Components {
		ks[i] = k.Short()
	}
	return "components " + strings.Join(ks, ",")
}

// Impact is what an eviction removes (a dry run's answer).
type Impact struct {
	Components []canon.Key
	Pipelines  []string // client/pipeline
	Blocks     int      // memo entries
	Bytes      int64    // ready bytes
	// Objects deleted (only after a real eviction).
	Objects int
	AuditID string
}

// resolve turns a target into component keys.
func (e *Evictor) resolve(t Target) ([]canon.Key, error) {
	if len(t.Components) > 0 {
		return t.Components, nil
	}
	var key canon.Key
	var err error
	switch {
	case t.Subgraph != "":
		key, err = e.Frontend.SubgraphKey(t.Subgraph, t.Source)
	case t.NodeKey != "":
		key, err = canon.ParseKey(t.NodeKey)
		if err != nil {
			err = &matching.InputError{Field: "node_key", Err: err}
		}
	default:
		err = &matching.InputError{Field: "target", Err: errors.New("give a subgraph, a node key or components")}
	}
	if err != nil {
		return nil, err
	}
	return e.Frontend.Cache().ContainingNode(key, 0)
}

// Plan is a dry run: every component containing the target, the pipelines
// using them, their blocks and bytes. It changes nothing.
func (e *Evictor) Plan(t Target) (Impact, error) {
	keys, err := e.resolve(t)
	if err != nil {
		return Impact{}, err
	}
	return e.impact(keys)
}

func (e *Evictor) impact(keys []canon.Key) (Impact, error) {
	im := Impact{Components: keys}
	pipes := map[string]bool{}
	for _, k := range keys {
		info, err := e.Frontend.Info(k)
		if err != nil {
			if errors.Is(err, matching.ErrNotFound) {
				continue
			}
			return im, err
		}
		for _, p := range info.Pipelines {
			pipes[p[0]+"/"+p[1]] = true
		}
		im.Blocks += info.Ready + info.Pending + info.Failed
		im.Bytes += info.Bytes
	}
	for p := range pipes {
		im.Pipelines = append(im.Pipelines, p)
	}
	sort.Strings(im.Pipelines)
	return im, nil
}

// Evict removes all memoized outputs of the target's components (memo
// entries and objects), cancels their tasks, tells watchers (their read
// solutions turn pending) and records who, when, what and why.
func (e *Evictor) Evict(ctx context.Context, t Target, who, why string) (Impact, error) {
	if strings.TrimSpace(why) == "" {
		return Impact{}, &matching.InputError{Field: "reason", Err: errors.New("a reason is required")}
	}
	if len(why) > 4096 {
		return Impact{}, &matching.InputError{Field: "reason", Err: errors.New("longer than 4096 bytes")}
	}
	keys, err := e.resolve(t)
	if err != nil {
		return Impact{}, err
	}
	im, err := e.impact(keys)
	if err != nil {
		return im, err
	}
	im.Objects, err = e.remove(ctx, keys)
	// A failed eviction is recorded too: its entries may be gone (the
	// read solutions pending) with some objects left, which Sweep deletes.
	im.AuditID = randid.Hex(8)
	entry := matching.AuditEntry{ID: im.AuditID, Who: who, When: e.clock().Now(), What: t.String(), Why: why,
		Pipelines: im.Pipelines, Blocks: im.Blocks, Bytes: im.Bytes, Objects: im.Objects}
	if err != nil {
		entry.Why = fmt.Sprintf("%s [failed after deleting %d objects: %v]", why, im.Objects, err)
	}
	for _, k := range keys {
		entry.Components = append(entry.Components, k)
	}
	if aerr := e.Frontend.Cache().AppendAudit(entry); aerr != nil {
		return im, errors.Join(err, aerr)
	}
	if err != nil {
		e.log().Warn("eviction failed", "what", entry.What, "who", who, "why", why, "components", len(keys), "objects", im.Objects, "err", err)
		return im, err
	}
	e.log().Info("evicted", "what", entry.What, "who", who, "why", why, "components", len(keys), "blocks", im.Blocks, "objects", im.Objects)
	return im, nil
}

// remove deletes the components' memo entries, then cancels their tasks,
// then deletes their objects (every object under memo/<key>/, which also
// catches objects a racing worker that predates packs wrote, and every
// pack no entry names any more: matching.Cache.Unnamed; a pack that still
// holds another component's ready column stays), all while the components
// are marked as being evicted. Watchers are told once the mark is lifted: a
// watcher re-reads its solution when told, and a read while the mark is on
// creates (and schedules) nothing.
func (e *Evictor) remove(ctx context.Context, keys []canon.Key) (int, error) {
	objects := 0
	var deleted []matching.MemoEntry
	defer func() {
		// Even after a failure: the entries are gone either way.
		for _, m := range deleted {
			e.Frontend.Notify(matching.MemoEntry{Component: m.Component, Block: m.Block}) // state 0: gone
		}
	}()
	// Once entries are deleted the objects must go too, whether or not the
	// caller (an operator's browser, a CLI) is still waiting: the store's
	// own retry limits bound the deletion.
	dctx := context.WithoutCancel(ctx)
	err := e.Frontend.Evicting(keys, func() error {
		for _, k := range keys {
			es, err := e.Frontend.Cache().DeleteMemos(k)
			if err != nil {
				return err
			}
			deleted = append(deleted, es...)
		}
		for _, m := range deleted {
			if e.Queue != nil {
				if err := e.Queue.Cancel(m.Component, m.Block); err != nil {
					return err
				}
			}
		}
		objs, err := e.list(dctx, keys)
		if err != nil {
			return err
		}
		freed, err := e.Frontend.Cache().Unnamed(deleted)
		if err != nil {
			return err
		}
		for _, o := range freed {
			if !slices.Contains(objs, o) {
				objs = append(objs, o)
			}
		}
		n, err := e.deleteObjects(dctx, objs)
		objects = n
		if err != nil {
			return err
		}
		e.evicted.Add(int64(len(deleted)))
		return nil
	})
	// Sweep later: objects a racing worker writes after the deletion, or
	// that a failed deletion left.
	now := e.clock().Now()
	e.mu.Lock()
	if e.toSweep == nil {
		e.toSweep = map[canon.Key]time.Time{}
	}
	for _, k := range keys {
		e.toSweep[k] = now
	}
	e.mu.Unlock()
	return objects, err
}

// Sweep deletes the memo objects that no memo entry names of the
// components evicted at least SweepAfter ago (see SweepAfter), and returns
// how many it deleted. The components are marked as being evicted
// meanwhile, so no entry of theirs appears between the listing of their
// entries and the deletion: an object deleted here can never be named by a
// ready entry. Objects of pending entries stay (their recomputation
// overwrites them). Components evicted again meanwhile wait for their new
// turn.
func (e *Evictor) Sweep(ctx context.Context) (int, error) {
	now := e.clock().Now()
	wait := e.SweepAfter
	if wait <= 0 {
		wait = e.interval()
	}
	e.mu.Lock()
	due := map[canon.Key]time.Time{}
	for k, at := range e.toSweep {
		if now.Sub(at) >= wait {
			due[k] = at
		}
	}
	e.mu.Unlock()
	if len(due) == 0 {
		return 0, nil
	}
	keys := make([]canon.Key, 0, len(due))
	for k := range due {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return bytes.Compare(keys[i][:], keys[j][:]) < 0 })
	deleted := 0
	err := e.Frontend.Evicting(keys, func() error {
		named := map[string]bool{}
		for _, k := range keys {
			memos, err := e.Frontend.Cache().Memos(k)
			if err != nil {
				return err
			}
			for _, m := range memos {
				named[m.Object] = true
			}
		}
		objs, err := e.list(ctx, keys)
		if err != nil {
			return err
		}
		var orphans []string
		for _, o := range objs {
			if !named[o] {
				orphans = append(orphans, o)
			}
		}
		deleted, err = e.deleteObjects(ctx, orphans)
		return err
	})
	e.swept.Add(int64(deleted))
	if err != nil {
		return deleted, err
	}
	e.mu.Lock()
	for k, at := range due {
		if e.toSweep[k].Equal(at) {
			delete(e.toSweep, k)
		}
	}
	e.mu.Unlock()
	if deleted > 0 {
		e.log().Info("swept memo objects written after their eviction", "objects", deleted, "components", len(keys))
	}
	return deleted, nil
}

// SweepPacks deletes the packs (issue 28) that no memo entry names and
// that were written at least SweepAfter ago, and returns how many. A pack
// is written whole before its entries are switched to it (matching's
// CompletePack), so a crash of its writer, or of sigd, in between, or a
// completion refused (its entries evicted or recomputed meanwhile), leaves
// a pack nothing reads; a pack whose entries all went since was deleted
// then (deleteUnnamed, versions' GC). The check of each pack and its
// deletion run while no completion switches entries to a pack
// (Frontend.SweepingPacks), a thousand packs at a time, so no entry is
// ever switched to a pack deleted here, and SweepAfter leaves a pack's
// writer time to complete.
func (e *Evictor) SweepPacks(ctx context.Context) (int, error) {
	now := e.clock().Now()
	wait := e.SweepAfter
	if wait <= 0 {
		wait = e.interval()
	}
	var old []string
	for info, err := range e.Store.List(ctx, block.PackPrefix) {
		if err != nil {
			return 0, err
		}
		if now.Sub(info.LastModified) >= wait {
			old = append(old, info.Key)
		}
	}
	const batch = 1000
	deleted := 0
	for len(old) > 0 {
		chunk := old[:min(len(old), batch)]
		old = old[len(chunk):]
		err := e.Frontend.SweepingPacks(func() error {
			var orphans []string
			for _, o := range chunk {
				named, err := e.Frontend.Cache().PackNamed(o)
				if err != nil {
					return err
				}
				if !named {
					orphans = append(orphans, o)
				}
			}
			n, err := e.deleteObjects(ctx, orphans)
			deleted += n
			return err
		})
		if err != nil {
			e.swept.Add(int64(deleted))
			return deleted, err
		}
	}
	e.swept.Add(int64(deleted))
	if deleted > 0 {
		e.log().Info("swept packs no memo entry names", "objects", deleted)
	}
	return deleted, nil
}

// Round runs one last-requested eviction round at the clock's now.
func (e *Evictor) Round(ctx context.Context) ([]Decision, error) {
	cache := e.Frontend.Cache()
	keys, err := cache.ComponentKeys()
	if err != nil {
		return nil, err
	}
	cands := make([]Candidate, 0, len(keys))
	for _, k := range keys {
		info, err := e.Frontend.Info(k)
		if err != nil {
			return nil, err
		}
		cands = append(cands, Candidate{Component: k, LastRequested: info.LastRequested,
			Bytes: info.Bytes, Blocks: info.Ready + info.Pending + info.Failed})
	}
	decisions := e.Policy.Decide(e.clock().Now(), cands)
	if len(decisions) == 0 {
		return nil, nil
	}
	var evict []canon.Key
	reasons := map[string]int{}
	for _, d := range decisions {
		evict = append(evict, d.Component)
		reasons[d.Reason]++
	}
	why := fmt.Sprintf("last-requested eviction (ttl %s, budget %d bytes): %d by ttl, %d by budget",
		e.Policy.TTL, e.Policy.BudgetBytes, reasons["ttl"], reasons["budget"])
	_, err = e.Evict(ctx, Target{Components: evict}, "eviction-policy", why)
	return decisions, err
}

// Run evicts by the policy and sweeps (Sweep) every Interval, and sweeps
// packs (SweepPacks) at its first round and every PackSweepEvery, until
// ctx ends.
func (e *Evictor) Run(ctx context.Context) error {
	policy := e.Policy.TTL > 0 || e.Policy.BudgetBytes > 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-e.clock().After(e.interval()):
		}
		if policy {
			if _, err := e.Round(ctx); err != nil {
				e.log().Warn("eviction round failed", "err", err)
			}
		}
		if _, err := e.Sweep(ctx); err != nil {
			e.log().Warn("eviction sweep failed", "err", err)
		}
		if now := e.clock().Now(); e.lastPackSweep.IsZero() || now.Sub(e.lastPackSweep) >= e.packSweepEvery() {
			e.lastPackSweep = now
			if _, err := e.SweepPacks(ctx); err != nil {
				e.log().Warn("pack sweep failed", "err", err)
			}
		}
	}
}

func (e *Evictor) packSweepEvery() time.Duration {
	if e.PackSweepEvery <= 0 {
		return 10 * e.interval()
	}
	return e.PackSweepEvery
}

func (e *Evictor) interval() time.Duration {
	if e.Interval <= 0 {
		return time.Minute
	}
	return e.Interval
}

// Evicted returns the number of memo blocks evicted since start.
func (e *Evictor) Evicted() int64 { return e.evicted.Load() }

// Swept returns the number of objects Sweep deleted since start.
func (e *Evictor) Swept() int64 { return e.swept.Load() }

func (e *Evictor) clock() clock.Clock {
	if e.Clock == nil {
		return clock.Real{}
	}
	return e.Clock
}

func (e *Evictor) log() *slog.Logger {
	if e.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.Log
}

// storeParallelism bounds the object-store requests an eviction has in
// flight: listings of the components' memo prefixes, and multi-object
// deletes of up to 1000 keys.
const storeParallelism = 8

// list returns every object under the components' memo prefixes.
func (e *Evictor) list(ctx context.Context, keys []canon.Key) ([]string, error) {
	out := make([][]string, len(keys))
	err := parallel(len(keys), storeParallelism, func(i int) error {
		for info, err := range e.Store.List(ctx, block.MemoComponentPrefix(keys[i])) {
			if err != nil {
				return err
			}
			out[i] = append(out[i], info.Key)
		}
		return nil
	})
	var all []string
	for _, o := range out {
		all = append(all, o...)
	}
	return all, err
}

// deleteObjects deletes objects in concurrent batches of 1000 and returns
// how many were deleted.
func (e *Evictor) deleteObjects(ctx context.Context, objs []string) (int, error) {
	const batch = 1000
	var deleted atomic.Int64
	err := parallel((len(objs)+batch-1)/batch, storeParallelism, func(i int) error {
		n, err := e.Store.DeleteMany(ctx, objs[i*batch:min(len(objs), (i+1)*batch)])
		deleted.Add(int64(n))
		return err
	})
	return int(deleted.Load()), err
}

// parallel runs f(0..n-1) with at most k at once and returns the first
// error; after an error no new call starts.
func parallel(n, k int, f func(i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	sem := make(chan struct{}, k)
	for i := 0; i < n; i++ {
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := f(i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}
