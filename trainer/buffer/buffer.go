package buffer

import (
	"context"
	"sync"

	"github.com/sigdata/sig/trainer/model"
	"github.com/sigdata/sig/warehouse/blockref"
)

// Buffer is a host's FIFO of examples. Safe for concurrent use: readers Put,
// one batch builder Takes.
type Buffer struct {
	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every change
	f        model.Features
	ex       *model.Examples
	segs     []Segment // which unit each run of buffered rows came from
	capacity int
	added    int
	consumed int
	closed   bool
}

// Segment is a run of rows of one work unit (a block at a version), in
// buffer order.
type Segment struct {
	Unit blockref.Ref
	Rows int
}

// New returns a buffer for examples shaped by f holding at most capacity
// examples.
func New(f model.Features, capacity int) *Buffer {
	return &Buffer{f: f, ex: model.NewExamples(f), capacity: max(capacity, 1), changed: make(chan struct{})}
}

func (b *Buffer) notify() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// Put appends e, rows of unit, in order: as many rows at a time as there
// is room for, waiting while the buffer is full. A record larger than the
// room left goes in in parts, so the buffer fills up to its capacity
// whatever the records' size: a batch builder that waits for a whole batch
// (the host's) finds one whenever the capacity holds a batch. (A record that
// had to fit whole waited beside fewer rows than a batch, and the batch
// builder for a batch, forever: with 1,024-row records, a capacity of 1,024
// and batches of 128, after a 1,000-row unit's 7 batches.) It returns ctx's
// error if ctx ends first, or ErrClosed; the rows put before stay.
func (b *Buffer) Put(ctx context.Context, unit blockref.Ref, e *model.Examples) error {
	n := e.Len()
	for off := 0; off < n; {
		err := b.await(ctx, func() bool {
			room := b.capacity - b.ex.Len()
			if room <= 0 {
				return false
			}
			k := min(room, n-off)
			if off == 0 && k == n {
				b.ex.Append(e)
			} else {
				b.ex.Append(e.Slice(off, off+k))
			}
			if s := len(b.segs); s > 0 && b.segs[s-1].Unit == unit {
				b.segs[s-1].Rows += k
			} else {
				b.segs = append(b.segs, Segment{unit, k})
			}
			off += k
			b.added += k
			b.notify()
			return true
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// await is the one wait of Put and Wait: it runs ready under b.mu until
// ready reports true, waiting for the buffer's next change after each
// false. It returns ErrClosed once the buffer is closed, ctx's error if ctx
// ends first.
func (b *Buffer) await(ctx context.Context, ready func() bool) error {
	for {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return ErrClosed
		}
		if ready() {
			b.mu.Unlock()
			return nil
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// Take removes up to n examples from the front and returns them with the
// runs of rows of each unit they carry, in order (the controller attributes
// every event id to its unit with them). It does not wait; it returns an
// empty set when the buffer is empty.
func (b *Buffer) Take(n int) (*model.Examples, []Segment) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n = min(n, b.ex.Len())
	out := b.ex.Slice(0, n)
	b.ex.DropFront(n)
	var segs []Segment
	left := n
	for left > 0 {
		s := &b.segs[0]
		k := min(s.Rows, left)
		segs = append(segs, Segment{s.Unit, k})
		s.Rows -= k
		left -= k
		if s.Rows == 0 {
			b.segs = b.segs[1:]
		}
	}
	b.consumed += n
	if n > 0 {
		b.notify()
	}
	return out, segs
}

// Changed returns a channel closed at the buffer's next change.
func (b *Buffer) Changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changed
}

// Rows sums segments by unit.
func Rows(segs []Segment) map[blockref.Ref]int64 {
	out := map[blockref.Ref]int64{}
	for _, s := range segs {
		out[s.Unit] += int64(s.Rows)
	}
	return out
}

// Wait returns when the buffer holds at least n examples, or changes at
// all when n <= 0, or ctx ends.
func (b *Buffer) Wait(ctx context.Context, n int) error {
	changed := false
	return b.await(ctx, func() bool {
		if n <= 0 {
			// The first call sees the buffer before any change.
			done := changed
			changed = true
			return done
		}
		return b.ex.Len() >= n
	})
}

// Len is the number of buffered examples.
func (b *Buffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ex.Len()
}

// Capacity is the buffer's capacity in examples.
func (b *Buffer) Capacity() int { return b.capacity }

// Counters returns the examples added and consumed since the last call,
// and the number buffered now: one Observation interval.
func (b *Buffer) Counters() (added, consumed, buffered int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	added, consumed = b.added, b.consumed
	b.added, b.consumed = 0, 0
	return added, consumed, b.ex.Len()
}

// Close wakes every waiter with ErrClosed and drops the contents.
func (b *Buffer) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		b.ex = model.NewExamples(b.f)
		b.segs = nil
		b.notify()
	}
}

type constErr string

func (e constErr) Error() string { return string(e) }

// ErrClosed is returned by Put and Wait after Close.
const ErrClosed = constErr("buffer: closed")
