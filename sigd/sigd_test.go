package sigd_test

import (
	"context"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sigdata/sig/canon"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/gen"
	"github.com/sigdata/sig/warehouse/ingest"
	"github.com/sigdata/sig/warehouse/record"
	"github.com/sigdata/sig/workers"
)

func TestMain(m *testing.M) {
	code := m.Run()
	sigdtest.RemoveBuilds()
	os.Exit(code)
}

// countingRunner counts the memoization runs that computed something, per
// task: a run whose memo entry was already ready (MemoGeneration 0)
// computes nothing and is not counted.
type countingRunner struct {
	inner workers.Runner
	mu    sync.Mutex
	runs  map[workers.TaskID]int
}

func newCounter() (*countingRunner, func(workers.Runner) workers.Runner) {
	c := &countingRunner{runs: map[workers.TaskID]int{}}
	return c, func(r workers.Runner) workers.Runner { c.inner = r; return c }
}

func (c *countingRunner) Run(ctx context.Context, t workers.Task) (workers.Result, error) {
	res, err := c.inner.Run(ctx, t)
	if err == nil && t.Spec != nil && t.Spec.MemoGeneration != 0 {
		c.mu.Lock()
		c.runs[t.ID]++
		c.mu.Unlock()
	}
	return res, err
}

func (c *countingRunner) snapshot() map[workers.TaskID]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[workers.TaskID]int, len(c.runs))
	for k, v := range c.runs {
		out[k] = v
	}
	return out
}

