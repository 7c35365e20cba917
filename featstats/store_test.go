package featstats

import (
	"errors"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/internal/pebbleutil"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
)

func openStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir(), clock.Real{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func goodStats() *sigv1.FeatureStatistics {
	return &sigv1.FeatureStatistics{Feature: "ad_id", Model: "ctr", Batches: 10, BatchSize: 512, MeanValency: 2,
		ValencyHistogram: []float64{0.1, 0.5, 0.4}, MeanUniquePerBatch: 300, ZipfS: 1.1, Vocab: 1000,
		HotRows: []*sigv1.RowFrequency{{Row: 1, Fraction: 0.2}}}
}

func finiteStats(t *testing.T, st *sigv1.FeatureStatistics) {
	t.Helper()
	vals := append([]float64{st.MeanValency, st.MeanUniquePerBatch, st.ZipfS}, st.ValencyHistogram...)
	for _, h := range st.HotRows {
		vals = append(vals, h.Fraction)
	}
	for _, v := range vals {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("stored statistics are not finite: %v", st)
		}
	}
}

// TestRejectsPoison: a report with a non-finite or negative
// value, a fraction above 1 or an implausible batch count is refused with
// an error naming the report and the field, nothing of its Put is stored
// (the good report beside it neither), and the stored statistics (which
// every later report is merged into) stay finite.
func TestRejectsPoison(t *testing.T) {
	s := openStore(t)
	if err := s.Put([]*sigv1.FeatureStatistics{goodStats()}); err != nil {
		t.Fatal(err)
	}
	nan, inf := math.NaN(), math.Inf(1)
	cases := []struct {
		field string
		edit  func(*sigv1.FeatureStatistics)
	}{
		{"mean_valency", func(s *sigv1.FeatureStatistics) { s.MeanValency = nan }},
		{"mean_valency", func(s *sigv1.FeatureStatistics) { s.MeanValency = inf }},
		{"mean_valency", func(s *sigv1.FeatureStatistics) { s.MeanValency = -1 }},
		{"mean_unique_per_batch", func(s *sigv1.FeatureStatistics) { s.MeanUniquePerBatch = nan }},
		{"mean_unique_per_batch", func(s *sigv1.FeatureStatistics) { s.MeanUniquePerBatch = -inf }},
		{"zipf_s", func(s *sigv1.FeatureStatistics) { s.ZipfS = nan }},
		{"zipf_s", func(s *sigv1.FeatureStatistics) { s.ZipfS = -0.5 }},
		{"valency_histogram[1]", func(s *sigv1.FeatureStatistics) { s.ValencyHistogram[1] = nan }},
		{"valency_histogram[2]", func(s *sigv1.FeatureStatistics) { s.ValencyHistogram[2] = math.MaxFloat64 }},
		{"hot_rows[0].fraction", func(s *sigv1.FeatureStatistics) { s.HotRows[0].Fraction = inf }},
		{"batches", func(s *sigv1.FeatureStatistics) { s.Batches = 0 }},
		{"batches", func(s *sigv1.FeatureStatistics) { s.Batches = math.MaxUint64 }},
	}
	for _, c := range cases {
		st := goodStats()
		c.edit(st)
		err := s.Put([]*sigv1.FeatureStatistics{goodStats(), st})
		var re *ReportError
		if !errors.As(err, &re) || re.Index != 1 || !strings.HasPrefix(err.Error(), "stats[1]."+c.field) {
			t.Errorf("%s: got %v, want a ReportError naming stats[1].%s", c.field, err, c.field)
		}
	}
	stats, err := s.Get([]string{"ad_id"})
	if err != nil || len(stats) != 1 {
		t.Fatalf("get: %v, %v", stats, err)
	}
	finiteStats(t, stats[0])
	if got := stats[0]; got.Batches != 10 || got.MeanValency != 2 {
		t.Errorf("refused reports changed the stored statistics: %v", got)
	}
}

// TestMergeSaturates: merged batch counts saturate instead of
// wrapping around, means stay between the merged values (no overflow to
// Inf), and a stored value poisoned before validation existed is replaced
// by the next valid report instead of staying NaN forever.
func TestMergeSaturates(t *testing.T) {
	s := openStore(t)
	old := goodStats()
	old.Batches = math.MaxUint64 - 3
	old.MeanValency = math.NaN()
	old.ValencyHistogram = []float64{1, 0, 0}
	v, err := proto.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.Set([]byte("ad_id"), v, pebbleutil.WriteOptions); err != nil {
		t.Fatal(err)
	}
	if err := s.Put([]*sigv1.FeatureStatistics{goodStats()}); err != nil {
		t.Fatal(err)
	}
	stats, err := s.Get([]string{"ad_id"})
	if err != nil || len(stats) != 1 {
		t.Fatalf("get: %v, %v", stats, err)
	}
	got := stats[0]
	finiteStats(t, got)
	if got.Batches != math.MaxUint64 {
		t.Errorf("batches = %d, want saturated at %d", got.Batches, uint64(math.MaxUint64))
	}
	if got.MeanValency != 2 {
		t.Errorf("mean_valency = %v, want the new report's 2 replacing the stored NaN", got.MeanValency)
	}
	for i, x := range got.ValencyHistogram {
		if x < 0 || x > 1 {
			t.Errorf("valency_histogram[%d] = %v, outside [0, 1]", i, x)
		}
	}

	// Two huge but finite values merge to a finite mean.
	a, b := goodStats(), goodStats()
	a.MeanUniquePerBatch, b.MeanUniquePerBatch = math.MaxFloat64, math.MaxFloat64/2
	a.Batches, b.Batches = 1<<40, 1<<40
	if m := Merge(a, b); math.IsInf(m.MeanUniquePerBatch, 0) || m.MeanUniquePerBatch < b.MeanUniquePerBatch {
		t.Errorf("merged mean_unique_per_batch = %v", m.MeanUniquePerBatch)
	}
}
