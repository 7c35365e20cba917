package memo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"runtime"
	"runtime/debug"
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

// BenchmarkCompression measures Arrow IPC buffer compression of block
// segments (block.Compression) side by side in one run: the same raw
// blocks (100k Ads events each, from the generator) written uncompressed,
// with LZ4 frame and with ZSTD, and the memo objects of the ctr_small
// pipeline's components over them written by memo.Runner with the same
// compression. Per compression, alternating within every iteration:
//
//   - stored bytes: raw block objects, and the memo columns (bytes per
//     block: each component's segment, workers.Result.Bytes; since
//     packs, a pack's shared event_id and footer are not a member's);
//   - worker CPU: memo.Runner computing and writing every component of one
//     block (read the raw columns, decompress, run, compress, PUT), CPU
//     milliseconds per block;
//   - ingestion CPU: encoding one raw block (block.EncodeWith, what
//     ingestion adds per block), CPU milliseconds per block;
//   - reader CPU: a reader serving the pipeline's SIG units (every input
//     from its memo object, reader.Server.Serve, responses discarded), CPU
//     nanoseconds per example, and the bytes it fetched per example.
//
// CPU is the benchmark process's (getrusage); MinIO is a process of its
// own. bench/compression.sh runs it and writes bench/compression.txt.
func BenchmarkCompression(b *testing.B) {
	const rows, blocks = 100_000, 2
	old := debug.SetGCPercent(reader.DefaultGCPercent)
	defer debug.SetGCPercent(old)
	m := devenv.NewMinIO(b)
	st := m.NewStore(b, objstore.Config{Bucket: "sig", RetryFor: 5 * time.Second})
	ctx := context.Background()
	s := transform.AdsSchema()
	schemaJSON, _ := json.Marshal(s)
	src, err := fs.ReadFile(examples.Fleet, "fleet/ctr_small.sig")
	if err != nil {
		b.Fatal(err)
	}
	g, err := transform.Parse(src, "ctr_small", transform.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	c, err := canon.Canonicalize(g, s, transform.Default(), transform.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	comps := []block.Compression{block.Uncompressed, block.LZ4Frame, block.ZSTD}
	type arm struct {
		comp              block.Compression
		raw               []block.Meta
		rawBytes, memoB   int64
		workerCPU, reader time.Duration
		encodeCPU         time.Duration
		examples, tasks   int64
		blocksRun         int64
		readBytes         int64
		// object is where Runner.Run last put each component's column of
		// a block (a pack of that one member): component index/block id.
		object map[string]string
	}
	arms := make([]*arm, len(comps))
	recs := gen.New(gen.Config{Seed: 3}).Records(rows*blocks, rows)
	for i, comp := range comps {
		a := &arm{comp: comp, object: map[string]string{}}
		for k, rec := range recs {
			window := time.Date(2026, 1, 1, k, 0, 0, 0, time.UTC).UnixMicro()
			// Each arm's blocks are other Kafka ranges: other block ids.
			first := int64((i*len(recs) + k) * rows)
			kr := block.KafkaRange{Topic: "raw.ads", First: first, Last: first + rows - 1}
			id := block.ID(window, kr)
			meta, err := block.WriteWith(ctx, st, block.Meta{Key: block.RawKey("ads", blockref.New(id, 1)), ID: id,
				Source: "ads", WindowStart: window, WindowLength: int64(time.Hour / time.Microsecond),
				SchemaFingerprint: s.Fingerprint(), Kafka: &kr}, rec, block.EncodeOptions{Compression: comp})
			if err != nil {
				b.Fatal(err)
			}
			a.raw = append(a.raw, meta)
			a.rawBytes += meta.Size
		}
		arms[i] = a
	}
	for _, r := range recs[1:] {
		r.Release()
	}
	rec := recs[0] // encoded again by every iteration: ingestion's cost
	defer rec.Release()
	memoKey := func(ci int, blk string) string { return block.MemoKey(c.Components[ci].Key, blockref.ParseMemo(blk)) }
	// work memoizes every component over block k of arm a.
	work := func(a *arm, k int) {
		r := &memo.Runner{Store: st, Compression: a.comp}
		meta := a.raw[k]
		for ci := range c.Components {
			comp := &c.Components[ci]
			task := workers.Task{ID: workers.TaskID{Component: comp.Key, Block: blockref.ParseMemo(meta.ID)}, Spec: &sigv1.Task{
				ComponentKey: comp.Key.String(), BlockId: meta.ID, RawSource: "ads", RawObject: meta.Key,
				MemoObject: memoKey(ci, meta.ID), CanonicalDsl: c.DSL(comp, "out"), Columns: comp.Columns,
				SchemaJson: string(schemaJSON), MemoGeneration: 1,
			}}
			res, err := r.Run(ctx, task)
			if err != nil {
				b.Fatal(err)
			}
			a.object[fmt.Sprint(ci, "/", meta.ID)] = res.Object
			if a.blocksRun < int64(len(a.raw)) {
				a.memoB += res.Bytes
			}
			a.tasks++
		}
		a.blocksRun++
	}
	unit := func(a *arm, k int) *readerv1.WorkUnit {
		meta := a.raw[k]
		u := &readerv1.WorkUnit{UnitId: meta.ID, Client: "ctr", Pipeline: "p", RawSource: "ads", RawSchemaJson: string(schemaJSON),
			BlockId: meta.ID, RawObject: meta.Key, BatchRows: 4096}
		for ci := range c.Components {
			comp := &c.Components[ci]
			u.Inputs = append(u.Inputs, &readerv1.ModelInput{Name: comp.Input, ComponentKey: comp.Key.String(),
				Type: comp.Type.String(), CanonicalDsl: c.DSL(comp, "out"), MemoObject: a.object[fmt.Sprint(ci, "/", meta.ID)],
				MemoColumn: block.MemberColumn(comp.Key), MemoState: sigv1.BlockState_BLOCK_STATE_READY, Mode: readerv1.InputMode_INPUT_MODE_MEMO})
		}
		return u
	}
	srv, err := reader.NewServer(reader.Config{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	// Every arm's memo objects exist before the first read.
	for _, a := range arms {
		for k := range a.raw {
			work(a, k)
		}
		a.workerCPU, a.tasks, a.blocksRun = 0, 0, int64(len(a.raw))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, a := range arms {
			k := i % len(a.raw)
			runtime.GC()
			t0 := cpuTime()
			work(a, k)
			a.workerCPU += cpuTime() - t0
			runtime.GC()
			t0 = cpuTime()
			if _, _, err := block.EncodeWith(a.raw[0], rec, block.EncodeOptions{Compression: a.comp}); err != nil {
				b.Fatal(err)
			}
			a.encodeCPU += cpuTime() - t0
			runtime.GC()
			read0 := st.Stats().BytesRead
			t0 = cpuTime()
			err := srv.Serve(ctx, &readerv1.ReadRequest{Unit: unit(a, k)}, func(r *readerv1.ReadResponse) error {
				a.examples += r.Rows
				return nil
			})
			a.reader += cpuTime() - t0
			a.readBytes += st.Stats().BytesRead - read0
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	// Per-run ratios to uncompressed: the runs' medians of these are
	// steadier than ratios of medians on a shared machine.
	base := arms[0]
	perEx := func(a *arm) float64 { return float64(a.reader.Nanoseconds()) / float64(a.examples) }
	for _, a := range arms[1:] {
		n := a.comp.Flag()
		b.ReportMetric(perEx(a)/perEx(base), n+"/none-reader-cpu")
		b.ReportMetric(float64(a.workerCPU)/float64(base.workerCPU), n+"/none-worker-cpu")
	}
	for _, a := range arms {
		n := a.comp.Flag()
		b.ReportMetric(float64(a.rawBytes)/float64(len(a.raw)), n+"-raw-B/block")
		b.ReportMetric(float64(a.memoB)/float64(len(a.raw)), n+"-memo-B/block")
		b.ReportMetric(float64(a.workerCPU.Microseconds())/1e3/float64(b.N), n+"-worker-cpu-ms/block")
		b.ReportMetric(float64(a.reader.Nanoseconds())/float64(a.examples), n+"-reader-cpu-ns/ex")
		b.ReportMetric(float64(a.readBytes)/float64(a.examples), n+"-reader-B/ex")
		b.ReportMetric(float64(a.encodeCPU.Microseconds())/1e3/float64(b.N), n+"-ingest-encode-cpu-ms/block")
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
