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
// exactly the embedding rows it touched. The embedding update is float32
// SGD: each unique row's gradient, summed in float64 over the batch, is
// rounded to float32 and w -= float32(lr·g) — the arithmetic of the CPU
// parameter servers (trainer/embedding/ps), so a table trains to the same
// bits on the slice and on the servers. A loss that is not finite returns
// ErrNonFinite before any parameter changes: the controller turns it into a
// permanent training hold (paper VI.A, "numeric overflow errors (e.g.,
// NaNs)").
//
// Tables have one vocabulary and width (Config.Vocab, Dim) unless
// Config.Shapes gives each its own (the report's synthetic models, paper
// VII.A: vocabularies from 64 rows, widths 1 to 380).
//
// # Pipelined execution: stale embedding gradients
//
// With Config.StaleEmbeddingGradients (the controller sets it in pipelined
// mode, paper V.C and Figure 5b) step N+1 gathers its rows before step N's
// embedding update is applied: the update of a step lands during the next
// step, after that step's lookups, and the dense layers are updated at once.
// The gradients the tables receive are thus one step stale, as in the paper
// ("this was found to not impact model quality"; here the held-out loss of
// stale training ends within 0.01 of ordinary training, tested). Flush, and
// MarshalBinary, apply the pending update: a checkpoint drains the pipeline.
//
// # Tables on parameter servers
//
// In the caught-up phase the controller moves the tables onto parameter
// servers (package trainer; paper III.B): TableValues hands them over,
// StepRemote trains with a Remote — one lookup of the step's unique rows of
// every table, the pooled forward and backward here, one update of the
// unique rows sent back (applied before the next step: never stale) — and
// SetTableValues takes them back before a checkpoint. The model's own
// tables are then a stale copy nobody reads. A server's failure is
// ErrRemote: the step did not happen and the attempt is retrained. The
// arithmetic is Step's, so the parameters equal those of the same steps on
// the slice bit for bit (remote_test.go; with the real servers over gRPC,
// package trainer's tests), except that a float32 gradient of -0 reaches
// the servers as +0 (their sum starts from +0), which changes a row only
// if it is -0 itself — never, since no update and no initial value makes
// one.
//
// # Placement
//
// Tables live in shards placed on emulated SparseCores by a
// trainer/embedding/partition Plan: the controller's is the partitioner's solved plan
// (its heuristic, with measured statistics when the statistics store has
// them); nil is one shard per table. Every gather and update goes through
// Plan.LocateAppend, so a row's column ranges come from whichever shards
// hold them; the arithmetic does not depend on the plan, so any plan — row
// sharding cyclic or block, column splits, column+row grids, solved plans —
// gives losses and parameters bit-identical to an unpartitioned table, in
// both modes (plan_test.go). Step reports, per SparseCore, the bytes moved
// (unique row slices × the steptime access cost), the row slices looked up
// and the shards held, and the model FLOPs: what the step-time model needs.
//
// # State
//
// MarshalBinary writes every parameter in plan-independent order (tables
// row-major as if unpartitioned) with a fingerprint of the architecture;
// UnmarshalBinary restores onto a model of the same architecture under any
// plan. Checkpoints (trainer/checkpoint) store these bytes, and a phase change
// that changes the chip count re-places the tables this way.
//
// What the package does not own: the partition plan (the partitioner,
// trainer/embedding/partition, decides it; the model follows it), a step's device time
// (trainer/steptime prices what Step reports), the hosts' batches and the
// order of steps (package trainer), and where checkpoints go
// (trainer/checkpoint).
package model