// componentKeys canonicalizes a DSL graph: input name -> component key.
func componentKeys(t testing.TB, dsl string) map[string]canon.Key {
	t.Helper()
	g, err := transform.Parse([]byte(dsl), "graph", transform.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := canon.Canonicalize(g, transform.AdsSchema(), transform.Default(), transform.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]canon.Key{}
	for _, comp := range c.Components {
		out[comp.Input] = comp.Key
	}
	return out
}

// TestThreeClientsShareComponents: three clients submit overlapping fleet
// graphs at the same time over the same blocks. Each distinct component is
// computed exactly once per block however many pipelines want it, every
// read solution becomes complete, and every memo object equals the output
// of `sigctl run` (LIG) on the same raw block, byte for byte per column.
// A fourth graph written differently (ctr_wide) then reuses the shared
// components without computing them again.
func TestThreeClientsShareComponents(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 4, RowsPerBlock: 2000, Seed: 1})
	counter, wrap := newCounter()
	srv := sigdtest.Start(t, w, sigd.Config{WorkersMin: 2, WorkersMax: 4, TargetDrain: time.Second}, sigd.Options{WrapRunner: wrap})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	type model struct{ client, pipeline, graph string }
	models := []model{{"ctr", "ctr-small", "ctr_small"}, {"cvr", "cvr", "cvr"}, {"ranking", "ranking", "ranking"}}
	dsl := map[string]string{}
	want := map[workers.TaskID]bool{}
	users := map[canon.Key]int{}
	for _, m := range models {
		dsl[m.graph] = sigdtest.DSL(t, m.graph)
		seen := map[canon.Key]bool{}
		for _, k := range componentKeys(t, dsl[m.graph]) {
			if !seen[k] {
				seen[k] = true
				users[k]++
			}
			for _, b := range w.Blocks {
				want[workers.TaskID{Component: k, Block: blockref.ParseMemo(b.ID)}] = true
			}
		}
	}
	shared := 0
	for _, n := range users {
		if n > 1 {
			shared++
		}
	}
	if shared < 3 {
		t.Fatalf("the fleet graphs share %d components; the test needs overlapping graphs", shared)
	}

	// Submit at once, each client with its own token.
	var wg sync.WaitGroup
	resps := make([]*sigv1.SubmitGraphResponse, len(models))
	errs := make([]error, len(models))
	for i, m := range models {
		c := srv.SIG(t, m.client)
		wg.Add(1)
		go func() {
			defer wg.Done()
			resps[i], errs[i] = c.SubmitGraph(ctx, sigdtest.Submit(m.client, m.pipeline, 10, dsl[m.graph], w.All()))
		}()
	}
	wg.Wait()
	for i, m := range models {
		if errs[i] != nil {
			t.Fatalf("submit %s: %v", m.pipeline, errs[i])
		}
		if got, want := len(resps[i].Solution.Inputs), len(componentKeys(t, dsl[m.graph])); got != want {
			t.Errorf("%s: %d inputs in the read solution, want %d", m.pipeline, got, want)
		}
		// The solution carries its source's schema, for readers.
		if sc, err := transform.ParseSchema([]byte(resps[i].Solution.RawSchemaJson)); err != nil ||
			sc.Fingerprint() != transform.AdsSchema().Fingerprint() {
			t.Errorf("%s: raw_schema_json %q: %v", m.pipeline, resps[i].Solution.RawSchemaJson, err)
		}
	}

	ligs := map[string]map[string]*sigdtest.LIGOutput{}
	for _, m := range models {
		sol := sigdtest.WaitComplete(ctx, t, srv.SIG(t, m.client), m.client, m.pipeline)
		inputs := len(componentKeys(t, dsl[m.graph]))
		if int(sol.BlocksReady) != inputs*len(w.Blocks) || sol.BlocksPending != 0 || sol.BlocksFailed != 0 {
			t.Errorf("%s: %d ready, %d pending, %d failed; want %d ready", m.pipeline, sol.BlocksReady, sol.BlocksPending, sol.BlocksFailed, inputs*len(w.Blocks))
		}
		ligs[m.graph] = map[string]*sigdtest.LIGOutput{}
		sigdtest.CheckSolution(t, w.Store, w.Blocks, sol, dsl[m.graph], ligs[m.graph])
	}
	checkOnce(t, counter.snapshot(), want)
	// The tasks of a block share its raw columns: each component reads
	// event_id at least, which only the first task of a block fetches.
	seg := metricByLabel(t, srv, "sig_worker_segment_cache_bytes_total", "outcome")
	if hit, miss := seg["hit"].GetCounter().GetValue(), seg["miss"].GetCounter().GetValue(); hit == 0 || miss == 0 {
		t.Errorf("segment cache: %v bytes hit, %v missed; want both positive", hit, miss)
	}

	// Resubmitting changes nothing; a graph that writes shared components
	// differently computes only its new ones.
	wide := sigdtest.DSL(t, "ctr_wide")
	for _, k := range componentKeys(t, wide) {
		for _, b := range w.Blocks {
			want[workers.TaskID{Component: k, Block: blockref.ParseMemo(b.ID)}] = true
		}
	}
	for _, m := range models {
		r, err := srv.SIG(t, m.client).SubmitGraph(ctx, sigdtest.Submit(m.client, m.pipeline, 10, dsl[m.graph], w.All()))
		if err != nil {
			t.Fatal(err)
		}
		if r.TasksEnqueued != 0 || r.BlockMisses != 0 || r.ComponentHits != r.Components || !r.Solution.Complete {
			t.Errorf("resubmit %s: %d tasks enqueued, %d block misses, %d/%d component hits, complete=%v; want all hits",
				m.pipeline, r.TasksEnqueued, r.BlockMisses, r.ComponentHits, r.Components, r.Solution.Complete)
		}
	}
	r, err := srv.SIG(t, "ctr").SubmitGraph(ctx, sigdtest.Submit("ctr", "ctr-wide", 10, wide, w.All()))
	if err != nil {
		t.Fatal(err)
	}
	if r.ComponentHits != 2 {
		t.Errorf("ctr_wide: %d component hits, want 2 (the overlap feature and the price buckets)", r.ComponentHits)
	}
	sol := sigdtest.WaitComplete(ctx, t, srv.SIG(t, "ctr"), "ctr", "ctr-wide")
	sigdtest.CheckSolution(t, w.Store, w.Blocks, sol, wide, map[string]*sigdtest.LIGOutput{})
	checkOnce(t, counter.snapshot(), want)
	if q := srv.Queue().ListQuarantine(); len(q) != 0 {
		t.Errorf("quarantined tasks: %v", q)
	}
}

