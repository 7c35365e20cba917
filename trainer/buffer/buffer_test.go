package buffer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sigdata/sig/trainer/model"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/blockref"
)

// unit names a work unit in these tests.
func unit(s string) blockref.Ref { return blockref.Parse(s) }

func features(t *testing.T) model.Features {
	f, err := model.NewFeatures([]model.Input{{Name: "q", Type: transform.ListInt64}, {Name: "p", Type: transform.Float64}})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func rows(f model.Features, first int64, n int) *model.Examples {
	e := model.NewExamples(f)
	for i := 0; i < n; i++ {
		o := model.NewExamples(f)
		o.EventIDs = []int64{first + int64(i)}
		o.Labels = []float32{0}
		o.Sparse[0] = model.SparseColumn{Offsets: []int32{0, 1}, IDs: []uint64{uint64(i)}}
		o.Dense[0] = []float32{1}
		e.Append(o)
	}
	return e
}

func TestTakeReportsRowsPerUnit(t *testing.T) {
	f := features(t)
	b := New(f, 100)
	ctx := context.Background()
	if err := b.Put(ctx, unit("u1"), rows(f, 0, 5)); err != nil {
		t.Fatal(err)
	}
	_ = b.Put(ctx, unit("u2"), rows(f, 100, 3))
	_ = b.Put(ctx, unit("u2"), rows(f, 103, 2))
	_ = b.Put(ctx, unit("u1"), rows(f, 5, 4))
	got, segs := b.Take(7)
	if want := []Segment{{unit("u1"), 5}, {unit("u2"), 2}}; got.Len() != 7 || len(segs) != 2 || segs[0] != want[0] || segs[1] != want[1] {
		t.Fatalf("take 7: %d examples, %v", got.Len(), segs)
	}
	if per := Rows(segs); per[unit("u1")] != 5 || per[unit("u2")] != 2 {
		t.Fatalf("rows per unit of take 7: %v", per)
	}
	if got.EventIDs[5] != 100 {
		t.Fatalf("order: %v", got.EventIDs)
	}
	got, segs = b.Take(100)
	per := Rows(segs)
	if got.Len() != 7 || per[unit("u2")] != 3 || per[unit("u1")] != 4 || len(segs) != 2 {
		t.Fatalf("take rest: %d, %v", got.Len(), segs)
	}
	if got, segs := b.Take(5); got.Len() != 0 || len(segs) != 0 {
		t.Fatal("take from empty")
	}
	a, c, n := b.Counters()
	if a != 14 || c != 14 || n != 0 {
		t.Fatalf("counters %d %d %d", a, c, n)
	}
}

func TestPutBlocksWhileFull(t *testing.T) {
	f := features(t)
	b := New(f, 10)
	ctx := context.Background()
	// An oversized put fills the buffer and waits with the rest.
	done := make(chan error, 1)
	go func() { done <- b.Put(ctx, unit("u"), rows(f, 0, 12)) }()
	if err := b.Wait(ctx, 10); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("a put of 12 into a buffer of 10 returned %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if b.Len() != 10 {
		t.Fatalf("len %d, want the capacity 10", b.Len())
	}
	if got, _ := b.Take(8); got.Len() != 8 || got.EventIDs[7] != 7 {
		t.Fatalf("take 8: %v", got.EventIDs)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if b.Len() != 4 {
		t.Fatalf("len %d after the rest went in", b.Len())
	}
	go func() { done <- b.Put(ctx, unit("u"), rows(f, 12, 7)) }()
	select {
	case err := <-done:
		t.Fatalf("put into a nearly full buffer returned %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	b.Take(8)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if b.Len() != 3 {
		t.Fatalf("len %d", b.Len())
	}
	// Close wakes a blocked put.
	_ = b.Put(ctx, unit("u"), rows(f, 19, 7))
	go func() { done <- b.Put(ctx, unit("u"), rows(f, 26, 5)) }()
	time.Sleep(10 * time.Millisecond)
	b.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := New(f, 1).Wait(cctx, 5); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

// TestRecordsLargerThanTheRoomLeft: a host's batch builder waits for a
// whole batch, so the buffer must fill up to its capacity whatever the
// records' size. With 1,000-row records (a reader's record batch of a
// whole block), a capacity of 1,024 and batches of 128, a unit's seven
// batches leave 104 rows: the next record went in only whole, did not fit,
// and the buffer stayed at 104, below a batch, forever (the host's stall
// in BenchmarkCaughtUpStream). Now it goes in in parts, every row once and
// in order, each part counted for its unit.
func TestRecordsLargerThanTheRoomLeft(t *testing.T) {
	f := features(t)
	const capacity, batch, record = 1024, 128, 1000
	b := New(f, capacity)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		for u := range 3 {
			if err := b.Put(ctx, unit(fmt.Sprintf("u%d", u)), rows(f, int64(u*record), record)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	var next int64
	per := map[blockref.Ref]int{}
	for next < 3*record {
		want := min(batch, 3*record-int(next))
		if err := b.Wait(ctx, want); err != nil {
			t.Fatalf("waiting for a batch of %d at row %d: %v (buffered %d of %d)", want, next, err, b.Len(), capacity)
		}
		got, segs := b.Take(batch)
		for i, id := range got.EventIDs {
			if id != next+int64(i) {
				t.Fatalf("row %d of the batch at %d is event %d", i, next, id)
			}
		}
		next += int64(got.Len())
		for u, r := range Rows(segs) {
			per[u] += int(r)
		}
		if b.Len() > capacity {
			t.Fatalf("buffered %d, capacity %d", b.Len(), capacity)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if per[unit("u0")] != record || per[unit("u1")] != record || per[unit("u2")] != record {
		t.Fatalf("rows per unit %v", per)
	}
}

// TestWaitForAnyChange: Wait with n <= 0 returns at the buffer's next
// change, and Close wakes it with ErrClosed like every other waiter.
func TestWaitForAnyChange(t *testing.T) {
	f := features(t)
	b := New(f, 10)
	ctx := context.Background()
	done := make(chan error, 1)
	go func() { done <- b.Wait(ctx, 0) }()
	select {
	case err := <-done:
		t.Fatalf("wait returned %v before any change", err)
	case <-time.After(20 * time.Millisecond):
	}
	_ = b.Put(ctx, unit("u"), rows(f, 0, 1))
	if err := <-done; err != nil {
		t.Fatalf("wait after a put: %v", err)
	}
	go func() { done <- b.Wait(ctx, 0) }()
	time.Sleep(10 * time.Millisecond)
	b.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("wait woken by close: %v, want ErrClosed", err)
	}
}

func TestDecide(t *testing.T) {
	s := Scaling{Min: 1, Max: 4}
	cases := []struct {
		name string
		o    Observation
		want int
	}{
		{"empty buffer: more", Observation{Buffered: 0, Capacity: 100, InFlight: 1}, 2},
		{"draining faster than filling below half: more", Observation{Buffered: 40, Capacity: 100, Added: 10, Consumed: 30, InFlight: 2}, 3},
		{"draining faster but above half: hold", Observation{Buffered: 60, Capacity: 100, Added: 10, Consumed: 30, InFlight: 2}, 2},
		{"filling faster in the band: hold", Observation{Buffered: 40, Capacity: 100, Added: 30, Consumed: 10, InFlight: 2}, 2},
		{"full: fewer", Observation{Buffered: 95, Capacity: 100, InFlight: 3}, 2},
		{"at max", Observation{Buffered: 0, Capacity: 100, InFlight: 4}, 4},
		{"at min", Observation{Buffered: 100, Capacity: 100, InFlight: 1}, 1},
		{"below min", Observation{Buffered: 50, Capacity: 100, InFlight: 0}, 1},
	}
	for _, c := range cases {
		if got := Decide(s, c.o); got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, got, c.want)
		}
	}
	if got := Decide(Scaling{Min: 1, Max: 1}, Observation{Capacity: 10}); got != 1 {
		t.Errorf("fixed: %d", got)
	}
}
