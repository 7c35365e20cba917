package fleet

import (
	"context"
	"reflect"
	"testing"
	"time"
)

func TestSchedulerWholeSlicesAndHolds(t *testing.T) {
	s := NewScheduler(16)
	must := func(got []string, err error) []string {
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	eq := func(what string, got, want []string) {
		t.Helper()
		if len(got) == 0 && len(want) == 0 {
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: started %v, want %v", what, got, want)
		}
	}
	eq("a", must(s.Request("a", 8, 0)), []string{"a"})
	eq("b", must(s.Request("b", 12, 0)), nil) // no partial slices
	eq("c", must(s.Request("c", 4, 0)), []string{"c"})
	if u := s.Usage(); u != (Usage{Training: 12, Queued: 12}) {
		t.Fatalf("usage %+v", u)
	}
	// A hold gives the chips back (b can start) and keeps the demand.
	eq("hold a", s.Hold("a", 8), []string{"b"})
	if u := s.Usage(); u != (Usage{Training: 16, OnHold: 8}) || s.Free() != 0 {
		t.Fatalf("usage %+v free %d", s.Usage(), s.Free())
	}
	// The hold lifted: a queues again and waits for room.
	eq("a back", must(s.Request("a", 8, 0)), nil)
	eq("c done", s.Release("c"), nil)
	eq("b done", s.Release("b"), []string{"a"})
	if _, err := s.Request("x", 17, 0); err == nil {
		t.Fatal("a slice larger than the fleet accepted")
	}
}

func TestSchedulerPriorityAndBackfill(t *testing.T) {
	s := NewScheduler(16)
	s.Request("big", 12, 0)
	s.Request("low", 8, 0)   // waits
	s.Request("small", 4, 0) // backfills next to big
	if s.State("small") != Running || s.State("low") != Queued {
		t.Fatalf("backfill: small %s low %s", s.State("small"), s.State("low"))
	}
	// A high-priority job that does not fit: nothing of lower priority
	// starts in front of it, and the victims that make room are named.
	s.Request("hi", 16, 1)
	if v := s.Victims(16, 1); !reflect.DeepEqual(v, []string{"small", "big"}) {
		t.Fatalf("victims %v", v)
	}
	if got := s.Release("small"); len(got) != 0 {
		t.Fatalf("started %v while hi waits", got)
	}
	if got := s.Release("big"); !reflect.DeepEqual(got, []string{"hi"}) {
		t.Fatalf("started %v, want hi", got)
	}
	if v := s.Victims(8, 0); v != nil {
		t.Fatalf("victims of equal priority: %v", v)
	}
	strict := NewScheduler(16)
	strict.NoBackfill = true
	strict.Request("big", 12, 0)
	strict.Request("low", 8, 0)
	strict.Request("small", 4, 0)
	if strict.State("small") != Queued {
		t.Fatal("strict queue backfilled")
	}
}

func TestSharedAcquireRelease(t *testing.T) {
	f := NewShared(8)
	ctx := context.Background()
	if err := f.Acquire(ctx, "a", 8); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- f.Acquire(ctx, "b", 4) }()
	select {
	case err := <-got:
		t.Fatalf("b granted while a holds the fleet: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	f.Release("a")
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	// A waiter that gives up leaves the queue.
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := f.Acquire(cctx, "c", 8); err == nil {
		t.Fatal("c granted")
	}
	if u := f.Usage(); u != (Usage{Training: 4}) {
		t.Fatalf("usage %+v", u)
	}
	// A job that already holds its slice is granted at once, not parked
	// forever waiting for a start that never comes.
	quick, cancelQuick := context.WithTimeout(ctx, 5*time.Second)
	defer cancelQuick()
	if err := f.Acquire(quick, "b", 4); err != nil {
		t.Fatalf("re-acquire by the running job: %v", err)
	}
	// Two waiters for one job: the second is refused, the first still
	// gets the chips when they free up.
	if err := f.Acquire(ctx, "x", 4); err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { first <- f.Acquire(ctx, "d", 8) }()
	deadline := time.Now().Add(5 * time.Second)
	for f.Usage().Queued == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := f.Acquire(ctx, "d", 8); err == nil {
		t.Fatal("a second waiter for d was accepted")
	}
	f.Release("b")
	f.Release("x")
	if err := <-first; err != nil {
		t.Fatalf("first waiter for d: %v", err)
	}
}