// checkOnce checks that every wanted task ran exactly once and nothing else
// ran.
func checkOnce(t *testing.T, runs map[workers.TaskID]int, want map[workers.TaskID]bool) {
	t.Helper()
	var bad []string
	for id := range want {
		if n := runs[id]; n != 1 {
			bad = append(bad, id.Component.Short()+"/"+id.Block.String()+": computed "+strconv.Itoa(n)+" times")
		}
	}
	for id, n := range runs {
		if !want[id] {
			bad = append(bad, id.Component.Short()+"/"+id.Block.String()+": not wanted, computed "+strconv.Itoa(n)+" times")
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
	if len(bad) == 0 && len(runs) != len(want) {
		t.Errorf("%d tasks computed, want %d", len(runs), len(want))
	}
}

// waitFor polls cond every 20ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hashGraph is a graph of two components of its own (the bucket count
// makes the keys distinct).
func hashGraph(buckets int) string {
	return "input q = hash(col(\"query\"), buckets=" + strconv.Itoa(buckets) + ")\n" +
		"input t = hash(col(\"ad_title\"), buckets=" + strconv.Itoa(buckets) + ")\n"
}

// TestPriorityFairnessReprioritization drives the queues end to end over
// gRPC with no in-process workers: tasks are leased through the Workers
// service with a worker token. The high-priority client's tasks come first;
// two clients of equal priority then alternate; raising one pipeline's
// priority with SetPriority (its client's own token) moves its queued tasks
// ahead of the other client's.
func TestPriorityFairnessReprioritization(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 3, RowsPerBlock: 50})
	srv := sigdtest.Start(t, w, sigd.Config{RemoteWorkers: true, Lease: time.Minute}, sigd.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Lower priorities submitted first: submit order must not matter.
	for _, s := range []struct {
		client, pipeline string
		prio             int32
		buckets          int
	}{{"ctr", "low-a", 10, 11}, {"cvr", "low-b", 10, 13}, {"ranking", "high", 50, 17}} {
		r, err := srv.SIG(t, s.client).SubmitGraph(ctx, sigdtest.Submit(s.client, s.pipeline, s.prio, hashGraph(s.buckets), w.All()))
		if err != nil {
			t.Fatal(err)
		}
		if r.TasksEnqueued != 6 {
			t.Fatalf("%s: %d tasks enqueued, want 6", s.pipeline, r.TasksEnqueued)
		}
	}
	qs, err := srv.SIG(t, "operator").ListQueues(ctx, &sigv1.ListQueuesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	depths := map[string]uint32{}
	for _, q := range qs.Queues {
		depths[q.Client+"@"+strconv.Itoa(int(q.Priority))] = q.Queued
	}
	if len(depths) != 3 || depths["ranking@50"] != 6 || depths["ctr@10"] != 6 || depths["cvr@10"] != 6 {
		t.Fatalf("queue depths %v, want ranking@50, ctr@10, cvr@10 with 6 tasks each", depths)
	}

	wc := srv.Workers(t, "worker")
	lease := func() *sigv1.Task {
		t.Helper()
		resp, err := wc.LeaseTask(ctx, &sigv1.LeaseTaskRequest{WorkerId: "w1"})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Task
	}
	var order []string
	defer func() {
		if t.Failed() {
			t.Logf("lease order: %v", order)
		}
	}()
	next := func() *sigv1.Task {
		t.Helper()
		task := lease()
		if task == nil {
			t.Fatalf("no task to lease after %v", order)
		}
		order = append(order, task.Client+"@"+strconv.Itoa(int(task.Priority)))
		return task
	}
	for range 6 {
		if task := next(); task.Client != "ranking" || task.Priority != 50 {
			t.Fatalf("lease %d: %s at %d, want the priority-50 client first", len(order), task.Client, task.Priority)
		}
	}
	// Equal priorities: the two clients alternate.
	prev := ""
	for range 4 {
		task := next()
		if task.Priority != 10 || (task.Client != "ctr" && task.Client != "cvr") {
			t.Fatalf("lease %d: %s at %d, want ctr or cvr at 10", len(order), task.Client, task.Priority)
		}
		if task.Client == prev {
			t.Fatalf("lease %d: %s twice in a row while the other client of equal priority waits", len(order), prev)
		}
		prev = task.Client
	}
	// Four tasks of each are left. Raise cvr's pipeline above ctr's.
	r, err := srv.SIG(t, "cvr").SetPriority(ctx, &sigv1.SetPriorityRequest{Client: "cvr", Pipeline: "low-b", Priority: 100})
	if err != nil {
		t.Fatal(err)
	}
	if r.TasksReprioritized != 4 {
		t.Errorf("SetPriority moved %d tasks, want the 4 still queued", r.TasksReprioritized)
	}
	for range 4 {
		if task := next(); task.Client != "cvr" || task.Priority != 100 {
			t.Fatalf("lease %d after re-prioritization: %s at %d, want cvr at 100", len(order), task.Client, task.Priority)
		}
	}
	for range 4 {
		if task := next(); task.Client != "ctr" || task.Priority != 10 {
			t.Fatalf("lease %d: %s at %d, want ctr at 10", len(order), task.Client, task.Priority)
		}
	}
	if task := lease(); task != nil {
		t.Fatalf("a 19th task was leased: %v", task)
	}
}

// TestRemoteWorkerKilledMidTask: a `sigd worker` process is SIGKILLed while
// it holds the lease of a task; the lease expires (it no longer
// heartbeats) and a second worker process completes the task. The memo
// object equals LIG's output.
func TestRemoteWorkerKilledMidTask(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 1, RowsPerBlock: 500})
	srv := sigdtest.Start(t, w, sigd.Config{RemoteWorkers: true, Lease: 2 * time.Second}, sigd.Options{})
	bin := sigdtest.BuildCommand(t, "cmd/sigd")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const dsl = "input qid = hash(unigrams(lower(col(\"query\"))), buckets=1000003)\n"
	if _, err := srv.SIG(t, "ctr").SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 1, dsl, w.All())); err != nil {
		t.Fatal(err)
	}
	id := workers.TaskID{Component: componentKeys(t, dsl)["qid"], Block: blockref.ParseMemo(w.Blocks[0].ID)}
	args := func(name string) []string {
		return append([]string{"worker", "--sigd", srv.Addr(), "--token", srv.Tokens["worker"], "--concurrency", "1", "--name", name}, w.S3Args()...)
	}
	// The first worker takes the task and would hold it for an hour.
	w1 := sigdtest.StartProcess(t, bin, args("w1"), "SIG_TEST_TASK_DELAY=1h")
	waitFor(t, 30*time.Second, "the first worker to lease the task", func() bool {
		task, ok := srv.Queue().Get(id)
		return ok && task.State == workers.StateLeased
	})
	sigdtest.StartProcess(t, bin, args("w2"))
	w1.Kill()
	sol := sigdtest.WaitComplete(ctx, t, srv.SIG(t, "ctr"), "ctr", "p")
	// The block is marked ready just before the task leaves the queue.
	waitFor(t, 10*time.Second, "the task to leave the queue", func() bool {
		_, ok := srv.Queue().Get(id)
		return !ok
	})
	if st := srv.Queue().Stats(); st.Expired != 1 || st.Completed != 1 || st.Queued != 0 || st.Leased != 0 {
		t.Errorf("queue after completion: %+v; want one expired lease, one completion, nothing left", st)
	}
	sigdtest.CheckSolution(t, w.Store, w.Blocks, sol, dsl, map[string]*sigdtest.LIGOutput{})
}

