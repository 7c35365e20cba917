package sigd_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/objstore"
)

// TestSIGKILLDuringWork runs the sigd binary, submits three overlapping
// fleet graphs, and kills sigd with SIGKILL twice while its in-process
// workers are memoizing (each run is slowed down so kills land mid-work),
// restarting it on the same data directory each time. Every read solution
// completes, the queues end empty with nothing quarantined (no task lost),
// every memo object the solutions name equals LIG's output for its input
// and block, byte for byte, and once the evictor has swept, every memo
// object in the bucket is one a solution names (packs a kill left unnamed
// are swept, issue 28).
func TestSIGKILLDuringWork(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 6, RowsPerBlock: 2000, Seed: 3})
	dir := t.TempDir()
	w.Catalog(t, dir)
	tokPath, toks := sigdtest.WriteTokens(t, t.TempDir())
	bin := sigdtest.BuildCommand(t, "cmd/sigd")
	args := append([]string{"serve", "--data-dir", dir, "--tokens", tokPath, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--kafka-brokers", strings.Join(w.Kafka.Brokers, ","), "--lease", "2s", "--workers-min", "4", "--workers-max", "4",
		"--evict-interval", "1s"}, w.S3Args()...)
	start := func() *sigdtest.Process {
		return sigdtest.StartProcess(t, bin, args, "SIG_TEST_TASK_DELAY=250ms")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	type model struct{ client, pipeline, graph string }
	models := []model{{"ctr", "ctr-small", "ctr_small"}, {"cvr", "cvr", "cvr"}, {"ranking", "ranking", "ranking"}}
	dsl := map[string]string{}
	total := 0
	p := start()
	for _, m := range models {
		dsl[m.graph] = sigdtest.DSL(t, m.graph)
		c := sigv1.NewSIGClient(sigdtest.Dial(t, p.Addr, toks[m.client]))
		if _, err := c.SubmitGraph(ctx, sigdtest.Submit(m.client, m.pipeline, 10, dsl[m.graph], w.All())); err != nil {
			t.Fatal(err)
		}
		total += len(componentKeys(t, dsl[m.graph])) * len(w.Blocks)
	}
	// ready sums the ready blocks of the three solutions.
	ready := func(p *sigdtest.Process) int {
		n := 0
		for _, m := range models {
			c := sigv1.NewSIGClient(sigdtest.Dial(t, p.Addr, toks[m.client]))
			sol, err := c.GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: m.client, Pipeline: m.pipeline})
			if err != nil {
				t.Fatalf("read solution: %v", err)
			}
			n += int(sol.BlocksReady)
		}
		return n
	}
	for i, at := range []int{total / 6, total / 2} {
		waitFor(t, time.Minute, "memoization to progress", func() bool { return ready(p) >= at })
		if n := ready(p); n >= total {
			t.Fatalf("kill %d: all %d blocks already ready; the kill must land mid-work", i+1, n)
		}
		p.Kill()
		p = start()
	}

	ligs := map[string]map[string]*sigdtest.LIGOutput{}
	named := map[string]bool{} // the memo objects the solutions name
	for _, m := range models {
		c := sigv1.NewSIGClient(sigdtest.Dial(t, p.Addr, toks[m.client]))
		sol := sigdtest.WaitComplete(ctx, t, c, m.client, m.pipeline)
		ligs[m.graph] = map[string]*sigdtest.LIGOutput{}
		sigdtest.CheckSolution(t, w.Store, w.Blocks, sol, dsl[m.graph], ligs[m.graph])
		for _, in := range sol.Inputs {
			for _, b := range in.Blocks {
				named[b.MemoObject] = true
			}
		}
	}
	op := sigv1.NewSIGClient(sigdtest.Dial(t, p.Addr, toks["operator"]))
	waitFor(t, 30*time.Second, "the queues to drain", func() bool {
		qs, err := op.ListQueues(ctx, &sigv1.ListQueuesRequest{})
		return err == nil && len(qs.Queues) == 0
	})
	qr, err := op.ListQuarantine(ctx, &sigv1.ListQuarantineRequest{})
	if err != nil || len(qr.Tasks) != 0 {
		t.Errorf("quarantine after the crashes: %v, %v", qr.GetTasks(), err)
	}
	// Every object under memo/ is one the solutions name, and equals LIG
	// (CheckSolution compared those), once the evictor has swept the packs
	// the kills left unnamed: nothing half-written or stray.
	var stray []string
	waitFor(t, 30*time.Second, "the memo objects to be the ones the solutions name", func() bool {
		stray = stray[:0]
		n := 0
		for info, err := range w.Store.List(ctx, block.MemoPrefix) {
			if err != nil {
				t.Fatal(err)
			}
			if !named[info.Key] {
				stray = append(stray, info.Key)
			}
			n++
		}
		return len(stray) == 0 && n == len(named)
	})
}

