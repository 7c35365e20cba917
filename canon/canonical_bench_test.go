package canon

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/sigdata/sig/transform"
)

// bigGraph writes a graph of about n nodes in the shape of real models: many
// inputs, each a few ops over token lists of a handful of raw columns, with
// shared subexpressions.
func bigGraph(n int, seed int64) string {
	rng := rand.New(rand.NewSource(seed))
	cols := []string{"query", "ad_title", "ad_category", "country", "device"}
	var b strings.Builder
	var lists []string
	for i, c := range cols {
		fmt.Fprintf(&b, "let t%d = unigrams(lower(col(%q)))\n", i, c)
		lists = append(lists, fmt.Sprintf("t%d", i))
	}
	nodes := 3 * len(cols)
	for i := 0; nodes < n; i++ {
		a, c := lists[rng.Intn(len(lists))], lists[rng.Intn(len(lists))]
		switch rng.Intn(4) {
		case 0:
			fmt.Fprintf(&b, "let l%d = intersect(%s, %s)\n", i, a, c)
			lists = append(lists, fmt.Sprintf("l%d", i))
			nodes++
		case 1:
			fmt.Fprintf(&b, "let l%d = union(%s, truncate(%s, max=%d))\n", i, a, c, 1+rng.Intn(20))
			lists = append(lists, fmt.Sprintf("l%d", i))
			nodes += 2
		case 2:
			fmt.Fprintf(&b, "input in%d = hash(%s, buckets=%d)\n", i, a, 1000+rng.Intn(100000))
			nodes++
		default:
			fmt.Fprintf(&b, "input in%d = length(concat(%s, %s))\n", i, a, c)
			nodes += 2
		}
	}
	return b.String()
}

func BenchmarkCanonicalize500(b *testing.B) {
	src := bigGraph(500, 1)
	g, err := transform.Parse([]byte(src), "", transform.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	s := transform.AdsSchema()
	reg := transform.Default()
	c, err := Canonicalize(g, s, reg, transform.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(g.Nodes)), "nodes")
	b.ReportMetric(float64(len(c.Nodes)), "canonical_nodes")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Canonicalize(g, s, reg, transform.Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
