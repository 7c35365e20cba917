package objstore

import (
	"math/rand/v2"
	"testing"
)

func TestChecksumCombine(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 1<<16)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	for _, cut := range []int{0, 1, 7, 8, 1000, 1 << 15, len(data) - 1, len(data)} {
		a, b := data[:cut], data[cut:]
		if got, want := ChecksumCombine(Checksum(a), Checksum(b), int64(len(b))), Checksum(data); got != want {
			t.Errorf("cut %d: combine = %08x, want %08x", cut, got, want)
		}
	}
	// Several pieces in turn, as block.Encode combines its segments.
	var crc uint32
	for lo := 0; lo < len(data); {
		hi := min(len(data), lo+1+r.IntN(5000))
		crc = ChecksumCombine(crc, Checksum(data[lo:hi]), int64(hi-lo))
		lo = hi
	}
	if want := Checksum(data); crc != want {
		t.Errorf("pieces: %08x, want %08x", crc, want)
	}
}

// TestChecksumCombineLong: lengths with many bits set, up to 2^22 and more.
func TestChecksumCombineLong(t *testing.T) {
	a := []byte("the first piece")
	for _, n := range []int{1 << 20, 3<<20 + 5, 1<<22 + 1<<21 + 777} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*31 + i>>9)
		}
		whole := append(append([]byte(nil), a...), b...)
		if got, want := ChecksumCombine(Checksum(a), Checksum(b), int64(n)), Checksum(whole); got != want {
			t.Errorf("len %d: combine = %08x, want %08x", n, got, want)
		}
	}
}

func BenchmarkChecksumCombine(b *testing.B) {
	var crc uint32
	for i := range b.N {
		crc = ChecksumCombine(crc, uint32(i), 1<<20+int64(i&4095))
	}
	_ = crc
}

// BenchmarkChecksumMiB hashes 1 MiB: what a combine saves (ChecksumCombine's
// comment compares the two).
func BenchmarkChecksumMiB(b *testing.B) {
	data := make([]byte, 1<<20)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		Checksum(data)
	}
}
