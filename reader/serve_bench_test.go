package reader

import (
	"context"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
)

// BenchmarkServe measures one reader serving whole 100k-row units of the
// ctr_small pipeline without a network (responses are discarded), per mode.
func BenchmarkServe(b *testing.B) {
	f := newFixture(b, fixtureConfig{Blocks: 2, RowsPerBlock: benchRows, Graphs: fleetGraphs(b, "ctr_small")})
	benchGC(b)
	s := f.server(b, Config{})
	for _, mode := range []struct {
		name string
		m    readerv1.InputMode
	}{{"sig", memo}, {"lig", local}} {
		b.Run(mode.name, func(b *testing.B) {
			var bytes, rows int64
			runtime.GC()
			cpu0 := cpuTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				u := f.unit(i%len(f.blocks), 4096, allMode(mode.m))
				err := s.Serve(context.Background(), &readerv1.ReadRequest{Unit: u}, func(r *readerv1.ReadResponse) error {
					bytes += int64(len(r.ArrowIpc))
					rows += r.Rows
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			cpu := cpuTime() - cpu0
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(rows), "cpu-ns/example")
			b.SetBytes(bytes / int64(b.N))
		})
	}
}

// BenchmarkFetch is the floor under a SIG reader's own work: the object
// store requests a reader makes for a ctr_small unit (BenchmarkServe/sig) and
// nothing else. Per unit, the raw block's footer (block.ReadFooter), then
// the ranged GETs of its event_id and labels (adjacent segments in one
// request) and one GET per memo object of its value segment and footer
// (objstore.GetFromInto, the request of block.FetchTail). The GETs read
// into buffers of the reader's segment pool, taken per unit and given back
// when the unit's reads are done, as Server.serve does. No checksums, no
// decoding, no encoding.
func BenchmarkFetch(b *testing.B) {
	f := newFixture(b, fixtureConfig{Blocks: 2, RowsPerBlock: benchRows, Graphs: fleetGraphs(b, "ctr_small")})
	benchGC(b)
	ctx := context.Background()
	var bytes, rows int64
	runtime.GC()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// The reader's requests: the raw block's footer, then at once its
		// spans and one request per memo object from where its value
		// segment starts (block.FetchTail's).
		u := f.unit(i%len(f.blocks), 4096, nil)
		rawMeta, err := block.ReadFooter(ctx, f.store, u.RawObject)
		if err != nil {
			b.Fatal(err)
		}
		id, _ := rawMeta.Column(transform.ColEventID)
		spans, err := block.Spans(rawMeta, append([]string{transform.ColEventID}, DefaultLabels...))
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		bufs := &unitBuffers{}
		add := func(n int) {
			mu.Lock()
			bytes += int64(n)
			mu.Unlock()
		}
		for _, sp := range spans {
			wg.Add(1)
			go func() {
				defer wg.Done()
				data := bufs.alloc(int(sp.End - sp.Off))
				if err := f.store.GetRangeInto(ctx, u.RawObject, sp.Off, data, nil); err != nil {
					b.Error(err)
					return
				}
				add(len(data))
			}()
		}
		for _, in := range u.Inputs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				data, _, err := f.store.GetFromInto(ctx, in.MemoObject, block.After(id), block.MaxTail, bufs.alloc, nil)
				if err != nil {
					b.Error(err)
					return
				}
				add(len(data))
			}()
		}
		wg.Wait()
		bufs.release()
		rows += f.blocks[i%len(f.blocks)].rows
	}
	cpu := cpuTime() - cpu0
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(rows), "cpu-ns/example")
	b.SetBytes(bytes / int64(b.N))
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
