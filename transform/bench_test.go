package transform

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/internal/rowref"
)

// Kernel throughput on one block of Ads-like data, side by side with the
// plain row-at-a-time implementation of the same op (internal/rowref) on
// Go strings and slices, in the same run:
//
//	BenchmarkOp/<case>/arrow   the kernel on Arrow arrays
//	BenchmarkOp/<case>/plain   rowref on the same data as Go slices
//
// Both sides are given their input ready (the conversion to Go slices is
// done before the timer) and are timed for the op alone, output included;
// collecting the previous iteration's output is not (rowMeter).
// Each reports rows/s (wall clock), rows/cpu-s (per second of the process's
// CPU time: the rate on one core whatever else the machine runs) and MB/s
// of input payload (string bytes, 8 bytes a number). bench/transform.sh
// runs them on one core and tabulates the ratios.

const benchRows = 1_000_000

// benchEnv holds the block as Arrow arrays only. The plain side's inputs
// are converted to Go slices for each case just before it runs and dropped
// after: Go slices of strings are full of pointers, and keeping every
// column in that form alive would make every garbage collection, on both
// sides, scan gigabytes that a real worker would not hold.
type benchEnv struct {
	rec   arrow.Record
	arrow map[string]arrow.Array // raw columns and derived inputs
	bytes map[string]int64       // payload bytes of each
}

var (
	benchOnce sync.Once
	benchData *benchEnv
)

// benchInputs derives the inputs of the benchmark cases from the raw
// columns, with the kernels (checked against rowref by the tests).
var benchInputs = []struct{ name, src string }{
	{"query_lower", `lower(col("query"))`},
	{"q_tokens", `unigrams(lower(col("query")))`},
	{"t_tokens", `unigrams(lower(col("ad_title")))`},
	{"t_tokens_raw", `unigrams(col("ad_title"))`},
}

func getBenchEnv(b *testing.B) *benchEnv {
	benchOnce.Do(func() {
		env := &benchEnv{arrow: map[string]arrow.Array{}, bytes: map[string]int64{}}
		env.rec = adsRecord(memory.DefaultAllocator, benchRows, 20240601)
		for i, f := range env.rec.Schema().Fields() {
			env.arrow[f.Name] = env.rec.Column(i)
		}
		for _, d := range benchInputs {
			g, _, err := ParseAndCheck([]byte("input x = "+d.src), "", AdsSchema(), Default(), Limits{})
			if err != nil {
				panic(err)
			}
			out, err := Run(g, Default(), env.rec, g.Inputs[0].Node)
			if err != nil {
				panic(err)
			}
			env.arrow[d.name] = out[0]
		}
		for name, a := range env.arrow {
			env.bytes[name] = payloadBytes(fromArrow(a))
		}
		benchData = env
	})
	if benchData == nil {
		b.Fatal("benchmark data setup failed")
	}
	return benchData
}

func payloadBytes(c rowref.Column) int64 {
	var n int64
	switch c.Type {
	case rowref.String:
		for _, s := range c.Str {
			n += int64(len(s))
		}
	case rowref.Int64, rowref.Float64:
		n = 8 * int64(c.Len())
	case rowref.ListString:
		for _, row := range c.LStr {
			for _, s := range row {
				n += int64(len(s))
			}
		}
	case rowref.ListInt64:
		for _, row := range c.LI64 {
			n += 8 * int64(len(row))
		}
	}
	return n
}

type benchCase struct {
	name   string
	op     string
	params []Param
	in     []string
	plain  func(in []rowref.Column) rowref.Column
}

