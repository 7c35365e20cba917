package reader

import "testing"

// TestDirtyPoolSizes: buffers have the length asked, come back by class,
// and foreign or oversized buffers are not pooled.
func TestDirtyPoolSizes(t *testing.T) {
	p := &dirtyPool{}
	for _, n := range []int{0, 1, 1024, 1025, 300 << 10, 16 << 20, 16<<20 + 1} {
		b := p.Get(n)
		if len(*b) != n {
			t.Fatalf("Get(%d): length %d", n, len(*b))
		}
		if c := poolClass(n); c <= maxPoolClass && cap(*b) != 1<<c {
			t.Fatalf("Get(%d): capacity %d, want %d", n, cap(*b), 1<<c)
		}
		p.Put(b)
	}
	odd := make([]byte, 3000)
	p.Put(&odd) // not a pool buffer: dropped
	if b := p.Get(3000); cap(*b) != 4096 {
		t.Fatalf("capacity %d: a foreign buffer came back", cap(*b))
	}
}
