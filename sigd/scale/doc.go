// Package scale is the control plane's scale curve (issue 18): how
// SubmitGraph latency, read solutions, search, the work queue, the Pebble
// stores and sigd's memory behave as the matching cache grows from a
// thousand to a million components, and how fast a subgraph is evicted.
//
// The package holds the results' schema (Results, one Point per cache size;
// Kind "sig.scale", Version 1; JSON with Write and Read, a text table with
// WriteText), which bench/scale.sh writes to bench/scale.json and
// bench/scale.txt and which a report reads. Its tests hold the benchmark
// that measures them (BenchmarkScaleCurve):
//
//   - the cache grows through its own API (matching.Frontend.Submit of
//     pipelines of 200 components over 8 raw blocks, their ready memo
//     entries written with Cache.SetMemo first), in sigd's data directory
//     while sigd is stopped; one fill pipeline in 40 is left pending, so
//     the queue's backlog grows with the cache (a fifth of a task per
//     component);
//   - at each point the same workload runs into matching.Frontend in the
//     benchmark's process and over gRPC to `sigd serve`, a subprocess on
//     those stores with its real MinIO and Kafka: submits of 10-200-node
//     graphs whose inputs are cached components drawn by Zipf popularity,
//     5% never seen (misses: pending entries and queued tasks), read
//     solutions of the pipelines submitted, subgraph searches, the Stats
//     RPC;
//   - the queue's enqueue-lease-complete cycles run on sigd's queue store
//     with its backlog; sizes are the stores' files on disk; sigd's memory
//     and CPU come from /proc/<pid> of the process; the eviction is the
//     Evict RPC of a subgraph contained by 1% of the components.
//
// It does not own what it measures (matching, workers, eviction, sigd) or
// the report that plots it.
package scale
