package control

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sigdata/sig/warehouse/blockref"
)

// simHost is a TPU host worker in the simulation: it follows the protocol
// the real host (package trainer) follows.
type simHost struct {
	id      string
	inc     int
	up      bool
	attempt uint64
	units   []blockref.Ref // assigned, not yet read whole
	reading map[blockref.Ref]int64
	drain   bool
	final   bool
	buffer  []blockref.Ref // unit of each buffered row
	seq     uint64
	credit  int
	phase   Phase
}

// TestSimulatedExactlyOnce runs the machine against simulated hosts,
// checkpoints and failures (hosts crash and rejoin, checkpoint writes fail,
// units fail to read, the controller crashes and restarts from the last
// checkpoint, preemption notices with deadlines short and long) for many
// seeds, executing every action faithfully. The rows that reach committed
// state must be every block's rows exactly once, and every invariant must
// hold after every event. In most runs blocks also change while the job
// trains (issue 21: late events, new labels, deletions make new versions):
// every epoch must read its units at one snapshot, and every version an
// epoch claims must reach committed state exactly once.
func TestSimulatedExactlyOnce(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { simulate(t, seed) })
	}
}

func simulate(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 99))
	nBlocks := 1 + r.IntN(9)
	nHosts := 1 + r.IntN(3)
	rows := map[blockref.Ref]int64{}
	var blocks []Block
	for i := 0; i < nBlocks; i++ {
		ref := blockref.New(fmt.Sprintf("b%d", i), 1)
		rows[ref] = 1 + r.Int64N(40)
		blocks = append(blocks, Block{Ref: ref, Ready: true})
	}
	// Versions: a refresh may answer a newer snapshot where a block
	// changed (up to changeBudget changes, so the job ends). Rows are per
	// version: a change may add or remove rows.
	changeBudget := 0
	if r.Float64() < 0.7 {
		changeBudget = r.IntN(8)
	}
	snapshot := int64(1)
	versionsAt := map[int64]map[string]int64{} // snapshot -> block -> version
	record := func() {
		vs := map[string]int64{}
		for _, b := range blocks {
			vs[b.Ref.ID()] = b.Ref.Version()
		}
		versionsAt[snapshot] = vs
	}
	record()
	cfg := Config{Hosts: nHosts, EpochUnits: 1 + r.IntN(4), CaughtUpEpochUnits: 1 + r.IntN(2), MaxAttempts: 1000}
	m := New(cfg)
	now := epoch0
	// The checkpoint store: the last durable progress and the ledger of
	// committed rows (one entry per row, naming its unit).
	var store struct {
		progress Progress
		ledger   []blockref.Ref
	}
	var attemptLedger []blockref.Ref
	restarts, preemptions, committedPreempted := 0, 0, 0
	hosts := map[string]*simHost{}
	for i := 0; i < nHosts; i++ {
		id := fmt.Sprintf("h%d", i)
		hosts[id] = &simHost{id: id}
	}
	var queue []Event
	push := func(ev Event) { queue = append(queue, ev) }
	// Batches sent and not yet consumed by a step: host -> seq -> units.
	sent := map[string]map[uint64][]blockref.Ref{}
	var stepAttempt uint64
	var stepUnits []blockref.Ref
	stepping := false
	done := false
	var restart bool
	faults := r.Float64() < 0.8

	execute := func(acts []Action) {
		for _, a := range acts {
			switch a.Kind {
			case ActSetup:
				push(Event{Kind: EvSetupDone})
			case ActLoadCheckpoint:
				push(Event{Kind: EvRestored, Progress: store.progress.Clone()})
			case ActRefreshBlocks:
				if changeBudget > 0 && r.Float64() < 0.4 {
					changeBudget--
					i := r.IntN(len(blocks))
					blocks = slices.Clone(blocks)
					blocks[i].Ref = blockref.New(blocks[i].Ref.ID(), blocks[i].Ref.Version()+1)
					rows[blocks[i].Ref] = 1 + r.Int64N(40)
					snapshot++
					record()
				}
				push(Event{Kind: EvBlocks, Blocks: blocks, Snapshot: snapshot})
			case ActAcquireChips:
				push(Event{Kind: EvChipsGranted})
			case ActRestoreModel:
				push(Event{Kind: EvModelRestored})
			case ActCompile:
				push(Event{Kind: EvCompiled})
			case ActStartAttempt:
				// One snapshot per epoch: every unit is its block at the
				// snapshot's version, and no block appears twice.
				ids := map[string]bool{}
				for _, u := range a.Units {
					id, v := u.ID(), u.Version()
					if ids[id] {
						t.Fatalf("attempt %d trains block %s twice: %v", a.Attempt, id, a.Units)
					}
					ids[id] = true
					if want := versionsAt[a.Snapshot][id]; v != want {
						t.Fatalf("attempt %d: unit %s, but block %s is at version %d in snapshot %d", a.Attempt, u, id, want, a.Snapshot)
					}
				}
				attemptLedger = nil
				sent = map[string]map[uint64][]blockref.Ref{}
				stepping = false
				for _, h := range hosts {
					if h.up {
						*h = simHost{id: h.id, inc: h.inc, up: true, attempt: a.Attempt, reading: map[blockref.Ref]int64{}, credit: 2, phase: a.Phase}
					}
				}
			case ActAbort:
				for _, h := range hosts {
					h.attempt = 0
				}
			case ActAssign:
				if h := hosts[a.Host]; h.up && h.attempt == a.Attempt {
					h.units = append(h.units, a.Units...)
				}
			case ActDrain:
				if h := hosts[a.Host]; h.up {
					h.drain = true
				}
			case ActRunStep:
				if stepping {
					t.Fatalf("run-step while a step runs")
				}
				stepping, stepAttempt, stepUnits = true, a.Attempt, nil
				for i, hid := range a.Hosts {
					stepUnits = append(stepUnits, sent[hid][a.Seqs[i]]...)
					delete(sent[hid], a.Seqs[i])
					if h := hosts[hid]; h.up && h.attempt == a.Attempt {
						h.credit++
					}
				}
			case ActWriteCheckpoint:
				var err string
				if faults && r.Float64() < 0.1 {
					err = "write failed"
				} else {
					// The manifest is written: durable, whatever happens next.
					store.progress = a.Progress.Clone()
					store.ledger = append(slices.Clone(store.ledger), attemptLedger...)
				}
				push(Event{Kind: EvCheckpointDone, Attempt: a.Attempt, Err: err})
			case ActExit:
				if a.Reason == "done" {
					done = true
				} else {
					if a.Committed {
						committedPreempted++
					}
					restart = true
				}
			case ActExitHost:
				hosts[a.Host].up = false
				push(Event{Kind: EvHostLost, Host: a.Host, Incarnation: fmt.Sprint(hosts[a.Host].inc)})
			}
		}
	}
	feed := func(ev Event) {
		now = now.Add(time.Millisecond)
		ev.At = now
		if ev.Kind == EvStepDone && ev.Attempt == m.Attempt() && m.Stepping() {
			attemptLedger = append(attemptLedger, stepUnits...)
		}
		execute(m.Handle(ev))
		checkInvariants(t, m)
	}
	start := func() {
		queue, stepping = nil, false
		feed(Event{Kind: EvStart})
		for _, id := range slices.Sorted(maps.Keys(hosts)) {
			h := hosts[id]
			h.attempt = 0
			if h.up || restarts > 0 {
				h.up = true
				feed(Event{Kind: EvHostJoined, Host: h.id, Incarnation: fmt.Sprint(h.inc)})
			}
		}
	}
	for _, h := range hosts {
		h.up = true
	}
	start()
	for iter := 0; iter < 40000 && !done; iter++ {
		if restart || (faults && r.Float64() < 0.001) {
			// The controller process dies (or exited after a preemption)
			// and starts again: everything not in the checkpoint is gone.
			restart = false
			restarts++
			m = New(cfg)
			start()
			continue
		}
		if faults && r.Float64() < 0.004 && preemptions < 5 {
			preemptions++
			feed(Event{Kind: EvPreempt, Deadline: now.Add(time.Duration(r.IntN(300)) * time.Millisecond)})
			continue
		}
		if len(queue) > 0 && r.IntN(3) > 0 {
			ev := queue[0]
			queue = queue[1:]
			feed(ev)
			continue
		}
		if stepping && r.IntN(2) == 0 {
			stepping = false
			feed(Event{Kind: EvStepDone, Attempt: stepAttempt})
			continue
		}
		// A host does one thing.
		ids := slices.Sorted(maps.Keys(hosts))
		h := hosts[ids[r.IntN(len(ids))]]
		switch {
		case !h.up:
			if r.IntN(4) == 0 {
				h.up, h.inc = true, h.inc+1
				h.attempt = 0
				feed(Event{Kind: EvHostJoined, Host: h.id, Incarnation: fmt.Sprint(h.inc)})
			}
		case faults && r.Float64() < 0.01:
			h.up = false
			feed(Event{Kind: EvHostLost, Host: h.id, Incarnation: fmt.Sprint(h.inc)})
		case h.attempt == 0 || h.attempt != m.Attempt() || h.final:
		case !h.drain && len(h.units) < 2 && r.IntN(3) == 0:
			feed(Event{Kind: EvUnitsRequested, Host: h.id, Attempt: h.attempt, Max: 1 + r.IntN(3)})
		case len(h.units) > 0 && r.IntN(2) == 0:
			u := h.units[0]
			if faults && r.Float64() < 0.005 {
				feed(Event{Kind: EvUnitFailed, Host: h.id, Attempt: h.attempt, Unit: u, Err: "unreadable"})
				continue
			}
			k := min(rows[u]-h.reading[u], 1+r.Int64N(15))
			for i := int64(0); i < k; i++ {
				h.buffer = append(h.buffer, u)
			}
			h.reading[u] += k
			if h.reading[u] == rows[u] {
				h.units = h.units[1:]
				feed(Event{Kind: EvUnitRead, Host: h.id, Attempt: h.attempt, Unit: u, Rows: rows[u]})
			}
		case h.credit > 0 && (len(h.buffer) >= 8 || (h.drain && len(h.units) == 0)):
			n := min(8, len(h.buffer))
			final := h.drain && len(h.units) == 0 && n == len(h.buffer)
			batch := h.buffer[:n]
			h.buffer = h.buffer[n:]
			ur := map[blockref.Ref]int64{}
			for _, u := range batch {
				ur[u]++
			}
			if sent[h.id] == nil {
				sent[h.id] = map[uint64][]blockref.Ref{}
			}
			sent[h.id][h.seq] = batch
			h.credit--
			h.final = final
			feed(Event{Kind: EvBatch, Host: h.id, Attempt: h.attempt, Seq: h.seq, Examples: n, UnitRows: ur, Final: final})
			h.seq++
		default:
			feed(Event{Kind: EvTick})
		}
	}
	if !done {
		t.Fatalf("did not finish: %s (queue %d)", m.Describe(), len(queue))
	}
	if st := m.Stats(); st.PreemptedCommitted > st.PreemptedEpochs {
		t.Fatalf("stats %+v", st)
	}
	t.Logf("restarts %d, preemption notices %d (%d exits committed), stats %+v", restarts, preemptions, committedPreempted, m.Stats())
	// Every version the committed epochs claim reached committed state
	// exactly once, and every block's newest version is among them (a
	// change is never lost).
	count := map[blockref.Ref]int64{}
	for _, u := range store.ledger {
		count[u]++
	}
	claimed := map[blockref.Ref]bool{}
	for _, u := range store.progress.Units {
		claimed[u] = true
		if count[u] != rows[u] {
			t.Errorf("unit %s: %d rows committed, want %d", u, count[u], rows[u])
		}
	}
	if len(count) != len(claimed) {
		t.Errorf("rows committed of units %v, progress claims %v", count, store.progress.Units)
	}
	for _, b := range blocks {
		if ref := b.Ref; !claimed[ref] {
			t.Errorf("block %s: newest version %s never trained (committed %v)", ref.ID(), ref, store.progress.Units)
		}
	}
	if p := m.Committed(); p.Retrained != len(p.Units)-nBlocks {
		t.Errorf("committed progress %v: %d retrained", p.Units, p.Retrained)
	}
}

func checkInvariants(t *testing.T, m *Machine) {
	t.Helper()
	seen := map[blockref.Ref]bool{}
	for _, u := range m.committed.Units {
		if seen[u] {
			t.Fatalf("unit %s committed twice: %v", u, m.committed.Units)
		}
		seen[u] = true
	}
	if m.chipsHeld > m.chipsRequested {
		t.Fatalf("holds %d of %d chips", m.chipsHeld, m.chipsRequested)
	}
	if (m.status == StTraining || m.status == StCheckpointing) != (m.at != nil) {
		t.Fatalf("status %s with attempt %v", m.status, m.at != nil)
	}
	if m.status == StTraining && m.chipsHeld == 0 {
		t.Fatal("training without chips")
	}
	if m.hold != nil && m.status != StHeld {
		t.Fatalf("hold %v in status %s", m.hold, m.status)
	}
}
