package partition

import (
	"math"
	"sort"
)

// This file is the deduplication model: how many distinct rows of a table one
// batch looks up, and how they spread over row parts.
//
// The paper deduplicates the input batch before the all-to-all exchange (V.A),
// so a SparseCore's work for a shard is proportional to the number of unique
// rows of that shard one batch touches, not to the number of feature values.
// For one batch of B examples, each example drawing V feature values
// independently from the table's access profile p, row r is looked up (once)
// with probability
//
//	u_r = 1 - E[(1-p_r)^(total draws)] = 1 - G_V(1-p_r)^B
//
// where G_V is the probability generating function of the valency
// distribution. With only a mean valency v, the draws are fixed at B·v and
// u_r = 1 - (1-p_r)^(B·v). The expected unique rows of a shard are the sum of
// u_r over its rows. Both forms are evaluated through log1p/expm1 so that rows
// with tiny p_r keep their precision.
//
// A profile is kept as runs of rows sharing one u (a row-order run-length
// encoding). Explicit per-row profiles produce one run per row (adjacent equal
// rows merged). Zipf profiles of large vocabularies keep the first zipfHeadRows
// rows exact and group the tail into geometrically growing runs whose rows
// share the run's mean probability; since u is concave in p this overestimates
// a tail run's uniques slightly (well under 0.1% with zipfTailRatio = 1.02).

// run is a range of rows [lo, hi) each looked up u times per batch (expected,
// after deduplication).
type run struct {
	lo, hi int64
	u      float64
}

type rowProfile struct {
	vocab int64
	runs  []run
	total float64 // expected unique rows per batch
}

const (
	zipfHeadRows  = 1024
	zipfTailRatio = 1.02
)

// probRun is a range of rows [lo, hi) each drawn with probability p.
type probRun struct {
	lo, hi int64
	p      float64
}

// buildProfile evaluates the dedup model for one table: the measured per-row
// lookups if present, else the row access profile (measured or configured)
// pushed through the valency model.
func buildProfile(tb *Table, batch int) rowProfile {
	m := tb.Measured
	if m != nil && m.RowLookups != nil {
		return profileFromPerRow(tb.Vocab, m.RowLookups)
	}
	var prob []probRun
	switch {
	case m != nil && m.RowFreq != nil:
		prob = perRowProb(m.RowFreq)
	case m != nil && len(m.HotRows) > 0:
		prob = hotRowProb(tb.Vocab, m.HotRows, m.TailZipfS)
	case tb.Access.RowFreq != nil:
		prob = perRowProb(tb.Access.RowFreq)
	case tb.Access.ZipfS > 0:
		prob = zipfProb(tb.Vocab, tb.Access.ZipfS)
	default:
		prob = []probRun{{0, tb.Vocab, 1 / float64(tb.Vocab)}}
	}

	var u func(p float64) float64
	switch {
	case m != nil && m.UniquePerBatch > 0:
		n := solveDraws(prob, m.UniquePerBatch)
		u = func(p float64) float64 { return uniqueFixed(p, n) }
	case m != nil && len(m.ValencyDist) > 0:
		dist := normalizedDist(m.ValencyDist)
		b := float64(batch)
		u = func(p float64) float64 { return uniqueDist(p, dist, b) }
	case m != nil && m.MeanValency > 0:
		n := float64(batch) * m.MeanValency
		u = func(p float64) float64 { return uniqueFixed(p, n) }
	case len(tb.Valency.Dist) > 0:
		dist := normalizedDist(tb.Valency.Dist)
		b := float64(batch)
		u = func(p float64) float64 { return uniqueDist(p, dist, b) }
	default:
		n := float64(batch) * tb.Valency.Mean
		u = func(p float64) float64 { return uniqueFixed(p, n) }
	}

	pr := rowProfile{vocab: tb.Vocab, runs: make([]run, 0, len(prob))}
	for _, r := range prob {
		x := u(r.p)
		pr.runs = append(pr.runs, run{r.lo, r.hi, x})
		pr.total += float64(r.hi-r.lo) * x
	}
	return pr
}

// uniqueFixed is 1-(1-p)^n: the probability that n independent draws hit a
// row of probability p at least once.
func uniqueFixed(p, n float64) float64 {
	if p <= 0 || n <= 0 {
		return 0
	}
	if p >= 1 {
		return 1
	}
	return -math.Expm1(n * math.Log1p(-p))
}

