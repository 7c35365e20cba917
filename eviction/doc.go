// Package eviction will own the removal of memoized data (paper IV.A,
// "Eviction"): last-requested eviction against a TTL and a storage budget,
// subgraph eviction of everything a faulty subgraph produced, the audit log,
// and the operator web UI that drives them.
//
// It decides what to remove; the matching cache and the warehouse own the
// state it removes.
package eviction
