package gen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// expr is an expression of the DSL: a raw column or an op over
// expressions, with its named parameters already written out.
type expr struct {
	op     string
	col    string // op == "col"
	args   []*expr
	params string // "buckets=1000003", "" for none
}

func col(name string) *expr { return &expr{op: "col", col: name} }

func op(name string, params string, args ...*expr) *expr {
	return &expr{op: name, args: args, params: params}
}

// String writes e in the DSL.
func (e *expr) String() string { return e.print(nil) }

// print writes e, writing a subexpression that lets names by its name.
func (e *expr) print(lets map[string]string) string {
	if e.op == "col" {
		return strconv.Quote(e.col)
	}
	var b strings.Builder
	b.WriteString(e.op)
	b.WriteByte('(')
	for i, a := range e.args {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(a.ref(lets))
	}
	if e.params != "" {
		b.WriteString(", ")
		b.WriteString(e.params)
	}
	b.WriteByte(')')
	return b.String()
}

// ref writes an argument: a let's name, or the expression.
func (e *expr) ref(lets map[string]string) string {
	if e.op == "col" {
		return "col(" + strconv.Quote(e.col) + ")"
	}
	if name, ok := lets[e.String()]; ok {
		return name
	}
	return e.print(lets)
}

// walk calls fn on e and every subexpression, parents first.
func (e *expr) walk(fn func(*expr)) {
	fn(e)
	for _, a := range e.args {
		a.walk(fn)
	}
}

// Component is one model input of the population.
type Component struct {
	// Name is the model input's name in every graph that has it.
	Name string `json:"name"`
	// Family names the ops; the variants of a family differ in parameters.
	Family  string `json:"family"`
	Variant int    `json:"variant"`
	// DSL is the expression.
	DSL string `json:"dsl"`
	// Rank is the popularity rank (1: the most popular); Weight is
	// 1/Rank^s over the sum of every component's (Config.ZipfS).
	Rank   int     `json:"rank"`
	Weight float64 `json:"weight"`

	e *expr
}

// Parameter variants, in the order variants take them: the first is a
// family's common choice. Variants beyond a list's length cycle through
// it with a different salt or cap, so any Config.Variants is possible.
var (
	bucketSizes = []int64{1000003, 100003, 10007, 1009, 2000003, 500009, 50021, 5003}
	catBuckets  = []int64{1000, 10007, 100003, 1009, 50021, 5003, 200003, 20011}
	priceBounds = []string{
		"[0.1, 0.5, 1, 5]",
		"[0.25, 0.5, 1, 2, 5, 10]",
		"[1, 10, 100]",
		"[0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50]",
		"[0.5, 1, 1.5, 2, 3]",
		"[2, 4, 8, 16, 32, 64]",
		"[0.01, 0.1, 1, 10, 100, 1000]",
		"[0.3, 0.6, 0.9, 1.2]",
	}
	lenBounds = []string{"[1, 2, 4, 8]", "[1, 3, 10]", "[2, 5, 10, 20]", "[1, 2, 3, 4, 5, 6]", "[4, 16, 64]", "[1, 8]", "[3, 6, 9, 12]", "[2, 32]"}
	clipHi    = []string{"1000", "100", "10000", "50", "500", "5000", "250", "2500"}
	ngramCap  = []int64{32, 16, 64, 8, 128, 24, 48, 12}
)

// bucketParams returns the parameters of variant v of a hash: the v-th
// bucket count, salted once the list is exhausted.
func bucketParams(sizes []int64, v int) string {
	p := fmt.Sprintf("buckets=%d", sizes[v%len(sizes)])
	if s := v / len(sizes); s > 0 {
		p += fmt.Sprintf(", salt=%d", s)
	}
	return p
}

// crossParams returns the parameters of variant v of a cross (which has no
// salt): the v-th bucket count, plus one per pass through the list.
func crossParams(v int) string {
	return fmt.Sprintf("buckets=%d", bucketSizes[v%len(bucketSizes)]+int64(v/len(bucketSizes)))
}

// family is a set of components of the same ops.
type family struct {
	name string
	// make returns variant v's expression and a short parameter tag.
	make func(v int) (*expr, string)
}

// text pipelines: a raw text column, normalized, tokenized.
var (
	textCols = []struct{ col, tag string }{{"query", "query"}, {"ad_title", "title"}}
	norms    = []struct {
		tag string
		f   func(*expr) *expr
	}{
		{"lower", func(x *expr) *expr { return op("lower", "", x) }},
		{"clean", func(x *expr) *expr { return op("lower", "", op("strip_punct", "", x)) }},
	}
)

func unigrams(c string, n int) *expr { return op("unigrams", "", norms[n].f(col(c))) }

// tokens of kind k (0 unigrams, 1 bigrams, 2 trigrams; n-grams capped at
// cap tokens) of column c under normalization n.
func tokens(c string, n, k int, cap int64) *expr {
	if k == 0 {
		return unigrams(c, n)
	}
	return op("truncate", fmt.Sprintf("max=%d", cap), op("ngrams", fmt.Sprintf("n=%d", k+1), norms[n].f(col(c))))
}

var tokTags = []string{"uni", "bi", "tri"}

