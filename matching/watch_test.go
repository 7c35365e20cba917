package matching

import (
	"testing"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/warehouse/blockref"
)

// TestWatchOverflowCloses: a subscriber that falls more than watchBuffer
// changes behind is told so by its channel closing after the buffered
// changes (the watch stream then re-reads the solution); it never just
// misses a change. Other keys' subscribers are unaffected.
func TestWatchOverflowCloses(t *testing.T) {
	var n notifier
	k, other := canon.Key{1}, canon.Key{2}
	ch, cancel := n.subscribe([]canon.Key{k})
	defer cancel()
	och, ocancel := n.subscribe([]canon.Key{other})
	defer ocancel()
	for i := range watchBuffer + 1 {
		n.notify(k, MemoEntry{Component: k, Block: blockref.NewMemo(string(rune('a'+i%26)), 1), State: MemoReady})
	}
	got := 0
	for range ch {
		got++
	}
	if got != watchBuffer {
		t.Fatalf("received %d changes before the close, want the %d buffered", got, watchBuffer)
	}
	n.notify(k, MemoEntry{Component: k}) // after the close: no panic
	n.notify(other, MemoEntry{Component: other, State: MemoReady})
	select {
	case e, ok := <-och:
		if !ok || e.Component != other {
			t.Fatalf("other subscriber: %+v, %v", e, ok)
		}
	default:
		t.Fatal("other subscriber got nothing")
	}
	cancel() // cancel after an overflow close must not close twice
}
