package control_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sigdata/sig/trainer/checkpoint"
	"github.com/sigdata/sig/trainer/control"
	"github.com/sigdata/sig/warehouse/blockref"
)

// simBlock is a block of the simulated warehouse: its events, in row
// order, at a version, and a compacted block's lineage.
type simBlock struct {
	ref    blockref.Ref
	events []int64
	parts  []control.Part
}

// TestCompactionExactlyOnce (issue 28) trains a job on a warehouse whose
// small blocks are compacted while it trains (at random refreshes, runs of
// blocks of any version, some trained, some not), whose blocks change (new
// versions, also of compacted blocks) and grow (new blocks), while steps and
// checkpoint writes fail and the controller restarts from its last
// checkpoint. The host reads every unit at its epoch's snapshot and trains
// the rows the machine does not skip, recording each unit's lineage in the
// ledger as package trainer does. Every checkpoint's ledger passes
// checkpoint.Ledger.Check (no event trained twice in one version of its
// block, compacted or not), and at the end every event of the warehouse
// was trained, and every block version that changed after a job trained
// its block is trained. Without the skips the ledger check fails.
func TestCompactionExactlyOnce(t *testing.T) {
	compactions := 0
	for seed := uint64(1); seed <= 300; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { compactions += simulateCompaction(t, seed, true) })
	}
	if compactions < 300 {
		t.Fatalf("only %d compactions in 300 runs", compactions)
	}
}

// TestCompactionWithoutSkipsTrainsTwice is the simulation with hosts that
// train every row of a compacted block: some run's ledger check fails.
func TestCompactionWithoutSkipsTrainsTwice(t *testing.T) {
	failed := 0
	for seed := uint64(1); seed <= 50; seed++ {
		ft := &fakeT{}
		func() {
			defer func() { recover() }()
			simulateCompaction(ft, seed, false)
		}()
		if ft.failed {
			failed++
		}
	}
	if failed == 0 {
		t.Fatal("hosts that ignore the skips never trained an event twice")
	}
	t.Logf("%d of 50 runs trained an event twice", failed)
}

// fakeT records a failure and stops the run.
type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(string, ...any) {
	f.failed = true
	panic("stop")
}
func (f *fakeT) Errorf(string, ...any) { f.failed = true }
func (f *fakeT) Logf(string, ...any)   {}