// families returns the population's families, in a fixed order.
func families() []family {
	var fs []family
	for _, tc := range textCols {
		for n := range norms {
			for k := range tokTags {
				name := fmt.Sprintf("%s_%s_%s", tc.tag, norms[n].tag, tokTags[k])
				// Token ids: the n-gram families vary the cap with the
				// buckets, so their variants differ in two parameters.
				fs = append(fs, family{name + "_ids", func(v int) (*expr, string) {
					return op("hash", bucketParams(bucketSizes, v), tokens(tc.col, n, k, ngramCap[v%len(ngramCap)])), fmt.Sprintf("v%d", v)
				}})
				fs = append(fs, family{name + "_len", func(v int) (*expr, string) {
					return lengthVariant(tokens(tc.col, n, k, ngramCap[0]), v), fmt.Sprintf("v%d", v)
				}})
			}
			fs = append(fs, family{fmt.Sprintf("%s_%s_set_ids", tc.tag, norms[n].tag), func(v int) (*expr, string) {
				return op("hash", bucketParams(bucketSizes, v), op("dedupe", "", unigrams(tc.col, n))), fmt.Sprintf("v%d", v)
			}})
		}
	}
	for n := range norms {
		q, t := func() *expr { return unigrams("query", n) }, func() *expr { return unigrams("ad_title", n) }
		tag := norms[n].tag
		fs = append(fs,
			family{"overlap_" + tag + "_cat", func(v int) (*expr, string) {
				// The paper's Figure 2 component; variants cap the list.
				e := op("concat", "", op("intersect", "", q(), t()), col("ad_category"))
				if v > 0 {
					e = op("truncate", fmt.Sprintf("max=%d", ngramCap[(v-1)%len(ngramCap)]+int64((v-1)/len(ngramCap))), e)
				}
				return e, fmt.Sprintf("v%d", v)
			}},
			family{"overlap_" + tag + "_ids", func(v int) (*expr, string) {
				return op("hash", bucketParams(bucketSizes, v), op("intersect", "", q(), t())), fmt.Sprintf("v%d", v)
			}},
			family{"overlap_" + tag + "_len", func(v int) (*expr, string) {
				return lengthVariant(op("intersect", "", q(), t()), v), fmt.Sprintf("v%d", v)
			}},
			family{"union_" + tag + "_ids", func(v int) (*expr, string) {
				return op("hash", bucketParams(bucketSizes, v), op("union", "", q(), t())), fmt.Sprintf("v%d", v)
			}},
			family{"category_x_query_" + tag, func(v int) (*expr, string) {
				return op("cross", crossParams(v), col("ad_category"), q()), fmt.Sprintf("v%d", v)
			}},
		)
	}
	for _, c := range []string{"ad_category", "advertiser_id", "country", "device"} {
		fs = append(fs, family{c + "_ids", func(v int) (*expr, string) {
			return op("hash", bucketParams(catBuckets, v), col(c)), fmt.Sprintf("v%d", v)
		}})
	}
	pairs := [][2]string{{"country", "device"}, {"ad_category", "country"}, {"ad_category", "device"}}
	for _, p := range pairs {
		fs = append(fs, family{p[0] + "_x_" + p[1], func(v int) (*expr, string) {
			return op("cross", crossParams(v), col(p[0]), col(p[1])), fmt.Sprintf("v%d", v)
		}})
	}
	fs = append(fs,
		family{"price_bucket", func(v int) (*expr, string) {
			b := priceBounds[v%len(priceBounds)]
			if v >= len(priceBounds) {
				// Past the list: shift every boundary.
				b = shiftBounds(b, v/len(priceBounds))
			}
			return op("bucketize", "boundaries="+b, col("bid_price")), fmt.Sprintf("v%d", v)
		}},
		family{"log_price", func(v int) (*expr, string) {
			hi := clipHi[v%len(clipHi)]
			if k := v / len(clipHi); k > 0 {
				hi += "." + strconv.Itoa(k)
			}
			return op("log1p", "", op("clip", "lo=0, hi="+hi, op("fill_missing", "default=0", col("bid_price")))), fmt.Sprintf("v%d", v)
		}},
		family{"advertiser_bucket", func(v int) (*expr, string) {
			b := priceBounds[(v+2)%len(priceBounds)]
			if k := v / len(priceBounds); k > 0 {
				b = shiftBounds(b, k)
			}
			return op("bucketize", "boundaries="+b, op("fill_missing", "default=0", col("advertiser_id"))), fmt.Sprintf("v%d", v)
		}},
	)
	return fs
}

// lengthVariant is variant v of a list's length: the length itself, then
// bucketized at lenBounds (shifted once the list is exhausted).
func lengthVariant(list *expr, v int) *expr {
	e := op("length", "", list)
	if v == 0 {
		return e
	}
	b := lenBounds[(v-1)%len(lenBounds)]
	if k := (v - 1) / len(lenBounds); k > 0 {
		b = shiftBounds(b, k)
	}
	return op("bucketize", "boundaries="+b, e)
}

// shiftBounds adds k to every boundary of a boundaries list.
func shiftBounds(list string, k int) string {
	parts := strings.Split(strings.Trim(list, "[]"), ", ")
	for i, p := range parts {
		f, _ := strconv.ParseFloat(p, 64)
		parts[i] = strconv.FormatFloat(f+float64(k), 'g', -1, 64)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// population builds the components and ranks them (doc.go, Popularity).
func population(variants int, s float64, r *rand.Rand) []Component {
	fs := families()
	order := r.Perm(len(fs))
	var out []Component
	for v := range variants {
		for _, i := range order {
			e, tag := fs[i].make(v)
			out = append(out, Component{Name: fs[i].name + "_" + tag, Family: fs[i].name, Variant: v, DSL: e.String(), e: e})
		}
	}
	sum := 0.0
	for i := range out {
		out[i].Rank = i + 1
		out[i].Weight = 1 / math.Pow(float64(i+1), s)
		sum += out[i].Weight
	}
	for i := range out {
		out[i].Weight /= sum
	}
	return out
}
