package trainer

import (
	"fmt"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/reader"
	"github.com/sigdata/sig/trainer/control"
	"github.com/sigdata/sig/trainer/model"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/blockref"
)

// solution is a read solution indexed for building work units.
type solution struct {
	sol    *sigv1.ReadSolution
	raw    map[string]*sigv1.BlockRead
	blocks []control.Block
	// snapshot is the catalog snapshot the solution was resolved at: every
	// block of it is at its version in that snapshot (0 from a sigd
	// without versions).
	snapshot int64
	// memo[i][block] is input i's memoized block; nodes[i] its memo nodes'
	// (an input readers compute over a cover).
	memo  []map[string]*sigv1.BlockRead
	nodes []reader.NodeBlocks
}

func newSolution(s *sigv1.ReadSolution) *solution {
	x := &solution{sol: s, raw: map[string]*sigv1.BlockRead{}, snapshot: s.GetSnapshot()}
	for _, in := range s.GetInputs() {
		m := map[string]*sigv1.BlockRead{}
		for _, b := range in.GetBlocks() {
			m[b.GetBlockId()] = b
		}
		x.memo = append(x.memo, m)
		x.nodes = append(x.nodes, reader.IndexNodeBlocks(in))
	}
	for _, rb := range s.GetRawBlocks() {
		x.raw[rb.GetBlockId()] = rb
		// A block is ready for SIG reading when no input of it is pending;
		// a failed (quarantined) memo is read LOCAL instead (beyond the
		// paper: the failing component's blast radius is its own column).
		ready := true
		for _, m := range x.memo {
			if b, ok := m[rb.GetBlockId()]; !ok || (b.GetState() != sigv1.BlockState_BLOCK_STATE_READY && b.GetState() != sigv1.BlockState_BLOCK_STATE_FAILED) {
				ready = false
			}
		}
		// The read solution is where a block version enters the
		// controller: parsed once into its Ref, with a compacted block's
		// lineage (issue 28).
		b := control.Block{Ref: blockref.New(rb.GetBlockId(), rb.GetVersion()), Ready: ready}
		for _, p := range rb.GetParts() {
			b.Parts = append(b.Parts, control.Part{Ref: blockref.New(p.GetBlockId(), p.GetVersion()), Rows: p.GetRows()})
		}
		x.blocks = append(x.blocks, b)
	}
	return x
}

// lineage is the parts of ref's block if it is a compacted block (issue 28),
// as the ledger records them with its unit (checkpoint.UnitLedger.Parts).
func (x *solution) lineage(ref blockref.Ref) []blockref.Ref {
	rb, ok := x.raw[ref.ID()]
	if !ok {
		return nil
	}
	var out []blockref.Ref
	for _, p := range rb.GetParts() {
		out = append(out, blockref.New(p.GetBlockId(), p.GetVersion()))
	}
	return out
}

// features returns the model inputs of the solution.
func (x *solution) features() (model.Features, error) {
	var inputs []model.Input
	for _, in := range x.sol.GetInputs() {
		t, err := transform.ParseType(in.GetType())
		if err != nil {
			return model.Features{}, fmt.Errorf("%w: input %q: %v", model.ErrInvalidConfig, in.GetInput(), err)
		}
		inputs = append(inputs, model.Input{Name: in.GetInput(), Type: t})
	}
	return model.NewFeatures(inputs)
}

// unit builds the work unit of a block: an input is MEMO when its memoized
// block is ready, LOCAL otherwise, in either phase: caught-up training
// never waits for SIG (its epochs do not hold on pending data), and reads
// what SIG has ready rather than recomputing it (issue 21). With
// CaughtUpLIG, caught-up units are all LOCAL, as in the paper (IV.B).
//
// ref is the block at the version the epoch's snapshot has. A solution of
// another snapshot, where the block is at another version, is an error,
// never a unit of the other version. The unit's id on the wire is the
// ref's name.
func (x *solution) unit(cfg *ControllerConfig, ref blockref.Ref, phase control.Phase) (*readerv1.WorkUnit, error) {
	blockID := ref.ID()
	rb, ok := x.raw[blockID]
	if !ok {
		return nil, fmt.Errorf("block %s is not in the read solution", blockID)
	}
	if have := blockref.New(blockID, rb.GetVersion()); have != ref {
		return nil, fmt.Errorf("unit %s: the read solution (snapshot %d) has version %d of block %s", ref, x.snapshot, have.Version(), blockID)
	}
	u := &readerv1.WorkUnit{UnitId: ref.String(), Client: cfg.Client, Pipeline: cfg.Pipeline, RawSource: x.sol.GetRawSource(),
		RawSchemaJson: x.sol.GetRawSchemaJson(), // empty from an older sigd: the reader assumes ads
		BlockId:       blockID, RawObject: rb.GetRawObject(), LabelColumns: []string{cfg.LabelColumn}, BatchRows: uint32(cfg.ReadBatchRows)}
	for i, in := range x.sol.GetInputs() {
		b, ok := x.memo[i][blockID]
		if !ok {
			b = &sigv1.BlockRead{BlockId: blockID}
		}
		// An input readers compute reads the ready memo nodes of its cover
		// (reader.UnitInput); under CaughtUpLIG, everything from the raw
		// block when caught up.
		mode := readerv1.InputMode_INPUT_MODE_LOCAL
		sig := phase == control.Initial || cfg.CaughtUpInputs == CaughtUpSIG
		if sig && (in.GetComputed() || b.GetState() == sigv1.BlockState_BLOCK_STATE_READY) {
			mode = readerv1.InputMode_INPUT_MODE_MEMO
		}
		u.Inputs = append(u.Inputs, reader.UnitInput(in, b, x.nodes[i], mode))
	}
	return u, nil
}
