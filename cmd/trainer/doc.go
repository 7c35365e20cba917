// Command trainer runs the emulated TPU trainer and its tools. Each
// subcommand lives in its own file and registers itself in init, so that work
// on one command never touches another (the same pattern as cmd/sigctl; the
// dispatcher is internal/cli's).
//
// It holds flags and wiring only; the job runtime, embedding placement and
// accounting are package trainer's and its wings' (trainer/embedding,
// trainer/accounting).
package main
