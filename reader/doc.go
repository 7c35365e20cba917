// Package reader will own the stateless input readers (paper IV.B): serving a
// work unit as a stream of Arrow record batches, reading memoized columns (SIG
// mode) or computing them from raw blocks (LIG mode), with identical bytes
// either way.
package reader
