package eviction_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/eviction"
	"github.com/sigdata/sig/matching"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/workers"
)

// packWork runs every queued task as a block-batched worker would (issue
// 28): the tasks of one block computed together and written into one pack
// of many members (block.WritePacks), then the pack's entries switched to
// it in one batch (matching.Memos.CompletePack), as sigd's completion
// does. It returns the packs written.
func (s *stack) packWork() []string {
	s.t.Helper()
	var leases []workers.Lease
	for {
		l, ok, err := s.queue.TryLeaseAs("w", s.build)
		if err != nil {
			s.t.Fatal(err)
		}
		if !ok {
			break
		}
		leases = append(leases, l)
	}
	byBlock := map[string][]workers.Lease{}
	var ids []string
	for _, l := range leases {
		id := l.Task.ID.Block.ID()
		if _, ok := byBlock[id]; !ok {
			ids = append(ids, id)
		}
		byBlock[id] = append(byBlock[id], l)
	}
	memos := &matching.Memos{Frontend: s.f, Clock: s.clk, Stat: func(ctx context.Context, key string) error {
		_, err := s.store.Stat(ctx, key)
		return err
	}}
	var packs []string
	for _, id := range ids {
		raw, err := s.rawBlock("ads", blockref.ParseMemo(id))
		if err != nil {
			s.t.Fatal(err)
		}
		eventIDs, err := block.ReadColumns(s.ctx, s.store, raw, nil)
		if err != nil {
			s.t.Fatal(err)
		}
		var members []block.PackMember
		var done []matching.Member
		var values []arrow.Array
		for _, l := range byBlock[id] {
			k, ref := l.Task.ID.Component, l.Task.ID.Block
			gen, pending, err := s.f.Begin(k, ref)
			if err != nil {
				s.t.Fatal(err)
			}
			if !pending {
				continue
			}
			rec, err := s.f.Cache().Component(k)
			if err != nil {
				s.t.Fatal(err)
			}
			v, err := s.column(s.ctx, rec, raw)
			if err != nil {
				s.t.Fatal(err)
			}
			values = append(values, v)
			members = append(members, block.PackMember{Component: k, Block: ref, Value: v})
			done = append(done, matching.Member{Component: k, Block: ref, Gen: gen})
		}
		if len(members) > 0 {
			metas, placed, err := block.WritePacks(s.ctx, s.store, raw, eventIDs.Column(0), members, block.PackOptions{})
			if err != nil || len(metas) != 1 {
				s.t.Fatalf("packs of block %s: %d, %v", id, len(metas), err)
			}
			for i, p := range placed {
				done[i].Completion = matching.Completion{Object: p.Object, Column: p.Column.Name, Rows: raw.Rows, Bytes: p.Column.Length, Build: s.build}
			}
			marked, err := memos.CompletePack(s.ctx, metas[0].Key, done)
			if err != nil || slices.Contains(marked, false) {
				s.t.Fatalf("completing pack %s: %v, %v", metas[0].Key, marked, err)
			}
			packs = append(packs, metas[0].Key)
		}
		eventIDs.Release()
		for _, v := range values {
			v.Release()
		}
		for _, l := range byBlock[id] {
			if err := s.queue.Complete(s.ctx, l.ID, workers.Result{}); err != nil {
				s.t.Fatal(err)
			}
		}
	}
	return packs
}

// exists reports whether an object is in the bucket.
func (s *stack) exists(key string) bool {
	s.t.Helper()
	_, err := s.store.Stat(s.ctx, key)
	if err != nil && !errors.Is(err, objstore.ErrNotFound) {
		s.t.Fatal(err)
	}
	return err == nil
}

// healthy reports whether sigd's check of the entry (ReportCorrupt's)
// finds its data sound: the readers' footer check of its column in the
// pack, checksums and alignment.
func (s *stack) healthy(k canon.Key, ref blockref.Memo) bool {
	s.t.Helper()
	f, err := s.ev.ReportCorrupt(s.ctx, k, ref, "test", "", "check")
	if err != nil {
		s.t.Fatal(err)
	}
	return !f.Corrupt
}

