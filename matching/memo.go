package matching

import (
	"errors"
	"math/rand/v2"
	"time"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// The memo entry lifecycle. An entry of (component, memo block ref) is
// created pending with a new generation (createMissing, by a read solution
// or a block's new version), but not while its component is being evicted
// (Evicting); a worker computes it (Begin gives its generation, Needed
// whether a pipeline still reads it) and marks it ready (MarkReady), or
// its task is quarantined (MarkFailed, released by MarkPending); a corrupt
// or lost object turns it pending again (Invalidate). MarkReady and
// Invalidate succeed only on the incarnation (generation) they were
// decided on, so a worker that raced with an eviction never marks data
// that was deleted. Schedule and Reconcile enqueue pending entries' tasks
// at their pipelines' priorities. Watchers are told of every change
// (watch.go).

// createMissing creates the pending memo entry of (k, block) if it is still
// missing (a concurrent request may have created it, and a worker completed
// it, since the caller looked; overwriting would recompute it) and returns
// the entry. While k is being evicted it creates nothing and returns a
// pending entry without a generation, which is not scheduled: it is created
// by the first read after the eviction. The check and the creation hold
// evictMu, which Evicting takes to mark components, so an entry is either
// created before the mark (and the eviction deletes it) or not at all until
// the eviction is done. Were they apart, an entry could be created between
// the eviction's removal of the entries and of the objects, completed by a
// worker whose object the eviction then deletes, and stay ready without its
// object (TestEvictionDuringEntryCreation in eviction).
//
// created, when not nil, is set when this call created the entry.
func (f *Frontend) createMissing(k canon.Key, id blockref.Memo, now time.Time, created *bool) (MemoEntry, error) {
	f.evictMu.Lock()
	defer f.evictMu.Unlock()
	if f.evicting[k] > 0 {
		return MemoEntry{Component: k, Block: id, State: MemoPending, Object: block.MemoKey(k, id)}, nil
	}
	fresh := newPending(k, id, now)
	return f.cfg.Cache.UpdateMemo(k, id, func(cur *MemoEntry, exists bool) bool {
		if exists {
			return false
		}
		*cur = fresh
		if created != nil {
			*created = true
		}
		return true
	})
}

// newPending is a new pending memo entry of (k, memo block ref) with a new
// generation.
func newPending(k canon.Key, ref blockref.Memo, now time.Time) MemoEntry {
	return MemoEntry{Component: k, Block: ref, State: MemoPending, Object: block.MemoKey(k, ref),
		Updated: now, Gen: rand.Uint64() | 1}
}

// Evicting runs fn while no memo entry of the given components can be
// created (see Frontend.evicting). Evictions of overlapping sets may run
// at once; a component stays marked until the last of them is done.
func (f *Frontend) Evicting(keys []canon.Key, fn func() error) error {
	f.evictMu.Lock()
	if f.evicting == nil {
		f.evicting = map[canon.Key]int{}
	}
	for _, k := range keys {
		f.evicting[k]++
	}
	f.evictMu.Unlock()
	defer func() {
		f.evictMu.Lock()
		for _, k := range keys {
			if f.evicting[k]--; f.evicting[k] <= 0 {
				delete(f.evicting, k)
			}
		}
		f.evictMu.Unlock()
	}()
	return fn()
}

// Begin returns the generation of a pending memo entry, for a worker about
// to compute it. ok is false when there is nothing to compute (the entry is
// gone or already ready).
func (f *Frontend) Begin(k canon.Key, block blockref.Memo) (gen uint64, ok bool, err error) {
	e, err := f.cfg.Cache.Memo(k, block)
	if errors.Is(err, ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return e.Gen, e.State == MemoPending, nil
}

// Needed reports whether some registered pipeline reads k's memo entries
// (a cover's memo node, or a whole component). A pending entry no cover
// names any more — its pipelines re-submitted under other covers — need
// not be computed: sigd describes its task as having nothing to compute,
// and last-requested eviction removes the entry.
func (f *Frontend) Needed(k canon.Key) (bool, error) {
	users, err := f.cfg.Cache.Users(k)
	if err != nil {
		return false, err
	}
	for _, u := range users {
		p, err := f.cfg.Cache.Pipeline(u[0], u[1])
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return false, err
		}
		if p.Memoizes(k) {
			return true, nil
		}
	}
	return false, nil
}

// ErrStale: the memo entry a worker computed was evicted (and perhaps
// re-created) meanwhile; the worker must not mark it.
var ErrStale = errors.New("matching: memo entry changed while computing")

// MarkReady records that the object of (k, block) alone, as written
// before packs, was written whole (a pack's entries are switched by
// Memos.CompletePack). It only succeeds on the pending entry of the given
// generation, so a worker that raced with an eviction never marks data
// that was deleted.
func (f *Frontend) MarkReady(k canon.Key, block blockref.Memo, gen uint64, rows, bytes int64) error {
	return f.MarkReadyBy(k, block, gen, rows, bytes, "")
}

// MarkReadyBy is MarkReady recording the worker build that computed the
// incarnation (MemoEntry.Build; "" when unknown).
func (f *Frontend) MarkReadyBy(k canon.Key, id blockref.Memo, gen uint64, rows, bytes int64, build string) error {
	if gen == 0 {
		return ErrStale // no incarnation has generation 0
	}
	marked, err := f.markReady([]Member{{Component: k, Block: id, Gen: gen,
		Completion: Completion{Object: block.MemoKey(k, id), Rows: rows, Bytes: bytes, Build: build}}})
	if err == nil && !marked[0] {
		err = ErrStale
	}
	return err
}

// MarkFailed records that the task of (k, block) was quarantined.
func (f *Frontend) MarkFailed(k canon.Key, block blockref.Memo, reason string) error {
	e, err := f.cfg.Cache.UpdateMemo(k, block, func(e *MemoEntry, ok bool) bool {
		if !ok || e.State == MemoReady {
			return false
		}
		e.State, e.Error, e.Updated = MemoFailed, reason, f.cfg.Clock.Now()
		return true
	})
	if err != nil {
		return err
	}
	f.watch.notify(k, e)
	return nil
}

// MarkPending turns a failed entry pending again (quarantine released).
func (f *Frontend) MarkPending(k canon.Key, block blockref.Memo) error {
	e, err := f.cfg.Cache.UpdateMemo(k, block, func(e *MemoEntry, ok bool) bool {
		if !ok || e.State != MemoFailed {
			return false
		}
		e.State, e.Error, e.Updated, e.Gen, e.Build = MemoPending, "", f.cfg.Clock.Now(), rand.Uint64()|1, ""
		return true
	})
	if err != nil {
		return err
	}
	f.watch.notify(k, e)
	return nil
}

// SweepingPacks runs fn, the evictor's deletion of packs no entry names,
// while no completion switches entries to a pack (Memos.CompletePack
// checks that its pack exists, then switches, under the other side of
// the lock): a pack a completion found is named before fn looks, and one
// fn deletes is found missing by any completion after it.
func (f *Frontend) SweepingPacks(fn func() error) error {
	f.packMu.Lock()
	defer f.packMu.Unlock()
	return fn()
}

// Invalidate turns the ready memo entry of (k, block) of generation gen
// pending again, with a new generation, and tells watchers: its object was
// found corrupt or lost, or an operator asked for it to be recomputed. It
// refuses with ErrStale when the entry is no longer that ready incarnation
// (evicted, recomputed or invalidated meanwhile), so that a decision taken
// on one incarnation never touches the next. The caller removes the old
// object before (so that no worker's new object can be removed after it)
// and schedules the entry after (Schedule). An entry naming a pack's column
// names no pack afterwards: the caller deletes the pack after, only once
// no other entry names it (Cache.Unnamed), since its other members stay
// ready in it.
func (f *Frontend) Invalidate(k canon.Key, id blockref.Memo, gen uint64, reason string) (MemoEntry, error) {
	var stale bool
	e, err := f.cfg.Cache.UpdateMemo(k, id, func(e *MemoEntry, ok bool) bool {
		if !ok || e.State != MemoReady || e.Gen != gen {
			stale = true
			return false
		}
		e.State, e.Rows, e.Bytes, e.Error, e.Updated, e.Gen, e.Build = MemoPending, 0, 0, reason, f.cfg.Clock.Now(), rand.Uint64()|1, ""
		// It names no pack any more: its recomputation writes a new one,
		// and the old one is deleted once no other entry names it.
		e.Object, e.Column = block.MemoKey(k, id), ""
		return true
	})
	if err != nil {
		return e, err
	}
	if stale {
		return e, ErrStale
	}
	f.watch.notify(k, e)
	return e, nil
}

// Schedule enqueues the task of (k, block) for every pipeline using k, at
// that pipeline's priority (the queue runs it at the highest of them). It
// returns how many pipelines asked.
func (f *Frontend) Schedule(k canon.Key, block blockref.Memo) (int, error) {
	return f.schedule(MemoEntry{Component: k, Block: block}, map[canon.Key][][2]string{}, map[[2]string]int32{})
}

// schedule is Schedule with the users of components and the priorities of
// pipelines cached across calls.
func (f *Frontend) schedule(e MemoEntry, users map[canon.Key][][2]string, prio map[[2]string]int32) (int, error) {
	cache := f.cfg.Cache
	us, ok := users[e.Component]
	if !ok {
		var err error
		if us, err = cache.Users(e.Component); err != nil {
			return 0, err
		}
		users[e.Component] = us
	}
	n := 0
	for _, u := range us {
		pr, ok := prio[u]
		if !ok {
			p, err := cache.Pipeline(u[0], u[1])
			if err != nil {
				continue
			}
			pr = p.Priority
			prio[u] = pr
		}
		if err := f.cfg.Scheduler.Enqueue(e.Component, e.Block, u[0], u[1], pr); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Reconcile schedules every pending memo entry again. sigd runs it at start
// so that a crash between writing an entry and enqueueing its task loses
// nothing (Enqueue is idempotent). Priorities come from the pipelines using
// each component.
func (f *Frontend) Reconcile() (int, error) {
	n := 0
	var pending []MemoEntry
	err := f.cfg.Cache.eachMemoOfAll(func(e MemoEntry) {
		if e.State == MemoPending {
			pending = append(pending, e)
		}
	})
	if err != nil {
		return 0, err
	}
	users := map[canon.Key][][2]string{}
	prio := map[[2]string]int32{}
	for _, e := range pending {
		if _, err := f.schedule(e, users, prio); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
