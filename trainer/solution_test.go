package trainer

import (
	"testing"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/trainer/control"
	"github.com/sigdata/sig/warehouse/blockref"
)

// TestUnitModes: an input is read MEMO whenever its memoized block is
// ready, in either phase unless caught-up training is told to generate
// every input locally; a pending block is read LOCAL in the caught-up
// phase, so the head of the stream never waits for SIG.
func TestUnitModes(t *testing.T) {
	ready, pending := sigv1.BlockState_BLOCK_STATE_READY, sigv1.BlockState_BLOCK_STATE_PENDING
	sol := newSolution(&sigv1.ReadSolution{
		RawSource: "ads",
		RawBlocks: []*sigv1.BlockRead{{BlockId: "b1", RawObject: "raw/ads/b1.arrow"}},
		Inputs: []*sigv1.InputSolution{
			{Input: "a", ComponentKey: "aa", Type: "int64", CanonicalDsl: "a", Blocks: []*sigv1.BlockRead{{BlockId: "b1", State: ready, MemoObject: "memo/aa/b1.arrow"}}},
			{Input: "b", ComponentKey: "bb", Type: "int64", CanonicalDsl: "b", Blocks: []*sigv1.BlockRead{{BlockId: "b1", State: pending}}},
		},
	})
	local, memo := readerv1.InputMode_INPUT_MODE_LOCAL, readerv1.InputMode_INPUT_MODE_MEMO
	for _, tc := range []struct {
		phase  control.Phase
		inputs CaughtUpInputs
		want   []readerv1.InputMode
	}{
		{control.Initial, CaughtUpSIG, []readerv1.InputMode{memo, local}},
		{control.CaughtUp, CaughtUpSIG, []readerv1.InputMode{memo, local}},
		{control.Initial, CaughtUpLIG, []readerv1.InputMode{memo, local}},
		{control.CaughtUp, CaughtUpLIG, []readerv1.InputMode{local, local}},
	} {
		cfg := ControllerConfig{Client: "c", Pipeline: "p", CaughtUpInputs: tc.inputs}
		cfg.EnsureDefaults()
		u, err := sol.unit(&cfg, "b1", tc.phase)
		if err != nil {
			t.Fatal(err)
		}
		for i, in := range u.GetInputs() {
			if in.GetMode() != tc.want[i] {
				t.Errorf("%s, %s: input %s read %s, want %s", tc.phase, tc.inputs, in.GetName(), in.GetMode(), tc.want[i])
			}
		}
	}
}

// TestUnitVersion: a unit is its block at the version of the epoch's
// snapshot; a solution where the block is at another version refuses it
// rather than build a unit of the other version.
func TestUnitVersion(t *testing.T) {
	sol := newSolution(&sigv1.ReadSolution{RawSource: "ads", Snapshot: 9,
		RawBlocks: []*sigv1.BlockRead{{BlockId: "b1", RawObject: "raw/ads/b1.v3.arrow", Version: 3}}})
	if got := sol.blocks[0]; got.ID != "b1" || got.Version != 3 {
		t.Fatalf("block %+v", got)
	}
	cfg := ControllerConfig{Client: "c", Pipeline: "p"}
	cfg.EnsureDefaults()
	u, err := sol.unit(&cfg, "b1.v3", control.CaughtUp)
	if err != nil {
		t.Fatal(err)
	}
	if u.GetUnitId() != "b1.v3" || u.GetBlockId() != "b1" || u.GetRawObject() != "raw/ads/b1.v3.arrow" {
		t.Errorf("unit %v", u)
	}
	for _, ref := range []string{"b1", "b1.v2", "b2"} {
		if _, err := sol.unit(&cfg, ref, control.CaughtUp); err == nil {
			t.Errorf("unit %s of a solution with b1 at version 3: no error", ref)
		}
	}
}

// TestUnitRefIsTheWarehouseName: a unit ref is the name the warehouse gives
// a block version (block.VersionedID; its objects are
// raw/<source>/<ref>.arrow), written and parsed alike; trainer/control keeps
// its own copy so that the decision logic links no storage code.
func TestUnitRefIsTheWarehouseName(t *testing.T) {
	for _, ref := range []string{"b1", "b1.v2", "b1.v10", "b1.v1", "b1.v0", "b1.v02", "b1.v", "b1.vx", ".v3",
		"20260101T000000Z-p00003-00000000000000000000-00000000000000000999.v7", "b1.v99999999999999999999", "b1.v1000000000000000000"} {
		cid, cv := control.ParseUnitRef(ref)
		r := blockref.Parse(ref)
		bid, bv := r.ID(), r.Version()
		if cid != bid || cv != bv {
			t.Errorf("%q: control %q v%d, warehouse %q v%d", ref, cid, cv, bid, bv)
		}
		if got, want := control.UnitRef(cid, cv), blockref.New(bid, bv).String(); got != want {
			t.Errorf("%q: control writes %q, warehouse %q", ref, got, want)
		}
	}
}
