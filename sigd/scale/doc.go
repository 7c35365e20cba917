// Package scale is the control plane's scale curve (issue 18): how
// SubmitGraph latency, read solutions, search, the work queue, the Pebble
// stores and sigd's memory behave as the matching cache grows from a
// thousand to a million components, and how fast a subgraph is evicted.
//
// The package holds the results' schema (Results, one Point per cache size;
// Schema "sig.scale/v1"; JSON with Write and Read, a text table with
// WriteText), which bench/scale.sh writes to bench/scale.json and
// bench/scale.txt and which `sigctl report` reads: a Point's summary
// fields (components, submit_p50_ms, submit_p99_ms, submits,
// queue_ops_per_s, pebble_bytes, sigd_rss_bytes, evict_per_s) keep their
// names and units. Its tests hold the benchmark that measures them
// (BenchmarkScaleCurve) and the same run on a few thousand components
// (TestScaleCurveSmall):
//
//   - the cache grows through the code sigd runs, in bulk, not by RPCs:
//     matching.Frontend.Submit of pipelines of 200 components over 8 raw
//     blocks (one Pebble batch each for its component records, search index
//     and users), their ready memo entries written with Cache.SetMemo
//     first, in sigd's data directory while sigd is stopped; one component
//     in 40 is left pending, so the queue's backlog grows with the cache (a
//     fifth of a task per component);
//   - at each point the same workload runs into matching.Frontend in the
//     benchmark's process and over gRPC to `sigd serve`, a subprocess on
//     those stores with its real MinIO and Kafka: submits of 10-200-node
//     graphs whose inputs are cached components drawn by Zipf popularity,
//     5% never seen (misses: pending entries and queued tasks), read
//     solutions of the pipelines submitted, subgraph searches, the Stats
//     RPC, and the reuse walk Stats and /metrics make (in process);
//   - the queue's enqueue-lease-complete cycles run on sigd's queue store
//     with its backlog; sizes are the stores' files on disk; sigd's memory
//     and CPU come from /proc/<pid> of the process; the eviction is the
//     Evict RPC of a subgraph contained by 1% of the components.
//
// It does not own what it measures (matching, workers, eviction, sigd) or
// the report that plots it.
package scale
