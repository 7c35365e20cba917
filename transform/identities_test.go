package transform

import (
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/apache/arrow/go/v15/arrow"

	"github.com/sigdata/sig/internal/rowref"
)

// The op semantics depend on Go's Unicode tables (doc.go). A Go release
// that moves to a new Unicode version may change lower, strip_punct and the
// tokenizer for some code points, which would change memoized columns
// without a key change. This test fails first: bump the versions of lower,
// strip_punct, unigrams and ngrams (and update doc.go) before accepting it.
func TestUnicodeVersionIsDocumented(t *testing.T) {
	if unicode.Version != UnicodeVersion {
		t.Fatalf("Go's Unicode tables are version %s, the op semantics are documented for %s: bump the op versions of lower, strip_punct, unigrams and ngrams, then UnicodeVersion",
			unicode.Version, UnicodeVersion)
	}
}

// Canonicalization rewrites lower(lower(x)) to lower(x), which is only
// sound if the simple lowercase mapping is idempotent on every code point.
func TestLowerIdempotentEveryRune(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		l := unicode.ToLower(r)
		if ll := unicode.ToLower(l); ll != l {
			t.Errorf("unicode.ToLower is not idempotent on %U: %U then %U", r, l, ll)
		}
	}
}

// everyRune is a string column with one row per code point (surrogates
// included: they are invalid UTF-8 when encoded), each framed by ASCII so
// that tokenization and byte handling around it are exercised, plus rows
// of invalid UTF-8.
func everyRune() rowref.Column {
	c := rowref.Column{Type: rowref.String}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		var b []byte
		if utf8.ValidRune(r) {
			b = utf8.AppendRune([]byte("A"), r)
		} else {
			// A surrogate, encoded as WTF-8 would: invalid in UTF-8.
			b = []byte{'A', byte(0xe0 | r>>12), byte(0x80 | (r>>6)&0x3f), byte(0x80 | r&0x3f)}
		}
		c.Str = append(c.Str, string(append(b, 'z')))
	}
	for b := 0x80; b < 0x100; b++ {
		c.Str = append(c.Str, string([]byte{'x', byte(b), 'Y', byte(b), byte(b)}))
	}
	return c
}

