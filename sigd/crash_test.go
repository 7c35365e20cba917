package sigd_test

import (
	"context"
	"strings"
	"testing"
	"time"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// TestSIGKILLDuringWork runs the sigd binary, submits three overlapping
// fleet graphs, and kills sigd with SIGKILL twice while its in-process
// workers are memoizing (each run is slowed down so kills land mid-work),
// restarting it on the same data directory each time. Every read solution
// completes, the queues end empty with nothing quarantined (no task lost),
// and every memo object in the bucket equals LIG's output for its input and
// block, byte for byte.
func TestSIGKILLDuringWork(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 6, RowsPerBlock: 2000, Seed: 3})
	dir := t.TempDir()
	w.Catalog(t, dir)
	tokPath, toks := sigdtest.WriteTokens(t, t.TempDir())
	bin := sigdtest.BuildCommand(t, "cmd/sigd")
	args := append([]string{"serve", "--data-dir", dir, "--tokens", tokPath, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--kafka-brokers", strings.Join(w.Kafka.Brokers, ","), "--lease", "2s", "--workers-min", "4", "--workers-max", "4"}, w.S3Args()...)
	start := func() *sigdtest.Process {
		return sigdtest.StartProcess(t, bin, args, "SIG_TEST_TASK_DELAY=250ms")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	type model struct{ client, pipeline, graph string }
	models := []model{{"ctr", "ctr-small", "ctr_small"}, {"cvr", "cvr", "cvr"}, {"ranking", "ranking", "ranking"}}
	dsl := map[string]string{}
	wanted := map[string]string{} // memo object -> graph that defines it
	total := 0
	p := start()
	for _, m := range models {
		dsl[m.graph] = sigdtest.DSL(t, m.graph)
		c := sigv1.NewSIGClient(sigdtest.Dial(t, p.Addr, toks[m.client]))
		if _, err := c.SubmitGraph(ctx, sigdtest.Submit(m.client, m.pipeline, 10, dsl[m.graph], w.All())); err != nil {
			t.Fatal(err)
		}
		keys := componentKeys(t, dsl[m.graph])
		total += len(keys) * len(w.Blocks)
		for _, k := range keys {
			for _, b := range w.Blocks {
				if _, ok := wanted[block.MemoKey(k, blockref.ParseMemo(b.ID))]; !ok {
					wanted[block.MemoKey(k, blockref.ParseMemo(b.ID))] = m.graph
				}
			}
		}
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
	for _, m := range models {
		c := sigv1.NewSIGClient(sigdtest.Dial(t, p.Addr, toks[m.client]))
		sol := sigdtest.WaitComplete(ctx, t, c, m.client, m.pipeline)
		ligs[m.graph] = map[string]*sigdtest.LIGOutput{}
		sigdtest.CheckSolution(t, w.Store, w.Blocks, sol, dsl[m.graph], ligs[m.graph])
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
	// (CheckSolution compared those): nothing half-written or stray.
	n := 0
	for info, err := range w.Store.List(ctx, block.MemoPrefix) {
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := wanted[info.Key]; !ok {
			t.Errorf("unexpected memo object %s", info.Key)
		}
		n++
	}
	if n != len(wanted) {
		t.Errorf("%d memo objects in the bucket, want %d", n, len(wanted))
	}
}
