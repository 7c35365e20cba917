package reader

import (
	"encoding/json"
	"fmt"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/transform"
)

// UnitOptions shape the work units built from a read solution.
type UnitOptions struct {
	// Schema is the raw source's schema. Default: the solution's
	// raw_schema_json, else (an older sigd) the built-in Ads schema.
	Schema *transform.Schema
	// Labels are the label columns. Default DefaultLabels.
	Labels []string
	// BatchRows is the batch size. Default: the reader's (4096).
	BatchRows int
	// Mode picks an input's mode for one block. Default: MEMO for every
	// input (SIG); see ModeReadyElseLocal.
	Mode func(in *sigv1.InputSolution, blk *sigv1.BlockRead) readerv1.InputMode
}

// ModeReadyElseLocal reads an input's memo object when it is ready and
// computes the input locally otherwise, so that a pipeline trains without
// waiting for SIG (brief, "Beyond the paper" 2). An input readers compute
// reads whichever memo nodes of its cover are ready (UnitInput).
func ModeReadyElseLocal(in *sigv1.InputSolution, blk *sigv1.BlockRead) readerv1.InputMode {
	if in.GetComputed() || blk.GetState() == sigv1.BlockState_BLOCK_STATE_READY {
		return readerv1.InputMode_INPUT_MODE_MEMO
	}
	return readerv1.InputMode_INPUT_MODE_LOCAL
}

// UnitsFromSolution returns the work units of a read solution: one per raw
// block, in event order, each with every model input of the solution. A
// block the solution's range does not cover whole (by its events) carries
// the range (WorkUnit.event_range): its unit holds only the block's rows
// in it.
func UnitsFromSolution(sol *sigv1.ReadSolution, opts UnitOptions) ([]*readerv1.WorkUnit, error) {
	schema := opts.Schema
	if schema == nil && sol.GetRawSchemaJson() != "" {
		s, err := transform.ParseSchema([]byte(sol.GetRawSchemaJson()))
		if err != nil {
			return nil, fmt.Errorf("reader: the solution's raw_schema_json: %w", err)
		}
		schema = s
	}
	if schema == nil {
		schema = transform.AdsSchema()
	}
	source := sol.GetRawSource()
	if source == "" {
		source = "ads"
	}
	if source != schema.Source {
		return nil, fmt.Errorf("reader: solution of source %q, schema of %q", source, schema.Source)
	}
	js, err := json.Marshal(schema)
	if err != nil {
		return nil, err
	}
	mode := opts.Mode
	if mode == nil {
		mode = func(*sigv1.InputSolution, *sigv1.BlockRead) readerv1.InputMode {
			return readerv1.InputMode_INPUT_MODE_MEMO
		}
	}
	// Each input's blocks and its memo nodes' blocks by id.
	byBlock := make([]map[string]*sigv1.BlockRead, len(sol.GetInputs()))
	nodeBlocks := make([]NodeBlocks, len(sol.GetInputs()))
	for i, in := range sol.GetInputs() {
		byBlock[i] = map[string]*sigv1.BlockRead{}
		for _, b := range in.GetBlocks() {
			byBlock[i][b.GetBlockId()] = b
		}
		nodeBlocks[i] = IndexNodeBlocks(in)
	}
	// The solution's range is half-open and a block's rows span its window:
	// a block the range does not cover whole gets the range, so that its
	// unit holds exactly the rows in it (issue 29). A block wholly inside
	// (the read solution's events, [min, max+1) of its event times) stays
	// a whole-block unit, as is every unit of a range of whole windows.
	rng := sol.GetRange()
	var units []*readerv1.WorkUnit
	for _, raw := range sol.GetRawBlocks() {
		u := &readerv1.WorkUnit{
			UnitId:        sol.GetPipeline() + "/" + raw.GetBlockId(),
			Client:        sol.GetClient(),
			Pipeline:      sol.GetPipeline(),
			RawSource:     source,
			RawSchemaJson: string(js),
			BlockId:       raw.GetBlockId(),
			RawObject:     raw.GetRawObject(),
			LabelColumns:  opts.Labels,
			BatchRows:     uint32(opts.BatchRows),
		}
		if rng != nil && !covers(rng, raw.GetEvents()) {
			u.EventRange = &sigv1.EventRange{StartMicros: rng.GetStartMicros(), EndMicros: rng.GetEndMicros()}
		}
		for i, in := range sol.GetInputs() {
			b, ok := byBlock[i][raw.GetBlockId()]
			if !ok {
				return nil, fmt.Errorf("reader: input %q has no entry for block %s", in.GetInput(), raw.GetBlockId())
			}
			u.Inputs = append(u.Inputs, UnitInput(in, b, nodeBlocks[i], mode(in, b)))
		}
		units = append(units, u)
	}
	return units, nil
}

