package reader

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
)

// caughtUpFractions are the pending fractions BenchmarkCaughtUpMix sweeps:
// the share of (input, block) pairs whose memoized block is not ready when
// a caught-up unit is read, so that the reader computes them locally.
var caughtUpFractions = []float64{0, 0.1, 0.25, 0.5, 1}

// BenchmarkCaughtUpMix measures what SIG saves caught-up readers (issue 21,
// item 4): caught-up units read each input's memoized block when it is
// ready and compute only the pending ones locally, against pure LIG (the
// paper's caught-up phase, every input local) on the same units, in the
// same run. The pending fraction p is swept: which p a stream of late
// events and updates leaves at the head depends on the stream and on the
// workers' latency, so the sweep is the measured curve and a run's p is
// read from the readers' input-mode counters. The (input, block) pairs are
// taken in block order and every 1/p-th is local (floor((q+1)p) >
// floor(qp) for pair q), so the local ones spread evenly over inputs and
// blocks and exactly round-down(p x pairs) are local.
//
// Reported per p: the reader's CPU per example (cpu-ns/ex@p) and the share
// of pure LIG's CPU it saves (saved@p = 1 - cpu(p)/cpu(1)).
func BenchmarkCaughtUpMix(b *testing.B) {
	const name = "ctr_small"
	f := newFixture(b, fixtureConfig{Blocks: 8, RowsPerBlock: benchRows / 4, Graphs: fleetGraphs(b, name)})
	benchGC(b)
	srv := f.server(b, Config{})
	addr := serveOn(b, func(gs *grpc.Server) { readerv1.RegisterReaderServer(gs, srv) })
	lg := startLoadgen(b)
	units := make([][]*readerv1.WorkUnit, len(caughtUpFractions))
	for pi, p := range caughtUpFractions {
		q := 0
		for bi := range f.blocks {
			u := f.unit(bi, 4096, allMode(memo))
			var ins []*readerv1.ModelInput
			for _, in := range u.Inputs {
				if strings.HasPrefix(in.Name, "g0_") {
					ins = append(ins, in)
				}
			}
			for _, in := range ins {
				if int(float64(q+1)*p) > int(float64(q)*p) {
					in.Mode = local
				}
				q++
			}
			u.Inputs = ins
			units[pi] = append(units[pi], u)
		}
	}
	lg.run(b, addr, units[0], len(f.blocks)) // warm up
	b.Run(name, func(b *testing.B) {
		got := make([]measured, len(caughtUpFractions))
		for i := 0; i < b.N; i++ {
			for pi := range caughtUpFractions {
				got[pi] = got[pi].add(lg.run(b, addr, units[pi], len(f.blocks)))
			}
		}
		lig := got[len(got)-1]
		for pi, p := range caughtUpFractions {
			m := got[pi]
			if m.bytes != lig.bytes || m.rows != lig.rows {
				b.Fatalf("p=%g sent %d bytes/%d rows, pure LIG %d/%d", p, m.bytes, m.rows, lig.bytes, lig.rows)
			}
			b.ReportMetric(float64(m.cpu.Nanoseconds())/float64(m.rows), fmt.Sprintf("cpu-ns/ex@%g", p))
			b.ReportMetric(1-m.cpu.Seconds()/lig.cpu.Seconds(), fmt.Sprintf("saved@%g", p))
		}
		b.ReportMetric(0, "ns/op")
	})
}