// TestEvictOneMemberOfAPack (issue 28): the memo columns of every
// component of a block live in one pack. Evicting one component's block,
// recomputing another's, evicting a subgraph's components and then the
// rest remove entries only ("mark dead"): every other member stays ready in
// the pack, sound by sigd's own check, with nothing recomputed for it; a
// recomputed member goes into a new pack; a pack is deleted with the last
// entry naming it, and none is left once every component is evicted.
func TestEvictOneMemberOfAPack(t *testing.T) {
	s := newStack(t, 3, 200, eviction.Policy{})
	for _, p := range [][2]string{{"explore", exploreGraph}, {"cvr", cvrGraph}, {"ctr", ctrGraph}} {
		s.submit(p[0], p[1])
	}
	packs := s.packWork()
	if len(packs) != len(s.raw) {
		t.Fatalf("%d packs for %d blocks", len(packs), len(s.raw))
	}
	ids, price, qSmall, adv := s.input("ctr", "query_ids"), s.input("ctr", "price"), s.input("cvr", "q_small"), s.input("explore", "adv")
	b0 := blockref.ParseMemo(s.raw[0].ID)
	for _, k := range []canon.Key{ids, price, qSmall, adv} {
		if e := s.memo(k, b0); e.State != matching.MemoReady || e.Object != packs[0] || e.Column != block.MemberColumn(k) {
			t.Fatalf("entry of %s: %+v, want ready in %s", k.Short(), e, packs[0])
		}
	}

	// One member's block evicted: its entry only.
	im, err := s.ev.EvictBlock(s.ctx, ids, b0, "op", "bad block")
	if err != nil || im.Objects != 0 {
		t.Fatalf("EvictBlock: %+v, %v; want no object deleted", im, err)
	}
	if _, err := s.f.Cache().Memo(ids, b0); !errors.Is(err, matching.ErrNotFound) {
		t.Fatalf("evicted entry: %v", err)
	}
	if !s.exists(packs[0]) {
		t.Fatal("the pack went with one of its members")
	}
	for _, k := range []canon.Key{price, qSmall, adv} {
		if e := s.memo(k, b0); e.State != matching.MemoReady || e.Object != packs[0] || !s.healthy(k, b0) {
			t.Fatalf("%s after another member's eviction: %+v", k.Short(), e)
		}
	}
	if n := s.queue.Backlog(); n != 0 {
		t.Fatalf("%d tasks queued: evicting one member recomputes nothing", n)
	}

	// One member recomputed: into a new pack, the old one kept for the
	// others.
	if _, err := s.ev.RecomputeBlock(s.ctx, price, b0, "op", "recompute"); err != nil {
		t.Fatal(err)
	}
	if e := s.memo(price, b0); e.State != matching.MemoPending || e.Packed() {
		t.Fatalf("recomputed entry: %+v", e)
	}
	if !s.exists(packs[0]) {
		t.Fatal("the pack went with a recomputed member")
	}
	again := s.packWork()
	if len(again) != 1 || again[0] == packs[0] {
		t.Fatalf("recomputation wrote %v", again)
	}
	if e := s.memo(price, b0); e.State != matching.MemoReady || e.Object != again[0] || !s.healthy(price, b0) {
		t.Fatalf("recomputed entry: %+v", e)
	}
	if got, _ := s.f.Cache().PackEntries(packs[0]); len(got) != 2 {
		t.Fatalf("old pack named by %d entries, want q_small's and adv's", len(got))
	}

	// The tokenizer's components evicted: every pack still holds adv's or
	// price's column.
	if _, err := s.ev.Evict(s.ctx, eviction.Target{Subgraph: tokenizer}, "op", "tokenizer bug"); err != nil {
		t.Fatal(err)
	}
	for _, p := range append(packs, again...) {
		if !s.exists(p) {
			t.Fatalf("pack %s deleted while a member's entry names it", p)
		}
	}
	// adv evicted: block 0's old pack is named by nobody and goes; the
	// others hold price.
	if _, err := s.ev.Evict(s.ctx, eviction.Target{Components: []canon.Key{adv}}, "op", "adv"); err != nil {
		t.Fatal(err)
	}
	if s.exists(packs[0]) || !s.exists(packs[1]) || !s.exists(again[0]) {
		t.Fatalf("after adv's eviction: old pack %t, block 1's %t, price's new %t; want false, true, true",
			s.exists(packs[0]), s.exists(packs[1]), s.exists(again[0]))
	}
	if e := s.memo(price, blockref.ParseMemo(s.raw[1].ID)); e.State != matching.MemoReady || !s.healthy(price, e.Block) {
		t.Fatalf("price of block 1: %+v", e)
	}
	if _, err := s.ev.Evict(s.ctx, eviction.Target{Components: []canon.Key{price}}, "op", "price"); err != nil {
		t.Fatal(err)
	}
	for info, err := range s.store.List(s.ctx, block.PackPrefix) {
		if err != nil {
			t.Fatal(err)
		}
		t.Errorf("pack %s left after every component was evicted", info.Key)
	}
}

