package partition

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestUniqueFormulas(t *testing.T) {
	cases := []struct {
		name string
		got  float64
		want float64
	}{
		// Two draws of a row with probability 1/2: missed with probability 1/4.
		{"fixed", uniqueFixed(0.5, 2), 0.75},
		{"never drawn", uniqueFixed(0, 1e9), 0},
		{"always drawn", uniqueFixed(1, 3), 1},
		{"tiny p keeps precision", uniqueFixed(1e-12, 1000), 1e-9 * (1 - 0.5*1e-9)},
		// Every example has exactly 2 values: same as 2·B fixed draws.
		{"dist of one point", uniqueDist(0.01, []valencyPoint{{2, 1}}, 100), uniqueFixed(0.01, 200)},
		// Half the examples have no value: B=1 hits with probability p/2 for valency 1.
		{"dist with zeros", uniqueDist(0.3, []valencyPoint{{0, 0.5}, {1, 0.5}}, 1), 0.15},
	}
	for _, c := range cases {
		if math.Abs(c.got-c.want) > 1e-12*math.Max(1, math.Abs(c.want)) && math.Abs(c.got-c.want) > 1e-18 {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

// The dedup model against simulation: draw batches from a Zipf profile and
// count distinct rows. A fixed seed keeps it deterministic; 400 batches put
// the sampling error well under the 2% tolerance.
func TestUniqueRowsMatchSimulation(t *testing.T) {
	const vocab, batch = 5000, 64
	for _, tc := range []struct {
		name string
		val  Valency
	}{
		{"fixed valency", Valency{Mean: 5}},
		{"valency distribution", Valency{Dist: []ValencyWeight{{1, 0.6}, {4, 0.3}, {30, 0.1}}}},
	} {
		tb := Table{Name: "z", Vocab: vocab, Dim: 8, Valency: tc.val, Access: Access{ZipfS: 1.1}}
		prof := buildProfile(&tb, batch)
		// Exact Zipf CDF for sampling.
		cdf := make([]float64, vocab)
		var z float64
		for r := range cdf {
			z += math.Pow(float64(r+1), -1.1)
			cdf[r] = z
		}
		rng := rand.New(rand.NewPCG(1, 2))
		seen := make([]int, vocab)
		var total float64
		const batches = 400
		for b := 1; b <= batches; b++ {
			for e := 0; e < batch; e++ {
				v := 5
				if len(tc.val.Dist) > 0 {
					switch x := rng.Float64(); {
					case x < 0.6:
						v = 1
					case x < 0.9:
						v = 4
					default:
						v = 30
					}
				}
				for k := 0; k < v; k++ {
					u := rng.Float64() * z
					lo, hi := 0, vocab-1
					for lo < hi {
						mid := (lo + hi) / 2
						if cdf[mid] < u {
							lo = mid + 1
						} else {
							hi = mid
						}
					}
					if seen[lo] != b {
						seen[lo] = b
						total++
					}
				}
			}
		}
		sim := total / batches
		t.Logf("%s: model %.1f unique rows per batch, simulation %.1f", tc.name, prof.total, sim)
		if math.Abs(prof.total-sim) > 0.02*sim {
			t.Errorf("%s: model %v unique rows per batch, simulation %v", tc.name, prof.total, sim)
		}
	}
}

// Part sums computed from runs (with Zipf tail buckets) against a per-row
// computation, for both distributions and several part counts.
func TestPartUniquesMatchPerRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for iter := 0; iter < 40; iter++ {
		vocab := int64(1 + rng.IntN(6000))
		tb := Table{Name: "t", Vocab: vocab, Dim: 4, Valency: Valency{Mean: 1 + 10*rng.Float64()}}
		if rng.IntN(2) == 0 {
			tb.Access.ZipfS = 0.5 + rng.Float64()
		} else {
			tb.Access.RowFreq = make([]float64, vocab)
			for r := range tb.Access.RowFreq {
				tb.Access.RowFreq[r] = float64(rng.IntN(4))
			}
			tb.Access.RowFreq[0] = 1
		}
		batch := 1 + rng.IntN(500)
		prof := buildProfile(&tb, batch)
		perRow := make([]float64, vocab)
		for _, r := range prof.runs {
			for i := r.lo; i < r.hi; i++ {
				perRow[i] = r.u
			}
		}
		for _, K := range []int{1, 2, 3, 7, 64} {
			if int64(K) > vocab {
				continue
			}
			for _, d := range []RowDist{RowsBlock, RowsCyclic} {
				got := prof.parts(K, d)
				want := make([]float64, K)
				for k := 0; k < K; k++ {
					s := Shard{RowDist: d, RowPart: k, RowParts: K}
					if K == 1 {
						s.RowDist = RowsAll
					}
					for r := int64(0); r < vocab; r++ {
						if _, ok := s.HoldsRow(vocab, r); ok {
							want[k] += perRow[r]
						}
					}
				}
				var sum float64
				for k := range got {
					sum += got[k]
					if math.Abs(got[k]-want[k]) > 1e-9*math.Max(1, want[k]) {
						t.Fatalf("vocab %d K=%d %v part %d: %v, per row %v", vocab, K, d, k, got[k], want[k])
					}
				}
				if math.Abs(sum-prof.total) > 1e-9*math.Max(1, prof.total) {
					t.Fatalf("vocab %d K=%d %v: parts sum to %v, total %v", vocab, K, d, sum, prof.total)
				}
			}
		}
	}
}

// The Zipf runs keep the head exact and the total probability 1.
func TestZipfProfile(t *testing.T) {
	for _, s := range []float64{0.7, 1, 1.3} {
		for _, vocab := range []int64{1, 100, 5000, 10_000_000} {
			runs := zipfProb(vocab, s)
			var total float64
			for _, r := range runs {
				total += r.p * float64(r.hi-r.lo)
			}
			if math.Abs(total-1) > 1e-9 {
				t.Errorf("s=%v vocab=%d: probabilities sum to %v", s, vocab, total)
			}
			if vocab >= 2 && math.Abs(runs[0].p/runs[1].p-math.Pow(2, s)) > 1e-12 {
				t.Errorf("s=%v vocab=%d: p0/p1 = %v, want 2^s", s, vocab, runs[0].p/runs[1].p)
			}
			if len(runs) > 3000 {
				t.Errorf("s=%v vocab=%d: %d runs, want a compact profile", s, vocab, len(runs))
			}
		}
	}
	// The tail approximation stays close to the exact sum of u over rows.
	tb := Table{Name: "z", Vocab: 200_000, Dim: 4, Valency: Valency{Mean: 3}, Access: Access{ZipfS: 1.05}}
	prof := buildProfile(&tb, 4096)
	var z float64
	for r := int64(0); r < tb.Vocab; r++ {
		z += math.Pow(float64(r+1), -1.05)
	}
	var exact float64
	for r := int64(0); r < tb.Vocab; r++ {
		exact += uniqueFixed(math.Pow(float64(r+1), -1.05)/z, 4096*3)
	}
	if math.Abs(prof.total-exact) > 1e-3*exact {
		t.Errorf("run-length Zipf gives %v unique rows, per-row sum %v", prof.total, exact)
	}
}

// Measured statistics override the configured assumptions (paper V.C).
func TestMeasuredStatistics(t *testing.T) {
	base := Table{Name: "m", Vocab: 10000, Dim: 8, Valency: Valency{Mean: 2}, Access: Access{ZipfS: 1.1}}
	plain := buildProfile(&base, 1000).total

	withUnique := base
	withUnique.Measured = &Measured{UniquePerBatch: 1234}
	if got := buildProfile(&withUnique, 1000).total; math.Abs(got-1234) > 1e-6*1234 {
		t.Errorf("measured unique_per_batch 1234: model gives %v", got)
	}

	withValency := base
	withValency.Measured = &Measured{MeanValency: 8}
	quad := base
	quad.Valency = Valency{Mean: 8}
	if got, want := buildProfile(&withValency, 1000).total, buildProfile(&quad, 1000).total; got != want || got <= plain {
		t.Errorf("measured mean_valency 8: %v, want %v (> %v)", got, want, plain)
	}

	withFreq := base
	withFreq.Measured = &Measured{RowFreq: make([]float64, base.Vocab)}
	withFreq.Measured.RowFreq[7] = 1 // every value is row 7
	if got := buildProfile(&withFreq, 1000).total; math.Abs(got-1) > 1e-12 {
		t.Errorf("measured row_freq on one row: %v unique rows, want 1", got)
	}

	withLookups := base
	withLookups.Measured = &Measured{RowLookups: make([]float64, base.Vocab)}
	withLookups.Measured.RowLookups[0], withLookups.Measured.RowLookups[9999] = 0.5, 0.25
	prof := buildProfile(&withLookups, 1000)
	if prof.total != 0.75 {
		t.Errorf("measured row_lookups: total %v, want 0.75", prof.total)
	}
	if u := prof.parts(2, RowsBlock); u[0] != 0.5 || u[1] != 0.25 {
		t.Errorf("measured row_lookups: block parts %v, want [0.5 0.25]", u)
	}
}

// The sparse measured profile (Measured.HotRows): hot rows keep their
// measured fractions exactly, the rest of the mass spreads uniformly, or by
// Zipf weight of row position, over the other rows; and a measured valency
// distribution acts like the configured one.
func TestMeasuredHotRowsAndValencyDist(t *testing.T) {
	const vocab = 50_000
	hot := []RowFraction{{Row: 40_000, Fraction: 0.2}, {Row: 3, Fraction: 0.1}, {Row: 4, Fraction: 0.05}}
	for _, tailS := range []float64{0, 1.1} {
		runs := hotRowProb(vocab, hot, tailS)
		var total float64
		at := int64(0)
		perRow := func(r int64) float64 {
			for _, x := range runs {
				if r >= x.lo && r < x.hi {
					return x.p
				}
			}
			t.Fatalf("row %d not covered", r)
			return 0
		}
		for _, x := range runs {
			if x.lo != at || x.hi <= x.lo {
				t.Fatalf("tail %v: runs not contiguous at %d: %+v", tailS, at, x)
			}
			at = x.hi
			total += x.p * float64(x.hi-x.lo)
		}
		if at != vocab || math.Abs(total-1) > 1e-9 {
			t.Fatalf("tail %v: runs cover %d rows with mass %v", tailS, at, total)
		}
		for _, h := range hot {
			if got := perRow(h.Row); got != h.Fraction {
				t.Errorf("tail %v: hot row %d has %v, measured %v", tailS, h.Row, got, h.Fraction)
			}
		}
		p0, p1, pFar := perRow(0), perRow(1), perRow(49_999)
		if tailS == 0 && (p0 != p1 || p0 != pFar || math.Abs(p0*(vocab-3)-0.65) > 1e-9) {
			t.Errorf("uniform tail: %v %v %v", p0, p1, pFar)
		}
		if tailS > 0 && (math.Abs(p0/p1-math.Pow(2, tailS)) > 1e-9 || !(pFar < p1)) {
			t.Errorf("Zipf tail: p0/p1 = %v, want 2^s; far row %v", p0/p1, pFar)
		}
	}

	tb := Table{Name: "v", Vocab: vocab, Dim: 8, Optimizer: optimizers["sgd"], Valency: Valency{Mean: 1}}
	dist := []ValencyWeight{{1, 0.5}, {10, 0.5}}
	configured := tb
	configured.Valency = Valency{Dist: dist}
	measured := tb
	measured.Measured = &Measured{ValencyDist: dist, MeanValency: 99} // the distribution wins
	if a, b := buildProfile(&configured, 500).total, buildProfile(&measured, 500).total; a != b {
		t.Errorf("measured valency distribution gives %v unique rows, configured %v", b, a)
	}
	measured.Measured.HotRows = hot
	if err := (&Problem{Tables: []Table{measured}, Topology: Topology{Chips: 1, SparseCoresPerChip: 1, HBMBytesPerChip: 1 << 30}, BatchSize: 1}).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Measured{
		{HotRows: []RowFraction{{Row: vocab, Fraction: 0.1}}},
		{HotRows: []RowFraction{{Row: 1, Fraction: 0.7}, {Row: 2, Fraction: 0.7}}},
		{HotRows: []RowFraction{{Row: 1, Fraction: 0.1}, {Row: 1, Fraction: 0.1}}},
		{TailZipfS: -1},
		{ValencyDist: []ValencyWeight{{0, 1}}},
	} {
		b := tb
		b.Measured = &bad
		err := (&Problem{Tables: []Table{b}, Topology: Topology{Chips: 1, SparseCoresPerChip: 1, HBMBytesPerChip: 1 << 30}, BatchSize: 1}).Validate()
		if !errors.Is(err, ErrInvalidProblem) {
			t.Errorf("measured %+v accepted: %v", bad, err)
		} else {
			t.Logf("%v", err)
		}
	}
}
