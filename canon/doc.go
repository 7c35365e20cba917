// Package canon owns canonicalization and component keys (paper IV.A,
// Figure 3, "normalized representation"): a transformation graph is reduced
// to a normal form in which names and bindings are erased, common
// subexpressions merged, dead nodes dropped, commutative inputs sorted,
// associative ops flattened, documented identities applied and every
// parameter explicit; every node gets a Merkle key over its op, op version,
// parameters, type, input keys and, for raw columns, the source's schema
// fingerprint. The component of a model input is the cone of nodes its
// output depends on; its key (Key) is the key of its root. Two graphs
// computing the same column get the same key whatever their statement
// order, names or operand order of commutative ops; any change to what is
// computed changes the key. testdata/keys.txt pins keys across releases.
//
// A component's canonical DSL (Canonical.DSL) is what workers and readers
// run, so a key and the computation it names travel together.
//
// It imports package transform and nothing else of SIG's, and stores
// nothing: the stateless reader and the trainer import it for keys and
// canonical DSL without linking the matching cache's Pebble store (package
// matching). Key is the one type of a component key from SubmitGraph to the
// reader; it crosses a process boundary as hex (Key.String) and is parsed
// once there (ParseKey). Records that store keys as JSON hold them as hex
// too (Key.MarshalText), so decoding such a record is where its keys are
// parsed.
package canon
