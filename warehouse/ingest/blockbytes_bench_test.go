package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/examples"
	"github.com/sigdata/sig/internal/devenv"
	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/reader"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/gen"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/workers"
	"github.com/sigdata/sig/workers/memo"
)

// BenchmarkBlockBytes is the sweep that chooses ingest.DefaultBlockBytes
// (issue 28; bench/block-bytes.sh writes bench/block-bytes.txt and .json).
// The same generated Ads events (BLOCK_BYTES_ROWS of them, default
// 300,000) are cut into blocks of each target size (BLOCK_BYTES_SIZES,
// bytes, comma-separated; default 256 KiB to 64 MiB by fours), as
// ingestion cuts them by their encoded size, and in every iteration, for
// each size in turn, the fleet's ranking pipeline (its components all
// memoized) is
//
//   - memoized over every block by a worker (memo.Runner.RunBatch, the
//     block's tasks as one batch: its raw columns read once, the union of
//     the components' graphs, one pack, as sigd's workers run them):
//     worker CPU per block and per example;
//   - read by a SIG reader (reader.Server, every input MEMO, the guard at
//     its default) and by a LIG reader (every input computed from raw),
//     unit after unit: reader CPU per example each, and the object-store
//     requests each made per example (objstore.Stats, GETs of footers and
//     segments).
//
// CPU is getrusage of the benchmark process (MinIO runs in its own); each
// metric is reported per size, named "<size>-...".
func BenchmarkBlockBytes(b *testing.B) {
	rows := envInt(b, "BLOCK_BYTES_ROWS", 300_000)
	var sizes []int64
	for _, s := range strings.Split(envString("BLOCK_BYTES_SIZES", "262144,1048576,4194304,16777216,67108864"), ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || n <= 0 {
			b.Fatalf("BLOCK_BYTES_SIZES: %q", s)
		}
		sizes = append(sizes, n)
	}
	old := debug.SetGCPercent(reader.DefaultGCPercent)
	defer debug.SetGCPercent(old)
	m := devenv.NewMinIO(b)
	st := m.NewStore(b, objstore.Config{Bucket: "sig", RetryFor: 5 * time.Second})
	ctx := context.Background()
	s := transform.AdsSchema()
	schemaJSON, _ := json.Marshal(s)
	src, err := fs.ReadFile(examples.Fleet, "fleet/ranking.sig")
	if err != nil {
		b.Fatal(err)
	}
	g, err := transform.Parse(src, "ranking", transform.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	c, err := canon.Canonicalize(g, s, transform.Default(), transform.Limits{})
	if err != nil {
		b.Fatal(err)
	}

	// The events, and the bytes a row encodes to (a sample block's object
	// over its rows): a target of T bytes is T over that many rows, as
	// ingestion's estimate cuts it (TestSealBySize holds that estimate
	// within a fifth of the target).
	all := gen.New(gen.Config{Seed: 28, LateFraction: -1}).Records(rows, rows)[0]
	defer all.Release()
	sample := all.NewSlice(0, min(int64(rows), 20_000))
	data, _, err := block.Encode(block.Meta{ID: "sample", Key: "sample", Source: "ads"}, sample)
	sample.Release()
	if err != nil {
		b.Fatal(err)
	}
	bytesPerRow := float64(len(data)) / float64(min(rows, 20_000))

	type arm struct {
		target                int64
		blocks                []block.Meta
		workerCPU             time.Duration
		sigCPU, ligCPU        time.Duration
		sigReqs, ligReqs      int64
		examples, workedBlock int64
	}
	window := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	arms := make([]*arm, len(sizes))
	next := int64(0)
	for i, size := range sizes {
		a := &arm{target: size}
		per := max(int64(float64(size)/bytesPerRow), 1)
		for lo := int64(0); lo < int64(rows); lo += per {
			hi := min(lo+per, int64(rows))
			kr := block.KafkaRange{Topic: "raw.ads", First: next, Last: next + hi - lo - 1}
			next += hi - lo
			id := block.ID(window, kr)
			rec := all.NewSlice(lo, hi)
			meta, err := block.Write(ctx, st, block.Meta{Key: block.RawKey("ads", blockref.New(id, 1)), ID: id, Source: "ads",
				WindowStart: window, WindowLength: int64(time.Hour / time.Microsecond), SchemaFingerprint: s.Fingerprint(), Kafka: &kr}, rec)
			rec.Release()
			if err != nil {
				b.Fatal(err)
			}
			a.blocks = append(a.blocks, meta)
		}
		arms[i] = a
	}
	memoKey := func(ci int, id string) string { return block.MemoKey(c.Components[ci].Key, blockref.ParseMemo(id)) }
	// packs[id][ci] is the pack holding component ci's column of block id,
	// as the block's batch wrote it.
	var packsMu sync.Mutex
	packs := map[string][]string{}
	work := func(meta block.Meta) {
		// One batch of the block's tasks, as sigd's workers lease and run
		// them (memo.Runner.RunBatch: the raw columns read once, the union
		// graph, one pack).
		r := &memo.Runner{Store: st, Segments: block.NewSegmentCache(256 << 20)}
		var tasks []workers.Task
		for ci := range c.Components {
			comp := &c.Components[ci]
			tasks = append(tasks, workers.Task{ID: workers.TaskID{Component: comp.Key, Block: blockref.ParseMemo(meta.ID)}, Spec: &sigv1.Task{
				ComponentKey: comp.Key.String(), BlockId: meta.ID, RawSource: "ads", RawObject: meta.Key,
				MemoObject: memoKey(ci, meta.ID), CanonicalDsl: c.DSL(comp, "out"), Columns: comp.Columns,
				SchemaJson: string(schemaJSON), MemoGeneration: 1}})
		}
		objs := make([]string, len(tasks))
		for i, o := range r.RunBatch(ctx, tasks) {
			if o.Err != nil {
				b.Fatal(o.Err)
			}
			objs[i] = o.Result.Object
		}
		packsMu.Lock()
		packs[meta.ID] = objs
		packsMu.Unlock()
	}
	unit := func(meta block.Meta, mode readerv1.InputMode) *readerv1.WorkUnit {
		u := &readerv1.WorkUnit{UnitId: meta.ID, Client: "c", Pipeline: "ranking", RawSource: "ads", RawSchemaJson: string(schemaJSON),
			BlockId: meta.ID, RawObject: meta.Key, BatchRows: 4096}
		packsMu.Lock()
		objs := packs[meta.ID]
		packsMu.Unlock()
		for ci := range c.Components {
			comp := &c.Components[ci]
			in := &readerv1.ModelInput{Name: comp.Input, ComponentKey: comp.Key.String(),
				Type: comp.Type.String(), CanonicalDsl: c.DSL(comp, "out"), MemoObject: memoKey(ci, meta.ID),
				MemoState: sigv1.BlockState_BLOCK_STATE_READY, Mode: mode}
			if ci < len(objs) && objs[ci] != "" {
				in.MemoObject, in.MemoColumn = objs[ci], block.MemberColumn(comp.Key)
			}
			u.Inputs = append(u.Inputs, in)
		}
		return u
	}
	srv, err := reader.NewServer(reader.Config{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	read := func(u *readerv1.WorkUnit) int64 {
		var n int64
		if err := srv.Serve(ctx, &readerv1.ReadRequest{Unit: u}, func(r *readerv1.ReadResponse) error {
			n += r.Rows
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		return n
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, a := range arms {
			runtime.GC()
			t0 := cpuTime()
			for _, meta := range a.blocks {
				work(meta)
			}
			a.workerCPU += cpuTime() - t0
			a.workedBlock += int64(len(a.blocks))
			for _, mode := range []readerv1.InputMode{readerv1.InputMode_INPUT_MODE_MEMO, readerv1.InputMode_INPUT_MODE_LOCAL} {
				runtime.GC()
				req0 := st.Stats().Requests
				t0 := cpuTime()
				var n int64
				for _, meta := range a.blocks {
					n += read(unit(meta, mode))
				}
				d, reqs := cpuTime()-t0, st.Stats().Requests-req0
				if mode == readerv1.InputMode_INPUT_MODE_MEMO {
					a.sigCPU, a.sigReqs, a.examples = a.sigCPU+d, a.sigReqs+reqs, a.examples+n
				} else {
					a.ligCPU, a.ligReqs = a.ligCPU+d, a.ligReqs+reqs
				}
			}
		}
	}
	b.StopTimer()
	for _, a := range arms {
		n := fmt.Sprint(a.target)
		ex := float64(a.examples)
		b.ReportMetric(float64(len(a.blocks)), n+"-blocks")
		b.ReportMetric(float64(a.blocks[0].Size), n+"-B/block")
		b.ReportMetric(float64(a.blocks[0].Rows), n+"-rows/block")
		b.ReportMetric(float64(a.sigCPU.Nanoseconds())/ex, n+"-sig-reader-ns/ex")
		b.ReportMetric(float64(a.ligCPU.Nanoseconds())/ex, n+"-lig-reader-ns/ex")
		b.ReportMetric(float64(a.sigCPU)/float64(a.ligCPU), n+"-sig/lig-reader")
		b.ReportMetric(float64(a.sigReqs)/ex*1e3, n+"-sig-requests/kex")
		b.ReportMetric(float64(a.ligReqs)/ex*1e3, n+"-lig-requests/kex")
		b.ReportMetric(float64(a.workerCPU.Microseconds())/1e3/float64(a.workedBlock), n+"-worker-ms/block")
		b.ReportMetric(float64(a.workerCPU.Nanoseconds())/ex, n+"-worker-ns/ex")
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInt(tb testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		tb.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}
