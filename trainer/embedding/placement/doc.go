// Package placement places one training job's embedding tables on its
// slice, as the trainer's controller does at every compile (Ads paper V.A,
// V.C, VII.D), with feedback-directed partitioning's side of the job:
//
//   - Slice.Solve: the slice's partitioning problem — the model's tables
//     (trainer/model), the slice's SparseCores and HBM (the emulated chip,
//     trainer/steptime), the global batch — solved by the partitioner's
//     heuristic, seeded by the job's seed, so a restarted controller
//     compiles the same plan. Tables whose features have measured
//     statistics are planned from them (fdp.Statistics.Measured), the rest
//     from the compile-time assumption (valency 1, uniform access). The
//     plan's PlanReport says how many had statistics, its modelled cost and
//     load imbalance (Eq. 1) and how each table is split.
//   - FeatureKeys: the key each sparse feature's statistics are stored
//     under, its component key (canon.Key), parsed from the read solution
//     where it enters the job.
//   - ReadStatistics and PublishRequest: the statistics the store (sigd's
//     FeatureStats service) has for the features, read at setup; what the
//     profiler measured, published at each committed checkpoint ("the
//     database of statistics is continuously updated", V.C). Keys are hex
//     only in those messages.
//   - NewProfiler: the profiler of the model's sparse inputs, which the
//     device feeds the sampled steps (fdp.Sampled).
//
// Imports run one way: placement imports the partitioner, fdp, the
// emulated model and chip (trainer/model, trainer/steptime), canon and
// sigd's FeatureStats messages; never the job runtime (package trainer)
// nor the accounting wing.
//
// What the package does not own: when any of it happens and on which
// goroutine — the controller reads statistics in setup, solves under the
// device's mutex at each compile, profiles sampled steps and publishes at
// each commit (package trainer, embedding.go); executing the plan's lookups
// (trainer/model); the statistics store (featstats, served by sigd); the
// caught-up phase's parameter servers (trainer/embedding/paramservers).
package placement
