package trainer

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/sigdata/sig/internal/figure"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/trainer/accounting/fleet"
	"github.com/sigdata/sig/trainer/accounting/goodput"
	"github.com/sigdata/sig/trainer/accounting/jobgoodput"
	"github.com/sigdata/sig/trainer/buffer"
	"github.com/sigdata/sig/trainer/control"
	"github.com/sigdata/sig/trainer/steptime"
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
				return jobgoodput.StallFraction(p), rate
			}
		}
	}
	return rep.InputStallFraction, 0
}

// BenchmarkPreemptionCommits preempts real jobs (ctr_small on real sigd,
// MinIO and in-process readers) at random moments of epoch attempts and
// measures, on three sets of runs:
//
//   - notice0-1.5s: notices drawn uniformly from [0, noticeMax]; the
//     preempted epochs whose early epoch end committed before the deadline
//     (paper VII.G: 61%). The fraction is measured, but noticeMax decides
//     it: it is a choice, not a property of the system.
//   - notice30s: notices that never bind, so every preempted epoch commits
//     and the time from the notice to the committed checkpoint (drain and
//     save) and to the job's exit is measured for every run, not only for
//     those that beat their deadline. From these times the committed
//     fraction under any notice bound follows (P(drain+save ≤ notice)),
//     the sweep the report prints next to the measured fraction.
//   - complete: one whole job, whose program goodput (the trainer's step
//     records: ideal over productive chip-time) and input-stall fraction
//     replace the fleet simulation's assumed 0.55 and 0.05.
//
// With SIG_BENCH_PREEMPTION_JSON set it writes the figures (internal/figure)
// and the measurements the fleet simulation takes (fleet.Measured) to that
// file (bench/preemption.json).
func BenchmarkPreemptionCommits(b *testing.B) {
	e := benchSetup(b)
	var m preemptionMeasurements
	b.Run("notice0-1.5s", func(b *testing.B) { m.short(b, e) })
	b.Run("notice30s", func(b *testing.B) { m.long(b, e) })
	b.Run("complete", func(b *testing.B) { m.complete(b, e) })
	if path := os.Getenv("SIG_BENCH_PREEMPTION_JSON"); path != "" {
		out, err := json.MarshalIndent(m.report(), "", "  ")
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(path, append(out, '\n'), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// noticeMax bounds the short notices: a choice that puts the notices
// around this system's drain and save times (about a second), so that
// some preempted epochs commit and some do not.
const noticeMax = 1500 * time.Millisecond

// preemptionMeasurements are the last run of each sub-benchmark.
type preemptionMeasurements struct {
	runs, preempted, committed int       // short notices
	drainSave, exit            []float64 // long notices: seconds from notice to checkpoint, to exit
	longPreempted              int
	pg, stall                  float64 // the complete job
	jobGoodput                 goodput.Summary
	pgHow, stallHow            string
}

// preemptedRun is one job preempted after its first committed epoch,
// delay into a later one, with the given notice.
type preemptedRun struct {
	rep       Report
	drainSave time.Duration // notice to the last committed epoch; 0 if none after the notice
	exit      time.Duration // notice to RunJob's return
}

func runPreempted(b *testing.B, e *env, notice, delay time.Duration) (preemptedRun, bool) {
	cfg := e.jobConfig(b, fmt.Sprintf("preempt-%d", benchPipelines.Add(1)))
	var sent, lastCommit atomic.Int64 // unix nanoseconds
	done := make(chan struct{})
	cfg.OnController = func(c *Controller, _ string) {
		go func() {
			for c.snapshot().progress.Epochs < 1 || c.snapshot().status != control.StTraining {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(delay)
			sent.Store(time.Now().UnixNano())
			c.Preempt(notice, control.ScopeJob)
			// The last change of the committed epochs is the preempted
			// epoch's checkpoint.
			epochs := c.snapshot().progress.Epochs
			for {
				select {
				case <-done:
					return
				case <-time.After(2 * time.Millisecond):
				}
				if n := c.snapshot().progress.Epochs; n != epochs {
					epochs = n
					lastCommit.Store(time.Now().UnixNano())
				}
			}
		}()
	}
	rep, err := RunJob(context.Background(), cfg)
	end := time.Now()
	close(done)
	if err != nil {
		b.Fatal(err)
	}
	if rep.Exit != "preempted" {
		return preemptedRun{}, false // finished before the notice
	}
	r := preemptedRun{rep: rep, exit: end.Sub(time.Unix(0, sent.Load()))}
	if lc := lastCommit.Load(); lc > sent.Load() {
		r.drainSave = time.Duration(lc - sent.Load())
	}
	return r, true
}

func (m *preemptionMeasurements) short(b *testing.B, e *env) {
	r := rand.New(rand.NewPCG(42, 1))
	var runs, preempted, committed int
	for i := 0; i < b.N; i++ {
		for k := 0; k < 18; k++ {
			notice := time.Duration(r.Float64() * float64(noticeMax))
			delay := time.Duration(r.IntN(500)) * time.Millisecond
			pr, ok := runPreempted(b, e, notice, delay)
			if !ok {
				continue
			}
			runs++
			preempted += pr.rep.Stats.PreemptedEpochs
			committed += pr.rep.Stats.PreemptedCommitted
		}
	}
	if preempted > 0 {
		b.ReportMetric(float64(committed)/float64(preempted), "committed-fraction")
	}
	b.ReportMetric(float64(preempted), "preempted-epochs")
	m.runs, m.preempted, m.committed = runs, preempted, committed
}

func (m *preemptionMeasurements) long(b *testing.B, e *env) {
	r := rand.New(rand.NewPCG(43, 1))
	var drainSave, exit []float64
	var preempted int
	for i := 0; i < b.N; i++ {
		for k := 0; k < 8; k++ {
			pr, ok := runPreempted(b, e, 30*time.Second, time.Duration(r.IntN(500))*time.Millisecond)
			if !ok {
				continue
			}
			preempted += pr.rep.Stats.PreemptedEpochs
			if !pr.rep.Committed || pr.drainSave <= 0 {
				b.Fatalf("a 30s notice did not commit: %+v", pr.rep.Stats)
			}
			drainSave = append(drainSave, pr.drainSave.Seconds())
			exit = append(exit, pr.exit.Seconds())
		}
	}
	slices.Sort(drainSave)
	slices.Sort(exit)
	if len(drainSave) > 0 {
		b.ReportMetric(median(drainSave), "median-notice-to-checkpoint-s")
		b.ReportMetric(median(exit), "median-notice-to-exit-s")
		b.ReportMetric(predictedCommitted(drainSave, noticeMax.Seconds()), "predicted-committed-fraction")
	}
	m.drainSave, m.exit, m.longPreempted = drainSave, exit, preempted
}

func (m *preemptionMeasurements) complete(b *testing.B, e *env) {
	var ideal, productive, stall, attempt float64
	var jobs int
	for i := 0; i < b.N; i++ {
		cfg := e.jobConfig(b, fmt.Sprintf("complete-%d", benchPipelines.Add(1)))
		rep, err := RunJob(context.Background(), cfg)
		if err != nil || rep.Exit != "done" {
			b.Fatalf("exit %q: %v", rep.Exit, err)
		}
		g := rep.JobGoodput()
		m.jobGoodput = g // the last job's, for its MPG per job
		ideal += g.IdealChipSeconds
		productive += g.ChipSeconds[goodput.Productive]
		stall += g.ChipSeconds[goodput.InputStall]
		attempt += g.ChipSeconds[goodput.Productive] + g.ChipSeconds[goodput.InputStall]
		jobs++
	}
	m.pg, m.stall = ideal/productive, stall/attempt
	b.ReportMetric(m.pg, "program-goodput")
	b.ReportMetric(m.stall, "stall-fraction")
	m.pgHow = fmt.Sprintf("ideal over productive chip-time of %s on real sigd, MinIO and readers "+
		"(the trainer's step records: TensorCore FLOPs at TPU v4 peak over the steps' modelled device time, stretched by time scale %g)",
		completeJobs(jobs), DefaultTimeScale)
	m.stallHow = fmt.Sprintf("input-stall chip-time over stall plus productive chip-time of %s (goodput accounting)", completeJobs(jobs))
}

func completeJobs(n int) string {
	if n == 1 {
		return "one complete ctr_small job"
	}
	return fmt.Sprintf("%d complete ctr_small jobs", n)
}

// median of sorted values.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// predictedCommitted is the fraction of preempted epochs that commit when
// notices are uniform in [0, max] and an epoch needs one of the measured
// drain-and-save times t: the mean of P(notice ≥ t) = max(0, 1 − t/max).
func predictedCommitted(drainSave []float64, max float64) float64 {
	var sum float64
	for _, t := range drainSave {
		sum += math.Max(0, 1-t/max)
	}
	return sum / float64(len(drainSave))
}

// preemptionReport is bench/preemption.json.
type preemptionReport struct {
	Figures  figure.Set     `json:"figures"`
	Measured fleet.Measured `json:"measured"`
	// DrainSaveSeconds and ExitSeconds are the long-notice runs' times,
	// sorted.
	DrainSaveSeconds []float64 `json:"drain_save_seconds"`
	ExitSeconds      []float64 `json:"exit_seconds"`
}

func (m *preemptionMeasurements) report() preemptionReport {
	paper := &figure.Paper{Value: 0.61, Where: "Ads paper VII.G"}
	noticeSrc := figure.Guess + ": a choice that puts the notices around this system's drain and save times; no public source gives the production notice"
	rep := preemptionReport{Figures: figure.Set{}, DrainSaveSeconds: m.drainSave, ExitSeconds: m.exit}
	if m.preempted > 0 {
		p := float64(m.committed) / float64(m.preempted)
		rep.Figures["preempted_epochs_committed"] = figure.Figure{
			Value: p, Unit: "fraction", Kind: figure.Measured, Paper: paper,
			How: fmt.Sprintf("real runs: %d preempted epochs of %d ctr_small jobs (real sigd, MinIO, readers), each preempted at a random moment "+
				"of an epoch after its first, with a notice uniform in [0, notice_max]; counted from the jobs' reports (binomial standard error %.2f)",
				m.preempted, m.runs, math.Sqrt(p*(1-p)/float64(m.preempted))),
			Constants: map[string]figure.Constant{"notice_max": {Value: noticeMax.Seconds(), Unit: "s", Source: noticeSrc}}}
	}
	if len(m.drainSave) > 0 {
		how := fmt.Sprintf("%d real preemptions whose 30 s notice never bound (ctr_small jobs on real sigd, MinIO, readers), seconds from the notice ", len(m.drainSave))
		rep.Figures["notice_to_checkpoint_median"] = figure.Figure{Value: median(m.drainSave), Unit: "s", Kind: figure.Measured,
			How: how + "to the preempted epoch's committed checkpoint (drain and save); median"}
		rep.Figures["notice_to_exit_median"] = figure.Figure{Value: median(m.exit), Unit: "s", Kind: figure.Measured,
			How: how + "to the job's exit; median"}
		pred := figure.Figure{Value: predictedCommitted(m.drainSave, noticeMax.Seconds()), Unit: "fraction", Kind: figure.Modelled, Paper: paper,
			How: "P(drain and save ≤ notice) for notices uniform in [0, notice_max], over the measured drain-and-save times: the mean of max(0, 1 - t/notice_max)",
			Constants: map[string]figure.Constant{
				"notice_max":        {Value: noticeMax.Seconds(), Unit: "s", Source: noticeSrc},
				"drain_save_median": {Value: median(m.drainSave), Unit: "s", Source: figure.MeasuredPrefix + how + "to the committed checkpoint"},
			}}
		for _, at := range []float64{0.25, 0.5, 1, 1.5, 3, 6, 30} {
			pred.Sweep = append(pred.Sweep, figure.Point{Constant: "notice_max", At: at, Value: predictedCommitted(m.drainSave, at)})
		}
		rep.Figures["preempted_epochs_committed_predicted"] = pred
		for _, t := range m.drainSave {
			rep.Measured.DrainSaveTimes = append(rep.Measured.DrainSaveTimes, fleet.Duration(time.Duration(t*float64(time.Second))))
		}
	}
	rep.Measured.How = map[string]string{}
	if m.pg > 0 {
		rep.Figures["program_goodput"] = figure.Figure{Value: m.pg, Unit: "fraction", Kind: figure.Measured, How: m.pgHow,
			Constants: map[string]figure.Constant{
				"peak_flops":    {Value: steptime.DefaultPeakFLOPS, Unit: "FLOP/s", Source: "TPU v4, cloud.google.com/tpu/docs/v4"},
				"hbm_bandwidth": {Value: steptime.DefaultHBMBandwidth, Unit: "B/s", Source: "TPU v4, cloud.google.com/tpu/docs/v4"},
			}}
		rep.Figures["input_stall"] = figure.Figure{Value: m.stall, Unit: "fraction", Kind: figure.Measured, How: m.stallHow}
		g := m.jobGoodput
		rep.Figures["job_mpg"] = figure.Figure{Value: g.MPG, Unit: "fraction", Kind: figure.Measured,
			How: fmt.Sprintf("MPG of one complete ctr_small job on real sigd, MinIO and readers (the trainer's goodput accounting): "+
				"SG %.3f × RG %.3f × PG %.3f; it held its chips alone, so SG and RG are those of a job no other job preempts", g.SG, g.RG, g.PG),
			Constants: map[string]figure.Constant{
				"peak_flops":    {Value: steptime.DefaultPeakFLOPS, Unit: "FLOP/s", Source: "TPU v4, cloud.google.com/tpu/docs/v4"},
				"hbm_bandwidth": {Value: steptime.DefaultHBMBandwidth, Unit: "B/s", Source: "TPU v4, cloud.google.com/tpu/docs/v4"},
			}}
		rep.Measured.ProgramGoodput, rep.Measured.InputStall = m.pg, m.stall
		rep.Measured.How["program_goodput"], rep.Measured.How["input_stall"] = m.pgHow, m.stallHow
	}
	if len(m.drainSave) > 0 {
		rep.Measured.How["drain_save_times"] = fmt.Sprintf("notice to committed checkpoint of %d real preemptions of ctr_small jobs (median %.2f s)",
			len(m.drainSave), median(m.drainSave))
	}
	return rep
}

// TestPreemptionReport: the preemption benchmark's report labels every
// figure (figure.Set.Check), the predicted fraction is P(drain and save ≤
// notice) over the measured times, its sweep runs through notice_max, and
// the measurements the fleet simulation takes say how they were made.
func TestPreemptionReport(t *testing.T) {
	m := preemptionMeasurements{runs: 10, preempted: 10, committed: 6, drainSave: []float64{0.3, 0.6, 0.9, 1.8},
		exit: []float64{0.31, 0.62, 0.95, 1.9}, pg: 0.07, stall: 0.04, pgHow: "a job", stallHow: "a job",
		jobGoodput: goodput.Summary{SG: 1, RG: 0.9, PG: 0.07, MPG: 0.063}}
	rep := m.report()
	if err := rep.Figures.Check(); err != nil {
		t.Fatal(err)
	}
	// Uniform notices in [0, 1.5]: P(notice ≥ t) = 1 - t/1.5, 0 beyond.
	want := ((1 - 0.3/1.5) + (1 - 0.6/1.5) + (1 - 0.9/1.5) + 0) / 4
	pred := rep.Figures["preempted_epochs_committed_predicted"]
	if math.Abs(pred.Value-want) > 1e-12 || pred.Kind != figure.Modelled {
		t.Errorf("predicted %+v, want %v", pred, want)
	}
	var at15 bool
	for _, p := range pred.SweepOf("notice_max") {
		if p.At == noticeMax.Seconds() {
			at15 = p.Value == pred.Value
		}
	}
	if !at15 {
		t.Errorf("sweep of notice_max misses the configured %v: %+v", noticeMax, pred.Sweep)
	}
	if f := rep.Figures["preempted_epochs_committed"]; f.Kind != figure.Measured || f.Value != 0.6 || f.Constants["notice_max"].Value != 1.5 {
		t.Errorf("measured fraction %+v", f)
	}
	if f := rep.Figures["notice_to_checkpoint_median"]; f.Value != 0.75 {
		t.Errorf("median of 0.3, 0.6, 0.9, 1.8 = %v", f.Value)
	}
	if f := rep.Figures["job_mpg"]; f.Kind != figure.Measured || f.Value != 0.063 {
		t.Errorf("job MPG %+v", f)
	}
	ms := rep.Measured
	if ms.ProgramGoodput != 0.07 || ms.InputStall != 0.04 || len(ms.DrainSaveTimes) != 4 || ms.DrainSaveTimes[3] != fleet.Duration(1800*time.Millisecond) ||
		ms.How["program_goodput"] == "" || ms.How["drain_save_times"] == "" {
		t.Errorf("measured %+v", ms)
	}
}
