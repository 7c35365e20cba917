// Package evictiontest is the end-to-end environment of eviction's tests
// that go through sigd (gRPC, readers, a trainer) and of the operator
// console's (sigd/ui), which drives the same evictions from a browser: a
// sigd serving in the test process on a real MinIO and kfake
// (sigd/sigdtest), with raw blocks of Ads events in its warehouse, three
// pipelines of three clients that share a faulty subgraph (one of them
// named with markup that a careless UI would execute), gRPC clients per
// principal, and checks of the matching cache against the bucket.
//
// It sits beside sigdtest, above sigd, because it starts a sigd: package
// eviction is below sigd, so its harness cannot live under it without an
// import running up the layers (issue 26). The Evictor's own decisions are
// tested without it, on the matching cache, the work queue and an object
// store in memory (eviction/stack_test.go).
//
// Nothing here is specific to one of the two suites; what a suite adds
// (a browser, a reader, race checks) it adds on its own side. It is
// imported by tests only.
package evictiontest
