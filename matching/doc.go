// Package matching owns SIG's matching frontend (paper IV.A, Figure 3):
//
//   - canonicalization (canonical.go): a transformation graph is reduced to a
//     normal form in which names and bindings are erased, common
//     subexpressions merged, dead nodes dropped, commutative inputs sorted,
//     associative ops flattened, documented identities applied and every
//     parameter explicit; every node gets a Merkle key over its op, op
//     version, parameters, type, input keys and, for raw columns, the
//     source's schema fingerprint. The component of a model input is the
//     cone of nodes its output depends on; its key is the key of its root.
//     Two graphs computing the same column get the same key whatever their
//     statement order, names or operand order of commutative ops; any change
//     to what is computed changes the key.
//   - the Pebble-backed matching cache, read-solution construction and the
//     graph search index (later files).
//
// It does not execute transforms (package transform) nor schedule work
// (package workers).
package matching
