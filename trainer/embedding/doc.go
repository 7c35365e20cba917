// Package embedding is the trainer's embedding-placement wing (Ads paper
// section V, VII.D, VII.E): where a model's embedding tables live and how
// their lookups and updates are spread. It holds no code; its packages are
//
//	partition     the embedding partitioner: how each table is split over
//	              the SparseCores of a slice, within HBM (V.A, VII.D); pure
//	fdp           feedback-directed partitioning's profiler and the
//	              statistics it measures (V.C); the partitioner takes them
//	              as Measured
//	ps            CPU parameter servers: row sharding, table stacking,
//	              cyclic distribution, fetch and update coalescing (V.B,
//	              VII.E)
//	placement     one job's tables placed on its slice at each compile: the
//	              slice's problem from the model and the measured
//	              statistics, the plan and its report; the features' keys,
//	              statistics read from the store and profiles published to it
//	paramservers  one job's parameter servers in its caught-up phase (III.B):
//	              the `trainer ps` processes, the tables moved onto them,
//	              stepped, checkpointed and rolled back with the model
//	embreport     the embeddings report (`trainer embeddings-report`, Figure
//	              7 and VII.E), which runs partition, fdp and ps on synthetic
//	              models
//
// Imports run one way. partition and ps import nothing of the trainer. fdp
// profiles batches of the emulated model (trainer/model) under a partition
// plan. placement uses partition and fdp with the emulated model and chip
// (trainer/model, trainer/steptime); paramservers uses ps with the
// emulated model and what a checkpoint records of the servers
// (trainer/checkpoint). embreport uses partition, fdp and ps and the
// emulated device (trainer/model, trainer/steptime). None imports the job
// runtime (package trainer) or the accounting wing (trainer/accounting);
// layout_test.go checks both.
//
// What this wing does not own: executing a plan's lookups and updates (the
// emulated model, trainer/model, follows the plan's shards); when the job
// does any of it (package trainer, embedding.go: it reads statistics at
// setup, solves the slice's plan at each compile, profiles sampled steps,
// publishes what it measured at each committed checkpoint, and starts the
// parameter servers with the job, placing, stepping and saving the tables
// under its device's mutex); the statistics store that models share
// (featstats, served by sigd).
package embedding
