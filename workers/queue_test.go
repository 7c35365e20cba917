package workers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/warehouse/blockref"
)

func openTest(t *testing.T, dir string, clk clock.Clock, mod ...func(*Options)) *Queue {
	t.Helper()
	o := Options{Clock: clk}
	for _, m := range mod {
		m(&o)
	}
	q, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func req(comp, block, client, pipeline string, prio int32) Request {
	return Request{Task: TaskID{Component: nameKey(comp), Block: blockref.ParseMemo(block)}, Client: client, Pipeline: pipeline, Priority: prio}
}

// buildMixedState puts a queue through every kind of change, leaving queued
// tasks in several clients' queues at several priorities, shared tasks,
// leased tasks, a cancelled lease and quarantined tasks.
func buildMixedState(t *testing.T, q *Queue, clk *clock.Fake) {
	t.Helper()
	ctx := context.Background()
	var reqs []Request
	for i := 0; i < 60; i++ {
		c := fmt.Sprintf("c%d", i%3)
		reqs = append(reqs, req(fmt.Sprintf("k%02d", i%7), fmt.Sprint(i), c, fmt.Sprintf("p%d", i%4), int32(i%5)))
	}
	// Shared: the same tasks wanted by other clients and pipelines.
	for i := 0; i < 60; i += 5 {
		reqs = append(reqs, req(fmt.Sprintf("k%02d", i%7), fmt.Sprint(i), "shared", "s", int32(i%9)))
	}
	if _, err := q.Enqueue(reqs...); err != nil {
		t.Fatal(err)
	}
	if _, err := q.SetPriority("c1", "p1", 8); err != nil {
		t.Fatal(err)
	}
	var leases []Lease
	for i := 0; i < 12; i++ {
		l, ok, err := q.TryLease(fmt.Sprintf("w%d", i))
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		leases = append(leases, l)
		clk.Advance(time.Second)
	}
	for i, l := range leases[:4] {
		if err := q.Complete(ctx, l.ID, Result{Rows: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// Two tasks fail three times: quarantined.
	for _, l := range leases[4:6] {
		id := l.Task.ID
		cur := l
		for a := 0; a < 3; a++ {
			if _, err := q.Fail(ctx, cur.ID, "boom "+id.String()); err != nil {
				t.Fatal(err)
			}
			if a == 2 {
				break
			}
			// Lease until we get this task back (others go back with Fail).
			for {
				l2, ok, err := q.TryLease("retry")
				if err != nil || !ok {
					t.Fatal(ok, err)
				}
				if l2.Task.ID == id {
					cur = l2
					break
				}
				if _, err := q.Fail(ctx, l2.ID, "not this one"); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if _, err := q.Cancel(leases[6].Task.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := q.RemovePipeline("c2", "p2"); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Heartbeat(ctx, leases[7].ID); err != nil {
		t.Fatal(err)
	}
}

// TestReopenKeepsEveryTask: after a close and reopen, every queued, leased
// and quarantined task is where it was: same queues in the same order, same
// leases (still completable by their holders), same quarantine.
func TestReopenKeepsEveryTask(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(t0)
	q := openTest(t, dir, clk)
	buildMixedState(t, q, clk)
	before := q.dump()
	st := q.Stats()
	if st.Queued == 0 || st.Leased == 0 || st.Quarantined == 0 {
		t.Fatalf("mixed state lacks a kind of task: %+v", st)
	}
	var leased []Lease
	for _, l := range q.st.leases {
		if !l.cancelled {
			leased = append(leased, l.snapshot())
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}

	q = openTest(t, dir, clk)
	defer q.Close()
	if after := q.dump(); after != before {
		t.Fatalf("state differs after reopen\n--- before\n%s--- after\n%s", before, after)
	}
	if got := q.Stats(); got.Queued != st.Queued || got.Leased != st.Leased || got.Quarantined != st.Quarantined {
		t.Errorf("stats after reopen %+v, before %+v", got, st)
	}
	for _, l := range leased {
		if err := q.Complete(context.Background(), l.ID, Result{}); err != nil {
			t.Errorf("completing lease %s held across the restart: %v", l.ID, err)
		}
	}
	// Lease order after reopen equals lease order of the same state never
	// closed: build it again in a second store and drain both.
	clk2 := clock.NewFake(t0)
	q2 := openTest(t, t.TempDir(), clk2)
	defer q2.Close()
	buildMixedState(t, q2, clk2)
	for _, l := range leased {
		if err := q2.Complete(context.Background(), l.ID, Result{}); err != nil {
			// Lease ids differ between stores (random nonce); complete by task.
			for _, l2 := range q2.st.leases {
				if l2.t.id == l.Task.ID {
					if err := q2.Complete(context.Background(), l2.id, Result{}); err != nil {
						t.Fatal(err)
					}
					break
				}
			}
		}
	}
	for i := 0; ; i++ {
		a, okA, errA := q.TryLease("w")
		b, okB, errB := q2.TryLease("w")
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		if okA != okB || a.Task.ID != b.Task.ID || a.Client != b.Client || a.Priority != b.Priority {
			t.Fatalf("lease %d: reopened queue gave %v %s@%d, never-closed queue %v %s@%d", i, a.Task.ID, a.Client, a.Priority, b.Task.ID, b.Client, b.Priority)
		}
		if !okA {
			break
		}
	}
}

// TestOpenChecksIndexes: Open refuses a store whose indexes disagree with
// its task records, or whose format it does not know; it upgrades one of
// the format before worker builds in place.
func TestOpenChecksIndexes(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(db *pebble.DB) error
		want   error
	}{
		{"orphan queue entry", func(db *pebble.DB) error {
			return db.Set(queueKey("c", 1, 999), storeID(TaskID{nameKey("ghost"), blockref.ParseMemo("b")}), pebble.Sync)
		}, ErrCorrupt},
		{"missing queue entry", func(db *pebble.DB) error {
			return db.Delete(queueKey("a", 5, 1), pebble.Sync)
		}, ErrCorrupt},
		{"orphan pipeline entry", func(db *pebble.DB) error {
			return db.Set(pipelineKey("a", "nope", storeID(TaskID{nameKey("t1"), blockref.ParseMemo("b")})), nil, pebble.Sync)
		}, ErrCorrupt},
		{"bad record", func(db *pebble.DB) error {
			return db.Set(taskKey(storeID(TaskID{nameKey("t1"), blockref.ParseMemo("b")})), []byte{recordVersion, 9, 9}, pebble.Sync)
		}, ErrCorrupt},
		{"other format", func(db *pebble.DB) error {
			return db.Set(keyFormat, []byte("sig.workers/0"), pebble.Sync)
		}, ErrFormat},
		// The format before worker builds: upgraded in place (issue 27).
		{"format 1", func(db *pebble.DB) error {
			return db.Set(keyFormat, []byte(formatV1), pebble.Sync)
		}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			clk := clock.NewFake(t0)
			q := openTest(t, dir, clk)
			if _, err := q.Enqueue(req("t1", "b", "a", "p", 5), req("t2", "b", "a", "p", 5)); err != nil {
				t.Fatal(err)
			}
			q.Close()
			db, err := openDB(dir, DurabilityMachine)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.tamper(db); err != nil {
				t.Fatal(err)
			}
			db.Close()
			q, err = Open(dir, Options{Clock: clk})
			if !errors.Is(err, c.want) {
				t.Fatalf("Open = %v, want %v", err, c.want)
			}
			if c.want == nil {
				if n := q.Stats().Queued; n != 2 {
					t.Errorf("the upgraded store holds %d queued tasks, want 2", n)
				}
				q.Close()
				db, err := openDB(dir, DurabilityMachine)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				if v, closer, err := db.Get(keyFormat); err != nil || string(v) != FormatVersion {
					t.Errorf("format after the upgrade: %q %v, want %q", v, err, FormatVersion)
				} else {
					closer.Close()
				}
			}
		})
	}
}

// TestInvalidInputChangesNothing: malformed names are refused with
// ErrInvalid, and a batch with one bad request enqueues nothing. (A
// component key is a canon.Key: only the unset one can be malformed here;
// bad hex is refused where it is parsed, TestRemoteBadTask.)
func TestInvalidInputChangesNothing(t *testing.T) {
	q := openTest(t, t.TempDir(), clock.NewFake(t0))
	defer q.Close()
	bad := []Request{
		req("", "b", "c", "p", 1),
		req("k", "", "c", "p", 1),
		req("k", "b", "", "p", 1),
		req("k", "b", "c", "", 1),
		req("k", "b", "c\x00", "p", 1),
		req("k", "b", "c", "p\xff", 1),
		req("k", strings.Repeat("b", MaxNameLen+1), "c", "p", 1),
	}
	for _, r := range bad {
		if _, err := q.Enqueue(req("good", "b", "c", "p", 1), r); !errors.Is(err, ErrInvalid) {
			t.Errorf("Enqueue(%q) = %v, want ErrInvalid", r, err)
		}
	}
	if s := q.Stats(); s.Queued != 0 {
		t.Errorf("a rejected batch left %d tasks", s.Queued)
	}
	if _, err := q.SetPriority("", "p", 1); !errors.Is(err, ErrInvalid) {
		t.Errorf("SetPriority with empty client: %v", err)
	}
	if _, _, err := q.TryLease(""); !errors.Is(err, ErrInvalid) {
		t.Errorf("TryLease with empty worker: %v", err)
	}
	if err := q.Complete(context.Background(), "x", Result{Rows: -1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Complete with negative rows: %v", err)
	}
	if _, err := q.Heartbeat(context.Background(), "no-such-lease"); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Heartbeat unknown lease: %v", err)
	}
	if _, err := q.Fail(context.Background(), "no-such-lease", "x"); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Fail unknown lease: %v", err)
	}
}

// TestLeaseWaits: Lease blocks until work is queued (no polling: it is woken
// by Enqueue), returns ctx's error when cancelled, and ErrClosed on Close.
func TestLeaseWaits(t *testing.T) {
	q := openTest(t, t.TempDir(), clock.NewFake(t0))
	got := make(chan Lease)
	go func() {
		l, err := q.Lease(context.Background(), "w")
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	select {
	case l := <-got:
		t.Fatalf("leased %v from an empty queue", l.Task.ID)
	case <-time.After(20 * time.Millisecond): // let it park; not a timing assert
	}
	if _, err := q.Enqueue(req("k", "b", "c", "p", 1)); err != nil {
		t.Fatal(err)
	}
	if l := <-got; l.Task.ID != (TaskID{nameKey("k"), blockref.ParseMemo("b")}) {
		t.Errorf("leased %v", l.Task.ID)
	}

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() { _, err := q.Lease(ctx, "w"); errc <- err }()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Lease = %v", err)
	}

	go func() { _, err := q.Lease(context.Background(), "w"); errc <- err }()
	q.Close()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Errorf("Lease on a closed queue = %v", err)
	}
	if _, err := q.Enqueue(req("k2", "b", "c", "p", 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("Enqueue on a closed queue = %v", err)
	}
}

// TestOverdueLeasesOnOpen: a lease whose deadline passed while sigd was
// down is returned to the queue on Open, counting an attempt; one still
// within its deadline stays leased.
func TestOverdueLeasesOnOpen(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(t0)
	q := openTest(t, dir, clk, func(o *Options) { o.LeaseTTL = 30 * time.Second })
	if _, err := q.Enqueue(req("old", "b", "c", "p", 1), req("new", "b", "c", "p", 1)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.TryLease("w1"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(20 * time.Second)
	if _, _, err := q.TryLease("w2"); err != nil {
		t.Fatal(err)
	}
	q.Close()
	clk.Advance(15 * time.Second) // old's deadline (30s) passed; new's (50s) not
	q = openTest(t, dir, clk)
	defer q.Close()
	if tk, _ := q.Get(TaskID{nameKey("old"), blockref.ParseMemo("b")}); tk.State != StateQueued || tk.Attempts != 1 || !strings.Contains(tk.Err, "expired") {
		t.Errorf("overdue lease: %+v, want queued with 1 attempt", tk)
	}
	if tk, _ := q.Get(TaskID{nameKey("new"), blockref.ParseMemo("b")}); tk.State != StateLeased || tk.Attempts != 0 {
		t.Errorf("live lease: %+v, want still leased", tk)
	}
}

// TestRunExpiresLeases: the background loop expires leases on the injected
// clock, and a task whose worker keeps dying ends in quarantine.
func TestRunExpiresLeases(t *testing.T) {
	clk := clock.NewFake(t0)
	q := openTest(t, t.TempDir(), clk, func(o *Options) {
		o.LeaseTTL = 10 * time.Second
		o.ExpiryInterval = time.Second
	})
	defer q.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go q.Run(ctx)
	if _, err := q.Enqueue(req("killer", "b", "c", "p", 1)); err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= 3; attempt++ {
		if _, ok, err := q.TryLease("doomed"); !ok || err != nil {
			t.Fatalf("attempt %d: lease %v %v", attempt, ok, err)
		}
		// The worker dies: no heartbeat. Advance until the loop notices.
		waitFor(t, "lease expiry", func() bool {
			if q.Stats().Leased == 0 {
				return true
			}
			clk.Advance(time.Second)
			return false
		})
	}
	tk, _ := q.Get(TaskID{nameKey("killer"), blockref.ParseMemo("b")})
	if tk.State != StateQuarantined || tk.Attempts != 3 {
		t.Errorf("task that killed 3 workers: %+v, want quarantined", tk)
	}
	if s := q.Stats(); s.Expired != 3 || s.Quarantines != 1 {
		t.Errorf("stats %+v", s)
	}
}

// TestTaskCost: the moving average of lease-to-completion time, on the
// queue's clock, is the autoscaler's task cost.
func TestTaskCost(t *testing.T) {
	clk := clock.NewFake(t0)
	q := openTest(t, t.TempDir(), clk, func(o *Options) { o.CostSmoothing = 0.5 })
	defer q.Close()
	if _, err := q.Enqueue(req("a", "1", "c", "p", 1), req("a", "2", "c", "p", 1)); err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{4 * time.Second, 2 * time.Second} {
		l, _, _ := q.TryLease("w")
		clk.Advance(d)
		if err := q.Complete(context.Background(), l.ID, Result{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := q.MeanTaskSeconds(); got != 3 { // 4, then 0.5*2 + 0.5*4
		t.Errorf("mean task seconds %v, want 3", got)
	}
}

// TestQueuedPeak: the most distinct tasks queued at once since the last
// read, whatever was drained since; a task two clients requested counts
// once; the next interval starts at what is queued then; a reopened queue
// starts at what it loaded.
func TestQueuedPeak(t *testing.T) {
	dir := t.TempDir()
	q := openTest(t, dir, clock.NewFake(t0))
	if p := q.QueuedPeak(); p != 0 {
		t.Fatalf("empty queue: peak %d", p)
	}
	var reqs []Request
	for i := 0; i < 5; i++ {
		reqs = append(reqs, req("a", fmt.Sprint(i), "c1", "p", 1), req("a", fmt.Sprint(i), "c2", "p", 1))
	}
	if _, err := q.Enqueue(reqs...); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		l, ok, err := q.TryLease("w")
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		if err := q.Complete(context.Background(), l.ID, Result{}); err != nil {
			t.Fatal(err)
		}
	}
	if p := q.QueuedPeak(); p != 5 {
		t.Errorf("after a burst of 5 drained to 1: peak %d, want 5", p)
	}
	if p := q.QueuedPeak(); p != 1 {
		t.Errorf("next interval: peak %d, want the 1 still queued", p)
	}
	if _, err := q.Enqueue(req("b", "1", "c1", "p", 1), req("b", "2", "c1", "p", 1)); err != nil {
		t.Fatal(err)
	}
	q.Close()
	q = openTest(t, dir, clock.NewFake(t0))
	defer q.Close()
	if p := q.QueuedPeak(); p != 3 {
		t.Errorf("reopened with 3 queued: peak %d", p)
	}
}

// TestEvents: quarantine and release are reported in order, after they are
// durable.
func TestEvents(t *testing.T) {
	var mu sync.Mutex
	var got []string
	clk := clock.NewFake(t0)
	q := openTest(t, t.TempDir(), clk, func(o *Options) {
		o.MaxAttempts = 1
		o.OnEvent = func(e Event) {
			mu.Lock()
			got = append(got, fmt.Sprintf("%s %s %q", e.Kind, idName(e.Task.ID), e.Task.Err))
			mu.Unlock()
		}
	})
	defer q.Close()
	if _, err := q.Enqueue(req("k", "b", "c", "p", 1)); err != nil {
		t.Fatal(err)
	}
	l, _, _ := q.TryLease("w")
	if _, err := q.Fail(context.Background(), l.ID, "bad column"); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Release(TaskID{nameKey("k"), blockref.ParseMemo("b")}); err != nil {
		t.Fatal(err)
	}
	want := []string{`quarantined k/b "bad column"`, `released k/b ""`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

// TestErrorClipped: a huge or non-UTF-8 failure text is stored bounded and
// valid, so it cannot bloat the store or break the gRPC API.
func TestErrorClipped(t *testing.T) {
	q := openTest(t, t.TempDir(), clock.NewFake(t0), func(o *Options) { o.MaxAttempts = 1 })
	defer q.Close()
	if _, err := q.Enqueue(req("k", "b", "c", "p", 1)); err != nil {
		t.Fatal(err)
	}
	l, _, _ := q.TryLease("w")
	if _, err := q.Fail(context.Background(), l.ID, "\xff"+strings.Repeat("é", MaxErrorLen)); err != nil {
		t.Fatal(err)
	}
	tk := q.ListQuarantine()[0]
	if len(tk.Err) > MaxErrorLen+32 || !strings.HasPrefix(tk.Err, "\uFFFD") || !strings.HasSuffix(tk.Err, "(truncated)") {
		t.Errorf("stored error of %d bytes: %.40q…", len(tk.Err), tk.Err)
	}
}

// TestMachineDurability: the fsync path (apply under the lock, fsync
// outside it) keeps the same state across a reopen, with concurrent
// callers sharing fsyncs.
func TestMachineDurability(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(t0)
	q := openTest(t, dir, clk, func(o *Options) { o.Durability = DurabilityMachine })
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				if _, err := q.Enqueue(req(fmt.Sprintf("g%d", g), fmt.Sprint(i), fmt.Sprintf("c%d", g%2), "p", int32(i%3))); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	for i := 0; i < 5; i++ {
		l, _, err := q.TryLease("w")
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := q.Complete(context.Background(), l.ID, Result{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := q.dump()
	q.Close()
	q = openTest(t, dir, clk, func(o *Options) { o.Durability = DurabilityMachine })
	defer q.Close()
	if after := q.dump(); after != before {
		t.Fatalf("state differs after reopen\n--- before\n%s--- after\n%s", before, after)
	}
	if s := q.Stats(); s.Queued != 35 || s.Leased != 2 {
		t.Errorf("stats %+v, want 35 queued and 2 leased", s)
	}
}

// TestKeyLayout: a component key is stored as its 64 lowercase hex digits,
// the form stores written when TaskID held that string have, so existing
// stores open with byte-identical keys; a key that is not such hex is
// refused as corrupt rather than re-encoded differently.
func TestKeyLayout(t *testing.T) {
	k := numKey(0xabc)
	hx := k.String() // 0000…0abd
	id := TaskID{Component: k, Block: blockref.ParseMemo("b7")}
	for _, c := range []struct{ got, want string }{
		{string(taskKey(storeID(id))), "t" + hx + "\x00b7"},
		{string(quarantineKey(storeID(id))), "x" + hx + "\x00b7"},
		{string(pipelineKey("c", "p", storeID(id))), "pc\x00p\x00" + hx + "\x00b7"},
		{string(storeID(id)), hx + "\x00b7"},
	} {
		if c.got != c.want {
			t.Errorf("key %q, want %q", c.got, c.want)
		}
	}
	if got, err := parseID(storeID(id)); err != nil || got != id {
		t.Errorf("parseID round trip: %v, %v", got, err)
	}
	for _, bad := range []string{"t1\x00b", strings.ToUpper(hx) + "\x00b", hx[:63] + "\x00b", hx + "0\x00b"} {
		if _, err := parseID([]byte(bad)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("parseID(%q) = %v, want ErrCorrupt", bad, err)
		}
	}
}
