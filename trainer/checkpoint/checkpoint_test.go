package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sigdata/sig/trainer/control"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/warehouse/objstore/memstore"
)

// ref names a unit in these tests as a manifest or a ledger spells it.
func ref(s string) blockref.Ref { return blockref.Parse(s) }

func TestLedger(t *testing.T) {
	var l Ledger
	l.Unit(ref("b1")).Add([]int64{1, 2, 3, 7, 8})
	l.Unit(ref("b2")).Add([]int64{4, 5, 6})
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
	if got := l.Unit(ref("b1")).Runs; len(got) != 2 || got[1] != (Run{7, 2}) {
		t.Fatalf("runs %v", got)
	}
	b, _ := l.MarshalBinary()
	var r Ledger
	if err := r.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if r.Rows() != 8 || len(r.Unit(ref("b2")).IDs()) != 3 || r.Unit(ref("b1")).IDs()[3] != 7 {
		t.Fatalf("round trip: %+v", r.Units)
	}
	// A repeat, inside a unit or across units, is found.
	r.Unit(ref("b3")).Add([]int64{8})
	if err := r.Check(); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate across units: %v", err)
	}
	var d Ledger
	d.Unit(ref("b")).Add([]int64{1, 2, 3, 2})
	if err := d.Check(); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate in a unit: %v", err)
	}
	// Versions (issue 21): a block's new version trains its events again,
	// each once; a version of another block may not, nor may a version
	// train one twice.
	var v Ledger
	v.Unit(ref("b1")).Add([]int64{1, 2, 3})
	v.Unit(ref("b2")).Add([]int64{4, 5})
	v.Unit(ref("b1.v2")).Add([]int64{1, 3, 9})
	v.Unit(ref("b1.v3")).Add([]int64{1, 2, 3, 9, 10})
	if err := v.Check(); err != nil {
		t.Fatalf("versions of one block: %v", err)
	}
	v.Unit(ref("b2.v2")).Add([]int64{4, 10})
	if err := v.Check(); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("event 10 in b1.v3 and b2.v2: %v", err)
	}
	var w Ledger
	w.Unit(ref("b1")).Add([]int64{1, 2})
	w.Unit(ref("b1.v2")).Add([]int64{1, 2, 1})
	if err := w.Check(); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("event 1 twice in b1.v2: %v", err)
	}
	for i := range b {
		var x Ledger
		if err := x.UnmarshalBinary(b[:i]); err == nil && i < len(b) {
			t.Fatalf("truncated ledger of %d bytes decoded", i)
		}
	}
}

// newStore returns the checkpoint store of pipeline on an empty bucket in
// memory, and the bucket. These tests are about checkpoint logic: which
// checkpoint is the latest, what Prune keeps, what Load refuses, which
// objects a retried Save writes. memstore holds objects as objstore does on
// MinIO (objstore's TestConformance); how checkpoints behave on MinIO is the
// trainer's tests' (restart, preemption, exactly-once), which checkpoint and
// resume through a real bucket.
func newStore(t *testing.T, pipeline string) (*memstore.Store, *Store) {
	t.Helper()
	st := memstore.New()
	cs, err := NewStore(st, pipeline)
	if err != nil {
		t.Fatal(err)
	}
	return st, cs
}

