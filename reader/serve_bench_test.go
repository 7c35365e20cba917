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
	f := newFixture(b, fixtureConfig{Blocks: 2, RowsPerBlock: benchRows, Graphs: fleetGraphs(b, "ctr_small"), Packed: true})
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
// nothing else. Per unit, one planned read of the raw block's event_id and
// labels and one of each memo object's value (block.ObjectReader, with a
// footer cache as a Server keeps: after the first unit of a block, one
// ranged GET per object, the coalesced segments and the footer read back),
// into buffers of the reader's segment pool, taken per unit and given back
// when the unit's reads are done, as Server.serve does. Checksums are
// computed (they are part of the requests' reading), nothing is decoded or
// encoded. req/unit is the requests per unit.
func BenchmarkFetch(b *testing.B) {
	f := newFixture(b, fixtureConfig{Blocks: 2, RowsPerBlock: benchRows, Graphs: fleetGraphs(b, "ctr_small"), Packed: true})
	benchGC(b)
	ctx := context.Background()
	r := &block.ObjectReader{Store: f.store, Footers: block.NewFooterCache(DefaultFooterCacheEntries)}
	var bytes, rows, reqs int64
	var mu sync.Mutex
	count := func(block.RequestKind, int64) {
		mu.Lock()
		reqs++
		mu.Unlock()
	}
	read := func(key string, names []string, bufs *unitBuffers) {
		d, err := r.Read(ctx, block.ObjectRead{Key: key, Alloc: bufs.alloc, Count: count,
			Want: func(block.Meta, bool) ([]string, error) { return names, nil }})
		if err != nil {
			b.Error(err)
			return
		}
		mu.Lock()
		for _, s := range d.Segs {
			bytes += int64(len(s))
		}
		mu.Unlock()
	}
	unit := func(i int) {
		u := f.unit(i%len(f.blocks), 4096, nil)
		bufs := &unitBuffers{}
		var wg sync.WaitGroup
		// Each memo object once, for every input whose column it
		// holds (packs: the fixture is Packed), as the reader does.
		cols := map[string][]string{}
		for _, in := range u.Inputs {
			c := in.MemoColumn
			if c == "" {
				c = MemoColumn
			}
			cols[in.MemoObject] = append(cols[in.MemoObject], c)
		}
		for key, names := range cols {
			wg.Add(1)
			go func() {
				defer wg.Done()
				read(key, names, bufs)
			}()
		}
		read(u.RawObject, append([]string{transform.ColEventID}, DefaultLabels...), bufs)
		wg.Wait()
		bufs.release()
	}
	for i := range f.blocks {
		unit(i) // footers cached, as on a reader serving the blocks again
	}
	bytes, reqs = 0, 0
	runtime.GC()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		unit(i)
		rows += f.blocks[i%len(f.blocks)].rows
	}
	cpu := cpuTime() - cpu0
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(rows), "cpu-ns/example")
	b.ReportMetric(float64(reqs)/float64(b.N), "req/unit")
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
