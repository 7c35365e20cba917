package reader

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/gen"
)

// The guard's detection rate (issue 27): a memo block of n rows, m of them
// wrong, read by k jobs, each read checking s sampled rows with the
// guard's own code (readSeed, guardRows, checkSample: all of guardColumn
// but the I/O). A read catches the block when its sample holds a wrong
// row; the block is caught when any of the k reads does. Each trial is
// another block (another unit id, as a trainer's unit id is its block's
// reference) with m other wrong rows.
//
// Computed beside it: the probability that one read of s rows drawn
// without replacement (Floyd's algorithm) misses all m wrong rows is
// C(n-m, s) / C(n, s), so k independent reads catch the block with
// 1 - (C(n-m, s) / C(n, s))^k ("exact"); the 1 - (1 - m/n)^(k·s)
// is the same with rows drawn with replacement ("approx"), a hair lower.
// The sample of the unit alone (before issue 27: the seed of unit, block
// and component, the same for every job) is measured too: its k reads
// check the same rows, so its rate does not grow with k.

// detectionEnv is a raw block and the correct memo column of one
// component of ctr_small over it.
type detectionEnv struct {
	raw  arrow.Record
	gi   guardInput
	key  canon.Key
	good arrow.Array
}

func newDetectionEnv(tb testing.TB, n int) *detectionEnv {
	tb.Helper()
	g, err := transform.Parse([]byte(fleetGraphs(tb, "ctr_small")[0]), "ctr_small", transform.Limits{})
	if err != nil {
		tb.Fatal(err)
	}
	sc, reg := transform.AdsSchema(), transform.Default()
	c, err := canon.Canonicalize(g, sc, reg, transform.Limits{})
	if err != nil {
		tb.Fatal(err)
	}
	var comp *canon.Component
	for i := range c.Components {
		if c.Components[i].Input == "query_ids" {
			comp = &c.Components[i]
		}
	}
	if comp == nil {
		tb.Fatal("ctr_small has no input query_ids")
	}
	prog, err := transform.Compile(c.ComponentGraph(comp, "out"), sc, reg, transform.Limits{})
	if err != nil {
		tb.Fatal(err)
	}
	raw := gen.New(gen.Config{Seed: 27}).Records(n, n)[0]
	out, err := prog.Run(raw, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return &detectionEnv{raw: raw, gi: guardInput{prog: prog}, key: comp.Key, good: out[0]}
}

// wrongColumn returns the memo column with m random rows wrong: each holds
// the value of another row that differs from its own (a faulty worker's
// values: sound bytes, other rows' values).
func (e *detectionEnv) wrongColumn(tb testing.TB, m int, rng *rand.Rand) arrow.Array {
	tb.Helper()
	n := e.good.Len()
	donor := map[int]int{}
	for len(donor) < m {
		w := rng.IntN(n)
		if _, ok := donor[w]; ok {
			continue
		}
		for {
			if d := rng.IntN(n); !transform.SameRow(e.good, w, e.good, d) {
				donor[w] = d
				break
			}
		}
	}
	var parts []arrow.Array
	start := 0
	for r := 0; r < n; r++ {
		d, ok := donor[r]
		if !ok {
			continue
		}
		if start < r {
			parts = append(parts, array.NewSlice(e.good, int64(start), int64(r)))
		}
		parts = append(parts, array.NewSlice(e.good, int64(d), int64(d+1)))
		start = r + 1
	}
	if start < n {
		parts = append(parts, array.NewSlice(e.good, int64(start), int64(n)))
	}
	out, err := array.Concatenate(parts, memory.DefaultAllocator)
	for _, p := range parts {
		p.Release()
	}
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// detection is the measured and computed detection rates of one m, by k.
type detection struct {
	n, m, s, trials int
	ks              []int
	// perRead[i], perUnit[i]: blocks caught by ks[i] reads drawing their
	// samples per read (HEAD), and from the unit alone (before).
	perRead, perUnit []int
}

// measureDetection runs trials blocks of n rows with m wrong, each read
// max(ks) times with s sampled rows a read, both ways.
func (e *detectionEnv) measureDetection(tb testing.TB, m, s, trials int, ks []int, seed uint64) detection {
	tb.Helper()
	rng := rand.New(rand.NewPCG(seed, uint64(m)))
	d := detection{n: e.good.Len(), m: m, s: s, trials: trials, ks: ks, perRead: make([]int, len(ks)), perUnit: make([]int, len(ks))}
	kmax := ks[len(ks)-1]
	for trial := range trials {
		memoCol := e.wrongColumn(tb, m, rng)
		unitID := fmt.Sprintf("ads/b%06d", trial) // a trainer's unit: its block's reference
		unitSeed := guardSeed(unitID, unitID, e.key)
		firstRead, firstUnit := -1, -1 // the first read that caught it, each way
		for read := range kmax {
			for _, way := range []struct {
				seed  uint64
				first *int
			}{{readSeed(unitSeed, rng.Uint64()), &firstRead}, {unitSeed, &firstUnit}} {
				if *way.first >= 0 {
					continue
				}
				local, x, err := checkSample(e.raw, e.gi, memoCol, guardRows(int64(d.n), s, way.seed))
				if err != nil {
					tb.Fatal(err)
				}
				local.Release()
				if x >= 0 {
					*way.first = read
				}
			}
		}
		memoCol.Release()
		for i, k := range ks {
			if firstRead >= 0 && firstRead < k {
				d.perRead[i]++
			}
			if firstUnit >= 0 && firstUnit < k {
				d.perUnit[i]++
			}
		}
	}
	return d
}

// exact is 1 - (C(n-m, s) / C(n, s))^k: k reads of s rows drawn without
// replacement, one of them holding a wrong row.
func (d detection) exact(k int) float64 {
	miss := 1.0
	for i := 0; i < d.s; i++ {
		miss *= float64(d.n-d.m-i) / float64(d.n-i)
	}
	return 1 - math.Pow(miss, float64(k))
}

// approx is the 1 - (1 - m/n)^(k·s).
func (d detection) approx(k int) float64 {
	return 1 - math.Pow(1-float64(d.m)/float64(d.n), float64(k*d.s))
}

// TestGuardDetection: measured over 400 blocks of 2000 rows with 20
// wrong, read by up to 22 jobs, the rate at which reads drawing their own
// samples catch the block agrees with 1 - (C(n-m, s)/C(n, s))^k (within
// 4.5 standard deviations) and grows with k, from about 15% for one job to
// about 97% for 22. The sample of the unit alone catches no more blocks
// with 22 jobs than with one.
func TestGuardDetection(t *testing.T) {
	e := newDetectionEnv(t, 2000)
	ks := []int{1, 4, 22}
	d := e.measureDetection(t, 20, DefaultGuardSampleRows, 400, ks, 1)
	for i, k := range ks {
		p := d.exact(k)
		got := float64(d.perRead[i]) / float64(d.trials)
		if sd := math.Sqrt(p * (1 - p) / float64(d.trials)); math.Abs(got-p) > 4.5*sd+1e-9 {
			t.Errorf("k=%d: %d of %d blocks caught (%.3f), computed %.3f (sd %.3f)", k, d.perRead[i], d.trials, got, p, sd)
		}
		if i > 0 && d.perRead[i] <= d.perRead[i-1] {
			t.Errorf("k=%d catches %d blocks, k=%d %d: no growth with the jobs reading", k, d.perRead[i], ks[i-1], d.perRead[i-1])
		}
		if d.perUnit[i] != d.perUnit[0] {
			t.Errorf("the unit's own sample caught %d blocks with k=%d, %d with k=1: its reads check the same rows", d.perUnit[i], k, d.perUnit[0])
		}
	}
	t.Logf("per read %v, per unit %v of %d, computed %.3f %.3f %.3f", d.perRead, d.perUnit, d.trials, d.exact(1), d.exact(4), d.exact(22))
}

// BenchmarkGuardDetection reports, per m (wrong rows of 10000) and k
// (jobs reading the block), the blocks caught out of 2000 (16 rows a
// read): measured per read (per-read) and with the unit's own sample
// (per-unit), and computed (exact, approx; see above), as fractions.
// bench/guard-detection.sh makes bench/guard-detection.txt of them. The
// measurement runs once per m, for every k; -benchtime 1x.
func BenchmarkGuardDetection(b *testing.B) {
	const n, trials = 10000, 2000
	ks := []int{1, 2, 4, 8, 16, 22, 64}
	var once sync.Once
	var e *detectionEnv
	for _, m := range []int{1, 10, 50, 200} {
		var d detection
		var measured sync.Once
		for i, k := range ks {
			b.Run(fmt.Sprintf("m=%d/k=%d", m, k), func(b *testing.B) {
				once.Do(func() { e = newDetectionEnv(b, n) })
				measured.Do(func() { d = e.measureDetection(b, m, DefaultGuardSampleRows, trials, ks, 27) })
				for range b.N {
				}
				b.ReportMetric(float64(d.perRead[i])/trials, "per-read")
				b.ReportMetric(float64(d.perUnit[i])/trials, "per-unit")
				b.ReportMetric(d.exact(k), "exact")
				b.ReportMetric(d.approx(k), "approx")
				b.ReportMetric(float64(trials), "trials")
			})
		}
	}
}
