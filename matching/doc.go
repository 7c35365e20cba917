// Package matching owns SIG's matching frontend (paper IV.A, Figure 3):
//
//   - canonicalization and component keys live in matching/canon, which
//     stores nothing, so that readers and trainers use keys without the
//     cache;
//   - the Pebble-backed matching cache, read-solution construction and the
//     graph search index (later files).
//
// It does not execute transforms (package transform) nor schedule work
// (package workers).
package matching
