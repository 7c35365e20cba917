// Package steptime is the emulated TPU slice's step-time model: how long one
// training step takes on the device, from what the step does. It is pure and
// documented so that every figure derived from it (input stalls, Program
// Goodput, the effect of pipelining) can be checked by hand.
//
// # The model (Ads paper II.B, V.A, V.C, Figure 5; MPG paper §4)
//
// A TPU chip has a TensorCore (dense matrix work) and SparseCores (embedding
// gathers and scatters, bound by HBM bandwidth). One step of the emulated
// model does:
//
//   - TensorCore time = model FLOPs / (chips × PeakFLOPS). Model FLOPs are the
//     dense layers' forward and backward multiply-adds plus the pooling
//     (segment sums) of the looked-up embedding rows: the FLOPs of the
//     unoptimized program, which is also the numerator of Program Goodput.
//   - SparseCore time = max over SparseCores i of B_i / (HBMBandwidth /
//     SparseCoresPerChip), where B_i is the bytes SparseCore i moves for the
//     batch's deduplicated rows (paper V.A: "the input batch is deduplicated
//     to obtain a list of unique feature values"): each unique row slice is
//     read forward and read and written backward, each access rounded up to
//     AccessGranularity (VII.D: narrow column shards waste bandwidth). With
//     perfect balance this is Σ B_i / (chips × HBMBandwidth); load imbalance
//     (Eq. 1) stretches it, which is how the partition plan shows up in step
//     time.
//   - Optional overheads (Chip.LookupOverheadNS, ShardOverheadNS; zero by
//     default): a fixed SparseCore time per looked-up row slice and per
//     shard held, the same terms trainer/embedding/partition's cost model adds, so a
//     plan's modelled step time and its partitioner cost agree.
//   - Serialized execution (Figure 5a, the paper's baseline): device time =
//     TensorCore + SparseCore. Pipelined execution (Figure 5b, V.C): the
//     SparseCore works on step N+1 while the TensorCore runs step N, so
//     in steady state device time = max(TensorCore, SparseCore) (VII.D:
//     "the resulting training step time is the maximum of the TensorCore
//     and SparseCore step times") plus the contention the overlap causes
//     ("the TensorCore and SparseCore operations both become slower due to
//     contention for HBM ... ICI ... and shared on-chip resources"): with
//     contention factor κ (Model.Contention, default 0.1, an assumption —
//     the paper gives no figure), both engines run 1/(1+κ) as fast while
//     they overlap, so device time = max + κ·min. κ = 0 is perfect overlap,
//     κ = 1 makes pipelining worthless. The embedding gradients of a
//     pipelined step are one step stale; trainer/model applies them so.
//   - Tables on parameter servers (Ads paper III.B, V.B; the caught-up
//     phase with servers): no SparseCore touches a row; the host sends
//     each unique row's 8-byte id and gets its values (Lookup), then sends
//     its id and gradient (Apply), and the slice waits for both: Servers =
//     the step's bytes over Network.Bandwidth (default 100 Gbit/s, a
//     guess: the paper gives no figure) plus Network.RoundTripNS per round
//     (two rounds; zero by default, as the chip's overheads). The wait is
//     not overlapped in either mode (the servers apply a step before the
//     next looks up) and adds to device time: device time is the time the
//     step holds the slice, whatever it waits on (MPG paper §4).
//   - Ideal time = model FLOPs at peak = TensorCore time. Program Goodput
//     (ideal / device time) is therefore below 1 exactly when the SparseCore
//     (or the wait on parameter servers) adds time the roofline does not
//     account for; where the tables are does not change the ideal, only
//     the denominator. The emulated Ads models are lookup-bound, as
//     recommendation models are: a step's dense FLOPs take the TensorCore a
//     few nanoseconds, its deduplicated embedding rows take the SparseCores
//     tens (each row slice read and written back, rounded up to
//     AccessGranularity), so their PG is about 0.05, on the right basis: it
//     is the compute roofline's verdict on such a model. On parameter
//     servers the same rows cross the host's network, about a hundred
//     times slower than HBM at the defaults, and PG is lower still
//     (bench/placement.sh). MeanStep.Explain (ExplainProgramGoodput) says
//     so in one line from a job's mean step times; the trainer's report,
//     the demo and the web UI print it.
//
// # Time scale
//
// The emulated model is small, so its modelled device time is microseconds
// while the real input pipeline (readers over gRPC, MinIO) takes
// milliseconds. TimeScale multiplies every modelled duration into the wall
// time the emulator spends (sleeps) per step: 1 emulates the chips
// faithfully; larger values make the device slower relative to the input
// pipeline, which is how demos and benchmarks put the slice at the edge of
// being input-bound. Goodput is computed from the scaled times, so its ratios
// do not depend on the scale: every part of a step — the wait on parameter
// servers too — is modelled and scaled alike, never real time added to
// scaled time (issue 27).
//
// What the package does not own: counting the FLOPs and unique rows of a
// batch (trainer/model does, while it executes the step) and sleeping (the
// controller does).
package steptime
