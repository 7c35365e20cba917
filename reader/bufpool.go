package reader

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

// dirtyPool is a buffer pool that does not zero the buffers it hands out.
// gRPC's default pool does; a reader marshals a few hundred KiB per batch
// into such buffers (readerBufferPool) and fetches whole column segments
// into others (segmentPool), overwriting every byte each time, so the
// zeroing is pure cost. Every user writes a buffer whole before reading it.
type dirtyPool struct {
	classes [maxPoolClass + 1]sync.Pool
}

const (
	minPoolClass = 10 // 1 KiB
	maxPoolClass = 24 // 16 MiB; larger buffers are not pooled
)

var readerBufferPool mem.BufferPool = &dirtyPool{}

func poolClass(n int) int {
	if n <= 1<<minPoolClass {
		return minPoolClass
	}
	return bits.Len(uint(n - 1))
}

// Get implements mem.BufferPool.
func (p *dirtyPool) Get(length int) *[]byte {
	c := poolClass(length)
	if c > maxPoolClass {
		b := make([]byte, length)
		return &b
	}
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		*b = (*b)[:length]
		return b
	}
	b := make([]byte, length, 1<<c)
	return &b
}

// Put implements mem.BufferPool.
func (p *dirtyPool) Put(b *[]byte) {
	c := poolClass(cap(*b))
	if c <= maxPoolClass && cap(*b) == 1<<c {
		p.classes[c].Put(b)
	}
}
