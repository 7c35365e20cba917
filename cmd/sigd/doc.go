// Command sigd is the SIG daemon: the matching frontend, work queues,
// in-process workers, ingestion, metrics and the operator web UI. It parses
// flags into a sigd.Config and runs a sigd.Server; the logic is package
// sigd's and the packages below it.
//
//	sigd serve  [flags]            the service; every flag also reads SIG_<FLAG>
//	sigd dev    [flags]            the same with embedded MinIO and Kafka, ingesting "ads"
//	sigd worker --sigd ADDR [...]  a remote memoization worker (lease protocol)
//
// Test-only: SIG_TEST_TASK_DELAY (a Go duration) makes every memoization
// run of serve, dev and worker wait that long before it starts (or until
// its lease is lost), so reliability tests can kill a process while it
// holds leases; a worker with it runs a batch's tasks one by one, each
// into a pack of its own. SIG_TEST_HOLD_PACKS (a file) makes every
// memoization run, once it has written its pack, append the pack's key to
// that file and hold the task until its lease is lost, never completing
// it: the pack is written and no memo entry switched to it, where crash
// tests kill the process (issue 28). SIG_TEST_HOLD_COMPLETIONS ("N:FILE",
// worker only) lets a worker's pool report its first N completions and
// makes every one after append the object it names to FILE and hang,
// never reported: a block-batched worker then holds the rest of its batch,
// written into its pack, where crash tests kill it mid-batch.
// SIG_TEST_HOLD_CONCAT (a file) makes serve and dev, once they have
// written the packs concatenated for a compacted block from its parts'
// memo columns, append the packs' keys to that file and hold there until
// the process ends, never naming them in the block's memo entries
// (versions.Concatenator). They only slow work down or stop it; never set
// them in production.
package main
