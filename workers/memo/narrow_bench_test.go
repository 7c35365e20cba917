package memo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
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

// BenchmarkNarrow measures narrow stored types (issue 28: a memo value of
// int64 or list<int64> stored in the narrowest integer type that holds
// it, widened on read) side by side in one run, over every component of
// the example fleet (examples/fleet, its five models' graphs, shared
// components once) on the same raw Ads blocks (warehouse/gen, 10,000 rows,
// the fleet's block size), with the memo objects stored wide (in their
// declared types, Runner.Wide, as before) and narrow (the default), each
// in a bucket of its own:
//
//   - stored bytes: the fleet's memo objects per example (every distinct
//     component's object of a block, over the block's rows), uncompressed
//     as stored by default, and the same records encoded with LZ4 frame
//     and ZSTD (block.EncodeWith, what a worker with
//     --segment-compression writes); the same columns packed as a
//     worker's batch writes them (block.WritePacks, issue 28: one
//     event_id and one footer a pack), each way; and the value segments'
//     bytes per example by declared type;
//   - reader CPU: a reader serving every model's SIG unit of a block
//     (every input from its memo object, reader.Server.Serve, responses
//     discarded), CPU nanoseconds per example served, and the bytes it
//     fetched per example; the widening is in the narrow arm's CPU;
//   - worker CPU: memo.Runner computing and writing every component of a
//     block, CPU milliseconds per block (narrowing scans and copies the
//     value once per object).
//
// Wide and narrow alternate within every iteration, in alternating order.
// CPU is the benchmark process's (getrusage); MinIO is a process of its
// own. bench/narrow.sh runs it and writes bench/narrow.txt.
func BenchmarkNarrow(b *testing.B) {
	const rows, blocks = 10_000, 4
	old := debug.SetGCPercent(reader.DefaultGCPercent)
	defer debug.SetGCPercent(old)
	m := devenv.NewMinIO(b)
	ctx := context.Background()
	bucket := func(name string) *objstore.Store {
		return m.NewStore(b, objstore.Config{Bucket: name, RetryFor: 5 * time.Second})
	}
	s := transform.AdsSchema()
	schemaJSON, _ := json.Marshal(s)

	// The fleet: each model's inputs, and its distinct components.
	type component struct {
		key     canon.Key
		input   string
		typ     transform.Type
		dsl     string
		columns []string
	}
	type model struct {
		name   string
		inputs []component
	}
	var models []model
	var comps []component
	seen := map[canon.Key]bool{}
	files, err := fs.Glob(examples.Fleet, "fleet/*.sig")
	if err != nil || len(files) == 0 {
		b.Fatalf("fleet graphs: %v", err)
	}
	for _, f := range files {
		src, err := fs.ReadFile(examples.Fleet, f)
		if err != nil {
			b.Fatal(err)
		}
		name := path.Base(f[:len(f)-len(".sig")])
		g, err := transform.Parse(src, name, transform.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		c, err := canon.Canonicalize(g, s, transform.Default(), transform.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		md := model{name: name}
		for i := range c.Components {
			cc := &c.Components[i]
			comp := component{key: cc.Key, input: cc.Input, typ: cc.Type, dsl: c.DSL(cc, "out"), columns: cc.Columns}
			md.inputs = append(md.inputs, comp)
			if !seen[cc.Key] {
				seen[cc.Key] = true
				comps = append(comps, comp)
			}
		}
		models = append(models, md)
	}

	type arm struct {
		name  string
		wide  bool
		store *objstore.Store
		srv   *reader.Server
		raw   []block.Meta
		memo  [][]block.Meta // [block][component]
		// object is where Runner.Run put each component's column of a
		// block: a pack of that one member (issue 28), the layout of an
		// object per component.
		object    map[string]string // component/block -> object
		workerCPU time.Duration
		readerCPU time.Duration
		examples  int64
		readBytes int64
	}
	arms := []*arm{{name: "wide", wide: true}, {name: "narrow"}}
	recs := gen.New(gen.Config{Seed: 3}).Records(rows*blocks, rows)
	for _, a := range arms {
		a.object = map[string]string{}
		a.store = bucket("sig-" + a.name)
		if a.srv, err = reader.NewServer(reader.Config{Store: a.store}); err != nil {
			b.Fatal(err)
		}
		for k, rec := range recs {
			window := time.Date(2026, 1, 1, k, 0, 0, 0, time.UTC).UnixMicro()
			first := int64(k * rows)
			kr := block.KafkaRange{Topic: "raw.ads", First: first, Last: first + rows - 1}
			id := block.ID(window, kr)
			meta, err := block.Write(ctx, a.store, block.Meta{Key: block.RawKey("ads", blockref.New(id, 1)), ID: id,
				Source: "ads", WindowStart: window, WindowLength: int64(time.Hour / time.Microsecond),
				SchemaFingerprint: s.Fingerprint(), Kafka: &kr}, rec)
			if err != nil {
				b.Fatal(err)
			}
			a.raw = append(a.raw, meta)
		}
		a.memo = make([][]block.Meta, len(a.raw))
	}
	for _, r := range recs {
		r.Release()
	}
	memoKey := func(k canon.Key, blk string) string { return block.MemoKey(k, blockref.ParseMemo(blk)) }
	// work memoizes every component over block k of arm a.
	work := func(a *arm, k int) {
		r := &memo.Runner{Store: a.store, Wide: a.wide}
		meta := a.raw[k]
		for _, c := range comps {
			task := workers.Task{ID: workers.TaskID{Component: c.key, Block: blockref.ParseMemo(meta.ID)}, Spec: &sigv1.Task{
				ComponentKey: c.key.String(), BlockId: meta.ID, RawSource: "ads", RawObject: meta.Key,
				MemoObject: memoKey(c.key, meta.ID), CanonicalDsl: c.dsl, Columns: c.columns,
				SchemaJson: string(schemaJSON), MemoGeneration: 1,
			}}
			res, err := r.Run(ctx, task)
			if err != nil {
				b.Fatal(err)
			}
			a.object[c.key.String()+"/"+meta.ID] = res.Object
		}
	}
	units := func(a *arm, k int) []*readerv1.WorkUnit {
		meta := a.raw[k]
		var us []*readerv1.WorkUnit
		for _, md := range models {
			u := &readerv1.WorkUnit{UnitId: md.name + "/" + meta.ID, Client: "fleet", Pipeline: md.name, RawSource: "ads",
				RawSchemaJson: string(schemaJSON), BlockId: meta.ID, RawObject: meta.Key, BatchRows: 4096}
			for _, c := range md.inputs {
				u.Inputs = append(u.Inputs, &readerv1.ModelInput{Name: c.input, ComponentKey: c.key.String(),
					Type: c.typ.String(), CanonicalDsl: c.dsl, MemoObject: a.object[c.key.String()+"/"+meta.ID], MemoColumn: block.MemberColumn(c.key),
					MemoState: sigv1.BlockState_BLOCK_STATE_READY, Mode: readerv1.InputMode_INPUT_MODE_MEMO})
			}
			us = append(us, u)
		}
		return us
	}

	// Every memo object, both ways; stored bytes from their footers, and
	// the same records encoded compressed.
	comp := []block.Compression{block.LZ4Frame, block.ZSTD}
	memoBytes := map[string]int64{}  // arm[-compression] -> bytes
	valueBytes := map[string]int64{} // arm-declared type -> value segment bytes
	narrowed := 0
	packs := map[string]int{} // arm -> packs written (3 encodings a block)
	var stored []string       // input:declared=stored of each narrowed component
	for _, a := range arms {
		for k := range a.raw {
			work(a, k)
			var members []block.PackMember
			var eventID arrow.Array
			for _, c := range comps {
				meta, rec, err := block.ReadBlock(ctx, a.store, a.object[c.key.String()+"/"+a.raw[k].ID])
				if err != nil {
					b.Fatal(err)
				}
				if eventID == nil {
					eventID = rec.Column(0)
					eventID.Retain()
				}
				val := rec.Column(1)
				val.Retain()
				members = append(members, block.PackMember{Component: c.key, Block: blockref.ParseMemo(a.raw[k].ID), Value: val})
				a.memo[k] = append(a.memo[k], meta)
				memoBytes[a.name] += meta.Size
				v, _ := meta.Column(block.MemberColumn(c.key))
				kind := v.Type
				if c.typ != transform.Int64 && c.typ != transform.ListInt64 {
					kind = "other"
				}
				valueBytes[a.name+"-"+kind] += v.Length
				if !a.wide && k == 0 && v.Stored != "" {
					narrowed++
					stored = append(stored, fmt.Sprintf("%s:%s=%s", c.input, c.typ, v.Stored))
				}
				// As a worker writes it: event_id as the raw block's
				// (uncompressed), the value compressed.
				opts := block.EncodeOptions{Columns: map[string]block.Compression{transform.ColEventID: block.Uncompressed}}
				if !a.wide {
					opts.Narrow = []string{block.MemberColumn(c.key)}
				}
				for _, cp := range comp {
					opts.Compression = cp
					_, cm, err := block.EncodeWith(meta, rec, opts)
					if err != nil {
						b.Fatal(err)
					}
					memoBytes[a.name+"-"+cp.Flag()] += cm.Size
				}
				rec.Release()
			}
			// The same columns packed, as a worker's batch writes a
			// block's (block.WritePacks: one event_id and one footer for
			// the members of a pack), uncompressed and compressed.
			for _, cp := range append([]block.Compression{block.Uncompressed}, comp...) {
				name := a.name + "-packed"
				if cp != block.Uncompressed {
					name += "-" + cp.Flag()
				}
				metas, _, err := block.WritePacks(ctx, a.store, a.raw[k], eventID, members,
					block.PackOptions{EncodeOptions: block.EncodeOptions{Compression: cp}, Wide: a.wide})
				if err != nil {
					b.Fatal(err)
				}
				for _, m := range metas {
					memoBytes[name] += m.Size
				}
				packs[a.name] += len(metas)
			}
			eventID.Release()
			for _, m := range members {
				m.Value.Release()
			}
		}
	}

	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := i % blocks
		for j := range arms {
			a := arms[(i+j)%len(arms)] // alternating which arm goes first
			runtime.GC()
			t0 := cpuTime()
			work(a, k)
			a.workerCPU += cpuTime() - t0
			runtime.GC()
			read0 := a.store.Stats().BytesRead
			t0 = cpuTime()
			for _, u := range units(a, k) {
				err := a.srv.Serve(ctx, &readerv1.ReadRequest{Unit: u}, func(r *readerv1.ReadResponse) error {
					a.examples += r.Rows
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			a.readerCPU += cpuTime() - t0
			a.readBytes += a.store.Stats().BytesRead - read0
		}
	}
	b.StopTimer()
	b.Logf("stored narrow: %s", strings.Join(stored, " "))
	wide, narrow := arms[0], arms[1]
	perEx := func(a *arm) float64 { return float64(a.readerCPU.Nanoseconds()) / float64(a.examples) }
	examples := float64(rows * blocks)
	b.ReportMetric(perEx(narrow)/perEx(wide), "narrow/wide-reader-cpu")
	b.ReportMetric(float64(narrow.workerCPU)/float64(wide.workerCPU), "narrow/wide-worker-cpu")
	b.ReportMetric(float64(len(comps)), "components")
	b.ReportMetric(float64(narrowed), "narrowed-components")
	for _, a := range arms {
		b.ReportMetric(float64(memoBytes[a.name])/examples, a.name+"-memo-B/ex")
		b.ReportMetric(float64(memoBytes[a.name+"-packed"])/examples, a.name+"-packed-memo-B/ex")
		for _, cp := range comp {
			b.ReportMetric(float64(memoBytes[a.name+"-"+cp.Flag()])/examples, a.name+"-"+cp.Flag()+"-memo-B/ex")
			b.ReportMetric(float64(memoBytes[a.name+"-packed-"+cp.Flag()])/examples, a.name+"-packed-"+cp.Flag()+"-memo-B/ex")
		}
		b.ReportMetric(float64(packs[a.name])/float64((1+len(comp))*blocks), a.name+"-packs/block")
		for _, kind := range []string{"int64", "list<int64>", "other"} {
			b.ReportMetric(float64(valueBytes[a.name+"-"+kind])/examples, a.name+"-value-"+kind+"-B/ex")
		}
		b.ReportMetric(perEx(a), a.name+"-reader-cpu-ns/ex")
		b.ReportMetric(float64(a.readBytes)/float64(a.examples), a.name+"-reader-B/ex")
		b.ReportMetric(float64(a.workerCPU.Microseconds())/1e3/float64(b.N), a.name+"-worker-cpu-ms/block")
	}
}
