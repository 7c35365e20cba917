// Package sigdtest is the test harness of the SIG daemon. It builds what a
// test of sigd needs from the project's one test environment (devenv: a
// real MinIO and kfake):
//
//   - a Warehouse: raw blocks of Ads events from the generator
//     (warehouse/gen), written to MinIO exactly as ingestion writes them
//     (block.Write) and catalogued in a sigd data directory;
//   - a token file with four clients (ctr, cvr, ranking, explore), an
//     operator, a worker, a reader and a trainer of client ctr;
//   - a sigd.Server in the test process (Start), or the sigd binary as a
//     subprocess (BuildCommand, StartProcess), serving on 127.0.0.1 ports
//     (SIGDTEST_LOG_DIR=<dir> keeps each subprocess's whole output there);
//   - local input generation with the real `sigctl run` (LIG), and the
//     byte-for-byte column comparison of memo objects with its output.
//
// Nothing here skips: a missing tool fails the test with "run make deps".
// It is imported by tests only; it does not own the servers it starts
// (internal/devenv) or what the tests check.
package sigdtest
