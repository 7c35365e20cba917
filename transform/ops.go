package transform

import (
	"fmt"
	"math"
	"sort"
)

// ParamSpec describes one parameter of an op.
type ParamSpec struct {
	Name string
	Kind ValueKind
	// Required parameters have no default; optional ones get Default when
	// omitted, so that a graph's canonical form always carries every
	// parameter explicitly (brief: "defaults made explicit").
	Required bool
	Default  Value
	// Min and Max bound integer and number values (inclusive). For lists
	// they bound every element, and MaxLen bounds the length.
	Min, Max float64
	MaxLen   int
	// Check validates what a range cannot say (e.g. increasing boundaries).
	Check func(v Value) error
	Doc   string
}

// OpSpec describes an op: its signature, parameters, version and algebraic
// properties used by canonicalization.
type OpSpec struct {
	Name string
	// Version is part of every component key that uses the op; bumping it
	// invalidates all memoized data computed with the old semantics.
	Version int
	// MinArgs/MaxArgs bound the number of graph inputs; MaxArgs < 0 means
	// variadic.
	MinArgs, MaxArgs int
	Params           []ParamSpec
	// Commutative ops have their inputs sorted by key when canonicalized.
	Commutative bool
	// Associative ops are flattened: op(op(a, b), c) == op(a, b, c).
	Associative bool
	// Idempotent unary ops collapse: op(op(x)) == op(x).
	Idempotent bool
	// AcrossRows marks an op whose value for a row depends on other rows
	// of the block it runs over (a normalization by the block's mean, a
	// rank): its output over a block is not its outputs over the block's
	// parts one after the other, so memo data of a component using it
	// cannot be concatenated when blocks are compacted and is recomputed
	// (warehouse/compact, issue 28). Every built-in op computes each row
	// from that row alone.
	AcrossRows bool
	// Infer returns the output type for the given input types and the
	// (already range-checked, defaults filled) parameters.
	Infer func(in []Type, n *Node) (Type, error)
	// Signature and Doc are for humans: sigctl and the web UI show them.
	Signature string
	Doc       string
}

// Param returns the spec of parameter name.
func (o *OpSpec) Param(name string) (*ParamSpec, bool) {
	for i := range o.Params {
		if o.Params[i].Name == name {
			return &o.Params[i], true
		}
	}
	return nil, false
}

// Registry holds the op set. The zero value is empty; Default returns the
// built-in set.
type Registry struct {
	ops     map[string]*OpSpec
	kernels map[string]Kernel
	// viewReaders are the ops whose kernels read a list-view (truncate's
	// result) without a copy; the executor gives the others lists.
	viewReaders map[string]bool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{ops: map[string]*OpSpec{}, kernels: map[string]Kernel{}, viewReaders: map[string]bool{}}
}

// Register adds an op with its kernel.
func (r *Registry) Register(spec *OpSpec, k Kernel) {
	if _, dup := r.ops[spec.Name]; dup {
		panic("transform: op registered twice: " + spec.Name)
	}
	r.ops[spec.Name] = spec
	r.kernels[spec.Name] = k
}

// Kernel returns the kernel of op name (nil for col, which the executor
// reads from the record).
func (r *Registry) Kernel(name string) (Kernel, bool) {
	k, ok := r.kernels[name]
	return k, ok
}

// Op returns the spec of op name.
func (r *Registry) Op(name string) (*OpSpec, bool) {
	o, ok := r.ops[name]
	return o, ok
}

