package workers

import (
	"cmp"
	"slices"
	"time"
)

// Ahead is some of the work queued ahead of a task: Tasks of Client's
// queue at Priority.
type Ahead struct {
	Client   string
	Priority int32
	Tasks    int
}

// Position is where one task stands, for a caller asking why its memo
// entry is not ready yet (issue 30, sigd's ExplainPending).
type Position struct {
	// State is queued, leased or quarantined; 0: the queue does not hold
	// the task (completed, cancelled or never enqueued).
	State State
	// Ahead is the work the scheduler would lease before the task, by
	// client and priority, most tasks first (queued tasks only; see
	// explain).
	Ahead []Ahead
	// Client and Priority are the queue the task was judged in: the
	// asking client's, if it requested the task, else the best one.
	Client   string
	Priority int32
	// Since is when the task entered its state; Worker leases it
	// (leased); Attempts and Err are its failures so far.
	Since    time.Time
	Worker   string
	Attempts int
	Err      string
}

// Explain says, for each task, where it stands in the queue as client's
// pipelines see it: queued behind which work, leased by which worker
// since when, quarantined with which cause. It changes nothing.
func (q *Queue) Explain(client string, ids []TaskID) []Position {
	var out []Position
	q.read(func(s *state) { out = s.explain(client, ids) })
	return out
}

// explain: see Queue.Explain. For a queued task it counts what the
// scheduler (schedule.go) leases first: every task of a higher priority
// in any client's queue; in the task's own client queue, the tasks before
// it (higher priority, or the same and enqueued earlier); and in each
// other client's queue at the task's priority, as many as round-robin
// serves before the task's turn (one per round: the tasks ahead of it in
// its own queue at that priority, plus one if that client's turn comes
// before the task's client's in the round). A task in several queues is
// counted once, in the queue where it weighs most. Batches (a lease takes
// a block's tasks together) and leases ending out of order make it an
// estimate of the order, not a promise.
func (s *state) explain(client string, ids []TaskID) []Position {
	out := make([]Position, len(ids))
	for i, id := range ids {
		t := s.tasks[id]
		if t == nil {
			continue
		}
		p := &out[i]
		p.State, p.Since, p.Attempts, p.Err = t.rec.state, t.rec.since, t.rec.attempts, t.rec.err
		switch t.rec.state {
		case StateLeased:
			p.Worker, p.Client, p.Priority = t.rec.worker, t.rec.client, t.rec.priority
			continue
		case StateQueued:
		default:
			continue
		}
		var mine *qitem
		for _, it := range t.items {
			if it.client == client {
				mine = it
			}
		}
		if mine == nil {
			mine = bestItem(t.items)
		}
		if mine == nil {
			continue
		}
		p.Client, p.Priority = mine.client, mine.prio
		p.Ahead = s.ahead(mine)
	}
	return out
}

// ahead counts the tasks leased before it's (see explain).
func (s *state) ahead(it *qitem) []Ahead {
	type cp struct {
		client string
		prio   int32
	}
	seen := map[*task]bool{it.t: true}
	counts := map[cp]int{}
	add := func(o *qitem) {
		if !seen[o.t] {
			seen[o.t] = true
			counts[cp{o.client, o.prio}]++
		}
	}
	before := func(a, b *qitem) bool {
		return a.prio > b.prio || a.prio == b.prio && a.t.rec.seq < b.t.rec.seq
	}
	// Its own queue first: its turn at its priority is its rank there.
	rank := 0
	for _, o := range s.queues[it.client].items {
		if o != it && before(o, it) {
			add(o)
			if o.prio == it.prio {
				rank++
			}
		}
	}
	// Round-robin at the task's priority starts after the client served
	// last there (schedule.go): a client before the task's in that
	// rotation is served once more in the task's round.
	last, served := s.fair.Last[it.prio]
	wraps := func(c string) bool { return served && c <= last } // served in the next round
	mine := wraps(it.client)
	for c, cq := range s.queues {
		if c == it.client {
			continue
		}
		share := rank
		if w := wraps(c); w == mine && c < it.client || !w && mine {
			share++ // its turn comes before the task's client's in a round
		}
		// The other queue's items in its own order, so that the round-robin
		// share at the task's priority is the oldest ones.
		items := slices.Clone(cq.items)
		slices.SortFunc(items, func(a, b *qitem) int {
			if a.prio != b.prio {
				return cmp.Compare(b.prio, a.prio)
			}
			return cmp.Compare(a.t.rec.seq, b.t.rec.seq)
		})
		same := 0
		for _, o := range items {
			switch {
			case o.prio > it.prio:
				add(o)
			case o.prio == it.prio && same < share:
				same++
				add(o)
			}
		}
	}
	out := make([]Ahead, 0, len(counts))
	for k, n := range counts {
		out = append(out, Ahead{Client: k.client, Priority: k.prio, Tasks: n})
	}
	slices.SortFunc(out, func(a, b Ahead) int {
		return cmp.Or(cmp.Compare(b.Tasks, a.Tasks), cmp.Compare(b.Priority, a.Priority), cmp.Compare(a.Client, b.Client))
	})
	return out
}
