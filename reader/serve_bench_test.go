package reader

import (
	"context"
	"runtime"
	"syscall"
	"testing"
	"time"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
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

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
