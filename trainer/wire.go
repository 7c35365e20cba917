package trainer

import (
	"fmt"

	trainerv1 "github.com/sigdata/sig/proto/trainer/v1"
	"github.com/sigdata/sig/trainer/buffer"
	"github.com/sigdata/sig/trainer/model"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/blockref"
)

// examplesToProto encodes a host's batch for the wire.
func examplesToProto(e *model.Examples) *trainerv1.Examples {
	p := &trainerv1.Examples{EventIds: e.EventIDs, Labels: e.Labels}
	for _, c := range e.Sparse {
		p.Sparse = append(p.Sparse, &trainerv1.SparseColumn{Offsets: c.Offsets, Ids: c.IDs})
	}
	for _, c := range e.Dense {
		p.Dense = append(p.Dense, &trainerv1.DenseColumn{Values: c})
	}
	return p
}

// examplesFromProto decodes and checks a batch against the features.
func examplesFromProto(f model.Features, p *trainerv1.Examples) (*model.Examples, error) {
	e := &model.Examples{EventIDs: p.GetEventIds(), Labels: p.GetLabels()}
	for _, c := range p.GetSparse() {
		e.Sparse = append(e.Sparse, model.SparseColumn{Offsets: c.GetOffsets(), IDs: c.GetIds()})
	}
	for _, c := range p.GetDense() {
		e.Dense = append(e.Dense, c.GetValues())
	}
	if e.EventIDs == nil {
		e = model.NewExamples(f)
	}
	if err := e.Check(f); err != nil {
		return nil, err
	}
	return e, nil
}

func segmentsToProto(segs []buffer.Segment) []*trainerv1.UnitRows {
	out := make([]*trainerv1.UnitRows, 0, len(segs))
	for _, s := range segs {
		out = append(out, &trainerv1.UnitRows{UnitId: s.Unit.String(), Rows: int64(s.Rows)})
	}
	return out
}

// segmentsFromProto decodes and checks a batch's rows per unit, each unit id
// parsed into its block version.
func segmentsFromProto(p []*trainerv1.UnitRows, n int) ([]buffer.Segment, error) {
	var out []buffer.Segment
	total := 0
	for _, u := range p {
		if u.GetRows() <= 0 || u.GetUnitId() == "" {
			return nil, fmt.Errorf("batch: unit rows %q: %d", u.GetUnitId(), u.GetRows())
		}
		out = append(out, buffer.Segment{Unit: blockref.Parse(u.GetUnitId()), Rows: int(u.GetRows())})
		total += int(u.GetRows())
	}
	if total != n {
		return nil, fmt.Errorf("batch: unit rows add up to %d, the batch has %d examples", total, n)
	}
	return out, nil
}

func inputsToProto(f model.Features) []*trainerv1.Input {
	var out []*trainerv1.Input
	for _, in := range f.Inputs {
		out = append(out, &trainerv1.Input{Name: in.Name, Type: in.Type.String()})
	}
	return out
}

func featuresFromProto(p []*trainerv1.Input) (model.Features, error) {
	var inputs []model.Input
	for _, in := range p {
		t, err := transform.ParseType(in.GetType())
		if err != nil {
			return model.Features{}, fmt.Errorf("input %q: %w", in.GetName(), err)
		}
		inputs = append(inputs, model.Input{Name: in.GetName(), Type: t})
	}
	return model.NewFeatures(inputs)
}
