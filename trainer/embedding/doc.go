// Package embedding is the trainer's embedding-placement wing (Ads paper
// section V, VII.D, VII.E): where a model's embedding tables live and how
// their lookups and updates are spread. It holds no code; its packages are
//
//	partition   the embedding partitioner: how each table is split over the
//	            SparseCores of a slice, within HBM (V.A, VII.D); pure
//	fdp         feedback-directed partitioning's profiler and the statistics
//	            it measures (V.C); the partitioner takes them as Measured
//	ps          CPU parameter servers: row sharding, table stacking, cyclic
//	            distribution, fetch and update coalescing (V.B, VII.E)
//	embreport   the embeddings report (`trainer embeddings-report`, Figure 7
//	            and VII.E), which runs all of the above on synthetic models
//
// Imports run one way. partition and ps import nothing of the trainer. fdp
// profiles batches of the emulated model (trainer/model) under a partition
// plan. embreport uses every package here and the emulated device
// (trainer/model, trainer/steptime). None imports the job runtime (package
// trainer) or the accounting wing (trainer/accounting).
//
// What this wing does not own: executing a plan's lookups and updates (the
// emulated model, trainer/model, follows the plan's shards); the
// controller's use of it (package trainer, feedback.go: it solves the
// slice's plan at each compile, profiles sampled steps and publishes what
// it measured at each committed checkpoint); the statistics store that
// models share (featstats, served by sigd); starting the parameter servers
// for a job and moving its caught-up tables onto them (package trainer,
// paramservers.go; trainer/embedding/ps says how).
package embedding
