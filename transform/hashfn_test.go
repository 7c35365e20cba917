package transform

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/sigdata/sig/internal/rowref"
)

// TestHashInt64MatchesXXH64 checks the inlined XXH64 of an int64 against
// the library and rowref.
func TestHashInt64MatchesXXH64(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	vs := []int64{0, 1, -1, math.MinInt64, math.MaxInt64, 42}
	for range 20000 {
		vs = append(vs, int64(r.Uint64()))
	}
	for _, v := range vs {
		if hashInt64(v) != HashInt64(v) || HashInt64(v) != rowref.HashInt(v) {
			t.Fatalf("hashInt64(%d) = %x, HashInt64 %x, rowref %x", v, hashInt64(v), HashInt64(v), rowref.HashInt(v))
		}
	}
	b := []byte("some bytes")
	if HashBytes(b) != xxhash.Sum64(b) || HashBytes(b) != rowref.HashString(string(b)) {
		t.Fatal("HashBytes is not XXH64")
	}
}

// TestHashCache checks the memo of string hashes on columns that repeat
// (hits), that do not (it turns itself off), with empty strings, prefixes
// of one another and values near the end of the data buffer (the prefix
// load falls back to bytes), against Bucket.
func TestHashCache(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, distinct := range []int{3, 100, 5000, 1 << 20} {
		vocab := []string{"", "a", "ab", "abcdefgh", "abcdefghi", "abcdefgh\x00", "É", "\xff",
			"exactly-twenty-four-byte", "twenty-five-bytes-long-xx", "a much longer value that is never cached"}
		for len(vocab) < min(distinct, 20000) {
			b := make([]byte, r.IntN(20))
			for i := range b {
				b[i] = byte('a' + r.IntN(3))
			}
			vocab = append(vocab, string(b))
		}
		var data []byte
		var offs []int32
		for range 20000 {
			offs = append(offs, int32(len(data)))
			if distinct == 1<<20 {
				data = fmt.Appendf(data, "u%x", r.Uint64())
			} else {
				data = append(data, vocab[r.IntN(min(distinct, len(vocab)))]...)
			}
		}
		offs = append(offs, int32(len(data)))
		for _, salt := range []int64{0, -3} {
			hc := newHashCache(salt, 1000003)
			for i := 0; i+1 < len(offs); i++ {
				b := data[offs[i]:offs[i+1]]
				if got, want := hc.bucket(data, offs[i], offs[i+1]), Bucket(xxhash.Sum64(b), salt, 1000003); got != want {
					t.Fatalf("distinct %d: bucket(%q) = %d, want %d", distinct, b, got, want)
				}
			}
			if wantOff := distinct == 1<<20; distinct != 5000 && hc.memo.off != wantOff {
				t.Errorf("distinct %d: cache off = %v, want %v", distinct, hc.memo.off, wantOff)
			}
		}
	}
}

// TestBucket checks the exported functions against rowref's independent
// ones.
func TestBucket(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		salt, buckets := int64(r.Uint64()), 1+r.Int64N(1<<62)
		hx, hy := r.Uint64(), r.Uint64()
		if Bucket(hx, salt, buckets) != rowref.BucketOf(hx, salt, buckets) || CrossBucket(hx, hy, buckets) != rowref.CrossOf(hx, hy, buckets) {
			t.Fatal("Bucket or CrossBucket differs from rowref")
		}
	}
}
