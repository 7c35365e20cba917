package transform

import (
	"math"
	"math/rand/v2"
	"testing"
)

// log1pCases: values on both of math.Log1p's main paths and at every edge
// between its branches, random bit patterns, and the special values.
func log1pCases() []float64 {
	r := rand.New(rand.NewPCG(3, 4))
	var xs []float64
	for range 1 << 18 {
		xs = append(xs,
			math.Float64frombits(r.Uint64()),
			r.Float64()*4-1,
			r.Float64()*1e6,
			r.NormFloat64(),
			// prices as warehouse/gen draws them: log-normal, 4 decimals
			math.Round(r.Float64()*2*math.Exp(r.NormFloat64()*0.5)*1e4)/1e4)
	}
	for e := -1074; e < 1024; e++ {
		p := math.Ldexp(1, e)
		xs = append(xs, p-1, p, p+1, -p, math.Nextafter(p-1, 0), math.Nextafter(p-1, 10))
	}
	const sqrt2M1, sqrt2HalfM1 = 4.142135623730950488017e-01, -2.928932188134524755992e-01
	for _, e := range []float64{sqrt2M1, sqrt2HalfM1, math.Sqrt2 - 1, 1.0 / (1 << 29), 1.0 / (1 << 54), 1 << 53} {
		for _, v := range []float64{e, -e} {
			xs = append(xs, v, math.Nextafter(v, math.Inf(1)), math.Nextafter(v, math.Inf(-1)))
		}
	}
	return append(xs, 0, math.Copysign(0, -1), 1, -1, math.Inf(1), math.Inf(-1), math.NaN(),
		math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64)
}

func sameBits(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || (math.IsNaN(a) && math.IsNaN(b))
}

func TestLog1pIntoMatchesMath(t *testing.T) {
	xs := log1pCases()
	got := make([]float64, len(xs))
	log1pInto(got, xs)
	bad := 0
	for i, x := range xs {
		if want := math.Log1p(x); !sameBits(got[i], want) {
			if bad++; bad <= 10 {
				t.Errorf("log1p(%v = %#016x) = %v (%#016x), math.Log1p gives %v (%#016x)",
					x, math.Float64bits(x), got[i], math.Float64bits(got[i]), want, math.Float64bits(want))
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d values differ", bad, len(xs))
	}
	// In place (dst is src), as the kernel does on int64 input.
	inPlace := append([]float64(nil), xs...)
	log1pInto(inPlace, inPlace)
	for i, x := range xs {
		if !sameBits(inPlace[i], math.Log1p(x)) {
			t.Fatalf("in place: log1p(%v) = %v, want %v", x, inPlace[i], math.Log1p(x))
		}
	}
	// Lengths that are not a multiple of the chunk, and empty.
	for _, n := range []int{0, 1, 255, 257, 1000} {
		got := make([]float64, n)
		log1pInto(got, xs[:n])
		for i := range n {
			if !sameBits(got[i], math.Log1p(xs[i])) {
				t.Fatalf("n=%d: row %d differs", n, i)
			}
		}
	}
}

func FuzzLog1pInto(f *testing.F) {
	for _, x := range []float64{0, 0.5, 1, 3, 0.4142, -0.29, 1e-9, 1e300, -1, math.NaN()} {
		f.Add(math.Float64bits(x), math.Float64bits(x*3))
	}
	f.Fuzz(func(t *testing.T, a, b uint64) {
		xs := []float64{math.Float64frombits(a), math.Float64frombits(b)}
		got := make([]float64, 2)
		log1pInto(got, xs)
		for i, x := range xs {
			if want := math.Log1p(x); !sameBits(got[i], want) {
				t.Fatalf("log1p(%#016x) = %#016x, want %#016x", math.Float64bits(x), math.Float64bits(got[i]), math.Float64bits(want))
			}
		}
	})
}
