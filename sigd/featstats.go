package sigd

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/featstats"
	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/matching"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
)

// statsService serves the feature-statistics store of feedback-directed
// partitioning (package featstats) as sig.v1.FeatureStats: it
// authenticates, bounds requests and translates errors. The store is
// opened on first use, under DataDir/featstats.
type statsService struct {
	sigv1.UnimplementedFeatureStatsServer
	s     *Server
	once  sync.Once
	store *featstats.Store
	err   error
}

func (h *statsService) open() (*featstats.Store, error) {
	h.once.Do(func() {
		h.store, h.err = featstats.Open(filepath.Join(h.s.cfg.DataDir, "featstats"), h.s.clock)
	})
	return h.store, h.err
}

// close closes the store if it was opened, and keeps it from opening
// after; sigd calls it once it serves no more.
func (h *statsService) close() error {
	h.once.Do(func() { h.err = errors.New("sigd: feature statistics closed") })
	if h.store != nil {
		return h.store.Close()
	}
	return nil
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
	for i, st := range req.GetStats() {
		if err := matching.ValidateName("stats["+strconv.Itoa(i)+"].feature", st.GetFeature()); err != nil {
			return nil, grpcError(err)
		}
	}
	store, err := h.open()
	if err != nil {
		return nil, grpcError(err)
	}
	if err := store.Put(req.GetStats()); err != nil {
		var re *featstats.ReportError
		if errors.As(err, &re) {
			return nil, status.Error(codes.InvalidArgument, re.Error())
		}
		return nil, grpcError(err)
	}
	return &sigv1.PutFeatureStatisticsResponse{}, nil
}

func (h *statsService) GetFeatureStatistics(ctx context.Context, req *sigv1.GetFeatureStatisticsRequest) (*sigv1.GetFeatureStatisticsResponse, error) {
	if _, err := auth.Require(ctx, auth.RoleTrainer, auth.RoleOperator, auth.RoleClient); err != nil {
		return nil, err
	}
	if len(req.GetFeatures()) > maxStatsPerCall {
		return nil, status.Errorf(codes.InvalidArgument, "features: more than %d", maxStatsPerCall)
	}
	store, err := h.open()
	if err != nil {
		return nil, grpcError(err)
	}
	stats, err := store.Get(req.GetFeatures())
	if errors.Is(err, featstats.ErrCorrupt) {
		return nil, status.Error(codes.DataLoss, err.Error())
	}
	if err != nil {
		return nil, grpcError(err)
	}
	return &sigv1.GetFeatureStatisticsResponse{Stats: stats}, nil
}
