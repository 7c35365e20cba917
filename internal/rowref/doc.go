// Package rowref is a row-at-a-time reference implementation of the
// transform ops, written from their documented semantics (transform/doc.go)
// with the standard library (strings.ToLower, strings.Map, strings.Fields,
// sort, math) and cespare/xxhash only. It shares no code with the Arrow
// kernels of package transform.
//
// It has two users:
//   - the kernel tests, which check every kernel cell by cell against it;
//   - the benchmarks, which run it as the "plain Go" side: the same op on Go
//     strings and slices, one row at a time, next to the Arrow kernel.
//
// So it is written the way a careful Go programmer would write each op over
// slices: obviously correct first, without deliberate slowness.
//
// What it does not own: the ops' semantics (transform/doc.go) and anything
// SIG runs in production.
package rowref
