package fdp

import (
	"crypto/sha256"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/sigdata/sig/canon"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/trainer/embedding/partition"
	"github.com/sigdata/sig/trainer/model"
)

func TestSampledIsDeterministicAndNearRate(t *testing.T) {
	const n = 200_000
	hits := 0
	for s := uint64(1); s <= n; s++ {
		a := Sampled(42, s, DefaultRate)
		if a != Sampled(42, s, DefaultRate) {
			t.Fatal("not deterministic")
		}
		if a {
			hits++
		}
	}
	if got := float64(hits) / n; math.Abs(got-DefaultRate) > 0.002 {
		t.Errorf("sampled %.4f of steps, want %.2f", got, DefaultRate)
	}
	if !Sampled(42, 1, DefaultRate) || Sampled(42, 1, 0) || Sampled(42, 5, -1) {
		t.Error("step 1 must be sampled at a positive rate, nothing at rate <= 0")
	}
	same := 0
	for s := uint64(2); s < 10_000; s++ {
		if Sampled(1, s, 0.5) == Sampled(2, s, 0.5) {
			same++
		}
	}
	if same > 5500 {
		t.Errorf("seeds 1 and 2 agree on %d of 9998 steps: the seed is ignored", same)
	}
}

// key is a feature's key in these tests: any canon.Key, one per name.
func key(name string) canon.Key { return sha256.Sum256([]byte(name)) }

// TestFromProtoParsesTheKey: statistics enter the trainer with their
// feature's component key parsed; a store entry under a name that is not
// a key is refused, naming the field, not taken as some feature's.
func TestFromProtoParsesTheKey(t *testing.T) {
	k := key("f")
	s, err := FromProto(&sigv1.FeatureStatistics{Feature: k.String(), Batches: 1, MeanValency: 2})
	if err != nil || s.Feature != k || s.Batches != 1 {
		t.Fatalf("statistics of %s: %+v %v", k, s, err)
	}
	for _, name := range []string{"", "qa_overlap", k.String()[:63], strings.ToUpper(k.String()[:2]) + "zz" + k.String()[4:]} {
		if _, err := FromProto(&sigv1.FeatureStatistics{Feature: name}); err == nil || !strings.Contains(err.Error(), "feature") {
			t.Errorf("statistics of feature %q: %v, want an error naming the feature", name, err)
		}
	}
}

// batch builds a batch of one sparse column from per-example feature ids.
func batch(examples ...[]uint64) *model.Examples {
	e := &model.Examples{Sparse: []model.SparseColumn{{Offsets: []int32{0}}}}
	for i, ids := range examples {
		e.EventIDs = append(e.EventIDs, int64(i))
		e.Labels = append(e.Labels, 0)
		e.Sparse[0].IDs = append(e.Sparse[0].IDs, ids...)
		e.Sparse[0].Offsets = append(e.Sparse[0].Offsets, int32(len(e.Sparse[0].IDs)))
	}
	return e
}

// TestProfileByHand: two batches of a 10-row table, counted by hand.
func TestProfileByHand(t *testing.T) {
	p := NewProfiler([]Table{{Feature: key("f"), Vocab: 10}})
	// Batch 1: valencies 0, 2, 3; rows 1,1 | 3,13(=3),4: unique {1,3,4} = 3.
	p.Observe(batch(nil, []uint64{1, 11}, []uint64{3, 13, 4}), []float64{30, 10})
	// Batch 2: valencies 1, 1, 1; rows 1, 2, 1: unique {1,2} = 2.
	p.Observe(batch([]uint64{1}, []uint64{2}, []uint64{21}), []float64{10, 10})
	if li := p.LoadImbalance(); li != 2*40.0/60 {
		t.Errorf("load imbalance %v, want %v", li, 2*40.0/60)
	}
	st := p.Statistics("m")
	if len(st) != 1 {
		t.Fatalf("%d statistics", len(st))
	}
	s := st[0]
	want := Statistics{Feature: key("f"), Model: "m", Batches: 2, BatchSize: 3, MeanValency: 8.0 / 6,
		ValencyHistogram: []float64{1.0 / 6, 3.0 / 6, 1.0 / 6, 1.0 / 6}, MeanUniquePerBatch: 2.5, Vocab: 10,
		// Row 1: 4 of 8 values; row 3: 2; rows 2, 4: 1 each.
		HotRows: []partition.RowFraction{{Row: 1, Fraction: 0.5}, {Row: 3, Fraction: 0.25}, {Row: 2, Fraction: 0.125}, {Row: 4, Fraction: 0.125}},
		ZipfS:   0} // only two rows counted twice or more: no fit
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("statistics\n got %+v\nwant %+v", s, want)
	}
	if p.Batches() != 0 || len(p.Statistics("m")) != 0 {
		t.Error("Statistics did not reset the profile")
	}
	if got, err := FromProto(s.Proto()); err != nil || !reflect.DeepEqual(got, s) {
		t.Errorf("proto round trip: %+v %v", got, err)
	}
}

