package trainer

import (
	"testing"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/trainer/control"
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
