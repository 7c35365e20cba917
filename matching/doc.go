// Package matching owns SIG's matching frontend (paper IV.A, Figure 3):
//
//   - canonicalization and component keys live in matching/canon, which
//     stores nothing, so that readers and trainers use keys without the
//     cache;
//   - the Pebble-backed matching cache (cache.go) and its key layout
//     (keys.go, pinned by testdata/layout.txt): only the Cache's methods
//     touch Pebble or a key's bytes;
//   - the frontend: submit, read solutions, memo generations and watch
//     (frontend.go), and the graph search index (search.go), both through
//     Cache methods;
//   - how memoized blocks are shared (Frontend.Reuse): a ready block counts
//     the registered pipelines whose read solutions name it, those that use
//     its component over an event range covering it (testdata/reuse.txt).
//
// A component key is a canon.Key throughout, in the records the cache
// stores too (as hex in their JSON); it is never formatted and parsed back
// inside the process.
//
// It does not execute transforms (package transform) nor schedule work
// (package workers).
package matching