// Names returns the op names in sorted order.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.ops))
	for n := range r.ops {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// WithVersion returns a copy of the registry in which op name has the given
// version. Used to show that bumping a version changes every key using it.
func (r *Registry) WithVersion(name string, version int) *Registry {
	c := NewRegistry()
	for n, o := range r.ops {
		oc := *o
		if n == name {
			oc.Version = version
		}
		c.ops[n] = &oc
		c.kernels[n] = r.kernels[n]
		c.viewReaders[n] = r.viewReaders[n]
	}
	return c
}

var defaultRegistry = newDefaultRegistry()

// Default returns the built-in op registry. It must not be modified.
func Default() *Registry { return defaultRegistry }

// UnicodeVersion is the version of the Unicode tables (Go's package
// unicode) that lower, strip_punct, unigrams and ngrams are defined with. A
// test fails when Go's tables move, so that those ops' versions are bumped
// with it (doc.go, "Unicode").
const UnicodeVersion = "15.0.0"

const maxBuckets = 1 << 62

// hashable reports whether t is string or int64, scalar or list.
func hashable(t Type) bool { return t == String || t == Int64 || t == ListString || t == ListInt64 }

func argErr(n *Node, i int, got Type, want string) error {
	return fmt.Errorf("%s: argument %d has type %s, want %s", n.Op, i+1, got, want)
}

// sameElem checks that all inputs are strings/int64 (scalar or list) with
// one element type, and returns it.
func sameElem(in []Type, n *Node) (Type, error) {
	var elem Type
	for i, t := range in {
		if !hashable(t) {
			return TypeInvalid, argErr(n, i, t, "string, int64, list<string> or list<int64>")
		}
		if i == 0 {
			elem = t.Elem()
		} else if t.Elem() != elem {
			return TypeInvalid, fmt.Errorf("%s: argument %d has element type %s, but argument 1 has %s", n.Op, i+1, t.Elem(), elem)
		}
	}
	return elem, nil
}

func oneOf(t Type, n *Node, i int, want ...Type) error {
	for _, w := range want {
		if t == w {
			return nil
		}
	}
	s := ""
	for j, w := range want {
		if j > 0 {
			s += " or "
		}
		s += w.String()
	}
	return argErr(n, i, t, s)
}

func increasing(v Value) error {
	for i, f := range v.Floats {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("element %d is not finite", i+1)
		}
		if i > 0 && !(f > v.Floats[i-1]) {
			return fmt.Errorf("must be strictly increasing (element %d is %s after %s)", i+1, formatFloat(f), formatFloat(v.Floats[i-1]))
		}
	}
	return nil
}

func finite(v Value) error {
	if math.IsNaN(v.Float) || math.IsInf(v.Float, 0) {
		return fmt.Errorf("must be finite")
	}
	return nil
}

