package memo_test

import (
	"context"
	"encoding/json"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sigdata/sig/canon"
	fleetgen "github.com/sigdata/sig/fleet/gen"
	"github.com/sigdata/sig/internal/devenv"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/gen"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/workers"
	"github.com/sigdata/sig/workers/memo"
)

// BenchmarkBatch measures the worker CPU per (component, block) of
// block-batched tasks against one task per component (issue 28, "Worker
// CPU per (component, block), block-batched against one task per
// component, on the fleet generator's graphs"), side by side in one run.
//
// The tasks: every component the fleet generator's pipelines use
// (fleet/gen, seed 1, its default 300 pipelines: the components of the
// population that some pipeline reads, canonicalized, in the order the
// pipelines first use them, as their submissions enqueue them), over
// BATCH_BLOCKS raw blocks (default 2) of BATCH_ROWS generated Ads events
// each (default 10,000, the fleet run's blocks), in MinIO. In every
// iteration, alternating:
//
//   - per task: memo.Runner.Run of each (component, block) alone — its
//     raw columns read (through a segment cache of sigd's default size,
//     as `sigd worker`'s, so a column is fetched from the store once per
//     block), conformed, its graph run, its one-member pack written;
//   - batched: memo.Runner.RunBatch over each block's tasks in batches of
//     sigd's default --worker-batch-tasks (32), in that order, as a
//     worker leasing them gets them: a batch's raw columns read once, the
//     union of its graphs run once, one pack written.
//
// CPU is the benchmark process's (getrusage; MinIO runs in its own),
// reported per (component, block): batched-cpu-ns/task and
// pertask-cpu-ns/task, and the run's ratio pertask/batched. The stages'
// wall time (Runner.Observe: read, transform, write; -cpu 1, so near their
// CPU) is reported per task for each arm too, to show what bounds the
// ratio, with the kernel runs per task each arm makes (op nodes, col
// excluded: the batched arm's merged graphs hold a shared node once).
// bench/batch.sh runs it and writes bench/batch.txt.
func BenchmarkBatch(b *testing.B) {
	rows, nblocks := envInt(b, "BATCH_ROWS", 10_000), envInt(b, "BATCH_BLOCKS", 2)
	batchTasks := sigd.DefaultWorkerBatchTasks
	m := devenv.NewMinIO(b)
	st := m.NewStore(b, objstore.Config{Bucket: "sig", RetryFor: 5 * time.Second})
	ctx := context.Background()
	s, reg := transform.AdsSchema(), transform.Default()
	schemaJSON, _ := json.Marshal(s)

	// The fleet's components, in the order its pipelines first use them.
	fl, err := fleetgen.Generate(fleetgen.Config{Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	type component struct {
		key     canon.Key
		dsl     string
		columns []string
		ops     int // op nodes of its canonical graph
	}
	var comps []component
	seen := map[canon.Key]bool{}
	for _, p := range fl.Pipelines {
		for _, i := range p.Inputs {
			k, c, err := canon.KeyOf(fl.Components[i].DSL, s, reg)
			if err != nil {
				b.Fatalf("component %s: %v", fl.Components[i].Name, err)
			}
			if seen[k] {
				continue
			}
			seen[k] = true
			comp := &c.Components[0]
			comps = append(comps, component{key: k, dsl: c.DSL(comp, "out"), columns: comp.Columns, ops: opNodes(c, comp.Nodes)})
		}
	}

	// The raw blocks.
	var raws []block.Meta
	recs := gen.New(gen.Config{Seed: 1}).Records(rows*nblocks, rows)
	for k, rec := range recs {
		window := time.Date(2026, 1, 1, k, 0, 0, 0, time.UTC).UnixMicro()
		first := int64(k * rows)
		kr := block.KafkaRange{Topic: "raw.ads", First: first, Last: first + int64(rows) - 1}
		id := block.ID(window, kr)
		meta, err := block.WriteWith(ctx, st, block.Meta{Key: block.RawKey("ads", blockref.New(id, 1)), ID: id,
			Source: "ads", WindowStart: window, WindowLength: int64(time.Hour / time.Microsecond),
			SchemaFingerprint: s.Fingerprint(), Kafka: &kr}, rec, block.EncodeOptions{Compression: block.DefaultCompression})
		if err != nil {
			b.Fatal(err)
		}
		rec.Release()
		raws = append(raws, meta)
	}
	tasks := make([][]workers.Task, len(raws))
	for k, meta := range raws {
		for _, c := range comps {
			mb := blockref.ParseMemo(meta.ID)
			tasks[k] = append(tasks[k], workers.Task{ID: workers.TaskID{Component: c.key, Block: mb}, Spec: &sigv1.Task{
				ComponentKey: c.key.String(), BlockId: meta.ID, RawSource: "ads", RawObject: meta.Key,
				MemoObject: block.MemoKey(c.key, mb), CanonicalDsl: c.dsl, Columns: c.columns,
				SchemaJson: string(schemaJSON), MemoGeneration: 1,
			}})
		}
	}
	// The kernel runs of each arm per block: every component's op nodes
	// alone, a batch's merged graph's once.
	perTaskOps := 0
	for _, c := range comps {
		perTaskOps += c.ops
	}
	batchedOps := 0
	for lo := 0; lo < len(comps); lo += batchTasks {
		g := &transform.Graph{}
		for x, c := range comps[lo:min(lo+batchTasks, len(comps))] {
			cg, err := transform.Parse([]byte(c.dsl), "", transform.Limits{})
			if err != nil {
				b.Fatal(err)
			}
			base := len(g.Nodes)
			for _, n := range cg.Nodes {
				ins := make([]int, len(n.Inputs))
				for i, j := range n.Inputs {
					ins[i] = j + base
				}
				n.Inputs, n.Name = ins, ""
				g.Nodes = append(g.Nodes, n)
			}
			g.Inputs = append(g.Inputs, transform.ModelInput{Name: "t" + strconv.Itoa(x), Node: cg.Inputs[0].Node + base})
		}
		c, err := canon.Canonicalize(g, s, reg, transform.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		all := make([]int, len(c.Nodes))
		for i := range all {
			all[i] = i
		}
		batchedOps += opNodes(c, all)
	}

	type arm struct {
		name   string
		run    func(r *memo.Runner, ts []workers.Task)
		cpu    time.Duration
		tasks  int64
		phases map[string]time.Duration
	}
	perTask := &arm{name: "pertask", run: func(r *memo.Runner, ts []workers.Task) {
		for _, t := range ts {
			if _, err := r.Run(ctx, t); err != nil {
				b.Fatal(err)
			}
		}
	}}
	batched := &arm{name: "batched", run: func(r *memo.Runner, ts []workers.Task) {
		for lo := 0; lo < len(ts); lo += batchTasks {
			for _, o := range r.RunBatch(ctx, ts[lo:min(lo+batchTasks, len(ts))]) {
				if o.Err != nil {
					b.Fatal(o.Err)
				}
			}
		}
	}}
	arms := []*arm{perTask, batched}
	var mu sync.Mutex
	runner := func(a *arm) *memo.Runner {
		return &memo.Runner{Store: st, Segments: block.NewSegmentCache(sigd.DefaultWorkerCacheBytes), Compression: block.DefaultCompression,
			Observe: func(phase string, d time.Duration) {
				mu.Lock()
				a.phases[phase] += d
				mu.Unlock()
			}}
	}
	// Warm up both arms (connections, code, the store's first writes).
	for _, a := range arms {
		a.phases = map[string]time.Duration{}
		a.run(runner(a), tasks[0][:min(len(tasks[0]), batchTasks)])
		a.phases = map[string]time.Duration{}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, a := range arms {
			// A fresh runner a block: its segment cache starts empty, as a
			// worker's does for a block it has not read.
			for k := range raws {
				r := runner(a)
				runtime.GC()
				t0 := cpuTime()
				a.run(r, tasks[k])
				a.cpu += cpuTime() - t0
				a.tasks += int64(len(tasks[k]))
			}
		}
	}
	b.StopTimer()
	for _, a := range arms {
		b.ReportMetric(float64(a.cpu.Nanoseconds())/float64(a.tasks), a.name+"-cpu-ns/task")
		for _, ph := range []string{"read", "transform", "write"} {
			b.ReportMetric(float64(a.phases[ph].Nanoseconds())/float64(a.tasks), a.name+"-"+ph+"-ns/task")
		}
	}
	b.ReportMetric(float64(perTask.cpu)/float64(batched.cpu), "pertask/batched-cpu")
	b.ReportMetric(float64(len(comps)), "tasks/block")
	b.ReportMetric(float64(perTaskOps)/float64(len(comps)), "pertask-ops/task")
	b.ReportMetric(float64(batchedOps)/float64(len(comps)), "batched-ops/task")
}

// opNodes counts the op nodes (col excluded) among nodes of c.
func opNodes(c *canon.Canonical, nodes []int) int {
	n := 0
	for _, i := range nodes {
		if c.Nodes[i].Op != "col" {
			n++
		}
	}
	return n
}

// envInt is the integer environment variable name, or def when unset.
func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}
