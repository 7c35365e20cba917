package embreport

import (
	"math"
	"math/rand/v2"

	"github.com/sigdata/sig/trainer/model"
	"github.com/sigdata/sig/transform"
)

// features is the model's view of a synthetic model: one list<int64> input
// per table, no dense inputs.
func features(tables []TableSpec) (model.Features, error) {
	var ins []model.Input
	for _, t := range tables {
		ins = append(ins, model.Input{Name: t.Name, Type: transform.ListInt64})
	}
	return model.NewFeatures(ins)
}

// generator draws synthetic batches: per example and table a valency
// (1 + geometric with the table's mean, at most its declared maximum), then
// that many value ranks from the table's Zipf distribution over its
// production vocabulary; the feature id is the rank (sorted vocabulary) or a
// hash of it. The model folds ids into its clipped vocabulary (id mod
// vocab).
type generator struct {
	prod []TableSpec
	seed uint64
}

func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// batch returns batch number i of the stream (a pure function of the seed,
// i and the tables, so any batch can be drawn without the others).
func (g generator) batch(f model.Features, i uint64, size int) *model.Examples {
	rng := rand.New(rand.NewPCG(g.seed, i))
	e := model.NewExamples(f)
	for j := 0; j < size; j++ {
		e.EventIDs = append(e.EventIDs, int64(i)<<32|int64(j))
		var y float32
		if rng.Float64() < 0.2 {
			y = 1
		}
		e.Labels = append(e.Labels, y)
	}
	for t, ts := range g.prod {
		z := rand.NewZipf(rng, ts.ZipfS, 1, uint64(ts.Vocab-1))
		col := &e.Sparse[t]
		salt := mix(uint64(t) + 0x7461626c65)
		logq := 0.0
		if ts.MeanValency > 1 {
			logq = math.Log1p(-1 / ts.MeanValency) // geometric: P(v=k) = (1-p)^(k-1)·p, p = 1/mean
		}
		for j := 0; j < size; j++ {
			v := 1
			if logq < 0 {
				v = int(math.Ceil(math.Log(1-rng.Float64()) / logq))
				v = min(max(v, 1), ts.MaxValency)
			}
			for ; v > 0; v-- {
				r := z.Uint64()
				if !ts.Sorted {
					r = mix(r ^ salt)
				}
				col.IDs = append(col.IDs, r)
			}
			col.Offsets = append(col.Offsets, int32(len(col.IDs)))
		}
	}
	return e
}
