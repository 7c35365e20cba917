// Package trainer will own the emulated TPU training pipeline (paper III, V,
// VI): the controller with its epochs, checkpoints, training holds and
// preemption notices, the TPU host workers and their input buffers, the
// step-time model, the embedding partitioner and feedback-directed profiling,
// CPU parameter servers, and goodput accounting (MPG paper).
package trainer
