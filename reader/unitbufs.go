package reader

import (
	"sync"
	"sync/atomic"
)

// segmentPool recycles the buffers SIG reads fetch column segments into
// (block.FetchSegmentsInto): power-of-two size classes that are not zeroed,
// since every byte is overwritten by the object store's response before
// anything reads it. A fresh zeroed buffer per ranged GET costs clearing
// it, then faulting its pages in, then collecting it.
//
// Memory: buffers are out only while the unit that took them is served,
// and at most Config.MaxConcurrentUnits units are served at once; the
// buffers idle in the pool are sync.Pool's, which the garbage collector
// frees when they stay unused.
var segmentPool = &dirtyPool{}

// scribbleReleased makes unitBuffers.release overwrite every buffer before
// pooling it (tests: a buffer recycled while something still reads it then
// changes what a stream sends).
var scribbleReleased atomic.Bool

// unitBuffers are the fetch buffers of one unit.
//
// Lifetime: the segments fetched into them, and every array decoded from
// those segments (block.DecodeSegmentInto aliases the bytes, and
// decompresses a compressed segment's buffers into more of them: the raw
// block's columns, the memo values, LOCAL outputs that pass a raw column
// through), are views of these buffers. They go back to the pool only in release,
// which Server.serve defers before it loads the unit: it runs after the
// last batch was encoded and sent (or the call failed), after the columns
// were released, and after every fetch of the unit has returned (load
// waits for all its reads, and FetchSegmentsInto for all its requests), so
// that nothing reads or writes a buffer once another unit can take it.
// Nothing a Serve call returns or keeps (responses, errors, stats) refers
// to them: the encoder copies every byte it sends into the response's own
// buffer (batchMessage), which gRPC may still hold after serve returns.
type unitBuffers struct {
	mu       sync.Mutex
	bufs     []*[]byte
	released bool
}

// alloc implements block.Alloc. It may be called from several goroutines.
func (u *unitBuffers) alloc(n int) []byte {
	b := segmentPool.Get(n)
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.released {
		// A fetch outliving its unit would write into a buffer another
		// unit may be reading; serve's ordering rules that out.
		panic("reader: fetch buffer asked for after the unit's buffers were released")
	}
	u.bufs = append(u.bufs, b)
	return *b
}

// release returns every buffer to the pool. See the type's comment for
// when it may be called.
func (u *unitBuffers) release() {
	u.mu.Lock()
	defer u.mu.Unlock()
	scribble := scribbleReleased.Load()
	for _, b := range u.bufs {
		if scribble {
			full := (*b)[:cap(*b)]
			for i := range full {
				full[i] = 0xDB
			}
		}
		segmentPool.Put(b)
	}
	u.bufs, u.released = nil, true
}
