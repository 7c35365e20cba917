package sigd

import (
	"context"
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
		if st.GetBatches() == 0 || st.GetMeanValency() < 0 || len(st.GetValencyHistogram()) > 1024 || len(st.GetHotRows()) > 65536 {
			return nil, status.Errorf(codes.InvalidArgument, "stats[%d]: need batches > 0, mean_valency >= 0, at most 1024 histogram buckets and 65536 hot rows", i)
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

// mergeStats combines two measurements of one feature, weighting means by
// the number of profiled batches; hot rows come from the larger sample.
func mergeStats(a, b *sigv1.FeatureStatistics) *sigv1.FeatureStatistics {
	wa, wb := float64(a.Batches), float64(b.Batches)
	w := func(x, y float64) float64 { return (x*wa + y*wb) / (wa + wb) }
	out := proto.Clone(b).(*sigv1.FeatureStatistics)
	out.Batches = a.Batches + b.Batches
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
