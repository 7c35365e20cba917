// Command sigctl is the user and operator CLI of SIG. Each subcommand lives
// in its own file and registers itself in init, so that work on one command
// never touches another (the dispatcher is internal/cli's). The commands
// that call sigd (or a training job's controller) are remote commands
// (remote.go): each is its flags and its calls, and the connection, --json,
// deadlines and printing are the same for all.
//
// It holds flags, calls and printing; what it asks for is sigd's to decide
// (package sigd and below), and `sigctl run` is package transform's executor.
//
// Test-only: SIG_TEST_COMPACT_DELAY (a Go duration) makes every compaction
// of `sigctl ingest` wait that long between writing the compacted block's
// object and its catalog batch (warehouse/ingest, "Compaction"), and log
// when it starts waiting, so a reliability test can kill the process
// there. It only slows compaction down; never set it in production.
package main