// covers reports whether every event time of a block whose events are ev
// ([min, max+1)) lies in rng. A block whose events are not known (nil) is
// not covered: its unit carries the range, which costs only reading its
// event times.
func covers(rng, ev *sigv1.EventRange) bool {
	return ev != nil && ev.GetStartMicros() < ev.GetEndMicros() &&
		rng.GetStartMicros() <= ev.GetStartMicros() && ev.GetEndMicros() <= rng.GetEndMicros()
}

// NodeBlocks are the memo entries of an input's memo nodes by block id:
// NodeBlocks[k][block] is memo_nodes[k]'s.
type NodeBlocks []map[string]*sigv1.BlockRead

// IndexNodeBlocks indexes the blocks of an input's memo nodes.
func IndexNodeBlocks(in *sigv1.InputSolution) NodeBlocks {
	if len(in.GetMemoNodes()) == 0 {
		return nil
	}
	out := make(NodeBlocks, len(in.GetMemoNodes()))
	for k, n := range in.GetMemoNodes() {
		out[k] = make(map[string]*sigv1.BlockRead, len(n.GetBlocks()))
		for _, b := range n.GetBlocks() {
			out[k][b.GetBlockId()] = b
		}
	}
	return out
}

// UnitInput is the unit input of model input in for the block whose entry
// is b, in the given mode. An input the read solution says readers compute
// (a cover whose root is not memoized) is LOCAL whatever the mode: with MEMO
// it reads the memo nodes of its cover whose blocks are ready and computes
// the rest (a node not ready yet is computed from its own inputs, which
// gives the same column), with LOCAL it computes everything from the raw
// block (LIG).
func UnitInput(in *sigv1.InputSolution, b *sigv1.BlockRead, nodes NodeBlocks, mode readerv1.InputMode) *readerv1.ModelInput {
	mi := &readerv1.ModelInput{Name: in.GetInput(), ComponentKey: in.GetComponentKey(), Type: in.GetType(),
		CanonicalDsl: in.GetCanonicalDsl(), MemoObject: b.GetMemoObject(), MemoState: b.GetState(), Mode: mode,
		MemoColumn: b.GetMemoColumn(), MemoVersion: b.GetVersion()}
	if !in.GetComputed() {
		return mi
	}
	mi.MemoObject, mi.MemoState, mi.MemoColumn, mi.MemoVersion = "", sigv1.BlockState_BLOCK_STATE_UNSPECIFIED, "", 0
	if mode == readerv1.InputMode_INPUT_MODE_MEMO {
		for k, n := range in.GetMemoNodes() {
			if k >= len(nodes) {
				break
			}
			nb, ok := nodes[k][b.GetBlockId()]
			if !ok || nb.GetState() != sigv1.BlockState_BLOCK_STATE_READY {
				continue
			}
			mi.MemoNodes = append(mi.MemoNodes, &readerv1.MemoNodeRead{Key: n.GetKey(), Type: n.GetType(),
				MemoObject: nb.GetMemoObject(), MemoState: nb.GetState(), MemoColumn: nb.GetMemoColumn(), MemoVersion: nb.GetVersion()})
		}
	}
	mi.Mode = readerv1.InputMode_INPUT_MODE_LOCAL
	return mi
}
