package sigd

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/internal/pebbleutil"
	"github.com/sigdata/sig/matching"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
)

// statsService is the feature statistics store of feedback-directed
// partitioning (paper V.C): trainers profile a few percent of batches and
// store per-feature statistics here, keyed by feature name, so that every
// model using the same feature gets a better embedding partition from the
// first model's measurements. Pebble key: feature name -> FeatureStatistics
// (protobuf).
type statsService struct {
	sigv1.UnimplementedFeatureStatsServer
	s    *Server
	once sync.Once
	db   *pebble.DB
	err  error
	mu   sync.Mutex
}

func (h *statsService) open() (*pebble.DB, error) {
	h.once.Do(func() {
		h.db, h.err = pebbleutil.Open(filepath.Join(h.s.cfg.DataDir, "featstats"), pebbleutil.DurabilityProcess, nil)
	})
	return h.db, h.err
}

// maxStatsPerCall bounds a request.
const maxStatsPerCall = 4096

// maxBatchesPerReport bounds one report's profiled batches: far more than
// a trainer profiles between two checkpoints (the reports' cadence), and
// small enough that one report cannot claim a weight that dwarfs every
// other measurement of the feature.
const maxBatchesPerReport = 1 << 32

func (h *statsService) PutFeatureStatistics(ctx context.Context, req *sigv1.PutFeatureStatisticsRequest) (*sigv1.PutFeatureStatisticsResponse, error) {
	if _, err := auth.Require(ctx, auth.RoleTrainer, auth.RoleOperator, auth.RoleClient); err != nil {
		return nil, err
	}
	if len(req.GetStats()) > maxStatsPerCall {
		return nil, status.Errorf(codes.InvalidArgument, "stats: %d entries, more than the limit of %d", len(req.GetStats()), maxStatsPerCall)
	}
	db, err := h.open()
	if err != nil {
		return nil, grpcError(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	b := db.NewBatch()
	defer b.Close()
	for i, st := range req.GetStats() {
		if err := matching.ValidateName("stats["+strconv.Itoa(i)+"].feature", st.GetFeature()); err != nil {
			return nil, grpcError(err)
		}
		if err := validateStats(st); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "stats[%d].%v", i, err)
		}
		merged := st
		if old, ok, err := pebbleutil.Get(db, []byte(st.GetFeature())); err != nil {
			return nil, grpcError(err)
		} else if ok {
			var prev sigv1.FeatureStatistics
			if proto.Unmarshal(old, &prev) == nil {
				merged = mergeStats(&prev, st)
			}
		}
		merged.Updated = timestamppb.New(h.s.clock.Now())
		v, err := proto.Marshal(merged)
		if err != nil {
			return nil, grpcError(err)
		}
		if err := b.Set([]byte(st.GetFeature()), v, nil); err != nil {
			return nil, grpcError(err)
		}
	}
	if err := b.Commit(pebbleutil.WriteOptions); err != nil {
		return nil, grpcError(err)
	}
	return &sigv1.PutFeatureStatisticsResponse{}, nil
}

// validateStats checks a report before it is merged into the shared
// statistics, which every later report is averaged with: one NaN or
// infinity would stay there for good. The error names the field.
func validateStats(st *sigv1.FeatureStatistics) error {
	if b := st.GetBatches(); b == 0 || b > maxBatchesPerReport {
		return fmt.Errorf("batches: %d, need 1 to %d", b, uint64(maxBatchesPerReport))
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

// mergeStats combines two measurements of one feature, weighting means by
// the number of profiled batches (saturating); hot rows come from the
// larger sample. b is a validated report; a, stored earlier, may predate
// validation: a value of a that is not finite is replaced by b's.
func mergeStats(a, b *sigv1.FeatureStatistics) *sigv1.FeatureStatistics {
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

func (h *statsService) GetFeatureStatistics(ctx context.Context, req *sigv1.GetFeatureStatisticsRequest) (*sigv1.GetFeatureStatisticsResponse, error) {
	if _, err := auth.Require(ctx, auth.RoleTrainer, auth.RoleOperator, auth.RoleClient); err != nil {
		return nil, err
	}
	if len(req.GetFeatures()) > maxStatsPerCall {
		return nil, status.Errorf(codes.InvalidArgument, "features: more than %d", maxStatsPerCall)
	}
	db, err := h.open()
	if err != nil {
		return nil, grpcError(err)
	}
	out := &sigv1.GetFeatureStatisticsResponse{}
	for _, f := range req.GetFeatures() {
		v, ok, err := pebbleutil.Get(db, []byte(f))
		if err != nil {
			return nil, grpcError(err)
		}
		if !ok {
			continue
		}
		var st sigv1.FeatureStatistics
		if err := proto.Unmarshal(v, &st); err != nil {
			return nil, status.Errorf(codes.DataLoss, "feature %q: corrupt statistics", f)
		}
		out.Stats = append(out.Stats, &st)
	}
	return out, nil
}
