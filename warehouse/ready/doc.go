// Package ready is the completeness-notification topic of the warehouse,
// sig.memo.ready (paper IV.A: training pipelines "track the progress of these
// tasks and access the results as they become available using out-of-band
// completeness monitoring infrastructure provided by the training data
// warehouse"). A SIG worker publishes one Event when a memoized block is
// written and marked ready; trainers and readers subscribe to lift transient
// training holds and to schedule work units whose data has arrived.
//
// An event is a JSON object:
//
//	{"component_key": "9f2c...", "block_id": "20260101T000000Z-p00000-...",
//	 "source": "ads", "bucket": "sig", "key": "memo/9f2c.../20260101T000000Z-p00000-....arrow",
//	 "rows": 100000, "bytes": 812345, "time": "2026-01-01T01:02:03.456Z"}
//
// sigd creates the topic when it starts (internal/topics), so a subscriber
// that starts before the first memo is written finds it.
//
// The Kafka record key is the component key, so one component's events stay
// in order on one partition. Delivery is at least once: subscribers must
// treat a repeated event as a no-op (the state it announces does not change).
// Records that do not decode or validate are skipped by subscribers and
// counted, never returned.
//
// What it does not own: deciding when a block is ready (workers, the
// matching cache) and the gRPC watch stream of read solutions (sigd).
package ready
