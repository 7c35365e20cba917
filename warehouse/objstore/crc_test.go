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
