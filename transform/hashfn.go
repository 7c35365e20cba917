package transform

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// The stable hash of hash() and cross(). It must never change for a given
// op version: memoized columns, embedding rows and LIG all depend on it.
//
//	h(x)          = XXH64(bytes(x), seed 0)
//	hash(x)       = fmix64(h(x) + salt*golden) mod buckets
//	cross(x, y)   = fmix64(h(x)*golden + h(y)) mod buckets
//
// bytes(string) is its UTF-8 bytes; bytes(int64) is 8 little-endian bytes.
// golden = 0x9E3779B97F4A7C15; fmix64 is MurmurHash3's 64-bit finalizer.

const golden = 0x9E3779B97F4A7C15

func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

// HashBytes is h(x) of a string's bytes.
func HashBytes(b []byte) uint64 { return xxhash.Sum64(b) }

// HashInt64 is h(x) of an int64.
func HashInt64(v int64) uint64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(v))
	return xxhash.Sum64(b[:])
}

// Bucket is the hash() op on a precomputed h(x).
func Bucket(h uint64, salt int64, buckets int64) int64 {
	return int64(fmix64(h+uint64(salt)*golden) % uint64(buckets))
}

// CrossBucket is the cross() op on precomputed h(x), h(y).
func CrossBucket(hx, hy uint64, buckets int64) int64 {
	return int64(fmix64(hx*golden+hy) % uint64(buckets))
}
