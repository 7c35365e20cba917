package objstore

import "context"

// Reader reads objects: whole and checksum-verified (Get), or a part of
// one into the caller's buffer (the rest), which the caller checks with
// the checksums it keeps per range. It is what reading blocks takes
// (warehouse/block's read functions, and so the stateless readers and the
// trainer's in-process ones), not the whole client: *Store implements it
// over S3, objstore/memstore in memory for tests about logic.
//
// The three ways to read a part each save something the others cannot:
// GetRangeInto a range whose place is known (segments, from the footer);
// GetFromInto from a known offset to an end the caller does not know (a
// memo object's value segment and footer, one request instead of two);
// GetSuffixInto the end of an object whose size the caller does not know
// (a footer probe). All three read into memory the caller owns and
// recycles, and may report bytes as they arrive (filled) so that checksums
// are computed while the bytes are in the CPU's caches.
type Reader interface {
	Get(ctx context.Context, key string) ([]byte, Info, error)
	GetRangeInto(ctx context.Context, key string, off int64, dst []byte, filled func(lo, hi int)) error
	GetFromInto(ctx context.Context, key string, off, max int64, alloc func(n int) []byte, filled func(lo, hi int)) ([]byte, Info, error)
	GetSuffixInto(ctx context.Context, key string, dst []byte) (int, Info, error)
}

// Writer writes whole objects with their CRC-32C: computed (Put) or the
// caller's (PutChecksummed). *Store implements it over S3,
// objstore/memstore in memory.
type Writer interface {
	Put(ctx context.Context, key string, data []byte, metadata map[string]string) (Info, error)
	PutChecksummed(ctx context.Context, key string, data []byte, sum uint32, metadata map[string]string) (Info, error)
}

var (
	_ Reader = (*Store)(nil)
	_ Writer = (*Store)(nil)
)
