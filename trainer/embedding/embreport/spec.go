package embreport

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// ModelSpec describes one synthetic model at production scale (paper
// VII.A): its dense size and how its embedding tables are drawn. The
// generator draws Tables tables from the spec's seed; Scale turns them into
// the emulated model (scale.go).
type ModelSpec struct {
	Name string
	// What the paper says of the model, which the spec follows (VII.D).
	Note string
	// Tables at production scale ("hundreds"), and the dense (MLP and
	// transformer) weights, 50M to 300M.
	Tables       int
	DenseWeights float64
	// Multivalent is the fraction of tables whose examples carry more than
	// one value; their mean valency is log-uniform in [2, MaxMeanValency].
	Multivalent    float64
	MaxMeanValency float64
	// Dominant tables carry DominantValency values per example on average
	// (model A: "two tables contribute to most of the embedding lookups").
	Dominant        int
	DominantValency float64
	Seed            uint64
}

// Models are the five synthetic models A–E. Their table counts and dense
// sizes are within the paper's ranges (VII.A); their character follows the
// paper's description of each (VII.D): A has two tables with most lookups;
// B and E have many multivalent features ("FDP is primarily important due
// to multivalent lookups"); C and D have the larger dense parts (they are
// "TensorCore bound after hybrid partitioning"). The numbers were set once,
// from those descriptions, before any run; none is fitted to Figure 7.
var Models = []ModelSpec{
	{Name: "A", Note: "two tables carry most lookups", Tables: 160, DenseWeights: 50e6, Multivalent: 0.2, MaxMeanValency: 10, Dominant: 2, DominantValency: 150, Seed: 1},
	{Name: "B", Note: "many multivalent features", Tables: 240, DenseWeights: 120e6, Multivalent: 0.6, MaxMeanValency: 60, Seed: 2},
	{Name: "C", Note: "mostly univalent, large dense part", Tables: 120, DenseWeights: 300e6, Multivalent: 0.2, MaxMeanValency: 8, Seed: 3},
	{Name: "D", Note: "mixed, large dense part", Tables: 200, DenseWeights: 200e6, Multivalent: 0.4, MaxMeanValency: 20, Seed: 4},
	{Name: "E", Note: "many tables, many multivalent features", Tables: 320, DenseWeights: 80e6, Multivalent: 0.7, MaxMeanValency: 100, Seed: 5},
}

// Production-scale table ranges (paper VII.A).
const (
	MinVocab   = 64
	MaxVocab   = 300_000_000
	MaxDim     = 380
	MaxValency = 230
	// hugeVocab: tables above it have widths of at most 64, so one table
	// never needs more than a chip's HBM times a few (production widths
	// shrink as vocabularies grow).
	hugeVocab = 10_000_000
)

// TableSpec is one embedding table of a synthetic model.
type TableSpec struct {
	Name  string
	Vocab int64
	Dim   int
	// MeanValency is the mean number of values per example; every example
	// has at least one, and at most MaxValency (the declared maximum the
	// compiler knows, paper V.C: valency "is data dependent and not known
	// at compile time", only its bound is).
	MeanValency float64
	MaxValency  int
	// ZipfS is the access skew: value rank k is drawn with probability
	// proportional to (k+1)^-ZipfS. Sorted vocabularies use the rank as the
	// row (frequency-sorted, paper V.A); the others hash it.
	ZipfS  float64
	Sorted bool
}

// Generate draws n of the spec's tables at production scale (the dominant
// tables first): a model scaled down k-fold keeps Tables/k of them.
func (s ModelSpec) Generate(n int) []TableSpec {
	rng := rand.New(rand.NewPCG(s.Seed, 0x656d62))
	logU := func(lo, hi float64) float64 {
		return math.Exp(math.Log(lo) + rng.Float64()*(math.Log(hi)-math.Log(lo)))
	}
	out := make([]TableSpec, 0, n)
	for i := 0; i < n; i++ {
		t := TableSpec{Name: fmt.Sprintf("%s%03d", s.Name, i), MeanValency: 1, MaxValency: 1,
			ZipfS: 1.05 + 0.25*rng.Float64(), Sorted: rng.Float64() < 0.3}
		t.Vocab = int64(logU(MinVocab, MaxVocab))
		maxDim := float64(MaxDim)
		if t.Vocab > hugeVocab {
			maxDim = 64
		}
		t.Dim = max(1, int(logU(1, maxDim+1)))
		switch {
		case i < s.Dominant:
			t.MeanValency, t.MaxValency = s.DominantValency, MaxValency
			t.Vocab = max(t.Vocab, 1_000_000)
		case rng.Float64() < s.Multivalent:
			t.MeanValency = logU(2, s.MaxMeanValency)
			t.MaxValency = min(MaxValency, int(math.Ceil(4*t.MeanValency)))
		}
		out = append(out, t)
	}
	return out
}
