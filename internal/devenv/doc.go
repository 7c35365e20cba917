// Package devenv is the project's one development environment: it starts a
// real MinIO server (the repository's bin/minio, installed by `make deps`)
// and an embedded Kafka cluster (kfake), both on 127.0.0.1. The tests of
// every package use it, and so does `sigd dev` (the development mode that
// `make demo` runs): the same servers, started the same way, so what the
// tests exercise is what a developer runs. `sigd serve` with --s3-endpoint
// and --kafka-brokers uses neither.
//
// MinIO runs as a child process on a free port with a temporary data
// directory and random credentials. It can be killed and restarted on the
// same port and data directory, so tests inject object-store outages without
// changing any client's endpoint. kfake runs inside the calling process;
// with a data directory it persists its log and committed offsets, so a
// consumer that is killed and restarted resumes from the offsets it
// committed. It does not create topics on first use (kfake would forget such
// a topic when killed): they are created explicitly, as SIG's processes do
// (internal/topics).
//
// Tests never skip when MinIO is missing: they fail with "run make deps".
// The testing.TB helpers (NewMinIO, NewKafka) register cleanups; the plain
// constructors (StartMinIO, StartKafka) are for programs such as the demo,
// which stop the servers themselves. MinIO.NewStore gives a test a client
// of the server with its bucket created, the set-up most storage tests
// share.
//
// S3Traffic reads what a MinIO server counted of the S3 requests it served
// (requests by API, errors, bytes both ways; MinIO's metrics v3, behind
// the bearer token its root keys sign), for any devenv server, sigd dev's
// included: the fleet run (fleet/run) attributes the difference of two
// scrapes around a phase to the side that ran it, and a test can count the
// requests of the code it runs.
//
// SyncBuffer is where the tests and the demo capture a server's log while
// it still writes (one type for all of them); FreeAddr is how MinIO here
// and the processes tests start get a port to listen on.
//
// What this package does not own: the object-store client (warehouse/objstore,
// which NewStore only configures) and Kafka clients (callers build them from
// the addresses given here).
package devenv
