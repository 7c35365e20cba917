package sigd_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
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
	named := map[string]bool{}
	for _, in := range sol.Inputs {
		for _, b := range in.Blocks {
			if b.MemoColumn == "" {
				t.Errorf("input %s block %s names %s without a column: want a pack's", in.Input, b.BlockId, b.MemoObject)
			}
			named[b.MemoObject] = true
		}
	}
	for _, pk := range packs {
		if named[pk] {
			t.Fatalf("an entry names the pack %s held before the kill", pk)
		}
	}
	waitFor(t, 30*time.Second, "the packs held before the kill to be swept", func() bool {
		for _, pk := range packs {
			if _, err := w.Store.Stat(ctx, pk); !errors.Is(err, objstore.ErrNotFound) {
				return false
			}
		}
		return true
	})
	for info, err := range w.Store.List(ctx, block.MemoPrefix) {
		if err != nil {
			t.Fatal(err)
		}
		if !named[info.Key] {
			t.Errorf("memo object %s is named by no entry", info.Key)
		}
	}
}
