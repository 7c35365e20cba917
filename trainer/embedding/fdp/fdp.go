package fdp

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/sigdata/sig/canon"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/trainer/embedding/partition"
	"github.com/sigdata/sig/trainer/model"
)

// DefaultRate is the fraction of batches profiled (paper V.C: 3%).
const DefaultRate = 0.03

// Limits of a profile.
const (
	// HotRows is how many of a table's hottest rows a profile reports.
	HotRows = 64
	// keepRows bounds the row counts kept per table between batches.
	keepRows = 4096
	// maxBuckets bounds the valency histogram (the proto's limit).
	maxBuckets = 1024
)

// Sampled reports whether step (1-based) is profiled: step 1, then each step
// with probability rate, decided by a hash of (seed, step).
func Sampled(seed, step uint64, rate float64) bool {
	if rate <= 0 {
		return false
	}
	if step == 1 || rate >= 1 {
		return true
	}
	x := seed ^ step*0x9e3779b97f4a7c15
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11)/(1<<53) < rate
}

// Table names one profiled table: Feature is the key its statistics are
// stored under (the feature's component key, see Keys in the package doc),
// Vocab its rows (feature id mod Vocab is the row).
type Table struct {
	Feature canon.Key
	Vocab   int64
}

type tableProf struct {
	Table
	examples, values uint64
	unique           uint64 // sum over batches
	hist             []uint64
	counts           map[int64]uint64
}

// Profiler accumulates the statistics of sampled batches. Not safe for
// concurrent use.
type Profiler struct {
	tables  []tableProf
	batches uint64
	load    []float64 // per SparseCore bytes, summed over batches
}

// NewProfiler profiles the given tables, in the order of a batch's sparse
// columns.
func NewProfiler(tables []Table) *Profiler {
	p := &Profiler{}
	for _, t := range tables {
		p.tables = append(p.tables, tableProf{Table: t, counts: map[int64]uint64{}})
	}
	return p
}

// Batches is the number of batches profiled since the last Reset.
func (p *Profiler) Batches() uint64 { return p.batches }

// Observe profiles one sampled batch and the per-SparseCore bytes its step
// moved under the plan in use (nil if not known).
func (p *Profiler) Observe(b *model.Examples, sparseCoreBytes []float64) {
	if len(b.Sparse) != len(p.tables) || b.Len() == 0 {
		return
	}
	p.batches++
	for t := range p.tables {
		tp := &p.tables[t]
		col := &b.Sparse[t]
		n := b.Len()
		tp.examples += uint64(n)
		tp.values += uint64(len(col.IDs))
		for j := 0; j < n; j++ {
			v := int(col.Offsets[j+1] - col.Offsets[j])
			v = min(v, maxBuckets-1)
			for len(tp.hist) <= v {
				tp.hist = append(tp.hist, 0)
			}
			tp.hist[v]++
		}
		seen := make(map[int64]struct{}, len(col.IDs))
		for _, id := range col.IDs {
			row := int64(id % uint64(tp.Vocab))
			seen[row] = struct{}{}
			tp.counts[row]++
		}
		tp.unique += uint64(len(seen))
		if len(tp.counts) > keepRows {
			top := topRows(tp.counts, keepRows)
			tp.counts = make(map[int64]uint64, len(top))
			for _, rc := range top {
				tp.counts[rc.row] = rc.n
			}
		}
	}
	if len(sparseCoreBytes) > 0 {
		if len(p.load) != len(sparseCoreBytes) {
			p.load = make([]float64, len(sparseCoreBytes))
		}
		for i, x := range sparseCoreBytes {
			p.load[i] += x
		}
	}
}

// ResetLoad forgets the per-SparseCore load: the plan changed.
func (p *Profiler) ResetLoad() { p.load = nil }

// LoadImbalance is paper Eq. 1 over the per-SparseCore bytes of the profiled
// steps since the plan last changed: N·max B_i / Σ B_i, 0 if none.
func (p *Profiler) LoadImbalance() float64 { return LoadImbalance(p.load) }

// LoadImbalance is paper Eq. 1 (partition.LoadImbalance), but 0 for no
// bytes: the reports tell "nothing measured" from a balanced load.
func LoadImbalance(b []float64) float64 {
	if !slices.ContainsFunc(b, func(x float64) bool { return x > 0 }) {
		return 0
	}
	return partition.LoadImbalance(b)
}

type rowCount struct {
	row int64
	n   uint64
}

// topRows returns the k most counted rows, by count then row.
func topRows(counts map[int64]uint64, k int) []rowCount {
	all := make([]rowCount, 0, len(counts))
	for r, n := range counts {
		all = append(all, rowCount{r, n})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].n != all[j].n {
			return all[i].n > all[j].n
		}
		return all[i].row < all[j].row
	})
	if len(all) > k {
		all = all[:k]
	}
	return all
}

// Statistics are one feature's profile (proto sig.v1.FeatureStatistics).
type Statistics struct {
	Feature   canon.Key
	Model     string
	Batches   uint64
	BatchSize uint64 // mean examples per profiled batch
	// MeanValency is feature values per example; ValencyHistogram[i] the
	// fraction of examples with i values (the last bucket collects the
	// rest).
	MeanValency      float64
	ValencyHistogram []float64
	// MeanUniquePerBatch is the unique rows per batch at Vocab rows.
	MeanUniquePerBatch float64
	HotRows            []partition.RowFraction
	ZipfS              float64
	Vocab              int64
}

