package placement

import (
	"context"

	"github.com/sigdata/sig/canon"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/trainer/embedding/fdp"
	"github.com/sigdata/sig/trainer/model"
)

// ReadStatistics gets the statistics of the features keyed by keys from
// the store (zero keys are not asked for). The store's answer is where the
// statistics enter the job: an entry whose feature is not a key is
// skipped and reported in skipped, not taken as some feature's; err is the
// RPC's, and the caller plans without statistics then.
func ReadStatistics(ctx context.Context, store sigv1.FeatureStatsClient, keys []canon.Key) (stats map[canon.Key]fdp.Statistics, skipped []error, err error) {
	var ask []string
	for _, k := range keys {
		if k != (canon.Key{}) {
			ask = append(ask, k.String())
		}
	}
	resp, err := store.GetFeatureStatistics(ctx, &sigv1.GetFeatureStatisticsRequest{Features: ask})
	if err != nil {
		return nil, nil, err
	}
	stats = map[canon.Key]fdp.Statistics{}
	for _, st := range resp.GetStats() {
		s, err := fdp.FromProto(st)
		if err != nil {
			skipped = append(skipped, err)
			continue
		}
		stats[s.Feature] = s
	}
	return stats, skipped, nil
}

// NewProfiler profiles the sparse inputs of a model of config m, each
// table under its feature's key.
func NewProfiler(m model.Config, keys []canon.Key) *fdp.Profiler {
	var ts []fdp.Table
	for k := range m.Features.Sparse {
		var key canon.Key
		if k < len(keys) {
			key = keys[k]
		}
		ts = append(ts, fdp.Table{Feature: key, Vocab: m.Shape(k).Vocab})
	}
	return fdp.NewProfiler(ts)
}

// PublishRequest takes what prof collected since the last call, as the
// store's request (features without a key are left out), and the load
// imbalance of the profiled steps under the plan in use (paper V.C: the
// profiler records "load imbalance information"). nil when there is
// nothing to publish.
func PublishRequest(prof *fdp.Profiler, modelName string) (req *sigv1.PutFeatureStatisticsRequest, loadImbalance float64) {
	if prof == nil || prof.Batches() == 0 {
		return nil, 0
	}
	loadImbalance = prof.LoadImbalance()
	req = &sigv1.PutFeatureStatisticsRequest{}
	for _, s := range prof.Statistics(modelName) {
		if s.Feature != (canon.Key{}) {
			req.Stats = append(req.Stats, s.Proto())
		}
	}
	if len(req.Stats) == 0 {
		return nil, 0
	}
	return req, loadImbalance
}