// TestStringOpsEveryRune checks lower, strip_punct and unigrams on every
// code point against the reference, and the idempotence canonicalization
// relies on: lower(lower(x)) == lower(x), strip_punct(strip_punct(x)) ==
// strip_punct(x), at the level of whole columns through the kernels.
func TestStringOpsEveryRune(t *testing.T) {
	ref := everyRune()
	in := toArrow(ref)
	defer in.Release()
	reg := Default()
	run := func(op string, a arrow.Array) arrow.Array {
		t.Helper()
		k, _ := reg.Kernel(op)
		out, err := runKernel(k, []arrow.Array{a}, &Node{Op: op})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, tc := range []struct {
		op         string
		ref        func(rowref.Column) rowref.Column
		idempotent bool
	}{
		{"lower", rowref.Lower, true},
		{"strip_punct", rowref.StripPunct, true},
		{"unigrams", rowref.Unigrams, false},
	} {
		once := run(tc.op, in)
		if d := diffColumns(tc.ref(ref), fromArrow(once)); d != "" {
			t.Errorf("%s over every rune: %s", tc.op, d)
		}
		if tc.idempotent {
			twice := run(tc.op, once)
			if d := diffColumns(fromArrow(once), fromArrow(twice)); d != "" {
				t.Errorf("%s is not idempotent: %s", tc.op, d)
			}
			twice.Release()
		}
		once.Release()
	}
}

// TestSetIdentities checks dedupe(x) == union(x, x) == intersect(x, x) ==
// union(x) == intersect(x) on random lists, and that union and intersect
// are commutative and associative (canonicalization sorts and flattens
// them), through the kernels.
func TestSetIdentities(t *testing.T) {
	reg := Default()
	run := func(op string, in ...arrow.Array) rowref.Column {
		t.Helper()
		k, _ := reg.Kernel(op)
		out, err := runKernel(k, in, &Node{Op: op})
		if err != nil {
			t.Fatal(err)
		}
		defer out.Release()
		return fromArrow(out)
	}
	for seed := range uint64(20) {
		g := newGen(seed)
		for _, typ := range []rowref.Type{rowref.ListString, rowref.ListInt64} {
			x := toArrow(g.column(typ, 200, seed%2 == 0))
			y := toArrow(g.column(typ, 200, true))
			z := toArrow(g.column(typ, 200, true))
			dedupe := run("dedupe", x)
			for _, eq := range []struct {
				name string
				got  rowref.Column
				want rowref.Column
			}{
				{"union(x, x) == dedupe(x)", run("union", x, x), dedupe},
				{"intersect(x, x) == dedupe(x)", run("intersect", x, x), dedupe},
				{"union(x) == dedupe(x)", run("union", x), dedupe},
				{"intersect(x) == dedupe(x)", run("intersect", x), dedupe},
				{"dedupe(dedupe(x)) == dedupe(x)", run("dedupe", toArrow(dedupe)), dedupe},
				{"union(x, y) == union(y, x)", run("union", x, y), run("union", y, x)},
				{"intersect(x, y) == intersect(y, x)", run("intersect", x, y), run("intersect", y, x)},
				{"union(union(x, y), z) == union(x, y, z)", run("union", toArrow(run("union", x, y)), z), run("union", x, y, z)},
				{"intersect(intersect(x, y), z) == intersect(x, y, z)", run("intersect", toArrow(run("intersect", x, y)), z), run("intersect", x, y, z)},
				{"union(dedupe(x), y) == union(x, y)", run("union", toArrow(dedupe), y), run("union", x, y)},
				{"intersect(dedupe(x), y) == intersect(x, y)", run("intersect", toArrow(dedupe), y), run("intersect", x, y)},
				{"concat(concat(x, y), z) == concat(x, y, z)", run("concat", toArrow(run("concat", x, y)), z), run("concat", x, y, z)},
			} {
				if d := diffColumns(eq.want, eq.got); d != "" {
					t.Fatalf("seed %d %s: %s: %s", seed, typ, eq.name, d)
				}
			}
			x.Release()
			y.Release()
			z.Release()
		}
	}
}

// TestRewriteIdentities checks the other identities canonicalization
// applies: ngrams(s, n=1) == unigrams(s) and truncate(truncate(x, max=a),
// max=b) == truncate(x, max=min(a, b)).
func TestRewriteIdentities(t *testing.T) {
	reg := Default()
	run := func(op string, params []Param, in ...arrow.Array) rowref.Column {
		t.Helper()
		k, _ := reg.Kernel(op)
		out, err := runKernel(k, in, &Node{Op: op, Params: params})
		if err != nil {
			t.Fatal(err)
		}
		defer out.Release()
		return fromArrow(out)
	}
	for seed := range uint64(10) {
		g := newGen(seed)
		s := toArrow(g.column(rowref.String, 300, false))
		if d := diffColumns(run("unigrams", nil, s), run("ngrams", []Param{pInt("n", 1)}, s)); d != "" {
			t.Fatalf("ngrams(s, n=1) != unigrams(s): %s", d)
		}
		for _, typ := range []rowref.Type{rowref.ListString, rowref.ListInt64} {
			x := toArrow(g.column(typ, 300, false))
			for _, ab := range [][2]int64{{0, 3}, {3, 0}, {2, 5}, {5, 2}, {4, 4}} {
				inner := toArrow(run("truncate", []Param{pInt("max", ab[0])}, x))
				got := run("truncate", []Param{pInt("max", ab[1])}, inner)
				want := run("truncate", []Param{pInt("max", min(ab[0], ab[1]))}, x)
				if d := diffColumns(want, got); d != "" {
					t.Fatalf("truncate(truncate(x, %d), %d): %s", ab[0], ab[1], d)
				}
			}
		}
	}
}
