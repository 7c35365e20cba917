package trainer

import (
	"slices"
	"testing"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	trainerv1 "github.com/sigdata/sig/proto/trainer/v1"
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
		u, err := sol.unit(&cfg, blockref.New("b1", 1), tc.phase)
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
	if got := sol.blocks[0]; got.Ref != blockref.New("b1", 3) {
		t.Fatalf("block %+v", got)
	}
	cfg := ControllerConfig{Client: "c", Pipeline: "p"}
	cfg.EnsureDefaults()
	u, err := sol.unit(&cfg, blockref.New("b1", 3), control.CaughtUp)
	if err != nil {
		t.Fatal(err)
	}
	if u.GetUnitId() != "b1.v3" || u.GetBlockId() != "b1" || u.GetRawObject() != "raw/ads/b1.v3.arrow" {
		t.Errorf("unit %v", u)
	}
	for _, ref := range []blockref.Ref{blockref.New("b1", 1), blockref.New("b1", 2), blockref.New("b2", 1)} {
		if _, err := sol.unit(&cfg, ref, control.CaughtUp); err == nil {
			t.Errorf("unit %s of a solution with b1 at version 3: no error", ref)
		}
	}
}

// TestCompactionLineage (issue 28): a compacted block's lineage enters the
// controller with its block and the ledger with its unit; a host trains
// every row of a unit but those its skips name, batch by batch.
func TestCompactionLineage(t *testing.T) {
	sol := newSolution(&sigv1.ReadSolution{RawSource: "ads", RawBlocks: []*sigv1.BlockRead{
		{BlockId: "b1"},
		{BlockId: "c", Parts: []*sigv1.BlockRead{{BlockId: "b2", Rows: 10}, {BlockId: "b3", Version: 2, Rows: 5}}},
	}})
	want := []control.Part{{Ref: blockref.New("b2", 1), Rows: 10}, {Ref: blockref.New("b3", 2), Rows: 5}}
	if len(sol.blocks) != 2 || sol.blocks[0].Parts != nil || !slices.Equal(sol.blocks[1].Parts, want) {
		t.Fatalf("blocks %+v", sol.blocks)
	}
	if got := sol.lineage(blockref.New("c", 1)); !slices.Equal(got, []blockref.Ref{blockref.New("b2", 1), blockref.New("b3", 2)}) {
		t.Fatalf("lineage %v", got)
	}
	skip := &trainerv1.UnitSkip{UnitId: "c", Starts: []int64{0, 12}, Ends: []int64{10, 14}}
	for _, tc := range []struct {
		start, n int64
		want     [][2]int64
	}{
		{0, 8, nil},                         // all skipped
		{8, 4, [][2]int64{{2, 4}}},          // rows 10, 11
		{10, 6, [][2]int64{{0, 2}, {4, 6}}}, // rows 10, 11, 14, 15
		{20, 5, [][2]int64{{0, 5}}},         // none skipped
	} {
		if got := keptRows(tc.start, tc.n, skip); !slices.Equal(got, tc.want) {
			t.Errorf("batch of %d rows at %d: kept %v, want %v", tc.n, tc.start, got, tc.want)
		}
	}
	if got := keptRows(3, 4, nil); !slices.Equal(got, [][2]int64{{0, 4}}) {
		t.Errorf("no skip: %v", got)
	}
}