func benchCases() []benchCase {
	return []benchCase{
		{"lower(query)", "lower", nil, []string{"query"}, func(in []rowref.Column) rowref.Column { return rowref.Lower(in[0]) }},
		{"lower(ad_title)", "lower", nil, []string{"ad_title"}, func(in []rowref.Column) rowref.Column { return rowref.Lower(in[0]) }},
		{"lower(title_tokens)", "lower", nil, []string{"t_tokens_raw"}, func(in []rowref.Column) rowref.Column { return rowref.Lower(in[0]) }},
		{"strip_punct(ad_title)", "strip_punct", nil, []string{"ad_title"}, func(in []rowref.Column) rowref.Column { return rowref.StripPunct(in[0]) }},
		{"unigrams(query)", "unigrams", nil, []string{"query_lower"}, func(in []rowref.Column) rowref.Column { return rowref.Unigrams(in[0]) }},
		{"ngrams(query,n=2)", "ngrams", []Param{pInt("n", 2)}, []string{"query_lower"}, func(in []rowref.Column) rowref.Column { return rowref.Ngrams(in[0], 2) }},
		{"intersect(q,t)", "intersect", nil, []string{"q_tokens", "t_tokens"}, func(in []rowref.Column) rowref.Column { return rowref.Intersect(in...) }},
		{"union(q,t)", "union", nil, []string{"q_tokens", "t_tokens"}, func(in []rowref.Column) rowref.Column { return rowref.Union(in...) }},
		{"concat(q,ad_category)", "concat", nil, []string{"q_tokens", "ad_category"}, func(in []rowref.Column) rowref.Column { return rowref.Concat(in...) }},
		{"dedupe(t)", "dedupe", nil, []string{"t_tokens"}, func(in []rowref.Column) rowref.Column { return rowref.Dedupe(in[0]) }},
		{"truncate(t,max=5)", "truncate", []Param{pInt("max", 5)}, []string{"t_tokens"}, func(in []rowref.Column) rowref.Column { return rowref.Truncate(in[0], 5) }},
		{"truncate(t,max=100)", "truncate", []Param{pInt("max", 100)}, []string{"t_tokens"}, func(in []rowref.Column) rowref.Column { return rowref.Truncate(in[0], 100) }},
		{"length(t)", "length", nil, []string{"t_tokens"}, func(in []rowref.Column) rowref.Column { return rowref.Length(in[0]) }},
		{"hash(q)", "hash", []Param{pInt("buckets", 1000003), pInt("salt", 0)}, []string{"q_tokens"}, func(in []rowref.Column) rowref.Column { return rowref.Hash(in[0], 1000003, 0) }},
		{"hash(ad_category)", "hash", []Param{pInt("buckets", 1000003), pInt("salt", 0)}, []string{"ad_category"}, func(in []rowref.Column) rowref.Column { return rowref.Hash(in[0], 1000003, 0) }},
		{"hash(advertiser_id)", "hash", []Param{pInt("buckets", 1000003), pInt("salt", 0)}, []string{"advertiser_id"}, func(in []rowref.Column) rowref.Column { return rowref.Hash(in[0], 1000003, 0) }},
		{"cross(country,q)", "cross", []Param{pInt("buckets", 1000003)}, []string{"country", "q_tokens"}, func(in []rowref.Column) rowref.Column {
			c, err := rowref.Cross(in[0], in[1], 1000003)
			if err != nil {
				panic(err)
			}
			return c
		}},
		{"bucketize(bid_price)", "bucketize", []Param{pFloats("boundaries", 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10)}, []string{"bid_price"}, func(in []rowref.Column) rowref.Column {
			return rowref.Bucketize(in[0], []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10})
		}},
		{"log1p(bid_price)", "log1p", nil, []string{"bid_price"}, func(in []rowref.Column) rowref.Column { return rowref.Log1p(in[0]) }},
		{"clip(bid_price)", "clip", []Param{pFloat("hi", 10), pFloat("lo", 0.05)}, []string{"bid_price"}, func(in []rowref.Column) rowref.Column { return rowref.Clip(in[0], 0.05, 10) }},
		{"clip(advertiser_id)", "clip", []Param{pFloat("hi", 50000), pFloat("lo", 1500)}, []string{"advertiser_id"}, func(in []rowref.Column) rowref.Column { return rowref.Clip(in[0], 1500, 50000) }},
		{"fill_missing(ad_category)", "fill_missing", []Param{{Name: "default", Value: StringValue("none")}}, []string{"ad_category"}, func(in []rowref.Column) rowref.Column { return rowref.FillMissing(in[0], "none") }},
		{"fill_missing(bid_price)", "fill_missing", []Param{pFloat("default", 0)}, []string{"bid_price"}, func(in []rowref.Column) rowref.Column { return rowref.FillMissing(in[0], 0.0) }},
	}
}

