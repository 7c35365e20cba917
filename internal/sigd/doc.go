// Package sigd is the SIG daemon's server: it wires the matching frontend,
// the work queues and worker pool, the warehouse and Kafka into the gRPC
// services of proto/sig/v1, with authentication, metrics and health
// checking. cmd/sigd parses flags into a Config and runs a Server.
//
// It owns wiring and RPC translation only: canonicalization and read
// solutions are package matching's, scheduling is package workers', storage
// is package warehouse's.
package sigd
