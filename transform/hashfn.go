package transform

import (
	"encoding/binary"
	"math/bits"

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

// The kernels compute the same function: hashInt64 inlines XXH64 for the
// 8 bytes of an int64 (the library call costs more than the hash), and
// hashCache skips recomputing the hash of a string seen a few rows before
// (categorical columns repeat). hashfn_test.go checks both against
// xxhash.Sum64 and Bucket.

const (
	xxPrime1 uint64 = 0x9E3779B185EBCA87
	xxPrime2 uint64 = 0xC2B2AE3D27D4EB4F
	xxPrime3 uint64 = 0x165667B19E3779F9
	xxPrime4 uint64 = 0x85EBCA77C2B2AE63
	xxPrime5 uint64 = 0x27D4EB2F165667C5
)

// hashInt64 is HashInt64: XXH64 of the 8 little-endian bytes, seed 0.
func hashInt64(v int64) uint64 {
	h := xxPrime5 + 8
	k := bits.RotateLeft64(uint64(v)*xxPrime2, 31) * xxPrime1
	h = bits.RotateLeft64(h^k, 27)*xxPrime1 + xxPrime4
	h ^= h >> 33
	h *= xxPrime2
	h ^= h >> 29
	h *= xxPrime3
	h ^= h >> 32
	return h
}

// hashCache remembers the bucket of recently hashed strings in a small
// direct-mapped table indexed by length and first bytes, with short keys
// stored in the slot itself (a hit reads one cache line). A hit costs a
// comparison of the bytes instead of a hash and a division. Over every
// window of lookups it judges itself: with fewer than half hits (values
// rarely repeat) it turns off, so it never costs much.
type hashCache struct {
	slots [hashCacheSize]hashSlot
	salt  uint64
	d     uint64
	memo  memoStats
}

type hashSlot struct {
	n   int32 // key length + 1; 0: empty
	v   int64
	key [hashKeyMax]byte
}

const (
	hashCacheSize = 1024
	hashKeyMax    = 24
)

// memoStats decides whether a memo is worth keeping.
type memoStats struct {
	tries, hits int
	off         bool
}

func (m *memoStats) miss() {
	if m.tries >= 4096 { // judge every window of lookups
		m.off = m.hits*2 < m.tries
		m.tries, m.hits = 0, 0
	}
}

func newHashCache(salt, buckets int64) *hashCache {
	return &hashCache{salt: uint64(salt) * golden, d: uint64(buckets)}
}

// bucket returns hash(x) for the bytes data[o:e] of a string (data is the
// whole data buffer).
func (c *hashCache) bucket(data []byte, o, e int32) int64 {
	b := data[o:e]
	if c.memo.off || len(b) > hashKeyMax {
		return int64(fmix64(xxhash.Sum64(b)+c.salt) % c.d)
	}
	var pre uint64
	if int(o)+8 <= len(data) {
		pre = binary.LittleEndian.Uint64(data[o:])
		if n := e - o; n < 8 {
			pre &= 1<<(8*uint(n)) - 1
		}
	} else {
		for k, x := range b[:min(len(b), 8)] {
			pre |= uint64(x) << (8 * k)
		}
	}
	sl := &c.slots[((pre^uint64(len(b)))*golden)>>(64-10)&(hashCacheSize-1)]
	c.memo.tries++
	if int(sl.n) == len(b)+1 && string(sl.key[:len(b)]) == string(b) {
		c.memo.hits++
		return sl.v
	}
	v := int64(fmix64(xxhash.Sum64(b)+c.salt) % c.d)
	sl.n, sl.v = int32(len(b)+1), v
	copy(sl.key[:], b)
	c.memo.miss()
	return v
}
