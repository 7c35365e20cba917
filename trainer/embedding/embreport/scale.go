package embreport

// Production scale (paper VII.A): 128 TPU v4 chips, 32 GiB of HBM each.
const (
	ProdChips      = 128
	ProdHBMPerChip = 32 << 30
)

// Scaled is a synthetic model scaled to the emulator.
type Scaled struct {
	Spec ModelSpec
	// Prod are the kept tables at production size, Tables the same tables
	// with vocabularies clipped to VocabCap.
	Prod, Tables []TableSpec
	VocabCap     int64
	// DenseWeights is the spec's dense size divided by the scale factor.
	DenseWeights float64
	// HBMPerChip keeps the production memory pressure: the kept tables'
	// share of their chips' HBM is the same at both scales.
	HBMPerChip int64
	// Elements are the embedding parameters the emulator holds.
	Elements int64
}

// Scale shrinks a model by the factor k = ProdChips / chips: it keeps
// Tables/k of the tables and DenseWeights/k of the dense weights, so that
// with the same batch per chip the TensorCore work per chip and the
// SparseCore work per SparseCore both shrink k-fold (their ratio, and the
// tables per SparseCore, are the production model's); then it clips the
// vocabularies at the largest cap that fits elements embedding parameters
// (tables smaller than the cap keep their size; feature values of larger
// ones fold into the clipped vocabulary), and scales the HBM per chip by
// the kept tables' clipped/production bytes.
func Scale(spec ModelSpec, chips int, elements int64) Scaled {
	k := float64(ProdChips) / float64(chips)
	n := max(spec.Dominant+1, int(float64(spec.Tables)/k+0.5))
	prod := spec.Generate(n)
	sc := Scaled{Spec: spec, Prod: prod, DenseWeights: spec.DenseWeights / k}
	sc.VocabCap = vocabCap(prod, elements)
	var prodBytes, scaledBytes float64
	for _, t := range prod {
		c := t
		c.Vocab = min(t.Vocab, sc.VocabCap)
		sc.Tables = append(sc.Tables, c)
		sc.Elements += c.Vocab * int64(c.Dim)
		prodBytes += 4 * float64(t.Vocab) * float64(t.Dim)
		scaledBytes += 4 * float64(c.Vocab) * float64(c.Dim)
	}
	// The kept tables would live on 1/k of the production chips.
	sc.HBMPerChip = int64(float64(ProdHBMPerChip) * scaledBytes / prodBytes)
	return sc
}

// vocabCap is the largest cap C with Σ min(vocab, C)·dim ≤ elements (at
// least MinVocab).
func vocabCap(ts []TableSpec, elements int64) int64 {
	fits := func(c int64) bool {
		var e int64
		for _, t := range ts {
			e += min(t.Vocab, c) * int64(t.Dim)
		}
		return e <= elements
	}
	var largest int64
	for _, t := range ts {
		largest = max(largest, t.Vocab)
	}
	if fits(largest) {
		return largest
	}
	lo, hi := int64(MinVocab), largest // fits(lo) assumed, !fits(hi)
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}
