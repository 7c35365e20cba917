// Package buffer is a TPU host worker's input buffer and the rule that sizes
// its reading parallelism (Ads paper IV.B): "reader tasks stream training
// examples (events) to the TPU host, where they are buffered in memory. The
// host then constructs input batches from this buffer", and "horizontal
// scaling is achieved by adjusting the number of in-flight work units
// requested by TPU hosts ... dynamically by monitoring the fullness of the
// host's buffer. If events are consumed faster than they are added, the host
// requests more work units".
//
// Buffer is a FIFO of examples with a capacity: readers Put record batches
// (blocking while it is full, which pushes back on the readers' streams) and
// the batch builder Takes fixed-size batches, learning how many rows of each
// work unit every batch carries (the controller's exactly-once accounting
// needs it).
//
// Decide is the pure scaling rule. Every interval the host observes how many
// examples were added and consumed and how full the buffer is, and Decide
// returns the number of work units to keep in flight:
//
//   - the buffer is nearly full (≥ High): one fewer — readers are ahead;
//   - it is nearly empty (< Low), or examples were consumed faster than they
//     were added while it is below half full: one more — readers are behind;
//   - otherwise unchanged (the band between Low and High is hysteresis, so
//     the count does not oscillate).
//
// The result stays within [Min, Max]. A fixed count (Min = Max) is the
// baseline the benchmark compares against.
//
// What the package does not own: reading work units (the host worker in
// package trainer, through reader.Client), sending batches and returning
// credits (package trainer), the examples' columns (trainer/model).
package buffer
