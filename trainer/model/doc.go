// Package model is the emulated TPU slice's model: the computation one
// training step really does on the CPU, so that loss falls on the generated
// click labels and the step-time model (trainer/steptime) is fed with what
// the step actually touched.
//
// # Architecture (Ads paper II.A)
//
// One embedding table per categorical model input (types int64, string,
// list<int64>, list<string>): a feature value is hashed — int64 values with
// transform.HashInt64, strings with transform.HashBytes — into a feature id
// on the host, and the id modulo the table's vocabulary is the row. Each
// example's rows are mean-pooled (a multivalent embedding "combined by a
// simple aggregation function such as an average"); an example with no value
// pools to zeros. float64 inputs go straight to the dense layers after
// sign(x)·log1p(|x|), so any scale trains stably. The dense part is one
// hidden ReLU layer over [pooled embeddings, float features] and a logistic
// output; the loss is the mean binary cross-entropy of the click label.
//
// # Step
//
// Step trains on one global batch (the concatenation of every host's batch,
// in host order) with plain SGD, deterministically: the same batches in the
// same order give bit-identical parameters. Per table it first deduplicates
// the batch's rows (paper V.A: "the input batch is deduplicated to obtain a
// list of unique feature values"), gathers each unique row once, pools, runs
// the dense layers forward and backward, and updates the dense weights and
// exactly the embedding rows it touched. A loss that is not finite returns
// ErrNonFinite before any parameter changes: the controller turns it into a
// permanent training hold (paper VI.A, "numeric overflow errors (e.g.,
// NaNs)").
//
// # Placement
//
// Tables live in shards placed on emulated SparseCores by a
// trainer/partition Plan (RowSharding by default: every table row-partitioned
// cyclically over all SparseCores, the paper's baseline). Every gather and
// update goes through Plan.LocateAppend, so a row's column ranges come from
// whichever shards hold them; the arithmetic does not depend on the plan, so
// any plan gives bit-identical results to an unpartitioned table (tested).
// Step reports the bytes each SparseCore moved (unique row slices × the
// steptime access cost) and the model FLOPs, which is what the step-time
// model needs.
//
// # State
//
// MarshalBinary writes every parameter in plan-independent order (tables
// row-major as if unpartitioned) with a fingerprint of the architecture;
// UnmarshalBinary restores onto a model of the same architecture under any
// plan. Checkpoints (trainer/checkpoint) store these bytes, and a phase change
// that changes the chip count re-places the tables this way.
package model