// rowMeter reports rows/s (wall clock) and rows/cpu-s (rows per second of
// the process's CPU time: on one core, the rate the code sustains, which a
// shared machine's other load does not change).
//
// Every iteration after the first starts from the same memory state on
// both sides: the last iteration's output collected (next, outside the
// timer and the CPU count), so that the output is mostly written into
// memory the process already has (the runtime may have returned some to
// the OS meanwhile). The collection's own cost is left out on both sides;
// before, with no collection inside the 5 iterations, it was not counted
// either. Without it, which side paid for faulting in fresh
// memory depended on the order the sides ran in and on what the cases
// before had left: fill_missing(ad_category) measured 0.83 with the arrow
// side first and 1.02 with the plain side first, truncate(t,max=5) 0.81 and
// 0.59, in the same suite on the same machine.
type rowMeter struct {
	b        *testing.B
	cpu      time.Duration // CPU time counted so far
	cpuStart time.Duration // start of the current counted stretch
	started  bool
}

// startRows is called right after b.ResetTimer.
func startRows(b *testing.B) *rowMeter {
	c, _ := cpuTime()
	return &rowMeter{b: b, cpuStart: c}
}

// measureRows runs one side of a case: f, b.N times, each producing the
// block's benchRows rows from payload bytes of input, under a rowMeter.
func measureRows(b *testing.B, payload int64, f func() error) {
	b.SetBytes(payload)
	b.ReportAllocs()
	runtime.GC()
	b.ResetTimer()
	m := startRows(b)
	for range b.N {
		m.next()
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	m.report(benchRows)
}

// released runs an arrow side and releases its output.
func released(out arrow.Array, err error) error {
	if err == nil {
		out.Release()
	}
	return err
}

// rowsOf checks a plain side's output length.
func rowsOf(c rowref.Column) error {
	if c.Len() != benchRows {
		return fmt.Errorf("%d rows, want %d", c.Len(), benchRows)
	}
	return nil
}

// next is called at the top of every iteration.
func (m *rowMeter) next() {
	if !m.started {
		m.started = true
		return
	}
	c, _ := cpuTime()
	m.cpu += c - m.cpuStart
	m.b.StopTimer()
	runtime.GC()
	m.b.StartTimer()
	m.cpuStart, _ = cpuTime()
}

func (m *rowMeter) report(rows int) {
	b := m.b
	total := float64(rows) * float64(b.N)
	b.ReportMetric(total/b.Elapsed().Seconds(), "rows/s")
	if c, ok := cpuTime(); ok {
		if cpu := m.cpu + c - m.cpuStart; cpu > 0 {
			b.ReportMetric(total/cpu.Seconds(), "rows/cpu-s")
		}
	}
}

func BenchmarkOp(b *testing.B) {
	env := getBenchEnv(b)
	for _, c := range benchCases() {
		var ins []arrow.Array
		var payload int64
		for _, name := range c.in {
			ins = append(ins, env.arrow[name])
			payload += env.bytes[name]
		}
		node := &Node{Op: c.op, Params: c.params}
		k, _ := Default().Kernel(c.op)
		b.Run(c.name+"/arrow", func(b *testing.B) {
			measureRows(b, payload, func() error { return released(k(ins, node)) })
		})
		var refs []rowref.Column // converted once per case, dropped after it
		b.Run(c.name+"/plain", func(b *testing.B) {
			if refs == nil {
				for _, a := range ins {
					refs = append(refs, fromArrow(a))
				}
			}
			measureRows(b, payload, func() error { return rowsOf(c.plain(refs)) })
		})
		refs = nil
	}
}

// truncateChains are truncate with what reads its result, as the executor
// runs them: truncate returns a list-view over its input's elements (see
// truncateText), which hash reads as it is, and which is copied into a
// list at a graph's output or before any other kernel (contiguous).
func truncateChains() []struct {
	name  string
	arrow func(t arrow.Array) (arrow.Array, error)
	plain func(t rowref.Column) rowref.Column
} {
	trunc := &Node{Op: "truncate", Params: []Param{pInt("max", 5)}}
	hash := &Node{Op: "hash", Params: []Param{pInt("buckets", 1000003), pInt("salt", 0)}}
	return []struct {
		name  string
		arrow func(t arrow.Array) (arrow.Array, error)
		plain func(t rowref.Column) rowref.Column
	}{
		{"hash(truncate(t,max=5))", func(t arrow.Array) (arrow.Array, error) {
			v, err := kernelTruncate([]arrow.Array{t}, trunc)
			if err != nil {
				return nil, err
			}
			defer v.Release()
			return kernelHash([]arrow.Array{v}, hash)
		}, func(t rowref.Column) rowref.Column { return rowref.Hash(rowref.Truncate(t, 5), 1000003, 0) }},
		// The plain loop's result needs no such copy: this row shows what
		// a graph ending in truncate pays for its output, at most once.
		{"truncate(t,max=5)+copy", func(t arrow.Array) (arrow.Array, error) {
			v, err := kernelTruncate([]arrow.Array{t}, trunc)
			if err != nil {
				return nil, err
			}
			defer v.Release()
			return contiguous(v)
		}, func(t rowref.Column) rowref.Column { return rowref.Truncate(t, 5) }},
	}
}

// BenchmarkTruncateChain runs truncateChains on the title tokens (arrow)
// and the same rowref ops (plain).
func BenchmarkTruncateChain(b *testing.B) {
	env := getBenchEnv(b)
	in := env.arrow["t_tokens"]
	for _, c := range truncateChains() {
		b.Run(c.name+"/arrow", func(b *testing.B) {
			measureRows(b, env.bytes["t_tokens"], func() error { return released(c.arrow(in)) })
		})
		b.Run(c.name+"/plain", func(b *testing.B) {
			ref := fromArrow(in)
			measureRows(b, env.bytes["t_tokens"], func() error { return rowsOf(c.plain(ref)) })
		})
	}
}

// typicalComponent is the kind of component the paper's models share:
// query/title token overlap concatenated with the ad category.
const typicalComponent = `input x = concat(intersect(unigrams(lower(col("query"))), unigrams(lower(col("ad_title")))), col("ad_category"))`

// BenchmarkTypicalComponent runs the typical component through Run over the
// whole block (arrow) and the same chain of rowref ops (plain).
func BenchmarkTypicalComponent(b *testing.B) {
	env := getBenchEnv(b)
	g, _, err := ParseAndCheck([]byte(typicalComponent), "", AdsSchema(), Default(), Limits{})
	if err != nil {
		b.Fatal(err)
	}
	payload := env.bytes["query"] + env.bytes["ad_title"] + env.bytes["ad_category"]
	b.Run("arrow", func(b *testing.B) {
		measureRows(b, payload, func() error {
			out, err := Run(g, Default(), env.rec, g.Inputs[0].Node)
			if err != nil {
				return err
			}
			out[0].Release()
			return nil
		})
	})
	b.Run("plain", func(b *testing.B) {
		q, t, cat := fromArrow(env.arrow["query"]), fromArrow(env.arrow["ad_title"]), fromArrow(env.arrow["ad_category"])
		measureRows(b, payload, func() error {
			qt := rowref.Unigrams(rowref.Lower(q))
			tt := rowref.Unigrams(rowref.Lower(t))
			return rowsOf(rowref.Concat(rowref.Intersect(qt, tt), cat))
		})
	})
}

// BenchmarkProgram is what a Program adds to the executor for a record
// already in the schema's types (a SIG block, a reader's unit): "run" is
// the typical component through Run, "program" the same through
// Program.Run, which conforms the record first; "conform" is that step
// alone over the three raw columns the component reads (a pass over the
// string offsets, nothing copied).
func BenchmarkProgram(b *testing.B) {
	env := getBenchEnv(b)
	p, err := CompileDSL([]byte(typicalComponent), "", AdsSchema(), Default(), Limits{})
	if err != nil {
		b.Fatal(err)
	}
	payload := env.bytes["query"] + env.bytes["ad_title"] + env.bytes["ad_category"]
	b.Run("run", func(b *testing.B) {
		measureRows(b, payload, func() error {
			out, err := Run(p.Graph(), Default(), env.rec, p.Graph().Inputs[0].Node)
			if err == nil {
				out[0].Release()
			}
			return err
		})
	})
	b.Run("program", func(b *testing.B) {
		measureRows(b, payload, func() error {
			out, err := p.Run(env.rec, nil)
			if err == nil {
				out[0].Release()
			}
			return err
		})
	})
	b.Run("conform", func(b *testing.B) {
		measureRows(b, payload, func() error {
			rec, err := p.Conform(env.rec)
			if err == nil {
				rec.Release()
			}
			return err
		})
	})
}

// TestBenchCasesMatchReference runs every benchmark case on a small slice
// of the benchmark data and checks the two sides agree, so that the
// benchmark compares like with like.
func TestBenchCasesMatchReference(t *testing.T) {
	rec := adsRecord(memory.DefaultAllocator, 3000, 7)
	defer rec.Release()
	cols := map[string]arrow.Array{}
	for i, f := range rec.Schema().Fields() {
		cols[f.Name] = rec.Column(i)
	}
	for _, d := range benchInputs {
		g, _, err := ParseAndCheck([]byte("input x = "+d.src), "", AdsSchema(), Default(), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		out, err := Run(g, Default(), rec, g.Inputs[0].Node)
		if err != nil {
			t.Fatal(err)
		}
		defer out[0].Release()
		cols[d.name] = out[0]
	}
	for _, c := range benchCases() {
		var ins []arrow.Array
		var refs []rowref.Column
		for _, name := range c.in {
			// Slice off the first row so that offsets are non-zero.
			a := array.NewSlice(cols[name], 1, int64(cols[name].Len()))
			defer a.Release()
			ins = append(ins, a)
			refs = append(refs, fromArrow(a))
		}
		k, _ := Default().Kernel(c.op)
		got, err := k(ins, &Node{Op: c.op, Params: c.params})
		if err != nil {
			t.Fatal(err)
		}
		if d := diffColumns(c.plain(refs), fromArrow(got)); d != "" {
			t.Errorf("%s: %s", c.name, d)
		}
		got.Release()
	}
	for _, c := range truncateChains() {
		a := array.NewSlice(cols["t_tokens"], 1, int64(cols["t_tokens"].Len()))
		defer a.Release()
		got, err := c.arrow(a)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := got.(*array.List); !ok {
			t.Errorf("%s: got a %T, want a list", c.name, got)
		}
		if d := diffColumns(c.plain(fromArrow(a)), fromArrow(got)); d != "" {
			t.Errorf("%s: %s", c.name, d)
		}
		got.Release()
	}
	g, _, err := ParseAndCheck([]byte(typicalComponent), "", AdsSchema(), Default(), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(g.Nodes); n != 9 {
		t.Fatalf("typical component has %d nodes", n)
	}
}
