package featstats

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/internal/pebbleutil"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
)

// ErrCorrupt: stored statistics that do not decode.
var ErrCorrupt = errors.New("featstats: corrupt statistics")

// MaxBatchesPerReport bounds one report's profiled batches: far more than
// a trainer profiles between two checkpoints (the reports' cadence), and
// small enough that one report cannot claim a weight that dwarfs every
// other measurement of the feature.
const MaxBatchesPerReport = 1 << 32

// ReportError says which report of a Put was refused and why; nothing of
// that Put was stored.
type ReportError struct {
	Index int   // position of the report in the Put
	Err   error // names the field
}

func (e *ReportError) Error() string { return fmt.Sprintf("stats[%d].%v", e.Index, e.Err) }
func (e *ReportError) Unwrap() error { return e.Err }

// Store holds the merged statistics of every reported feature.
type Store struct {
	db    *pebble.DB
	clock clock.Clock
	mu    sync.Mutex // orders read-merge-write of concurrent Puts
}

// Open opens (creating if needed) the store in dir. clk stamps each
// merged entry's Updated time.
func Open(dir string, clk clock.Clock) (*Store, error) {
	db, err := pebbleutil.Open(dir, pebbleutil.DurabilityProcess, nil)
	if err != nil {
		return nil, err
	}
	return &Store{db: db, clock: clk}, nil
}

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

// Put validates every report, merges each into what is stored for its
// feature and writes them in one batch: all or nothing. Feature names are
// the caller's to check.
func (s *Store) Put(reports []*sigv1.FeatureStatistics) error {
	for i, st := range reports {
		if err := Validate(st); err != nil {
			return &ReportError{Index: i, Err: err}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	now := timestamppb.New(s.clock.Now())
	for _, st := range reports {
		merged := st
		if old, ok, err := pebbleutil.Get(s.db, []byte(st.GetFeature())); err != nil {
			return err
		} else if ok {
			var prev sigv1.FeatureStatistics
			// Statistics that do not decode are replaced, not merged.
			if proto.Unmarshal(old, &prev) == nil {
				merged = Merge(&prev, st)
			}
		}
		merged.Updated = now
		v, err := proto.Marshal(merged)
		if err != nil {
			return err
		}
		if err := b.Set([]byte(st.GetFeature()), v, nil); err != nil {
			return err
		}
	}
	return b.Commit(pebbleutil.WriteOptions)
}

// Get returns the statistics of the features that have any, in the order
// asked; features never reported are left out. A stored entry that does
// not decode is ErrCorrupt naming the feature.
func (s *Store) Get(features []string) ([]*sigv1.FeatureStatistics, error) {
	var out []*sigv1.FeatureStatistics
	for _, f := range features {
		v, ok, err := pebbleutil.Get(s.db, []byte(f))
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		var st sigv1.FeatureStatistics
		if err := proto.Unmarshal(v, &st); err != nil {
			return nil, fmt.Errorf("%w: feature %q", ErrCorrupt, f)
		}
		out = append(out, &st)
	}
	return out, nil
}

// Validate checks a report before it is merged into the shared statistics,
// which every later report is averaged with: one NaN or infinity would stay
// there for good. The error names the field.
func Validate(st *sigv1.FeatureStatistics) error {
	if b := st.GetBatches(); b == 0 || b > MaxBatchesPerReport {
		return fmt.Errorf("batches: %d, need 1 to %d", b, uint64(MaxBatchesPerReport))
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"mean_valency", st.GetMeanValency()}, {"mean_unique_per_batch", st.GetMeanUniquePerBatch()}, {"zipf_s", st.GetZipfS()}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			return fmt.Errorf("%s: %v, need a finite value >= 0", f.name, f.v)
		}
	}
	if n := len(st.GetValencyHistogram()); n > 1024 {
		return fmt.Errorf("valency_histogram: %d buckets, more than 1024", n)
	}
	for j, v := range st.GetValencyHistogram() {
		if !(v >= 0 && v <= 1) {
			return fmt.Errorf("valency_histogram[%d]: %v, need a fraction in [0, 1]", j, v)
		}
	}
	if n := len(st.GetHotRows()); n > 65536 {
		return fmt.Errorf("hot_rows: %d rows, more than 65536", n)
	}
	for j, h := range st.GetHotRows() {
		if v := h.GetFraction(); !(v >= 0 && v <= 1) {
			return fmt.Errorf("hot_rows[%d].fraction: %v, need a fraction in [0, 1]", j, v)
		}
	}
	return nil
}

// Merge combines two measurements of one feature, weighting means by the
// number of profiled batches (saturating); hot rows come from the larger
// sample. b is a validated report; a, stored earlier, may predate
// validation: a value of a that is not finite is replaced by b's.
func Merge(a, b *sigv1.FeatureStatistics) *sigv1.FeatureStatistics {
	wa, wb := float64(a.Batches), float64(b.Batches)
	fb := wb / (wa + wb)
	// x + (y-x)·fb stays between x and y: unlike (x·wa + y·wb)/(wa+wb) it
	// cannot overflow to infinity for large values of one sign, and the
	// stored value is dropped if it (or the mean) is not finite.
	w := func(x, y float64) float64 {
		if m := x + (y-x)*fb; !math.IsNaN(m) && !math.IsInf(m, 0) {
			return m
		}
		return y
	}
	out := proto.Clone(b).(*sigv1.FeatureStatistics)
	out.Batches = a.Batches + b.Batches
	if out.Batches < a.Batches {
		out.Batches = math.MaxUint64
	}
	out.MeanValency = w(a.MeanValency, b.MeanValency)
	out.MeanUniquePerBatch = w(a.MeanUniquePerBatch, b.MeanUniquePerBatch)
	out.ZipfS = w(a.ZipfS, b.ZipfS)
	if len(a.ValencyHistogram) == len(b.ValencyHistogram) {
		for i := range out.ValencyHistogram {
			out.ValencyHistogram[i] = w(a.ValencyHistogram[i], b.ValencyHistogram[i])
		}
	}
	if wa > wb {
		out.HotRows = a.HotRows
	}
	out.Vocab = max(a.Vocab, b.Vocab)
	return out
}