// Statistics returns the profile of every table with at least one batch
// (model names the profiling model), and resets the profiler's counts (not
// its load, which belongs to the plan).
func (p *Profiler) Statistics(model string) []Statistics {
	var out []Statistics
	for t := range p.tables {
		tp := &p.tables[t]
		if tp.examples == 0 {
			continue
		}
		s := Statistics{Feature: tp.Feature, Model: model, Batches: p.batches,
			BatchSize:          uint64(math.Round(float64(tp.examples) / float64(p.batches))),
			MeanValency:        float64(tp.values) / float64(tp.examples),
			MeanUniquePerBatch: float64(tp.unique) / float64(p.batches),
			Vocab:              tp.Vocab}
		for _, h := range tp.hist {
			s.ValencyHistogram = append(s.ValencyHistogram, float64(h)/float64(tp.examples))
		}
		top := topRows(tp.counts, len(tp.counts))
		for i, rc := range top {
			if i >= HotRows {
				break
			}
			s.HotRows = append(s.HotRows, partition.RowFraction{Row: rc.row, Fraction: float64(rc.n) / float64(tp.values)})
		}
		s.ZipfS = fitZipf(top)
		out = append(out, s)
		tp.examples, tp.values, tp.unique, tp.hist = 0, 0, 0, nil
		tp.counts = map[int64]uint64{}
	}
	p.batches = 0
	return out
}

// fitZipf fits log count = a - s·log rank by least squares over the rows
// counted at least twice (rank 1 = most counted); 0 with fewer than 3 such
// rows.
func fitZipf(top []rowCount) float64 {
	var n, sx, sy, sxx, sxy float64
	for i, rc := range top {
		if rc.n < 2 {
			break
		}
		x, y := math.Log(float64(i+1)), math.Log(float64(rc.n))
		n++
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	if n < 3 {
		return 0
	}
	den := n*sxx - sx*sx
	if den <= 0 {
		return 0
	}
	s := -(n*sxy - sx*sy) / den
	return math.Max(0, math.Min(s, 100))
}

// Proto converts to the statistics store's message: the feature's key in
// hex, as keys cross a process boundary.
func (s Statistics) Proto() *sigv1.FeatureStatistics {
	m := &sigv1.FeatureStatistics{Feature: s.Feature.String(), Model: s.Model, Batches: s.Batches, BatchSize: s.BatchSize,
		MeanValency: s.MeanValency, ValencyHistogram: s.ValencyHistogram, MeanUniquePerBatch: s.MeanUniquePerBatch,
		ZipfS: s.ZipfS, Vocab: uint64(s.Vocab)}
	for _, h := range s.HotRows {
		m.HotRows = append(m.HotRows, &sigv1.RowFrequency{Row: h.Row, Fraction: h.Fraction})
	}
	return m
}

// FromProto converts from the statistics store's message; its feature must
// be a component key (the store takes any name, and a statistic stored
// under another name is no feature of a SIG model).
func FromProto(m *sigv1.FeatureStatistics) (Statistics, error) {
	k, err := canon.ParseKey(m.GetFeature())
	if err != nil {
		return Statistics{}, fmt.Errorf("fdp: feature statistics: feature: %w", err)
	}
	s := Statistics{Feature: k, Model: m.GetModel(), Batches: m.GetBatches(), BatchSize: m.GetBatchSize(),
		MeanValency: m.GetMeanValency(), ValencyHistogram: m.GetValencyHistogram(), MeanUniquePerBatch: m.GetMeanUniquePerBatch(),
		ZipfS: m.GetZipfS(), Vocab: int64(min(m.GetVocab(), math.MaxInt64))}
	for _, h := range m.GetHotRows() {
		s.HotRows = append(s.HotRows, partition.RowFraction{Row: h.GetRow(), Fraction: h.GetFraction()})
	}
	return s, nil
}

// Measured turns the statistics into the partitioner's measured statistics
// for a table of vocab rows trained in batches of batch examples (see the
// package doc for which fields carry over when). Statistics that say
// nothing usable (no batches, or a mean valency that is not positive and
// finite) give nil.
func (s Statistics) Measured(vocab int64, batch int) *partition.Measured {
	if s.Batches == 0 || !(s.MeanValency > 0) || math.IsInf(s.MeanValency, 0) {
		return nil
	}
	m := &partition.Measured{MeanValency: s.MeanValency}
	var sum float64
	for v, w := range s.ValencyHistogram {
		if w > 0 && !math.IsInf(w, 0) {
			m.ValencyDist = append(m.ValencyDist, partition.ValencyWeight{Valency: v, Weight: w})
			sum += w * float64(v)
		}
	}
	if !(sum > 0) {
		m.ValencyDist = nil
	}
	if s.Vocab != vocab {
		return m
	}
	if s.BatchSize == uint64(batch) && s.MeanUniquePerBatch > 0 && s.MeanUniquePerBatch <= float64(vocab) {
		m.UniquePerBatch = s.MeanUniquePerBatch
	}
	var hot float64
	seen := map[int64]bool{}
	for _, h := range s.HotRows {
		if h.Row < 0 || h.Row >= vocab || seen[h.Row] || !(h.Fraction >= 0) || hot+h.Fraction > 1 {
			continue
		}
		seen[h.Row] = true
		hot += h.Fraction
		m.HotRows = append(m.HotRows, h)
	}
	if sortedVocabulary(m.HotRows, vocab) {
		m.TailZipfS = s.ZipfS
	}
	return m
}

// sortedVocabulary reports whether the hot rows look like the head of a
// frequency-sorted vocabulary: at least three quarters of them among the
// 4·len(hot) lowest row ids, in a vocabulary at least 8 times larger. Hashed
// ids put hot rows anywhere, so this almost never holds for them.
func sortedVocabulary(hot []partition.RowFraction, vocab int64) bool {
	k := int64(len(hot))
	if k < 4 || vocab < 8*k {
		return false
	}
	low := 0
	for _, h := range hot {
		if h.Row < 4*k {
			low++
		}
	}
	return 4*low >= 3*len(hot)
}