func simulateCompaction(t testing.TB, seed uint64, skips bool) int {
	r := rand.New(rand.NewPCG(seed, 28))
	nextEvent, nextBlock := int64(1), 0
	newBlock := func() simBlock {
		n := 1 + r.IntN(6)
		b := simBlock{ref: blockref.New(fmt.Sprintf("b%02d", nextBlock), 1)}
		nextBlock++
		for range n {
			b.events = append(b.events, nextEvent)
			nextEvent++
		}
		return b
	}
	var blocks []simBlock
	for range 4 + r.IntN(8) {
		blocks = append(blocks, newBlock())
	}
	snapshots := map[int64][]simBlock{1: slices.Clone(blocks)}
	snap := int64(1)
	budget := 12 // warehouse changes, so the job ends
	compactions := 0

	// change mutates the warehouse at a refresh: compact a run of blocks,
	// change a block (a new version, sometimes with a late event), or add
	// a block.
	change := func() {
		if budget == 0 || r.IntN(3) == 0 {
			return
		}
		budget--
		switch k := r.IntN(4); {
		case k <= 1 && len(blocks) >= 2:
			i := r.IntN(len(blocks) - 1)
			j := i + 2 + r.IntN(min(3, len(blocks)-i-1))
			j = min(j, len(blocks))
			run := blocks[i:j]
			if slices.ContainsFunc(run, func(b simBlock) bool { return len(b.parts) > 0 }) {
				return // a compacted block is never a part
			}
			c := simBlock{ref: blockref.New(fmt.Sprintf("c%02d", compactions), 1)}
			compactions++
			for _, p := range run {
				c.parts = append(c.parts, control.Part{Ref: p.ref, Rows: int64(len(p.events))})
				c.events = append(c.events, p.events...)
			}
			blocks = slices.Concat(blocks[:i], []simBlock{c}, blocks[j:])
		case k == 2:
			i := r.IntN(len(blocks))
			b := blocks[i]
			b.ref = blockref.New(b.ref.ID(), b.ref.Version()+1)
			b.events = slices.Clone(b.events)
			if r.IntN(2) == 0 {
				b.events = append(b.events, nextEvent) // a late event
				nextEvent++
			}
			blocks = slices.Clone(blocks)
			blocks[i] = b
		default:
			blocks = append(slices.Clone(blocks), newBlock())
		}
		snap++
		snapshots[snap] = slices.Clone(blocks)
	}
	solution := func(s int64) []control.Block {
		var out []control.Block
		for _, b := range snapshots[s] {
			out = append(out, control.Block{Ref: b.ref, Ready: true, Parts: b.parts})
		}
		return out
	}
	blockAt := func(s int64, ref blockref.Ref) simBlock {
		for _, b := range snapshots[s] {
			if b.ref == ref {
				return b
			}
		}
		t.Fatalf("unit %s is not in snapshot %d", ref, s)
		return simBlock{}
	}

	cfg := control.Config{Hosts: 1, EpochUnits: 1 + r.IntN(3), CaughtUpEpochUnits: 1 + r.IntN(2), MaxAttempts: 1000}
	var store struct {
		progress control.Progress
		ledger   *checkpoint.Ledger
	}
	store.ledger = &checkpoint.Ledger{}
	var (
		m        *control.Machine
		queue    []control.Event
		now      = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		attempt  *checkpoint.Ledger
		atSnap   int64
		batches  = map[uint64]*checkpoint.Ledger{} // seq -> rows it carries
		seq      uint64
		done     bool
		restarts int
	)
	push := func(ev control.Event) { queue = append(queue, ev) }
	execute := func(acts []control.Action) {
		for _, a := range acts {
			switch a.Kind {
			case control.ActSetup:
				push(control.Event{Kind: control.EvSetupDone})
			case control.ActLoadCheckpoint:
				push(control.Event{Kind: control.EvRestored, Progress: store.progress.Clone()})
			case control.ActRefreshBlocks:
				change()
				push(control.Event{Kind: control.EvBlocks, Blocks: solution(snap), Snapshot: snap})
			case control.ActAcquireChips:
				push(control.Event{Kind: control.EvChipsGranted})
			case control.ActRestoreModel:
				push(control.Event{Kind: control.EvModelRestored})
			case control.ActCompile:
				push(control.Event{Kind: control.EvCompiled})
			case control.ActStartAttempt:
				attempt, atSnap, batches = &checkpoint.Ledger{}, a.Snapshot, map[uint64]*checkpoint.Ledger{}
				push(control.Event{Kind: control.EvUnitsRequested, Host: "h0", Attempt: a.Attempt, Max: 100})
			case control.ActAssign:
				// The host reads each unit whole at the epoch's snapshot
				// and trains the rows not skipped.
				for _, u := range a.Units {
					b := blockAt(atSnap, u)
					var ids []int64
					for row, id := range b.events {
						if skips && slices.ContainsFunc(a.Skips[u], func(rr control.RowRange) bool { return int64(row) >= rr.Start && int64(row) < rr.End }) {
							continue
						}
						ids = append(ids, id)
					}
					push(control.Event{Kind: control.EvUnitRead, Host: "h0", Attempt: a.Attempt, Unit: u, Rows: int64(len(ids))})
					bl := &checkpoint.Ledger{}
					ul := bl.Unit(u)
					ul.Add(ids)
					for _, p := range b.parts {
						ul.Parts = append(ul.Parts, p.Ref)
					}
					batches[seq] = bl
					push(control.Event{Kind: control.EvBatch, Host: "h0", Attempt: a.Attempt, Seq: seq, Examples: len(ids),
						UnitRows: map[blockref.Ref]int64{u: int64(len(ids))}})
					seq++
				}
				push(control.Event{Kind: control.EvUnitsRequested, Host: "h0", Attempt: a.Attempt, Max: 100})
			case control.ActDrain:
				push(control.Event{Kind: control.EvBatch, Host: "h0", Attempt: m.Attempt(), Seq: seq, Final: true})
				seq++
			case control.ActRunStep:
				var err string
				if r.IntN(20) == 0 {
					err = "step failed"
				} else {
					for _, s := range a.Seqs {
						if bl := batches[s]; bl != nil {
							attempt.Merge(bl)
						}
					}
				}
				push(control.Event{Kind: control.EvStepDone, Attempt: a.Attempt, Err: err})
			case control.ActWriteCheckpoint:
				merged := store.ledger.Clone()
				merged.Merge(attempt)
				if err := merged.Check(); err != nil {
					t.Fatalf("epoch %d: %v", a.Progress.Epochs, err)
				}
				var err string
				if r.IntN(8) == 0 {
					err = "write failed"
				} else {
					store.progress, store.ledger = a.Progress.Clone(), merged
				}
				push(control.Event{Kind: control.EvCheckpointDone, Attempt: a.Attempt, Err: err})
			case control.ActExit:
				done = true
			}
		}
	}
	start := func() {
		m, queue = control.New(cfg), nil
		for _, ev := range []control.Event{{Kind: control.EvStart}, {Kind: control.EvHostJoined, Host: "h0", Incarnation: fmt.Sprint(restarts)}} {
			now = now.Add(time.Millisecond)
			ev.At = now
			execute(m.Handle(ev))
		}
	}
	start()
	for iter := 0; !done; iter++ {
		if iter > 100_000 {
			t.Fatalf("did not finish: %s", m.Describe())
		}
		if r.IntN(300) == 0 && restarts < 5 {
			restarts++
			start()
			continue
		}
		if len(queue) == 0 {
			now = now.Add(2 * time.Second)
			execute(m.Handle(control.Event{Kind: control.EvTick, At: now}))
			continue
		}
		ev := queue[0]
		queue = queue[1:]
		now = now.Add(time.Millisecond)
		ev.At = now
		execute(m.Handle(ev))
	}

	// Nothing lost: every event of the warehouse was trained, and every
	// block the job trained and that changed since is trained at its
	// newest version.
	trained := map[int64]bool{}
	units := map[blockref.Ref]bool{}
	for _, u := range store.ledger.Units {
		units[u.Unit] = true
		for _, id := range u.IDs() {
			trained[id] = true
		}
	}
	for _, b := range blocks {
		for _, id := range b.events {
			if !trained[id] {
				t.Fatalf("event %d of %s never trained (units %v)", id, b.ref, store.progress.Units)
			}
		}
		if b.ref.Version() >= 2 && !units[b.ref] {
			t.Fatalf("block %s changed and was not trained at its newest version (units %v)", b.ref, store.progress.Units)
		}
	}
	if err := store.ledger.Check(); err != nil {
		t.Fatal(err)
	}
	return compactions
}
