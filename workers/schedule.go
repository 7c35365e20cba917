package workers

// Head is the first task of one client's queue, as the scheduler sees it:
// whose queue, and at what priority.
type Head struct {
	Client   string
	Priority int32
}

// Fairness is the scheduler's memory: for each priority, the client served
// last at that priority. Keeping one cursor per priority means a burst of
// higher-priority work does not reset the round-robin among lower-priority
// clients: when it is over, they resume where they left off.
//
// A Fairness value is never modified by Schedule; treat it as immutable.
type Fairness struct {
	Last map[int32]string
}

// Schedule is the scheduling decision (paper IV.A, "Prioritization"): given
// the heads of the non-empty client queues, it picks the client whose head
// task is leased next, and returns the new fairness state.
//
// Highest priority first; among the clients whose heads share that priority,
// round-robin in client-name order, starting after the client served last at
// that priority. Within a client's queue, order is priority then enqueue
// order; that is the queue's business, not the scheduler's.
//
// Schedule is pure and deterministic: the result depends on the set of heads
// (not their order) and on f, and f is not modified. ok is false when heads
// is empty.
func Schedule(heads []Head, f Fairness) (client string, next Fairness, ok bool) {
	if len(heads) == 0 {
		return "", f, false
	}
	top := heads[0].Priority
	for _, h := range heads[1:] {
		if h.Priority > top {
			top = h.Priority
		}
	}
	last, served := f.Last[top]
	// The smallest name after last (the round-robin successor), and the
	// smallest name overall (where the round wraps).
	var after, first string
	var haveAfter, haveFirst bool
	for _, h := range heads {
		if h.Priority != top {
			continue
		}
		if !haveFirst || h.Client < first {
			first, haveFirst = h.Client, true
		}
		if served && h.Client > last && (!haveAfter || h.Client < after) {
			after, haveAfter = h.Client, true
		}
	}
	client = first
	if haveAfter {
		client = after
	}
	m := make(map[int32]string, len(f.Last)+1)
	for p, c := range f.Last {
		m[p] = c
	}
	m[top] = client
	return client, Fairness{Last: m}, true
}
