package block

import (
	"encoding/binary"
	"math"
	"testing"
)

// TestValidOffsets: the check a reader runs on every offset it fetches
// accepts what Encode writes and nothing that would let a kernel or the
// reader's encoder index outside the values.
func TestValidOffsets(t *testing.T) {
	enc := func(offs ...int32) []byte {
		b := make([]byte, 4*len(offs))
		for i, o := range offs {
			binary.LittleEndian.PutUint32(b[4*i:], uint32(o))
		}
		return b
	}
	for _, c := range []struct {
		name  string
		b     []byte
		n     int
		limit int
		want  bool
	}{
		{"valid", enc(0, 1, 1, 5), 3, 5, true},
		{"valid-below-limit", enc(0, 2, 3), 2, 9, true},
		{"trailing-bytes", append(enc(0, 2, 3), 0xff, 0xff, 0xff, 0xff), 2, 3, true},
		{"empty", nil, 0, 0, true},
		{"empty-zero", enc(0), 0, 0, true},
		{"empty-nonzero", enc(3), 0, 5, false},
		{"empty-short", []byte{0, 0}, 0, 5, false},
		{"short", enc(0, 1), 2, 5, false},
		{"nonzero-start", enc(1, 2, 3), 2, 5, false},
		{"decrease", enc(0, 3, 2, 4), 3, 5, false},
		{"decrease-last", enc(0, 3, 4, 3), 3, 5, false},
		{"past-limit", enc(0, 3, 6), 2, 5, false},
		{"negative", enc(0, -1, 2), 2, 5, false},
		{"wrap", enc(0, math.MaxInt32, math.MinInt32), 2, math.MaxInt32, false},
	} {
		if got := validOffsets(c.b, c.n, c.limit); got != c.want {
			t.Errorf("%s: validOffsets = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestValidOffsetsLong puts one decrease at every position of offsets long
// enough for the unrolled loop and its tail.
func TestValidOffsetsLong(t *testing.T) {
	for n := 1; n <= 19; n++ {
		offs := make([]int32, n+1)
		for i := 1; i <= n; i++ {
			offs[i] = offs[i-1] + int32(i%3)
		}
		b := make([]byte, 4*(n+1))
		put := func() {
			for i, o := range offs {
				binary.LittleEndian.PutUint32(b[4*i:], uint32(o))
			}
		}
		put()
		if !validOffsets(b, n, int(offs[n])) {
			t.Fatalf("n=%d: valid offsets rejected", n)
		}
		if validOffsets(b, n, int(offs[n])-1) && offs[n] > 0 {
			t.Fatalf("n=%d: last offset past the limit accepted", n)
		}
		for at := 1; at <= n; at++ {
			save := offs[at]
			offs[at] = offs[at-1] - 1
			put()
			if validOffsets(b, n, math.MaxInt32) {
				t.Fatalf("n=%d: decrease at %d accepted", n, at)
			}
			offs[at] = save
		}
		put()
	}
}

func BenchmarkValidOffsets(b *testing.B) {
	const n = 1 << 16
	buf := make([]byte, 4*(n+1))
	for i := 1; i <= n; i++ {
		binary.LittleEndian.PutUint32(buf[4*i:], uint32(3*i))
	}
	b.SetBytes(int64(len(buf)))
	for i := 0; i < b.N; i++ {
		if !validOffsets(buf, n, 3*n) {
			b.Fatal("rejected")
		}
	}
}
