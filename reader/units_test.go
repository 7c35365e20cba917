package reader

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// TestUnitsFromSolution builds the units of a read solution (as sigd
// returns it over gRPC) and streams them: the units are those the fixture
// builds by hand, and with ModeReadyElseLocal a block whose memo is pending
// is read LOCAL with the same bytes.
func TestUnitsFromSolution(t *testing.T) {
	f := newFixture(t, fixtureConfig{Blocks: 2, RowsPerBlock: 400, Graphs: fleetGraphs(t, "ctr_small")})
	sol := &sigv1.ReadSolution{Client: "ctr", Pipeline: "p1", RawSource: "ads"}
	for _, b := range f.blocks {
		sol.RawBlocks = append(sol.RawBlocks, &sigv1.BlockRead{BlockId: b.id, RawObject: b.meta.Key})
	}
	for _, in := range f.inputs {
		is := &sigv1.InputSolution{Input: in.name, ComponentKey: in.key.String(), Type: in.typ.String(), CanonicalDsl: in.dsl}
		for _, b := range f.blocks {
			is.Blocks = append(is.Blocks, &sigv1.BlockRead{BlockId: b.id, MemoObject: block.MemoKey(in.key, blockref.ParseMemo(b.id)),
				State: sigv1.BlockState_BLOCK_STATE_READY})
		}
		sol.Inputs = append(sol.Inputs, is)
	}
	units, err := UnitsFromSolution(sol, UnitOptions{BatchRows: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(units) != 2 {
		t.Fatalf("%d units, want 2", len(units))
	}
	s := f.server(t, Config{})
	ctx := context.Background()
	for i, u := range units {
		want := f.unit(i, 100, nil)
		want.UnitId, want.RawSchemaJson = u.UnitId, u.RawSchemaJson
		if !proto.Equal(u, want) {
			t.Fatalf("unit %d:\n%v\nwant\n%v", i, u, want)
		}
		if _, err := collect(ctx, s, &readerv1.ReadRequest{Unit: u}); err != nil {
			t.Fatal(err)
		}
	}

	// Block 1's second input is pending and its object gone.
	sol.Inputs[1].Blocks[1].State = sigv1.BlockState_BLOCK_STATE_PENDING
	if err := f.store.Delete(ctx, sol.Inputs[1].Blocks[1].MemoObject); err != nil {
		t.Fatal(err)
	}
	units, err = UnitsFromSolution(sol, UnitOptions{BatchRows: 100, Mode: ModeReadyElseLocal})
	if err != nil {
		t.Fatal(err)
	}
	if m := units[1].Inputs[1].Mode; m != local || units[0].Inputs[1].Mode != memo {
		t.Fatalf("modes %v/%v", units[0].Inputs[1].Mode, m)
	}
	got, err := collect(ctx, s, &readerv1.ReadRequest{Unit: units[1]})
	if err != nil {
		t.Fatal(err)
	}
	want, err := collect(ctx, s, &readerv1.ReadRequest{Unit: f.unit(1, 100, allMode(local))})
	if err != nil {
		t.Fatal(err)
	}
	sameResponses(t, "ready-else-local", got, "LIG", want)

	sol.Inputs[0].Blocks = sol.Inputs[0].Blocks[:1]
	if _, err := UnitsFromSolution(sol, UnitOptions{}); err == nil {
		t.Fatal("solution with a missing block entry accepted")
	}
}

// TestUnitsFromSolutionSchema: units take the raw schema sigd puts in the
// solution, so any source is read with its own schema; without one (an
// older sigd) the source must be ads.
func TestUnitsFromSolutionSchema(t *testing.T) {
	schema := `{"source":"clicks","fields":[{"name":"event_id","type":"int64"},{"name":"event_time","type":"int64"},` +
		`{"name":"page","type":"string"},{"name":"click","type":"float64"}]}`
	sol := &sigv1.ReadSolution{Client: "c", Pipeline: "p", RawSource: "clicks", RawSchemaJson: schema,
		RawBlocks: []*sigv1.BlockRead{{BlockId: "b1", RawObject: "raw/clicks/b1.arrow"}}}
	units, err := UnitsFromSolution(sol, UnitOptions{Labels: []string{"click"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(units) != 1 || units[0].RawSource != "clicks" {
		t.Fatalf("units %v", units)
	}
	got, err := transform.ParseSchema([]byte(units[0].RawSchemaJson))
	if err != nil || got.Source != "clicks" || len(got.Fields) != 4 {
		t.Fatalf("unit schema %s: %v", units[0].RawSchemaJson, err)
	}

	sol.RawSchemaJson = ""
	if _, err := UnitsFromSolution(sol, UnitOptions{}); err == nil || !strings.Contains(err.Error(), `"clicks"`) {
		t.Fatalf("clicks solution without a schema: %v", err)
	}
	sol.RawSchemaJson = `{"source":`
	if _, err := UnitsFromSolution(sol, UnitOptions{}); err == nil || !strings.Contains(err.Error(), "raw_schema_json") {
		t.Fatalf("bad schema JSON: %v", err)
	}
}

// TestUnitsFromSolutionRange: a unit carries the solution's range exactly
// when the range does not cover its block whole (issue 29), by the
// block's events ([min, max+1) of its event times): blocks wholly inside,
// a range's edge on a block's first event or just past its last included,
// stay whole-block units, as a trainer's and the fleet's are; a block cut
// by either edge, or whose events are not known, gets the range.
func TestUnitsFromSolutionRange(t *testing.T) {
	ev := func(from, to int64) *sigv1.EventRange { return &sigv1.EventRange{StartMicros: from, EndMicros: to} }
	blocks := []struct {
		events  *sigv1.EventRange
		trimmed bool
	}{
		{ev(100, 200), false}, // starts on the range's start
		{ev(200, 300), false}, // inside
		{ev(300, 400), false}, // ends on the range's end
		{ev(99, 150), true},   // one event before the range
		{ev(350, 401), true},  // its last event is the range's end, which is out
		{nil, true},           // events unknown
		{ev(0, 1000), true},   // holds the range
	}
	sol := &sigv1.ReadSolution{Client: "ctr", Pipeline: "p1", RawSource: "ads", Range: ev(100, 400)}
	for i, b := range blocks {
		id := fmt.Sprintf("20260101T000000Z-p00000-%020d-%020d", i, i)
		sol.RawBlocks = append(sol.RawBlocks, &sigv1.BlockRead{BlockId: id, RawObject: "raw/ads/" + id + ".arrow", Events: b.events})
	}
	units, err := UnitsFromSolution(sol, UnitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, u := range units {
		if got := u.EventRange != nil; got != blocks[i].trimmed {
			t.Errorf("block %d of events %v: event_range %v, want trimmed %t", i, blocks[i].events, u.EventRange, blocks[i].trimmed)
		} else if got && !proto.Equal(u.EventRange, sol.Range) {
			t.Errorf("block %d: event_range %v, want the solution's %v", i, u.EventRange, sol.Range)
		}
	}
	sol.Range = nil // a solution without a range (none from sigd): whole blocks
	if units, err = UnitsFromSolution(sol, UnitOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, u := range units {
		if u.EventRange != nil {
			t.Errorf("block %d: event_range %v without a solution range", i, u.EventRange)
		}
	}
}
