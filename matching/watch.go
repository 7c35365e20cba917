package matching

import (
	"sync"

	"github.com/sigdata/sig/canon"
)

// Watching memo entries (completeness monitoring, paper IV.A): a
// subscriber — sigd's WatchReadSolution — gets every change of the memo
// entries of the keys it follows, made by the frontend (memo.go) or told
// by an eviction (Notify).

// Watch subscribes to changes of the memo entries of the given components.
// The returned channel receives every change until cancel is called; a
// subscriber that falls behind by more than its buffer loses changes and is
// told so by a closed channel (it then re-reads the solution).
func (f *Frontend) Watch(keys []canon.Key) (<-chan MemoEntry, func()) {
	return f.watch.subscribe(keys)
}

// Notify tells watchers of a change made outside the frontend (eviction).
func (f *Frontend) Notify(e MemoEntry) { f.watch.notify(e.Component, e) }

// notifier fans memo changes out to watchers.
type notifier struct {
	mu   sync.Mutex
	subs map[canon.Key]map[*subscriber]bool
}

type subscriber struct {
	ch     chan MemoEntry
	closed bool
}

// watchBuffer is a subscription's channel capacity. A subscriber that
// falls further behind is not silently skipped: notify closes its channel
// and it re-reads the whole solution. So the buffer only has to absorb
// ordinary bursts (a few blocks completing while the watcher sends); a
// small one keeps an idle subscription small: 64 entries of 136 bytes
// (unsafe.Sizeof(MemoEntry{})), 8.5 KiB.
const watchBuffer = 64

func (n *notifier) subscribe(keys []canon.Key) (<-chan MemoEntry, func()) {
	s := &subscriber{ch: make(chan MemoEntry, watchBuffer)}
	n.mu.Lock()
	if n.subs == nil {
		n.subs = map[canon.Key]map[*subscriber]bool{}
	}
	for _, k := range keys {
		if n.subs[k] == nil {
			n.subs[k] = map[*subscriber]bool{}
		}
		n.subs[k][s] = true
	}
	n.mu.Unlock()
	cancel := func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		for _, k := range keys {
			delete(n.subs[k], s)
			if len(n.subs[k]) == 0 {
				delete(n.subs, k)
			}
		}
		if !s.closed {
			s.closed = true
			close(s.ch)
		}
	}
	return s.ch, cancel
}

func (n *notifier) notify(k canon.Key, e MemoEntry) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for s := range n.subs[k] {
		if s.closed {
			continue
		}
		select {
		case s.ch <- e:
		default:
			// Too far behind: close so the watcher re-reads everything.
			s.closed = true
			close(s.ch)
		}
	}
}
