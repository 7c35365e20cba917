// Package featstats is the feature-statistics store of feedback-directed
// partitioning (paper V.C): trainers profile a few percent of their
// batches and report per-feature statistics (valency, unique ids per
// batch, skew, hot rows); the store merges the reports of every model that
// uses a feature, so that a new model gets a good embedding partition from
// the measurements of the models before it (trainer/embedding/fdp turns them into
// partitioner inputs).
//
// A report is checked before it is merged (Validate): a NaN or an infinity
// averaged into the shared statistics would stay there for good. Merge
// weighs means by profiled batches and cannot overflow. Storage is one
// Pebble store, key: feature name, value: sigv1.FeatureStatistics
// (protobuf), opened through internal/pebbleutil.
//
// It does not authenticate or bound requests (package sigd serves it as
// sig.v1.FeatureStats and does both), nor does it profile (trainer/embedding/fdp).
package featstats