// zipfTable profiles batches whose ids are Zipf(s) ranks, either as row ids
// (a frequency-sorted vocabulary) or hashed.
func zipfTable(t *testing.T, s float64, vocab int64, sorted bool, batches int) Statistics {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 5))
	z := rand.NewZipf(rng, s, 1, uint64(vocab-1))
	p := NewProfiler([]Table{{Feature: key("z"), Vocab: vocab}})
	for b := 0; b < batches; b++ {
		var ex [][]uint64
		for e := 0; e < 512; e++ {
			var ids []uint64
			for v := 0; v < 1+e%4; v++ { // valencies 1..4
				r := z.Uint64()
				if !sorted {
					r = r*0x9e3779b97f4a7c15 + 12345
				}
				ids = append(ids, r)
			}
			ex = append(ex, ids)
		}
		p.Observe(batch(ex...), nil)
	}
	return p.Statistics("m")[0]
}

// TestZipfFitAndMeasured: the fitted exponent recovers the generator's, and
// Measured carries over what is valid at the consumer's vocabulary and
// batch size, with a Zipf tail only for a sorted vocabulary.
func TestZipfFitAndMeasured(t *testing.T) {
	const vocab = 1 << 16
	sorted := zipfTable(t, 1.2, vocab, true, 8)
	if math.Abs(sorted.ZipfS-1.2) > 0.15 {
		t.Errorf("fitted Zipf exponent %.3f, generator 1.2", sorted.ZipfS)
	}
	if math.Abs(sorted.MeanValency-2.5) > 1e-9 || len(sorted.ValencyHistogram) != 5 {
		t.Errorf("valency %v histogram %v", sorted.MeanValency, sorted.ValencyHistogram)
	}
	m := sorted.Measured(vocab, 512)
	if m.UniquePerBatch != sorted.MeanUniquePerBatch || len(m.HotRows) != HotRows || m.TailZipfS != sorted.ZipfS || len(m.ValencyDist) != 4 {
		t.Errorf("sorted, same shape: %+v", m)
	}
	hashed := zipfTable(t, 1.2, vocab, false, 8).Measured(vocab, 512)
	if hashed.TailZipfS != 0 || len(hashed.HotRows) != HotRows {
		t.Errorf("hashed ids taken for a sorted vocabulary: tail %v", hashed.TailZipfS)
	}
	other := sorted.Measured(vocab, 1024)
	if other.UniquePerBatch != 0 || len(other.HotRows) == 0 {
		t.Errorf("another batch size: %+v", other)
	}
	small := sorted.Measured(1000, 512)
	if small.UniquePerBatch != 0 || small.HotRows != nil || small.MeanValency != 2.5 {
		t.Errorf("another vocabulary: %+v", small)
	}
	if (Statistics{}).Measured(10, 1) != nil {
		t.Error("empty statistics gave a measurement")
	}
	// The partitioner accepts the measurement and, fed the measured unique
	// count, predicts exactly it.
	tb := partition.Table{Name: "z", Vocab: vocab, Dim: 8, Optimizer: partition.Optimizer{Name: "sgd", ElementWise: true}, Valency: partition.Valency{Mean: 1}, Measured: m}
	prob := &partition.Problem{Tables: []partition.Table{tb}, Topology: partition.Topology{Chips: 1, SparseCoresPerChip: 2, HBMBytesPerChip: 1 << 30}, BatchSize: 512}
	plan, err := partition.Solve(prob, partition.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var u float64
	for _, s := range plan.Shards {
		if s.ColFrom == 0 {
			u += s.UniqueRows
		}
	}
	if math.Abs(u-sorted.MeanUniquePerBatch) > 1e-6*u {
		t.Errorf("partitioner predicts %v unique rows, measured %v", u, sorted.MeanUniquePerBatch)
	}
}

// TestRowCountsStayBounded: a table with far more distinct rows than the
// profiler keeps still reports its true hot rows.
func TestRowCountsStayBounded(t *testing.T) {
	p := NewProfiler([]Table{{Feature: key("big"), Vocab: 1 << 40}})
	rng := rand.New(rand.NewPCG(9, 9))
	for b := 0; b < 5; b++ {
		var ex [][]uint64
		for e := 0; e < 2000; e++ {
			ex = append(ex, []uint64{7, rng.Uint64() % (1 << 40), rng.Uint64() % (1 << 40)})
		}
		p.Observe(batch(ex...), nil)
		if n := len(p.tables[0].counts); n > keepRows {
			t.Fatalf("%d row counts kept", n)
		}
	}
	s := p.Statistics("m")[0]
	if s.HotRows[0].Row != 7 || math.Abs(s.HotRows[0].Fraction-1.0/3) > 1e-12 {
		t.Errorf("hottest row %+v", s.HotRows[0])
	}
}
