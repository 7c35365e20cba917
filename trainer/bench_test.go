package trainer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/trainer/accounting/goodput"
	"github.com/sigdata/sig/trainer/buffer"
	"github.com/sigdata/sig/trainer/control"
)

// benchPipelines numbers the pipelines the benchmarks create.
var benchPipelines atomic.Int64

// benchSetup starts a warehouse memoized for the ctr_small graph. Call it
// from a benchmark whose body only calls b.Run: cleanups registered on a
// benchmark run after each of its runs, and a parent's body runs once.
func benchSetup(b *testing.B) *env {
	b.Helper()
	e := newEnv(b, 8, 4000, sigd.Options{})
	e.memoize(b, "warm")
	return e
}

// BenchmarkInputStall measures the input-stall fraction of the trainer's
// time (input stalls over stalls plus steps, from the goodput accounting)
// when hosts scale their in-flight work units by buffer fullness (paper
// IV.B) and when each host keeps a single unit in flight. Two hosts, two
// in-process readers, memoized inputs; one iteration trains the whole range.
func BenchmarkInputStall(b *testing.B) {
	e := benchSetup(b)
	for _, c := range []struct {
		name string
		s    buffer.Scaling
	}{
		{"scaling", buffer.Scaling{Min: 1, Max: 8}},
		{"fixed1", buffer.Scaling{Min: 1, Max: 1}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var stall, secs, rate float64
			for i := 0; i < b.N; i++ {
				cfg := e.jobConfig(b, fmt.Sprintf("stall-%s-%d", c.name, benchPipelines.Add(1)))
				cfg.EpochUnits, cfg.Chips = 4, 4
				cfg.BatchSize = 256
				cfg.BufferExamples = 4096
				cfg.HostInFlight = c.s
				cfg.ReaderOptions = []grpc.ServerOption{grpc.ChainStreamInterceptor(readerTaskCapacity(readerRowsPerSecond))}
				if v := os.Getenv("BENCH_TIME_SCALE"); v != "" {
					cfg.Device.TimeScale, _ = strconv.ParseFloat(v, 64)
				}
				start := time.Now()
				rep, err := RunJob(context.Background(), cfg)
				if err != nil || rep.Exit != "done" {
					b.Fatalf("exit %q: %v", rep.Exit, err)
				}
				secs += time.Since(start).Seconds()
				st, r := initialStall(rep)
				stall += st
				rate += r
				if os.Getenv("BENCH_SHOW") != "" {
					_ = rep.WriteText(os.Stdout)
				}
			}
			b.ReportMetric(stall/float64(b.N), "stall-fraction")
			b.ReportMetric(rate/float64(b.N), "device-examples/s")
			b.ReportMetric(secs/float64(b.N), "s/job")
		})
	}
}

// readerRowsPerSecond is the throughput of one reader stream in the
// input-stall benchmark: one unit in flight per host feeds the two hosts
// less than the slice consumes in the initial phase (about 12k examples/s:
// the device-examples/s metric), a few per host feed it more.
const readerRowsPerSecond = 5000

// readerTaskCapacity paces a reader's streams to rows per second each. In
// the paper every in-flight work unit is served by its own reader task on
// its own machine (IV.B), so parallel units add throughput; on this one
// test machine the readers, hosts and controller share a few CPUs, so the
// benchmark gives each stream a fixed capacity instead and lets the pacing,
// not CPU contention, bound one stream.
func readerTaskCapacity(rows float64) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return h(srv, &pacedStream{ServerStream: ss, rate: rows, start: time.Now()})
	}
}

type pacedStream struct {
	grpc.ServerStream
	rate  float64
	start time.Time
	rows  int64
}

func (p *pacedStream) SendMsg(m any) error {
	// Batches go out as the reader's marshaled messages, which have
	// GetRows as a ReadResponse does.
	if r, ok := m.(interface{ GetRows() int64 }); ok && r.GetRows() > 0 {
		p.rows += r.GetRows()
		if wait := time.Until(p.start.Add(time.Duration(float64(p.rows) / p.rate * float64(time.Second)))); wait > 0 {
			time.Sleep(wait)
		}
	}
	return p.ServerStream.SendMsg(m)
}

// initialStall is the input-stall fraction of the initial phase (the phase
// that reads memoized inputs) and the examples per second its steps
// consume (examples over productive seconds).
func initialStall(rep Report) (frac, rate float64) {
	var examples int64
	for _, p := range rep.Phases {
		if p.Phase == control.Initial.String() {
			examples = p.Examples
		}
	}
	for _, j := range rep.Goodput.Jobs {
		for _, p := range j.Phases {
			if p.Phase == control.Initial.String() {
				secs := p.ChipSeconds[goodput.Productive] / float64(4) // 4 chips
				if secs > 0 {
					rate = float64(examples) / secs
				}
				return stallFraction(p), rate
			}
		}
	}
	return rep.InputStallFraction, 0
}

// BenchmarkPreemptionCommits sends preemption notices at random moments of
// epoch attempts, with notices drawn uniformly from [0, 1.5s], and counts
// the preempted epochs whose early epoch end committed before the deadline
// (paper VII.G: 61%). It also reports, over the runs whose last epoch
// committed, the median time from the notice to the job's exit (drain,
// save, shutdown).
func BenchmarkPreemptionCommits(b *testing.B) {
	e := benchSetup(b)
	b.Run("notice0-1.5s", func(b *testing.B) { benchPreemptions(b, e) })
}

func benchPreemptions(b *testing.B, e *env) {
	r := rand.New(rand.NewPCG(42, 1))
	var preempted, committed int
	var drains []float64
	for i := 0; i < b.N; i++ {
		for k := 0; k < 6; k++ {
			cfg := e.jobConfig(b, fmt.Sprintf("preempt-%d", benchPipelines.Add(1)))
			notice := time.Duration(r.Float64() * 1.5 * float64(time.Second))
			delay := time.Duration(r.IntN(500)) * time.Millisecond
			var sent atomic.Value
			cfg.OnController = func(c *Controller, _ string) {
				go func() {
					for c.snapshot().progress.Epochs < 1 || c.snapshot().status != control.StTraining {
						time.Sleep(5 * time.Millisecond)
					}
					time.Sleep(delay)
					sent.Store(time.Now())
					c.Preempt(notice, control.ScopeJob)
				}()
			}
			rep, err := RunJob(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			if rep.Exit != "preempted" {
				continue // finished before the notice
			}
			preempted += rep.Stats.PreemptedEpochs
			committed += rep.Stats.PreemptedCommitted
			if rep.Committed {
				drains = append(drains, time.Since(sent.Load().(time.Time)).Seconds())
			}
		}
	}
	if preempted > 0 {
		b.ReportMetric(float64(committed)/float64(preempted), "committed-fraction")
	}
	b.ReportMetric(float64(preempted), "preempted-epochs")
	if len(drains) > 0 {
		slices.Sort(drains)
		b.ReportMetric(drains[len(drains)/2], "median-notice-to-exit-s")
	}
}