func newDefaultRegistry() *Registry {
	r := NewRegistry()
	strToSame := func(in []Type, n *Node) (Type, error) {
		if err := oneOf(in[0], n, 0, String, ListString); err != nil {
			return TypeInvalid, err
		}
		return in[0], nil
	}
	r.Register(&OpSpec{
		Name: "col", Version: 1, MinArgs: 0, MaxArgs: 0,
		Params:    []ParamSpec{{Name: "name", Kind: KindString, Required: true, Doc: "raw column name"}},
		Signature: `col("name")`,
		Doc:       "A raw column of the source. Its type is the schema's.",
		// Infer is special-cased in validation: it needs the schema.
	}, nil)
	r.Register(&OpSpec{
		Name: "lower", Version: 1, MinArgs: 1, MaxArgs: 1, Idempotent: true, Infer: strToSame,
		Signature: "lower(s)",
		Doc: "Unicode simple lowercase mapping of every code point (Go unicode.ToLower, " +
			"Unicode 15.0.0 tables), without context or locale (Σ -> σ, never ς; İ U+0130 -> i); " +
			"no normalization, no full case folding. Each byte of invalid UTF-8 becomes U+FFFD. " +
			"Elementwise on list<string>. null -> null.",
	}, kernelLower)
	r.Register(&OpSpec{
		Name: "strip_punct", Version: 1, MinArgs: 1, MaxArgs: 1, Idempotent: true, Infer: strToSame,
		Signature: "strip_punct(s)",
		Doc: "Deletes every code point in Unicode general category P (punctuation, Go unicode.IsPunct, " +
			"'_' included); symbols (S), letters, digits, marks and spaces are kept, spaces are not " +
			"collapsed. Each byte of invalid UTF-8 becomes U+FFFD. Elementwise on list<string>. " +
			"null -> null.",
	}, kernelStripPunct)
	r.Register(&OpSpec{
		Name: "unigrams", Version: 1, MinArgs: 1, MaxArgs: 1,
		Infer: func(in []Type, n *Node) (Type, error) {
			if err := oneOf(in[0], n, 0, String); err != nil {
				return TypeInvalid, err
			}
			return ListString, nil
		},
		Signature: "unigrams(s)",
		Doc: "Splits s into tokens: maximal runs of code points that are not white space " +
			"(Go unicode.IsSpace; invalid UTF-8 bytes are not space), in order, duplicates kept, bytes " +
			"copied unchanged (as strings.Fields). \"\" and all-space strings give []. null -> null.",
	}, kernelUnigrams)
	r.Register(&OpSpec{
		Name: "ngrams", Version: 1, MinArgs: 1, MaxArgs: 1,
		Params: []ParamSpec{{Name: "n", Kind: KindInt, Default: IntValue(2), Min: 1, Max: 16, Doc: "tokens per n-gram"}},
		Infer: func(in []Type, n *Node) (Type, error) {
			if err := oneOf(in[0], n, 0, String); err != nil {
				return TypeInvalid, err
			}
			return ListString, nil
		},
		Signature: "ngrams(s, n=2)",
		Doc: "Tokenizes s as unigrams does, then returns every run of n consecutive tokens joined " +
			"by one space (U+0020), in order (only the n-grams: ngrams(s, n=1) == unigrams(s)). " +
			"Fewer than n tokens give []. null -> null.",
	}, kernelNgrams)
	setInfer := func(in []Type, n *Node) (Type, error) {
		elem, err := sameElem(in, n)
		if err != nil {
			return TypeInvalid, err
		}
		return ListOf(elem), nil
	}
	r.Register(&OpSpec{
		Name: "intersect", Version: 1, MinArgs: 1, MaxArgs: -1, Commutative: true, Associative: true, Infer: setInfer,
		Signature: "intersect(a, b, ...)",
		Doc: "The values present in every argument, sorted ascending (bytewise for strings) and " +
			"unique. Scalars count as one-element lists; null counts as empty. Never null.",
	}, kernelIntersect)
	r.Register(&OpSpec{
		Name: "union", Version: 1, MinArgs: 1, MaxArgs: -1, Commutative: true, Associative: true, Infer: setInfer,
		Signature: "union(a, b, ...)",
		Doc: "The values present in any argument, sorted ascending (bytewise for strings) and " +
			"unique. Scalars count as one-element lists; null counts as empty. Never null.",
	}, kernelUnion)
	r.Register(&OpSpec{
		Name: "concat", Version: 1, MinArgs: 1, MaxArgs: -1, Associative: true, Infer: setInfer,
		Signature: "concat(a, b, ...)",
		Doc: "The elements of every argument in argument order, duplicates kept. A scalar " +
			"contributes one element; a null scalar or null list contributes none. Never null.",
	}, kernelConcat)
	r.Register(&OpSpec{
		Name: "dedupe", Version: 1, MinArgs: 1, MaxArgs: 1, Idempotent: true,
		Infer: func(in []Type, n *Node) (Type, error) {
			if err := oneOf(in[0], n, 0, ListString, ListInt64); err != nil {
				return TypeInvalid, err
			}
			return in[0], nil
		},
		Signature: "dedupe(l)",
		Doc: "The distinct values of l, sorted ascending (bytewise for strings): the same as " +
			"union(l), so intersect(x, x) == union(x, x) == dedupe(x). null -> []. Never null.",
	}, kernelDedupe)
	r.Register(&OpSpec{
		Name: "truncate", Version: 1, MinArgs: 1, MaxArgs: 1,
		Params: []ParamSpec{{Name: "max", Kind: KindInt, Default: IntValue(100), Min: 0, Max: 1 << 20, Doc: "maximum length"}},
		Infer: func(in []Type, n *Node) (Type, error) {
			if err := oneOf(in[0], n, 0, ListString, ListInt64); err != nil {
				return TypeInvalid, err
			}
			return in[0], nil
		},
		Signature: "truncate(l, max=100)",
		Doc:       "The first max elements of l. null -> null.",
	}, kernelTruncate)
	r.Register(&OpSpec{
		Name: "hash", Version: 1, MinArgs: 1, MaxArgs: 1,
		Params: []ParamSpec{
			{Name: "buckets", Kind: KindInt, Default: IntValue(1 << 20), Min: 1, Max: maxBuckets, Doc: "output range [0, buckets)"},
			{Name: "salt", Kind: KindInt, Default: IntValue(0), Min: math.MinInt64, Max: math.MaxInt64, Doc: "mixed into the hash"},
		},
		Infer: func(in []Type, n *Node) (Type, error) {
			if !hashable(in[0]) {
				return TypeInvalid, argErr(n, 0, in[0], "string, int64, list<string> or list<int64>")
			}
			if in[0].IsList() {
				return ListInt64, nil
			}
			return Int64, nil
		},
		Signature: "hash(x, buckets=1048576, salt=0)",
		Doc: "fmix64(XXH64(bytes(x), seed 0) + salt * 0x9E3779B97F4A7C15) mod buckets (arithmetic " +
			"mod 2^64), where bytes of a string are its bytes as stored and of an int64 its 8 " +
			"little-endian bytes, and fmix64 is MurmurHash3's 64-bit finalizer. Elementwise on lists, " +
			"order kept. null -> null.",
	}, kernelHash)
	r.Register(&OpSpec{
		Name: "cross", Version: 1, MinArgs: 2, MaxArgs: 2,
		Params: []ParamSpec{{Name: "buckets", Kind: KindInt, Default: IntValue(1 << 20), Min: 1, Max: maxBuckets, Doc: "output range [0, buckets)"}},
		Infer: func(in []Type, n *Node) (Type, error) {
			for i, t := range in {
				if !hashable(t) {
					return TypeInvalid, argErr(n, i, t, "string, int64, list<string> or list<int64>")
				}
			}
			return ListInt64, nil
		},
		Signature: "cross(a, b, buckets=1048576)",
		Doc: "For every pair (x of a, y of b), a-major, duplicates kept: " +
			"fmix64(XXH64(x)*0x9E3779B97F4A7C15 + XXH64(y)) mod buckets, with XXH64 and bytes as in " +
			"hash. Scalars count as one-element lists, null as empty. At most 65536 pairs a row " +
			"(more fails the op). Never null.",
	}, kernelCross)
	r.Register(&OpSpec{
		Name: "bucketize", Version: 1, MinArgs: 1, MaxArgs: 1,
		Params: []ParamSpec{{Name: "boundaries", Kind: KindFloatList, Required: true, MaxLen: 1024,
			Min: -math.MaxFloat64, Max: math.MaxFloat64, Check: increasing, Doc: "strictly increasing, finite"}},
		Infer: func(in []Type, n *Node) (Type, error) {
			if err := oneOf(in[0], n, 0, Int64, Float64); err != nil {
				return TypeInvalid, err
			}
			return Int64, nil
		},
		Signature: "bucketize(x, boundaries=[...])",
		Doc: "The number of boundaries b with b <= x, in [0, len(boundaries)]. int64 x is converted " +
			"to float64 first (rounding to nearest). -Inf -> 0, +Inf -> len(boundaries). " +
			"null and NaN -> null.",
	}, kernelBucketize)
	r.Register(&OpSpec{
		Name: "log1p", Version: 1, MinArgs: 1, MaxArgs: 1,
		Infer: func(in []Type, n *Node) (Type, error) {
			if err := oneOf(in[0], n, 0, Int64, Float64); err != nil {
				return TypeInvalid, err
			}
			return Float64, nil
		},
		Signature: "log1p(x)",
		Doc:       "math.Log1p(float64(x)): NaN below -1, -Inf at -1. null -> null.",
	}, kernelLog1p)
	r.Register(&OpSpec{
		Name: "clip", Version: 1, MinArgs: 1, MaxArgs: 1,
		Params: []ParamSpec{
			{Name: "lo", Kind: KindFloat, Required: true, Min: -math.MaxFloat64, Max: math.MaxFloat64, Check: finite},
			{Name: "hi", Kind: KindFloat, Required: true, Min: -math.MaxFloat64, Max: math.MaxFloat64, Check: finite},
		},
		Infer: func(in []Type, n *Node) (Type, error) {
			if err := oneOf(in[0], n, 0, Int64, Float64); err != nil {
				return TypeInvalid, err
			}
			lo, _ := n.Param("lo")
			hi, _ := n.Param("hi")
			if lo.Float > hi.Float {
				return TypeInvalid, fmt.Errorf("clip: lo (%s) is greater than hi (%s)", formatFloat(lo.Float), formatFloat(hi.Float))
			}
			return in[0], nil
		},
		Signature: "clip(x, lo=, hi=)",
		Doc: "min(max(x, lo), hi), as math.Max and math.Min order float64s (-0 < +0). For int64 x " +
			"the bounds are ceil(lo) and floor(hi), saturated to the int64 range (if ceil(lo) > " +
			"floor(hi), every value becomes floor(hi)). NaN stays NaN, bits unchanged. null -> null.",
	}, kernelClip)
	r.Register(&OpSpec{
		Name: "fill_missing", Version: 1, MinArgs: 1, MaxArgs: 1,
		Params: []ParamSpec{{Name: "default", Kind: KindScalar, Required: true, Min: -math.MaxFloat64, Max: math.MaxFloat64,
			Doc: "a string for string input, an integer for int64, a number for float64"}},
		Infer: func(in []Type, n *Node) (Type, error) {
			if err := oneOf(in[0], n, 0, String, Int64, Float64); err != nil {
				return TypeInvalid, err
			}
			return in[0], nil
		},
		Signature: "fill_missing(x, default=)",
		Doc:       "x, with nulls replaced by default (NaN and \"\" are not missing). Never null.",
	}, kernelFillMissing)
	r.Register(&OpSpec{
		Name: "length", Version: 1, MinArgs: 1, MaxArgs: 1,
		Infer: func(in []Type, n *Node) (Type, error) {
			if err := oneOf(in[0], n, 0, ListString, ListInt64); err != nil {
				return TypeInvalid, err
			}
			return Int64, nil
		},
		Signature: "length(l)",
		Doc:       "The number of (non-null) elements of l. null -> 0. Never null.",
	}, kernelLength)
	r.viewReaders["hash"], r.viewReaders["length"] = true, true
	return r
}