type valencyPoint struct {
	v int
	w float64 // normalized
}

func normalizedDist(d []ValencyWeight) []valencyPoint {
	var sum float64
	for _, x := range d {
		sum += x.Weight
	}
	out := make([]valencyPoint, 0, len(d))
	for _, x := range d {
		if x.Weight > 0 {
			out = append(out, valencyPoint{x.Valency, x.Weight / sum})
		}
	}
	return out
}

// uniqueDist is 1 - G(1-p)^b with G(x) = Σ w_v x^v, computed as
// -expm1(b·log1p(Σ w_v expm1(v·log1p(-p)))) to keep small p precise.
func uniqueDist(p float64, dist []valencyPoint, b float64) float64 {
	if p <= 0 {
		return 0
	}
	lq := math.Inf(-1)
	if p < 1 {
		lq = math.Log1p(-p)
	}
	var g float64 // G(1-p) - 1
	for _, x := range dist {
		if x.v == 0 {
			continue // (1-p)^0 - 1 = 0
		}
		g += x.w * math.Expm1(float64(x.v)*lq)
	}
	if g <= -1 {
		return 1
	}
	return -math.Expm1(b * math.Log1p(g))
}

// solveDraws finds the number of draws n per batch for which the profile's
// expected unique rows equal target (the measured unique values per batch),
// by bisection on log n: the unique count grows monotonically with n.
func solveDraws(prob []probRun, target float64) float64 {
	uniques := func(n float64) float64 {
		var s float64
		for _, r := range prob {
			s += float64(r.hi-r.lo) * uniqueFixed(r.p, n)
		}
		return s
	}
	var support float64
	for _, r := range prob {
		if r.p > 0 {
			support += float64(r.hi - r.lo)
		}
	}
	if target >= support {
		return math.Inf(1)
	}
	lo, hi := 1e-9, 1.0
	for uniques(hi) < target {
		lo, hi = hi, hi*2
		if hi > 1e300 {
			return hi
		}
	}
	for i := 0; i < 200 && hi-lo > 1e-12*hi; i++ {
		mid := math.Sqrt(lo * hi)
		if uniques(mid) < target {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

func perRowProb(freq []float64) []probRun {
	var sum float64
	for _, f := range freq {
		sum += f
	}
	out := make([]probRun, 0, 16)
	for i, f := range freq {
		p := f / sum
		if n := len(out); n > 0 && out[n-1].p == p {
			out[n-1].hi++
			continue
		}
		out = append(out, probRun{int64(i), int64(i) + 1, p})
	}
	return out
}

// hotRowProb is the sparse measured profile (Measured.HotRows): each hot
// row its measured fraction, the rest of the mass over the other rows —
// uniformly, or by Zipf(tailS) weight of their position. It costs
// O(hot rows + Zipf runs).
func hotRowProb(vocab int64, hot []RowFraction, tailS float64) []probRun {
	hs := append([]RowFraction(nil), hot...)
	sort.Slice(hs, func(i, j int) bool { return hs[i].Row < hs[j].Row })
	var hotMass float64
	for _, h := range hs {
		hotMass += h.Fraction
	}
	rest := max(0, 1-hotMass)
	// base: the tail's per-row weights over all rows (hot rows included,
	// removed below), as runs.
	var base []probRun
	if tailS > 0 {
		base = zipfProb(vocab, tailS)
	} else {
		base = []probRun{{0, vocab, 1 / float64(vocab)}}
	}
	// Split the base runs at the hot rows; the tail's weight is what the
	// non-hot rows carry.
	out := make([]probRun, 0, len(base)+2*len(hs))
	isHot := make([]bool, 0, cap(out))
	push := func(r probRun, h bool) {
		out = append(out, r)
		isHot = append(isHot, h)
	}
	var tailW float64
	i := 0
	for _, r := range base {
		lo := r.lo
		for i < len(hs) && hs[i].Row < r.hi {
			h := hs[i]
			if h.Row > lo {
				push(probRun{lo, h.Row, r.p}, false)
				tailW += r.p * float64(h.Row-lo)
			}
			push(probRun{h.Row, h.Row + 1, h.Fraction}, true)
			lo = h.Row + 1
			i++
		}
		if lo < r.hi {
			push(probRun{lo, r.hi, r.p}, false)
			tailW += r.p * float64(r.hi-lo)
		}
	}
	for k := range out {
		if !isHot[k] && tailW > 0 {
			out[k].p = out[k].p / tailW * rest
		}
	}
	return out
}

func profileFromPerRow(vocab int64, lookups []float64) rowProfile {
	pr := rowProfile{vocab: vocab}
	for i, x := range lookups {
		pr.total += x
		if n := len(pr.runs); n > 0 && pr.runs[n-1].u == x {
			pr.runs[n-1].hi++
			continue
		}
		pr.runs = append(pr.runs, run{int64(i), int64(i) + 1, x})
	}
	return pr
}

// zipfProb returns the Zipf(s) probabilities of rows 0..vocab-1 (row r has
// weight (r+1)^-s): exact for the head, geometric runs for the tail.
func zipfProb(vocab int64, s float64) []probRun {
	head := min(vocab, zipfHeadRows)
	out := make([]probRun, 0, head+512)
	var z float64
	for r := int64(0); r < head; r++ {
		w := math.Pow(float64(r+1), -s)
		out = append(out, probRun{r, r + 1, w})
		z += w
	}
	for lo := head; lo < vocab; {
		hi := min(vocab, max(lo+1, int64(float64(lo)*zipfTailRatio)))
		// Rows lo..hi-1 have ranks lo+1..hi; the midpoint rule on unit
		// intervals integrates x^-s over [lo+0.5, hi+0.5].
		w := powIntegral(float64(lo)+0.5, float64(hi)+0.5, s)
		out = append(out, probRun{lo, hi, w}) // mass for now
		z += w
		lo = hi
	}
	for i := range out {
		r := &out[i]
		r.p = r.p / z / float64(r.hi-r.lo)
	}
	return out
}

// powIntegral is ∫_a^b x^-s dx, stable near s = 1.
func powIntegral(a, b, s float64) float64 {
	la, lb := math.Log(a), math.Log(b)
	t := 1 - s
	if math.Abs(t) < 1e-12 {
		return lb - la
	}
	return math.Exp(t*la) * math.Expm1(t*(lb-la)) / t
}

// partRange is the first row and row count of part k of K under dist.
// Block distribution gives part k the contiguous rows
// [floor(k·V/K), floor((k+1)·V/K)); cyclic distribution gives it rows
// k, k+K, k+2K, ... (paper V.A, after [1]).
func partRange(vocab int64, dist RowDist, k, parts int) (first, count int64) {
	K := int64(parts)
	switch dist {
	case RowsBlock:
		first = int64(k) * vocab / K
		return first, int64(k+1)*vocab/K - first
	case RowsCyclic:
		if int64(k) >= vocab {
			return int64(k), 0
		}
		return int64(k), (vocab - int64(k) + K - 1) / K
	default:
		return 0, vocab
	}
}

// parts returns the expected unique rows per batch of each of K row parts
// under dist. It costs O(runs + K): block parts are merged against the runs,
// cyclic parts take each run's whole cycles as a uniform add and the leftover
// rows through a difference array over residues.
func (pr *rowProfile) parts(parts int, dist RowDist) []float64 {
	u := make([]float64, parts)
	if parts == 1 || dist == RowsAll {
		u[0] = pr.total
		return u
	}
	K := int64(parts)
	switch dist {
	case RowsBlock:
		k := 0
		end := pr.vocab / K
		for _, r := range pr.runs {
			for pos := r.lo; pos < r.hi; {
				for pos >= end {
					k++
					end = int64(k+1) * pr.vocab / K
				}
				e := min(r.hi, end)
				u[k] += float64(e-pos) * r.u
				pos = e
			}
		}
	case RowsCyclic:
		diff := make([]float64, parts+1)
		var base float64
		for _, r := range pr.runs {
			c := r.hi - r.lo
			base += float64(c/K) * r.u
			rem := c % K
			if rem == 0 {
				continue
			}
			start := r.lo % K
			if start+rem <= K {
				diff[start] += r.u
				diff[start+rem] -= r.u
			} else {
				diff[start] += r.u
				diff[0] += r.u
				diff[start+rem-K] -= r.u
			}
		}
		var acc float64
		for k := range u {
			acc += diff[k]
			u[k] = base + acc
		}
	}
	for k := range u {
		if u[k] < 0 { // roundoff from the difference array
			u[k] = 0
		}
	}
	return u
}
