package transform

import (
	"math"
	"runtime"
)

// log1pInto sets dst[i] = math.Log1p(src[i]) for every i, bit for bit, and
// faster than calling math.Log1p in a loop. dst may be src.
//
// Why: math.Log1p (FreeBSD's s_log1p.c) picks its path with branches on the
// value (|x| below sqrt(2)-1 or not; the mantissa of 1+x below sqrt(2)'s or
// not). On real columns such as prices those branches go either way from
// one row to the next, and the mispredictions cost about half of its time:
// 16 ns a value on BenchmarkOp's bid_price (its plain side), 8.5 ns on the
// same kind of values sorted (a one-off measurement, not kept). For the values
// on its two main paths (sqrt(2)/2-1 < x < 2^53, |x| >= 2^-29), log1pInto
// evaluates both choices and selects, so no branch depends on which path a
// value takes (only the test for the main paths is a branch, and it goes
// the same way for nearly every value of a real column), and runs in two
// passes over chunks of a column (the argument reduction, then the
// polynomial), so independent rows overlap in the CPU. Every other value
// (NaN, infinities, -1 and below, tiny |x|, x+1 a power of two) goes to
// math.Log1p itself, and so does every value on s390x, where math.Log1p is
// assembly of its own.
//
// The arithmetic is math.Log1p's, operation for operation and in the same
// order (Go 1.26 src/math/log1p.go), so the results are identical:
// TestLog1pIntoMatchesMath and FuzzLog1pInto compare bits. Each expression
// keeps math.Log1p's shape, so where the compiler fuses multiply-adds it
// fuses both alike (the tests pass built with GOAMD64=v3, which fuses).
func log1pInto(dst, src []float64) {
	const (
		sqrt2M1     = 4.142135623730950488017e-01  // sqrt(2)-1
		sqrt2HalfM1 = -2.928932188134524755992e-01 // sqrt(2)/2-1
		small       = 1.0 / (1 << 29)
		two53       = 1 << 53
		ln2Hi       = 6.93147180369123816490e-01
		ln2Lo       = 1.90821492927058770002e-10
		lp1         = 6.666666666666735130e-01
		lp2         = 3.999999999940941908e-01
		lp3         = 2.857142874366239149e-01
		lp4         = 2.222219843214978396e-01
		lp5         = 1.818357216161805012e-01
		lp6         = 1.531383769920937332e-01
		lp7         = 1.479819860511658591e-01
		chunk       = 256
	)
	dst = dst[:len(src)]
	if runtime.GOARCH == "s390x" {
		for i, x := range src {
			dst[i] = math.Log1p(x)
		}
		return
	}
	var xsave, fs, cs, ks [chunk]float64 // xsave: the inputs, for dst aliasing src
	var other [chunk]bool
	for lo := 0; lo < len(src); lo += chunk {
		xs := src[lo:min(lo+chunk, len(src))]
		out := dst[lo : lo+len(xs)]
		anyOther := false
		// Pass 1: the reduction 1+x = 2^k (1+f), with the correction c
		// for the rounding of 1+x. Rows with |x| < sqrt(2)-1 take k = 0,
		// f = x (math.Log1p's first branch) and ignore the rest.
		for j, x := range xs {
			xsave[j] = x
			reduceK0 := x < sqrt2M1
			u := 1.0 + x
			iu := math.Float64bits(u)
			k := int((iu >> 52) - 1023)
			c := selectF64(k > 0, 1.0-(u-x), x-(u-1.0))
			c /= u
			iu &= 0x000fffffffffffff
			below := iu < 0x0006a09e667f3bcd // mantissa of sqrt(2)
			u = selectF64(below, math.Float64frombits(iu|0x3ff0000000000000), math.Float64frombits(iu|0x3fe0000000000000))
			// Written as two selects, not one branch, so the compiler
			// emits conditional moves.
			kUp, iuUp := k+1, (0x0010000000000000-iu)>>2
			if !below {
				k = kUp
			}
			if !below {
				iu = iuUp
			}
			if reduceK0 {
				k, iu = 0, 1
			}
			fs[j] = selectF64(reduceK0, x, u-1.0)
			cs[j] = c
			ks[j] = float64(k)
			// iu == 0: f is tiny or zero, which math.Log1p treats apart.
			o := !(x > sqrt2HalfM1 && x < two53 && math.Abs(x) >= small) || iu == 0
			other[j] = o
			anyOther = anyOther || o
		}
		// Pass 2: log(1+f) by the polynomial, plus k ln 2.
		for j := range xs {
			f, c, fk := fs[j], cs[j], ks[j]
			hfsq := 0.5 * f * f
			s := f / (2.0 + f)
			z := s * s
			R := z * (lp1 + z*(lp2+z*(lp3+z*(lp4+z*(lp5+z*(lp6+z*lp7))))))
			k0 := f - (hfsq - s*(hfsq+R))
			kn := fk*ln2Hi - ((hfsq - (s*(hfsq+R) + (fk*ln2Lo + c))) - f)
			out[j] = selectF64(fk == 0, k0, kn)
		}
		if anyOther {
			for j := range xs {
				if other[j] {
					out[j] = math.Log1p(xsave[j])
				}
			}
		}
	}
}

// selectF64 is a if c, else b, computed without a branch.
func selectF64(c bool, a, b float64) float64 {
	var m uint64
	if c {
		m = 1
	}
	m = -m
	return math.Float64frombits(math.Float64bits(a)&m | math.Float64bits(b)&^m)
}