// TestReportCorruptPackMember (issue 28): a pack whose one member's column
// rots is reported by readers of each member; sigd's check of a member
// reads its column only, so the rotten one is recomputed into a new pack
// and the others are found healthy and left ready in the old one.
func TestReportCorruptPackMember(t *testing.T) {
	s := newStack(t, 1, 300, eviction.Policy{})
	s.submit("ctr", ctrGraph)
	packs := s.packWork()
	ids, price := s.input("ctr", "query_ids"), s.input("ctr", "price")
	b0 := blockref.ParseMemo(s.raw[0].ID)
	data := s.get(packs[0])
	meta, err := block.ReadFooter(s.ctx, s.store, packs[0])
	if err != nil {
		t.Fatal(err)
	}
	c, _ := meta.Column(block.MemberColumn(ids))
	data[c.Offset+c.Length/2] ^= 0x10
	if _, err := s.store.PutChecksummed(s.ctx, packs[0], data, objstore.Checksum(data), nil); err != nil {
		t.Fatal(err)
	}
	f, err := s.ev.ReportCorrupt(s.ctx, price, b0, "reader", "", "refused")
	if err != nil || f.Corrupt {
		t.Fatalf("report of the sound member: %+v, %v", f, err)
	}
	f, err = s.ev.ReportCorrupt(s.ctx, ids, b0, "reader", "", "refused")
	if err != nil || !f.Corrupt || f.Entry.State != matching.MemoPending {
		t.Fatalf("report of the rotten member: %+v, %v", f, err)
	}
	if e := s.memo(price, b0); e.State != matching.MemoReady || e.Object != packs[0] || !s.exists(packs[0]) {
		t.Fatalf("the sound member after the other's repair: %+v", e)
	}
	again := s.packWork()
	if e := s.memo(ids, b0); len(again) != 1 || e.Object != again[0] || !s.healthy(ids, b0) {
		t.Fatalf("repaired member: %+v in %v", e, again)
	}
}

