// Command reader runs a stateless input reader (paper IV.B): a gRPC server
// that streams work units of training examples as Arrow record batches,
// reading memoized columns from the warehouse (SIG) or computing them from
// raw blocks (LIG). See package reader.
//
// Usage:
//
//	reader --listen 127.0.0.1:7090 --s3-endpoint HOST:PORT --s3-access-key K \
//	       --s3-secret-key S --s3-bucket sig --tokens tokens.json
//
// Every flag can also be set with its SIG_* environment variable
// (--s3-endpoint: SIG_S3_ENDPOINT). The reader prints "listening on ADDR"
// once it serves (then, with --metrics, "metrics on http://ADDR/metrics"),
// and stops gracefully on SIGINT or SIGTERM. Besides the Reader service it
// serves health and reflection (internal/grpcsvc), and with --metrics the
// reader's Prometheus metrics (package reader, metrics.go) over HTTP.
//
// With --sigd ADDR --sigd-token T (a token of role reader in sigd's token
// file; `sigd dev` writes one named "reader"), the reader reports every memo
// object it finds corrupt, or missing though the unit said it was ready, to
// sigd, which verifies it and recomputes that block (reader.Reporter).
// Without them a corrupt memo object keeps failing units with DataLoss
// until an operator evicts or recomputes its block.
//
// --guard-sample-rows N (default 16; 0: off) is the shared-fate guard
// (package reader, "The shared-fate guard"): N sampled rows of each memo
// object a unit reads are recomputed from the raw block and compared; a
// memo object holding other values fails the unit with DataLoss, reason
// MEMO_MISMATCH, and is reported to sigd (with --sigd), which recomputes
// the block to confirm it and quarantines and recomputes the entry.
// Each read draws its own sample (the seed is in a MEMO_MISMATCH error's
// guard_seed), so the rows checked grow with the reads of a block.
// --guard-every N guards each memo object in one read of N, for about 1/N
// of the guard's cost. --guard-on-error says what to do when the guard
// cannot recompute its sample: serve the unit unchecked (serve, the
// default) or fail it with FailedPrecondition, reason GUARD_ERROR (fail);
// either way sig_reader_guard_errors_total counts it.
//
// The same server serves Arrow Flight (package reader, "Arrow Flight"):
// DoGet reads a unit from its ticket with any Flight client. GetFlightInfo
// needs --sigd: the reader resolves the pipeline's read solution there with
// the caller's own token (forwarded; the --sigd-token is for reports only),
// and names --flight-locations (default grpc+tcp://ADDR of --listen, none
// when it listens on all interfaces: then clients redeem tickets on the
// reader they asked) as the readers of every endpoint.
//
// It holds flags and wiring only; reading, checking and encoding are
// package reader's.
package main
