// Package fdp is feedback-directed partitioning's profiler (Ads paper V.C,
// VII.D): the trainer profiles about 3% of its training batches — feature
// values per example, unique values per batch, the hottest rows, and the
// per-SparseCore load of the plan in use — and stores the statistics, keyed
// by feature, in a database shared across models (sigd's FeatureStats
// service, Pebble-backed). When a model is compiled, the partitioner
// (trainer/embedding/partition) takes the statistics of its features as Measured
// statistics in place of the compile-time assumptions (valency 1, uniform
// access), so a second model with the same features gets a plan balanced for
// the real load from the first model's measurements.
//
// # Sampling
//
// Sampled decides per step, deterministically from a seed and the step
// number (a hash, not a random source), so reruns profile the same steps:
// step 1 always (a short run still contributes), then each step with
// probability Rate (DefaultRate = 0.03, the paper's "we sample only 3% of
// the training batches to reduce training overheads").
//
// # What a profile holds (Statistics, proto sig.v1.FeatureStatistics)
//
// Per table, over the sampled batches: the mean feature values per example
// and their histogram (bucket i = examples with i values, up to 1024
// buckets, the last collecting the rest); the mean unique rows per batch
// (after deduplication, the SparseCore's work, paper V.A); the batch size and
// the table's vocabulary they were measured at; the hottest rows (up to
// HotRows, as fractions of the table's feature values); and the Zipf exponent
// fitted to the rank-frequency of the rows seen at least twice. Row counts
// are kept for at most 4096 rows per table between batches (the rest are
// pruned after each batch), so memory stays bounded whatever the vocabulary.
//
// # Keys
//
// The trainer keys statistics by the feature's component key (canon.Key, the
// Merkle key of the computation that produces the model input): it is the
// feature's identity in SIG, so two models that name the same feature
// differently (ctr_small's qa_overlap and ctr_wide's overlap) share its
// statistics, and two that use one name for different features do not.
// A key is a canon.Key here; it is hex only in the store's messages
// (Proto, FromProto: where statistics cross to and from sigd).
//
// # From statistics to the partitioner (Measured)
//
// The valency histogram becomes Measured.ValencyDist; the mean unique rows
// per batch becomes Measured.UniquePerBatch when the statistics were
// measured at the same vocabulary and batch size (it depends on both); the
// hot rows become Measured.HotRows at the same vocabulary, with a Zipf tail
// by row position when the vocabulary looks frequency-sorted (most hot rows
// among the lowest row ids) and a uniform tail otherwise (hashed ids).
//
// What the package does not own: storing statistics (featstats, served by
// sigd), deciding when to publish (the controller, at each committed
// checkpoint) and solving (trainer/embedding/partition).
package fdp
