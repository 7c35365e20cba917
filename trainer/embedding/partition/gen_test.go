package partition

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// genSpec shapes a random problem.
type genSpec struct {
	tables             int
	chips, perChip     int
	hbm                int64
	vocabLo, vocabHi   float64 // log-uniform
	valencyLo, valHi   float64 // log-uniform
	dims               []int
	batch              int
	withRowFreq        bool // small vocabularies only
	withMeasured       bool
	withValencyDist    bool
	shardOverheadNS    float64
	lookupOverheadNS   float64
	accessGranularity  int
	optimizerNames     []string
	optimizerCumWeight []float64
}

// modelSpec is an Ads-like model: Zipf-distributed vocabularies from a
// thousand to ten million rows, widths 8 to 256, valencies 1 to 100, mostly
// element-wise optimizers.
func modelSpec(tables, chips, perChip int, vocabHi float64) genSpec {
	return genSpec{
		tables: tables, chips: chips, perChip: perChip, hbm: 32 << 30,
		vocabLo: 1e3, vocabHi: vocabHi,
		valencyLo: 1, valHi: 100,
		dims:               []int{8, 16, 32, 32, 64, 64, 64, 128, 128, 256},
		batch:              16384,
		shardOverheadNS:    DefaultShardOverheadNS,
		lookupOverheadNS:   DefaultLookupOverheadNS,
		accessGranularity:  DefaultAccessGranularity,
		optimizerNames:     []string{"adagrad", "sgd", "adam", "lamb", "rowwise_adagrad"},
		optimizerCumWeight: []float64{0.5, 0.65, 0.8, 0.9, 1},
	}
}

func logUniform(rng *rand.Rand, lo, hi float64) float64 {
	return math.Exp(math.Log(lo) + rng.Float64()*(math.Log(hi)-math.Log(lo)))
}

func genProblem(rng *rand.Rand, g genSpec) *Problem {
	p := &Problem{
		Topology: Topology{
			Chips: g.chips, SparseCoresPerChip: g.perChip, HBMBytesPerChip: g.hbm,
			HBMBandwidth: DefaultHBMBandwidth, AccessGranularity: g.accessGranularity,
			LookupOverheadNS: g.lookupOverheadNS, ShardOverheadNS: g.shardOverheadNS,
		},
		BatchSize: g.batch,
	}
	for i := 0; i < g.tables; i++ {
		tb := Table{
			Name:  fmt.Sprintf("t%03d", i),
			Vocab: int64(logUniform(rng, g.vocabLo, g.vocabHi)),
			Dim:   g.dims[rng.IntN(len(g.dims))],
		}
		x := rng.Float64()
		for k, w := range g.optimizerCumWeight {
			if x <= w {
				tb.Optimizer, _ = OptimizerByName(g.optimizerNames[k])
				break
			}
		}
		tb.Valency.Mean = logUniform(rng, g.valencyLo, g.valHi)
		if g.withValencyDist && rng.IntN(3) == 0 {
			lo := max(0, int(tb.Valency.Mean)-1)
			tb.Valency = Valency{Dist: []ValencyWeight{{lo, 1}, {lo + 2, 1}, {3 * lo, 0.5}}}
		}
		switch r := rng.IntN(5); {
		case g.withRowFreq && r == 0 && tb.Vocab <= 4096:
			tb.Access.RowFreq = make([]float64, tb.Vocab)
			for k := range tb.Access.RowFreq {
				tb.Access.RowFreq[k] = rng.Float64() * rng.Float64()
			}
		case r == 1:
			// uniform
		default:
			tb.Access.ZipfS = 0.8 + 0.6*rng.Float64()
		}
		if g.withMeasured && rng.IntN(4) == 0 && tb.Vocab <= 4096 {
			m := &Measured{}
			switch rng.IntN(4) {
			case 0:
				m.MeanValency = tb.Valency.Mean * (0.5 + rng.Float64())
			case 1:
				m.UniquePerBatch = float64(tb.Vocab) * rng.Float64() * 0.9
			case 2:
				m.RowFreq = make([]float64, tb.Vocab)
				for k := range m.RowFreq {
					m.RowFreq[k] = rng.Float64()
				}
			case 3:
				m.RowLookups = make([]float64, tb.Vocab)
				for k := range m.RowLookups {
					m.RowLookups[k] = rng.Float64()
				}
			}
			tb.Measured = m
		}
		p.Tables = append(p.Tables, tb)
	}
	return p
}
