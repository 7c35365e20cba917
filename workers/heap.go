package workers

// qitem is a task's place in one client's queue.
type qitem struct {
	t      *task
	client string
	prio   int32 // the task's priority in this client's queue
	idx    int   // position in clientQueue.items
}

// clientQueue is one client's queue: a binary heap ordered by priority
// (highest first), then enqueue sequence (oldest first), the order of the
// client's q keys in Pebble. Open does not read those keys into it: it
// pushes each queued task as Enqueue does (state.go, "restore").
type clientQueue struct{ items []*qitem }

func (c *clientQueue) Len() int { return len(c.items) }

func (c *clientQueue) Less(i, j int) bool {
	a, b := c.items[i], c.items[j]
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	return a.t.rec.seq < b.t.rec.seq
}

func (c *clientQueue) Swap(i, j int) {
	c.items[i], c.items[j] = c.items[j], c.items[i]
	c.items[i].idx = i
	c.items[j].idx = j
}

func (c *clientQueue) Push(x any) {
	it := x.(*qitem)
	it.idx = len(c.items)
	c.items = append(c.items, it)
}

func (c *clientQueue) Pop() any {
	n := len(c.items) - 1
	it := c.items[n]
	c.items[n] = nil
	c.items = c.items[:n]
	it.idx = -1
	return it
}