// TestSIGKILLBetweenPackAndSwitch (issue 28): sigd's in-process worker
// writes a block's pack whole and sigd is SIGKILLed before the completion
// switches the memo entry to it (SIG_TEST_HOLD_PACKS holds the task right
// there). After a restart on the same data directory every entry of the
// pipeline is ready naming a pack that reads with the readers' own check
// and LIG's bytes; the pack written before the kill is named by no entry
// and is swept (the evictor's SweepPacks, --evict-interval 1s); nothing
// under memo/ is stray. Without the pack sweep the held pack stays in the
// bucket for ever: its key is random, so no recomputation overwrites it.
func TestSIGKILLBetweenPackAndSwitch(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 2, RowsPerBlock: 500, Seed: 4})
	dir := t.TempDir()
	w.Catalog(t, dir)
	tokPath, toks := sigdtest.WriteTokens(t, t.TempDir())
	bin := sigdtest.BuildCommand(t, "cmd/sigd")
	args := append([]string{"serve", "--data-dir", dir, "--tokens", tokPath, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--kafka-brokers", strings.Join(w.Kafka.Brokers, ","), "--lease", "2s", "--workers-min", "1", "--workers-max", "1",
		"--evict-interval", "1s"}, w.S3Args()...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const dsl = `input q = hash(unigrams(lower(col("query"))), buckets=1000)
input price = bucketize(col("bid_price"), boundaries=[0.5, 1, 5])
`
	held := filepath.Join(t.TempDir(), "held")
	p := sigdtest.StartProcess(t, bin, args, "SIG_TEST_HOLD_PACKS="+held)
	c := sigv1.NewSIGClient(sigdtest.Dial(t, p.Addr, toks["ctr"]))
	if _, err := c.SubmitGraph(ctx, sigdtest.Submit("ctr", "crash", 5, dsl, w.All())); err != nil {
		t.Fatal(err)
	}
	var packs []string
	waitFor(t, time.Minute, "a pack written and its switch held", func() bool {
		b, _ := os.ReadFile(held)
		packs = strings.Fields(string(b))
		return len(packs) > 0
	})
	p.Kill()
	for _, pk := range packs {
		if _, err := w.Store.Stat(ctx, pk); err != nil {
			t.Fatalf("held pack %s: %v; want it written whole before the kill", pk, err)
		}
	}

	p = sigdtest.StartProcess(t, bin, args)
	c = sigv1.NewSIGClient(sigdtest.Dial(t, p.Addr, toks["ctr"]))
	sol := sigdtest.WaitComplete(ctx, t, c, "ctr", "crash")
	sigdtest.CheckSolution(t, w.Store, w.Blocks, sol, dsl, map[string]*sigdtest.LIGOutput{})
	checkHeldPacksReplaced(ctx, t, w.Store, sol, packs, map[string]bool{})
}

