package clock

import (
	"testing"
	"time"
)

func TestFakeAfterFiresOnAdvance(t *testing.T) {
	start := time.Unix(1000, 0)
	f := NewFake(start)
	ch := f.After(10 * time.Second)
	f.Advance(5 * time.Second)
	select {
	case <-ch:
		t.Fatal("fired early")
	default:
	}
	f.Advance(5 * time.Second)
	select {
	case got := <-ch:
		if !got.Equal(start.Add(10 * time.Second)) {
			t.Fatalf("fired at %v", got)
		}
	default:
		t.Fatal("did not fire")
	}
}