// TestIngestedEventsAreMemoized is the smoke path end to end: events from
// the generator go to Kafka (raw.ads), sigd's ingestion seals them into raw
// blocks, a client submits a graph over them, in-process workers memoize
// every block, and the memo objects equal LIG over the sealed blocks.
func TestIngestedEventsAreMemoized(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{})
	srv := sigdtest.Start(t, w, sigd.Config{Ingest: []string{"ads"}, RowsPerBlock: 1000, SealAfter: time.Second}, sigd.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// sigd created raw.ads when it started (TestTopicsExistAtStart).
	cl, err := w.Kafka.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	g := gen.New(gen.Config{Seed: 5, LateFraction: -1})
	if err := g.Produce(ctx, cl, ingest.TopicFor("ads"), 3000, record.ContentTypeRow); err != nil {
		t.Fatal(err)
	}
	from := gen.Config{}
	from.EnsureDefaults()
	r := &sigv1.EventRange{StartMicros: from.Start.UnixMicro(), EndMicros: from.Start.Add(time.Hour).UnixMicro()}
	var blocks []block.Meta
	waitFor(t, time.Minute, "ingestion to seal 3 blocks of 1000 events", func() bool {
		blocks, err = srv.Catalog().Range("ads", r.StartMicros, r.EndMicros)
		if err != nil {
			t.Fatal(err)
		}
		rows := int64(0)
		for _, b := range blocks {
			rows += b.Rows
		}
		return len(blocks) == 3 && rows == 3000
	})
	dsl := sigdtest.DSL(t, "ctr_small")
	c := srv.SIG(t, "ctr")
	if _, err := c.SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 1, dsl, r)); err != nil {
		t.Fatal(err)
	}
	sol := sigdtest.WaitComplete(ctx, t, c, "ctr", "p")
	if sol.BlocksReady != 9 {
		t.Errorf("%d blocks ready, want 3 inputs x 3 blocks", sol.BlocksReady)
	}
	sigdtest.CheckSolution(t, w.Store, blocks, sol, dsl, map[string]*sigdtest.LIGOutput{})
}

// metricByLabel gathers the metric family name from srv's registry: its
// metrics by the value of their label.
func metricByLabel(tb testing.TB, srv *sigdtest.Server, name, label string) map[string]*dto.Metric {
	tb.Helper()
	mfs, err := srv.Registry().Gather()
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]*dto.Metric{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					out[l.GetValue()] = m
				}
			}
		}
	}
	return out
}
