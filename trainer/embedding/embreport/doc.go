// Package embreport is the embeddings report (`trainer embeddings-report`):
// five synthetic recommendation models A–E run through the embedding
// optimizations of the Ads paper — Baseline → +Pipelining → +Hybrid
// partitioning → +FDP (VII.D, Figure 7) on the emulated TPU slice, and
// uncoalesced → coalesced parameter servers in caught-up training (VII.E).
// Every figure comes out of the cost models (trainer/embedding/partition,
// trainer/steptime) and real runs of the project's code: the real model
// (trainer/model) doing real deduplicated lookups and updates through each
// plan's shards, the real profiler (trainer/embedding/fdp), real parameter servers
// (trainer/embedding/ps) over loopback gRPC. Nothing is fitted to the paper's figures.
//
// # The models (spec.go)
//
// Each model is a table count (hundreds, at production scale), a dense size
// (50M–300M weights) and a recipe for its tables (paper VII.A):
// vocabularies log-uniform in [64, 300M] (widths at most 64 above 10M rows),
// widths log-uniform in [1, 380], and per table either one value per example
// or a mean valency log-uniform in [2, the model's maximum], drawn per
// example as 1 + geometric, capped at the table's declared maximum (4× its
// mean, at most 230). Values are Zipf-distributed (exponent 1.05–1.3);
// 30% of the vocabularies are frequency-sorted (the rank is the row, so
// cyclic beats block distribution, V.A), the rest hashed. The models'
// characters follow the paper's descriptions (VII.D): A has two tables with
// most lookups, B and E many multivalent features, C and D the larger dense
// parts; the parameters were set from those descriptions before any run.
//
// # Scaling (scale.go)
//
// The paper's slice is 128 chips; the report's is Options.Chips (default
// 16), a factor k = 8. The model keeps Tables/k of its tables and
// DenseWeights/k of its dense weights, and the per-chip batch stays
// (default 256, global 4096): the TensorCore's work per chip and the
// SparseCores' work per SparseCore both shrink k-fold, so their ratio — what
// pipelining and partitioning act on — is kept, and so are tables per
// SparseCore. Vocabularies are clipped at the largest cap that fits the
// memory budget (Options.Elements, default 128M parameters, 512 MiB of
// float32): tables under the cap keep their size; values of larger ones fold
// into the clipped rows (more deduplication than at full size). HBM per chip
// is scaled by the kept tables' clipped/full bytes, which keeps the memory
// pressure of the production model (32 GiB per chip).
//
// # The ladder (tpu.go)
//
//   - Baseline: row sharding (every table cyclically over every SparseCore),
//     serialized execution.
//   - +Pipelining: the same plan, pipelined (the SparseCore works on step
//     N+1 while the TensorCore runs step N, with steptime's contention
//     factor; embedding gradients one step stale).
//   - +Hybrid: the partitioner's heuristic plan (table, column and row
//     partitioning) from what is known at compile time: sizes and each
//     feature's declared maximum valency, access assumed uniform.
//   - +FDP: the heuristic plan from profiled statistics: an earlier model
//     with the same features ran ProfileSteps steps on other batches,
//     profiled the ~3% fdp.Sampled picks, and its statistics went through
//     their wire form (sig.v1.FeatureStatistics, what sigd stores) into
//     partition.Measured.
//
// Each plan's real run trains Steps held-out batches (the same for every
// plan) through trainer/model, which reports per SparseCore the bytes moved,
// row slices looked up and shards held; steptime prices them with TPU v4
// peaks and the partitioner's default overheads (0.1 ns per row slice, 1 µs
// per shard — the same terms the partitioner's cost model uses). The
// TensorCore's FLOPs are the scaled dense model's (6 per weight per
// example) plus the real pooling; the real dense layer is kept tiny (its
// only job is making the step a training step). The rows-sharded run is
// priced both serialized and pipelined (its lookups move the same bytes
// either way). Speedup is the baseline's device time over the rung's. The
// report also gives each plan's load imbalance over the real lookups (Eq. 1)
// and the partitioner's modelled cost under the profiled statistics.
//
// # Parameter servers (ps.go)
//
// Each model's tables (clipped to Options.PSElements) are row-sharded over
// PSServers in-process parameter servers; PSCores TPU cores of a
// CaughtUpChips slice send each step's lookups and gradients uncoalesced
// (one Lookup and one Apply per core, table and server, paper V.B) and
// coalesced (one pair per server), on the same batches, taking turns. The
// Lookup+Apply wall time is measured; the step adds the TensorCore's
// modelled time. Clients, servers and the gRPC stacks share this machine's
// CPUs, so RPC overhead is far larger relative to the TPU step than in the
// paper's datacenter (where coalescing gains 6–10% of the caught-up step):
// the step speedup here is essentially the parameter-server speedup.
//
// # Measured or modelled (figures.go)
//
// The report's figures (Report.Figures, internal/figure) say which is
// which. Figure 7's speedups are modelled: the lookups are real, but the
// device times that make the speedups are steptime's prices of them, and
// constants decide those prices — TPU v4's peak FLOP/s and HBM bandwidth
// (cloud.google.com/tpu/docs/v4) and SparseCores per chip (Jouppi et al.,
// ISCA 2023), and four guesses: the HBM access granularity, the SparseCore's
// fixed cost per row slice and per shard (partition.DefaultLookupOverheadNS,
// DefaultShardOverheadNS: no public measurement exists) and pipelining's
// contention (the paper reports a slowdown, not its size). The shard
// overhead decides most of the gain: row sharding puts every table on every
// SparseCore, so the baseline pays it tables × SparseCores times a step,
// and table partitioning's advantage is largely not paying it. The report
// therefore reruns the whole ladder (plans re-solved by the partitioner,
// which weighs shards by the same overhead, re-run and re-priced) at each
// Options.ShardOverheadSweep value (0, 250, 1000, 4000 ns) and re-prices it
// at each Options.ContentionSweep value, and prints both next to Figure 7.
// The coalescing speedups are measured (wall time of real RPCs).
//
// What the package does not own: the optimizations it measures (the
// partitioner, the profiler and the parameter servers of trainer/embedding,
// the model and step-time model of trainer/model and trainer/steptime); it
// runs no controller, hosts or readers.
package embreport
