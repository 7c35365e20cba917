package control

import (
	"testing"
	"time"

	"github.com/sigdata/sig/warehouse/blockref"
)

// TestPreemptScopeIsItsOwnField: a broadcast preemption notice says what it
// covers in Scope (ScopeJob, or the host's id), never in Reason; a hold
// lifted because the data came says so in Reason, as a released one does.
func TestPreemptScopeIsItsOwnField(t *testing.T) {
	at := epoch0
	m := New(Config{Hosts: 2})
	feed := func(ev Event) []Action {
		at = at.Add(time.Second)
		ev.At = at
		return m.Handle(ev)
	}
	find := func(acts []Action, k ActionKind) Action {
		t.Helper()
		for _, a := range acts {
			if a.Kind == k {
				return a
			}
		}
		t.Fatalf("no %s in %v", k, acts)
		return Action{}
	}
	feed(Event{Kind: EvStart})
	feed(Event{Kind: EvSetupDone})
	feed(Event{Kind: EvRestored})
	blocks := func(ready bool) []Block {
		bs := []Block{{Ref: blockref.New("b1", 1), Ready: ready}}
		for _, id := range []string{"b2", "b3", "b4", "b5", "b6"} {
			bs = append(bs, Block{Ref: blockref.New(id, 1), Ready: true})
		}
		return bs
	}
	find(feed(Event{Kind: EvBlocks, Blocks: blocks(false)}), ActPlaceHold) // b1 pending: a transient hold
	lift := find(feed(Event{Kind: EvBlocks, Blocks: blocks(true)}), ActLiftHold)
	if lift.Reason != "data ready" {
		t.Errorf("transient hold lifted with reason %q, want data ready", lift.Reason)
	}

	for _, tc := range []struct{ scope, want string }{{"h1", "h1"}, {"", ScopeJob}, {ScopeJob, ScopeJob}} {
		m := New(Config{Hosts: 2})
		m.Handle(Event{Kind: EvStart, At: epoch0})
		a := find(m.Handle(Event{Kind: EvPreempt, At: epoch0, Deadline: epoch0.Add(time.Minute), Scope: tc.scope}), ActBroadcastPreempt)
		if a.Scope != tc.want || a.Reason != "" {
			t.Errorf("notice of scope %q: broadcast scope %q reason %q, want scope %q and no reason", tc.scope, a.Scope, a.Reason, tc.want)
		}
	}
}