// checkHeldPacksReplaced checks what a restart after a kill between
// writing packs and naming them leaves: sol's entries name packs' columns,
// none names a pack held (written before the kill), those are swept, and
// every memo object in the bucket is named by sol's entries or by named
// (the objects other solutions name; sol's are added to it).
func checkHeldPacksReplaced(ctx context.Context, t *testing.T, store *objstore.Store, sol *sigv1.ReadSolution, held []string, named map[string]bool) {
	t.Helper()
	for _, in := range sol.Inputs {
		for _, b := range in.Blocks {
			if b.MemoColumn == "" {
				t.Errorf("input %s block %s names %s without a column: want a pack's", in.Input, b.BlockId, b.MemoObject)
			}
			named[b.MemoObject] = true
		}
	}
	for _, pk := range held {
		if named[pk] {
			t.Fatalf("an entry names the pack %s held before the kill", pk)
		}
	}
	waitFor(t, 30*time.Second, "the packs held before the kill to be swept", func() bool {
		for _, pk := range held {
			if _, err := store.Stat(ctx, pk); !errors.Is(err, objstore.ErrNotFound) {
				return false
			}
		}
		return true
	})
	for info, err := range store.List(ctx, block.MemoPrefix) {
		if err != nil {
			t.Fatal(err)
		}
		if !named[info.Key] {
			t.Errorf("memo object %s is named by no entry", info.Key)
		}
	}
}