func TestSaveLatestLoad(t *testing.T) {
	st, cs := newStore(t, "p1")
	ctx := context.Background()
	if got, err := cs.Latest(ctx); err != nil || got != nil {
		t.Fatalf("empty store: %v %v", got, err)
	}
	var led Ledger
	led.Unit(ref("b1")).Add([]int64{10, 11, 12})
	for epoch := 1; epoch <= 3; epoch++ {
		_, err := cs.Save(ctx, Checkpoint{Job: "j", Progress: control.Progress{Epochs: epoch, Units: []blockref.Ref{ref("b1")}, Phase: control.CaughtUp, Steps: uint64(epoch * 10)},
			Fingerprint: "f", Model: []byte{byte(epoch), 2, 3}, Ledger: &led, Created: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		cs.Prune(ctx, epoch)
	}
	// A later checkpoint cut short before its manifest is not read.
	if _, err := st.Put(ctx, cs.key(4, ModelObject), []byte("partial"), nil); err != nil {
		t.Fatal(err)
	}
	latest, err := cs.Latest(ctx)
	if err != nil || latest == nil || latest.Seq != 3 || latest.Steps != 30 {
		t.Fatalf("latest: %+v %v", latest, err)
	}
	p, _ := latest.Progress()
	if p.Phase != control.CaughtUp || p.Epochs != 3 {
		t.Fatalf("progress %+v", p)
	}
	mb, l2, err := cs.Load(ctx, latest)
	if err != nil || mb[0] != 3 || l2.Rows() != 3 {
		t.Fatalf("load: %v %v %v", mb, l2, err)
	}
	// Only the Keep newest remain.
	if seqs, _ := cs.sequences(ctx); len(seqs) != 2 || seqs[0] != 2 {
		t.Fatalf("kept %v", seqs)
	}
	// A model object that does not match its manifest is refused.
	if _, err := st.Put(ctx, latest.Model.Key, []byte("tampered"), nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cs.Load(ctx, latest); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("tampered model: %v", err)
	}
	// A manifest that does not parse is skipped in favour of the previous.
	if _, err := st.Put(ctx, cs.key(3, ManifestObject), []byte("{"), nil); err != nil {
		t.Fatal(err)
	}
	if latest, err = cs.Latest(ctx); err != nil || latest.Seq != 2 {
		t.Fatalf("after a bad manifest: %+v %v", latest, err)
	}
	if _, err := NewStore(st, "a/b"); err == nil {
		t.Fatal("pipeline with '/' accepted")
	}
}

// TestGoodputHistory: a checkpoint may carry the job's goodput history; one
// without (written before it existed) restores as before. The journal lives
// beside the checkpoints and is not one.
func TestGoodputHistory(t *testing.T) {
	st, cs := newStore(t, "p2")
	ctx := context.Background()
	if j, err := cs.Journal(ctx); err != nil || j != nil {
		t.Fatalf("no journal yet: %q %v", j, err)
	}
	var led Ledger
	led.Unit(ref("b1")).Add([]int64{1, 2})
	save := func(epoch int, gp []byte) *Manifest {
		t.Helper()
		if _, err := cs.Save(ctx, Checkpoint{Job: "j", Progress: control.Progress{Epochs: epoch, Units: []blockref.Ref{ref("b1")}, Phase: control.Initial},
			Fingerprint: "f", Model: []byte{1}, Ledger: &led, Goodput: gp, Created: time.Now()}); err != nil {
			t.Fatal(err)
		}
		cs.Prune(ctx, epoch)
		latest, err := cs.Latest(ctx)
		if err != nil || latest == nil || latest.Seq != epoch {
			t.Fatalf("latest: %+v %v", latest, err)
		}
		return latest
	}
	old := save(1, nil)
	if gp, err := cs.LoadGoodput(ctx, old); err != nil || gp != nil || old.Goodput != nil {
		t.Fatalf("checkpoint without goodput: %q %v %+v", gp, err, old.Goodput)
	}
	if _, _, err := cs.Load(ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := cs.PutJournal(ctx, []byte(`{"seq":1}`)); err != nil {
		t.Fatal(err)
	}
	var second *Manifest
	for epoch := 2; epoch <= 4; epoch++ {
		latest := save(epoch, []byte(fmt.Sprintf(`{"epoch":%d}`, epoch)))
		if gp, err := cs.LoadGoodput(ctx, latest); err != nil || string(gp) != fmt.Sprintf(`{"epoch":%d}`, epoch) {
			t.Fatalf("goodput of %d: %q %v", epoch, gp, err)
		}
		if epoch == 2 {
			second = latest
		}
	}
	// Pruning takes the objects with their checkpoints, not the journal.
	for _, key := range []string{second.Goodput.Key, second.Model.Key, second.Ledger.Key} {
		if _, _, err := st.Get(ctx, key); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("%s of a pruned checkpoint: %v", key, err)
		}
	}
	if j, err := cs.Journal(ctx); err != nil || string(j) != `{"seq":1}` {
		t.Fatalf("journal: %q %v", j, err)
	}
	if seqs, _ := cs.sequences(ctx); len(seqs) != 2 || seqs[0] != 3 {
		t.Fatalf("kept %v", seqs)
	}
	latest, _ := cs.Latest(ctx)
	if _, err := st.Put(ctx, latest.Goodput.Key, []byte("tampered"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.LoadGoodput(ctx, latest); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("tampered goodput: %v", err)
	}
}

// TestRetryKeepsCommittedObjects: a Save of an epoch whose earlier Save
// committed (the manifest landed, but the call failed, so the controller
// retrains the epoch) writes new objects: the committed manifest's stay as
// they were, so a crash before the new manifest leaves a checkpoint that
// loads.
func TestRetryKeepsCommittedObjects(t *testing.T) {
	_, cs := newStore(t, "p3")
	ctx := context.Background()
	var led Ledger
	led.Unit(ref("b1")).Add([]int64{1, 2})
	save := func(model byte) Manifest {
		t.Helper()
		m, err := cs.Save(ctx, Checkpoint{Job: "j", Progress: control.Progress{Epochs: 1, Units: []blockref.Ref{ref("b1")}},
			Fingerprint: "f", Model: []byte{model, model}, Ledger: &led, Goodput: []byte{model}, Created: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	first := save(1)
	save(2) // the retry, up to and including its manifest
	// Had the retry crashed before its manifest, the first would be the
	// latest: its objects must be intact.
	if mb, _, err := cs.Load(ctx, &first); err != nil || mb[0] != 1 {
		t.Fatalf("committed checkpoint after a retry of its epoch: %v %v", mb, err)
	}
	if gp, err := cs.LoadGoodput(ctx, &first); err != nil || gp[0] != 1 {
		t.Fatalf("committed goodput after a retry of its epoch: %v %v", gp, err)
	}
	latest, err := cs.Latest(ctx)
	if err != nil || latest.Model.Key == first.Model.Key {
		t.Fatalf("latest %+v %v", latest, err)
	}
	if mb, _, err := cs.Load(ctx, latest); err != nil || mb[0] != 2 {
		t.Fatalf("the retry's checkpoint: %v %v", mb, err)
	}
}

// TestFormatBeforeRefs: a manifest and a ledger written before units were
// blockref.Refs — when they were strings, "<id>" for a block's first
// version and "<id>.v<N>" from the second on — load, with every unit the
// block version its string named, and are written back byte for byte.
func TestFormatBeforeRefs(t *testing.T) {
	st, cs := newStore(t, "old")
	ctx := context.Background()
	// The ledger as the string-unit encoder wrote it: magic, unit count,
	// then per unit its name's length and bytes, its run count and runs
	// (start delta, zig-zag; length).
	oldLedger := []byte(ledgerMagic + "\x03" + "\x02b1" + "\x01" + "\x14\x03" + "\x05b1.v2" + "\x01" + "\x14\x02" + "\x02b2" + "\x01" + "\x1a\x01")
	led, err := st.Put(ctx, cs.key(2, "s/"+LedgerObject), oldLedger, nil)
	if err != nil {
		t.Fatal(err)
	}
	model, err := st.Put(ctx, cs.key(2, "s/"+ModelObject), []byte{7}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The manifest as json.MarshalIndent wrote it from string units.
	oldManifest := fmt.Sprintf(`{
  "format": 1,
  "pipeline": "old",
  "job": "j",
  "seq": 2,
  "epochs": 2,
  "units": [
    "b1",
    "b1.v2",
    "b2"
  ],
  "phase": "caught-up",
  "steps": 9,
  "snapshot": 5,
  "retrained": 1,
  "fingerprint": "f",
  "model": {
    "key": %q,
    "size": 1,
    "crc32c": %d
  },
  "ledger": {
    "key": %q,
    "size": %d,
    "crc32c": %d
  },
  "event_ids": 6,
  "created": "2026-01-01T00:00:00Z"
}`, model.Key, model.Checksum, led.Key, len(oldLedger), led.Checksum)
	if _, err := st.Put(ctx, cs.key(2, ManifestObject), []byte(oldManifest), nil); err != nil {
		t.Fatal(err)
	}
	m, err := cs.Latest(ctx)
	if err != nil || m == nil {
		t.Fatalf("latest: %+v %v", m, err)
	}
	p, err := m.Progress()
	if err != nil {
		t.Fatal(err)
	}
	want := []blockref.Ref{blockref.New("b1", 1), blockref.New("b1", 2), blockref.New("b2", 1)}
	if !slices.Equal(p.Units, want) || p.Retrained != 1 || p.Snapshot != 5 {
		t.Fatalf("progress of the old manifest: %+v, want units %v", p, want)
	}
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil || string(body) != oldManifest {
		t.Fatalf("the old manifest written back (%v):\n%s\nwant:\n%s", err, body, oldManifest)
	}
	_, l, err := cs.Load(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Unit(blockref.New("b1", 2)).IDs(); !slices.Equal(got, []int64{10, 11}) || len(l.Units) != 3 || l.Units[2].Unit != blockref.New("b2", 1) {
		t.Fatalf("the old ledger: %+v", l.Units)
	}
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
	if b, err := l.MarshalBinary(); err != nil || !bytes.Equal(b, oldLedger) {
		t.Fatalf("the old ledger written back: %q %v, want %q", b, err, oldLedger)
	}
}