// TestSweepPacks (issue 28): the sweep deletes packs no entry names once
// they are SweepAfter old (a pack written by a worker or sigd that died
// before its entries were switched to it), and keeps younger ones (a
// completion may still switch to them) and every pack an entry names.
func TestSweepPacks(t *testing.T) {
	s := newStack(t, 1, 100, eviction.Policy{})
	s.submit("explore", exploreGraph)
	named := s.packWork()
	raw := s.raw[0]
	ids, err := block.ReadColumns(s.ctx, s.store, raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ids.Release()
	v := ids.Column(0)
	orphans, _, err := block.WritePacks(s.ctx, s.store, raw, v, []block.PackMember{{Component: canon.Key{9}, Block: raw.Ref().Memo(1), Value: v}}, block.PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The stack's clock is behind the bucket's: bring it an hour past
	// the objects' writes.
	s.clk.Advance(time.Since(s.clk.Now()) + time.Hour)
	s.ev.SweepAfter = 2 * time.Hour
	if n, err := s.ev.SweepPacks(s.ctx); err != nil || n != 0 {
		t.Fatalf("sweep of packs younger than SweepAfter: %d, %v", n, err)
	}
	s.ev.SweepAfter = 30 * time.Minute
	if n, err := s.ev.SweepPacks(s.ctx); err != nil || n != 1 {
		t.Fatalf("sweep: %d deleted, %v; want the orphan", n, err)
	}
	if s.exists(orphans[0].Key) || !s.exists(named[0]) {
		t.Fatalf("after the sweep: orphan %t, named pack %t", s.exists(orphans[0].Key), s.exists(named[0]))
	}
	if s.ev.Swept() != 1 {
		t.Fatalf("Swept() = %d", s.ev.Swept())
	}
}

// TestEvictionBetweenBatchCompletions (issue 28): a block-batched worker
// (memo.Runner.RunBatch) writes one pack of a block's tasks, and sigd
// completes them one by one, a lease each, each completion checking that
// the pack exists (Memos.Stat) and then switching its entry. An eviction
// of a member already switched (its component, or its block) that lands
// between another member's check and its switch must not delete the pack
// it finds unnamed: the other member's entry would be ready naming a pack
// that is gone. The eviction's check of the pack and its deletion run
// while no completion switches entries to a pack (Frontend.SweepingPacks),
// so it either sees the other member named (and keeps the pack) or deletes
// it before the check (whose completion then fails and runs again).
// Without that the pack is deleted under the second member's entry.
func TestEvictionBetweenBatchCompletions(t *testing.T) {
	for _, how := range []string{"component", "block"} {
		t.Run(how, func(t *testing.T) {
			s := newStack(t, 1, 200, eviction.Policy{})
			s.submit("ctr", ctrGraph)
			ids, price := s.input("ctr", "query_ids"), s.input("ctr", "price")
			b0 := blockref.ParseMemo(s.raw[0].ID)
			// The block's two tasks, leased and written into one pack.
			var members []matching.Member
			var values []block.PackMember
			for {
				l, ok, err := s.queue.TryLeaseAs("w", s.build)
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				k, ref := l.Task.ID.Component, l.Task.ID.Block
				gen, _, err := s.f.Begin(k, ref)
				if err != nil {
					t.Fatal(err)
				}
				rec, err := s.f.Cache().Component(k)
				if err != nil {
					t.Fatal(err)
				}
				v, err := s.column(s.ctx, rec, s.raw[0])
				if err != nil {
					t.Fatal(err)
				}
				defer v.Release()
				values = append(values, block.PackMember{Component: k, Block: ref, Value: v})
				members = append(members, matching.Member{Component: k, Block: ref, Gen: gen})
			}
			if len(members) != 2 {
				t.Fatalf("%d tasks leased, want the block's two", len(members))
			}
			ev, err := block.ReadColumns(s.ctx, s.store, s.raw[0], nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ev.Release()
			metas, placed, err := block.WritePacks(s.ctx, s.store, s.raw[0], ev.Column(0), values, block.PackOptions{})
			if err != nil || len(metas) != 1 {
				t.Fatalf("pack: %d, %v", len(metas), err)
			}
			pack := metas[0].Key
			// ids's completion first: its entry names the pack.
			first, second := 0, 1
			if members[0].Component != ids {
				first, second = 1, 0
			}
			stat := func(ctx context.Context, key string) error {
				_, err := s.store.Stat(ctx, key)
				return err
			}
			complete := func(m *matching.Memos, i int) error {
				c := matching.Completion{Object: pack, Column: placed[i].Column.Name, Rows: s.raw[0].Rows, Bytes: placed[i].Column.Length}
				return m.Complete(s.ctx, members[i].Component, members[i].Block, members[i].Gen, c)
			}
			if err := complete(&matching.Memos{Frontend: s.f, Clock: s.clk, Stat: stat}, first); err != nil {
				t.Fatal(err)
			}
			// price's completion racing the eviction of ids. A pack some
			// entry names is not stat'ed again (Memos' statPack: nothing
			// deletes a named pack while a completion holds its side of
			// the lock), so the eviction starts as the completion does
			// and, where the completion does stat the pack (ids already
			// gone), from inside the check, waiting 300 ms for it there.
			evicted := make(chan error, 1)
			var once sync.Once
			evict := func() {
				once.Do(func() {
					go func() {
						var err error
						if how == "component" {
							_, err = s.ev.Evict(s.ctx, eviction.Target{Components: []canon.Key{ids}}, "op", "race")
						} else {
							_, err = s.ev.EvictBlock(s.ctx, ids, b0, "op", "race")
						}
						evicted <- err
					}()
				})
			}
			raced := &matching.Memos{Frontend: s.f, Clock: s.clk, Stat: func(ctx context.Context, key string) error {
				err := stat(ctx, key)
				evict()
				select {
				case err := <-evicted:
					evicted <- err
				case <-time.After(300 * time.Millisecond):
				}
				return err
			}}
			evict()
			cerr := complete(raced, second)
			if err := <-evicted; err != nil {
				t.Fatal(err)
			}
			if cerr != nil {
				// The eviction deleted the pack first: the completion
				// failed, and price's entry is still pending (its task
				// runs again), never ready without its pack.
				if e := s.memo(price, b0); e.State == matching.MemoReady {
					t.Fatalf("price's completion failed (%v) but its entry is ready: %+v", cerr, e)
				}
				return
			}
			if _, err := s.f.Cache().Memo(ids, b0); !errors.Is(err, matching.ErrNotFound) {
				t.Fatalf("evicted entry: %v", err)
			}
			e := s.memo(price, b0)
			if e.State != matching.MemoReady || e.Object != pack {
				t.Fatalf("price's entry %+v, want ready in %s", e, pack)
			}
			if !s.exists(pack) || !s.healthy(price, b0) {
				t.Fatalf("price's entry names pack %s, which the eviction of ids deleted", pack)
			}
		})
	}
}