// TestRemoteWorkerKilledMidBatch (issue 28): a `sigd worker` process
// leases the six tasks of one block as one batch, completes two, and is
// SIGKILLed holding the other four. Until the kill the worker keeps its
// whole batch (every task's lease heartbeated, the waiting ones too: no
// lease expires); after it, each of the four leases expires on its own and
// a second worker leases and completes those four. Every task is
// completed exactly once (the queue's counts; each entry marked ready
// once: one sig_task_latency_seconds sample per entry), nothing is
// quarantined, and every entry's memo object is readable and equals LIG's
// output byte for byte.
//
// It fails without the heartbeat of the batch's waiting tasks (their
// leases expire while the first runs, and another worker runs them too),
// and without the rest of the batch crossing the wire (the worker holds
// one task, not six).
func TestRemoteWorkerKilledMidBatch(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 1, RowsPerBlock: 500, Seed: 4})
	srv := sigdtest.Start(t, w, sigd.Config{RemoteWorkers: true, Lease: 4 * time.Second}, sigd.Options{})
	bin := sigdtest.BuildCommand(t, "cmd/sigd")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const dsl = `let q = lower(col("query"))
let t = lower(col("ad_title"))
input q_uni = hash(unigrams(q), buckets=1000003)
input q_bi = hash(truncate(ngrams(q, n=2), max=32), buckets=1000003)
input t_uni = hash(unigrams(t), buckets=1000003)
input t_bi = hash(truncate(ngrams(t), max=32), buckets=1000003)
input overlap = length(intersect(unigrams(q), unigrams(t)))
input overlap_cat = concat(intersect(unigrams(t), unigrams(q)), col("ad_category"))
`
	const n = 6
	if keys := componentKeys(t, dsl); len(keys) != n {
		t.Fatalf("%d components, want %d", len(keys), n)
	}
	if _, err := srv.SIG(t, "ctr").SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 1, dsl, w.All())); err != nil {
		t.Fatal(err)
	}
	q := srv.Queue()
	if s := q.Stats(); s.Queued != n {
		t.Fatalf("queue after the submission: %+v, want %d tasks of the one block", s, n)
	}
	args := func(name string) []string {
		return append([]string{"worker", "--sigd", srv.Addr(), "--token", srv.Tokens["worker"], "--concurrency", "1",
			"--batch-tasks", "8", "--name", name}, w.S3Args()...)
	}
	// Each task takes 3s in w1: the two it completes take longer than a
	// lease (4s), so the batch's waiting tasks live on heartbeats until
	// the kill.
	w1 := sigdtest.StartProcess(t, bin, args("w1"), "SIG_TEST_TASK_DELAY=3s")
	waitFor(t, 30*time.Second, "the first worker to lease the block's tasks", func() bool { return q.Stats().Leased > 0 })
	if s := q.Stats(); s.Leased != n || s.Queued != 0 {
		t.Fatalf("queue once w1 leased: %+v; want its one worker holding all %d tasks of the block, a batch", s, n)
	}
	waitFor(t, 30*time.Second, "w1 to complete two tasks of its batch", func() bool { return q.Stats().Completed >= 2 })
	w1.Kill()
	// A completion sent just before the kill may still be landing.
	time.Sleep(300 * time.Millisecond)
	done := q.Stats()
	k := int(done.Completed)
	if k < 2 || k >= n || done.Leased != n-k || done.Expired != 0 || done.Failures != 0 {
		t.Fatalf("queue when w1 was killed: %+v; want 2 to %d tasks completed and the rest of the batch leased, no lease expired", done, n-1)
	}
	w2 := sigdtest.StartProcess(t, bin, args("w2"))

	sol := sigdtest.WaitComplete(ctx, t, srv.SIG(t, "ctr"), "ctr", "p")
	waitFor(t, 10*time.Second, "the queue to empty", func() bool { s := q.Stats(); return s.Queued == 0 && s.Leased == 0 })
	if s := q.Stats(); s.Completed != n || s.Expired != uint64(n-k) || s.Failures != uint64(n-k) || s.Quarantined != 0 {
		t.Errorf("queue at the end: %+v; want %d completions, the %d leases w1 died holding expired once each, nothing quarantined", s, n, n-k)
	}
	if w2.Exited() {
		t.Errorf("w2 exited: %s", w2.Stderr.String())
	}
	// Each entry's generation was marked ready once.
	mfs, err := srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	marked := uint64(0)
	for _, mf := range mfs {
		if mf.GetName() == "sig_task_latency_seconds" {
			marked = mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	if marked != n {
		t.Errorf("%d entries marked ready, want %d, each once", marked, n)
	}
	// Every entry names a readable object with LIG's bytes, and the
	// bucket holds nothing else under memo/: w1's packs of one task each
	// (SIG_TEST_TASK_DELAY runs its tasks one by one) and w2's of the
	// tasks it batched.
	sigdtest.CheckSolution(t, w.Store, w.Blocks, sol, dsl, map[string]*sigdtest.LIGOutput{})
	named := map[string]bool{}
	for _, in := range sol.Inputs {
		for _, b := range in.Blocks {
			named[b.MemoObject] = true
		}
	}
	objects := 0
	for info, err := range w.Store.List(ctx, block.MemoPrefix) {
		if err != nil {
			t.Fatal(err)
		}
		if !named[info.Key] {
			t.Errorf("memo object %s is named by no entry", info.Key)
		}
		objects++
	}
	if objects != len(named) {
		t.Errorf("%d memo objects in the bucket, want the %d the entries name", objects, len(named))
	}
}

// TestRemoteWorkerKilledMidMemoBatch (issue 28): a `sigd worker` process
// runs the six tasks of one block as one batch through memo.Runner's
// RunBatch, which writes them into one pack, and is SIGKILLed mid-batch:
// having reported none of them (the pack written, no entry switched to
// it), or two (their entries ready in the pack, four not).
// SIG_TEST_HOLD_COMPLETIONS holds the worker at the next completion, and
// the test waits a lease past it before the kill: the batch's unreported
// tasks keep their leases on heartbeats the while, only the held one's
// (its heartbeat stopped when its completion began) expires. A second
// worker, started after the kill, computes what was not reported into a
// pack of its own. Every task is completed once, nothing is quarantined,
// every entry is ready naming a pack that reads with the readers' check
// and LIG's bytes; the reported entries name the killed worker's pack,
// the others not; the bucket holds nothing under memo/ but the packs the
// entries name and, when none was reported, the killed worker's pack,
// named by no entry (the evictor's sweep deletes it, as
// TestSIGKILLBetweenPackAndSwitch shows).
//
// It fails when the worker does not run a batch through RunBatch (the two
// reported entries name two packs: the worker ran its tasks one by one),
// when a task is reported before its pack is whole (the held completion
// names a pack not in the bucket), and without the heartbeats of a
// batch's waiting tasks while its completions are made (their leases
// expire before the kill).
func TestRemoteWorkerKilledMidMemoBatch(t *testing.T) {
	const dsl = `let q = lower(col("query"))
let t = lower(col("ad_title"))
input q_uni = hash(unigrams(q), buckets=1000003)
input q_bi = hash(truncate(ngrams(q, n=2), max=32), buckets=1000003)
input t_uni = hash(unigrams(t), buckets=1000003)
input t_bi = hash(truncate(ngrams(t), max=32), buckets=1000003)
input overlap = length(intersect(unigrams(q), unigrams(t)))
input overlap_cat = concat(intersect(unigrams(t), unigrams(q)), col("ad_category"))
`
	const n, lease = 6, 4 * time.Second
	bin := sigdtest.BuildCommand(t, "cmd/sigd")
	for _, reported := range []int{0, 2} {
		t.Run(fmt.Sprintf("%d reported", reported), func(t *testing.T) {
			w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 1, RowsPerBlock: 500, Seed: 28})
			srv := sigdtest.Start(t, w, sigd.Config{RemoteWorkers: true, Lease: lease}, sigd.Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			keys := componentKeys(t, dsl)
			if _, err := srv.SIG(t, "ctr").SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 1, dsl, w.All())); err != nil {
				t.Fatal(err)
			}
			q := srv.Queue()
			if s := q.Stats(); s.Queued != n {
				t.Fatalf("queue after the submission: %+v, want the block's %d tasks", s, n)
			}
			args := func(name string) []string {
				return append([]string{"worker", "--sigd", srv.Addr(), "--token", srv.Tokens["worker"], "--concurrency", "1",
					"--batch-tasks", "8", "--name", name}, w.S3Args()...)
			}
			held := filepath.Join(t.TempDir(), "held")
			w1 := sigdtest.StartProcess(t, bin, args("w1"), fmt.Sprintf("SIG_TEST_HOLD_COMPLETIONS=%d:%s", reported, held))
			var pack string
			waitFor(t, 30*time.Second, "w1 to hold a completion", func() bool {
				b, _ := os.ReadFile(held)
				pack = strings.TrimSpace(string(b))
				return pack != ""
			})
			// A lease past the hold: only the held task's lease expires.
			time.Sleep(lease + time.Second)
			at := q.Stats()
			if int(at.Completed) != reported || at.Expired != 1 || at.Leased != n-reported-1 || at.Queued != 1 || at.Failures != 1 {
				t.Fatalf("queue a lease after w1 held its completion: %+v; want %d completed, the held task's lease expired "+
					"and the other %d leased", at, reported, n-reported-1)
			}
			w1.Kill()
			if _, err := w.Store.Stat(ctx, pack); err != nil {
				t.Fatalf("the pack w1 held a completion of, %s: %v; want it written whole before any completion", pack, err)
			}
			w2 := sigdtest.StartProcess(t, bin, args("w2"))
			sol := sigdtest.WaitComplete(ctx, t, srv.SIG(t, "ctr"), "ctr", "p")
			waitFor(t, 10*time.Second, "the queue to empty", func() bool { s := q.Stats(); return s.Queued == 0 && s.Leased == 0 })
			if s := q.Stats(); s.Completed != n || s.Expired != uint64(n-reported) || s.Quarantined != 0 {
				t.Errorf("queue at the end: %+v; want %d completions, the %d tasks w1 did not report expired once each, nothing quarantined",
					s, n, n-reported)
			}
			if w2.Exited() {
				t.Errorf("w2 exited: %s", w2.Stderr.String())
			}
			mfs, err := srv.Registry().Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				if mf.GetName() == "sig_task_latency_seconds" {
					if c := mf.GetMetric()[0].GetHistogram().GetSampleCount(); c != n {
						t.Errorf("%d entries marked ready, want %d, each once", c, n)
					}
				}
			}
			sigdtest.CheckSolution(t, w.Store, w.Blocks, sol, dsl, map[string]*sigdtest.LIGOutput{})
			named := map[string]bool{}
			inPack := 0
			for input, k := range keys {
				m := memoOf(t, srv, k, w.Blocks[0].ID)
				named[m.Object] = true
				if m.Object == pack {
					inPack++
				}
				if !m.Packed() {
					t.Errorf("input %s: entry %+v names no pack", input, m)
				}
			}
			if inPack != reported {
				t.Errorf("%d entries name w1's pack %s, want the %d it reported", inPack, pack, reported)
			}
			for info, err := range w.Store.List(ctx, block.MemoPrefix) {
				if err != nil {
					t.Fatal(err)
				}
				if !named[info.Key] && info.Key != pack {
					t.Errorf("memo object %s is named by no entry", info.Key)
				}
			}
		})
	}
}
