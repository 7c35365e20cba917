package trainer

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/timestamppb"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	trainerv1 "github.com/sigdata/sig/proto/trainer/v1"
	"github.com/sigdata/sig/trainer/accounting/goodput"
	"github.com/sigdata/sig/trainer/accounting/runstats"
	"github.com/sigdata/sig/trainer/accounting/stall"
	"github.com/sigdata/sig/trainer/control"
)

// The job's state for everyone outside the run goroutine: a snapshot
// refreshed after every event, which the Status RPC, the Prometheus
// metrics and the status reports to sigd's operator overview read.

// snapshot is what Status and ListHolds answer.
type snapshot struct {
	status   control.Status
	phase    control.Phase
	attempt  uint64
	chips    int
	hosts    []string
	progress control.Progress
	hold     *control.Hold
	stats    control.Stats
	// run sums this process's steps: their count, the last loss, the
	// chip-weighted modelled step times.
	run runstats.Totals
}

// refreshSnapshot takes the snapshot (on the run goroutine).
func (c *Controller) refreshSnapshot() {
	s := snapshot{status: c.m.Status(), phase: c.m.Phase(), attempt: c.m.Attempt(), chips: c.m.Chips(),
		progress: c.m.Committed(), stats: c.m.Stats(), run: c.stats.Totals()}
	if h, ok := c.m.Hold(); ok {
		s.hold = &h
	}
	for id := range c.sessions {
		s.hosts = append(s.hosts, id)
	}
	sort.Strings(s.hosts)
	c.snapMu.Lock()
	c.snap = s
	c.snapMu.Unlock()
}

// snapshot returns the last snapshot (from any goroutine).
func (c *Controller) snapshot() snapshot {
	c.snapMu.Lock()
	defer c.snapMu.Unlock()
	return c.snap
}

// Status returns the job's state and goodput.
func (c *Controller) Status() *trainerv1.StatusResponse {
	sn := c.snapshot()
	out := &trainerv1.StatusResponse{Job: c.cfg.Job, Client: c.cfg.Client, Pipeline: c.cfg.Pipeline,
		Status: sn.status.String(), Phase: sn.phase.String(), Attempt: sn.attempt, Chips: int32(sn.chips),
		Hosts: sn.hosts, CommittedEpochs: uint32(sn.progress.Epochs), CommittedUnits: uint32(len(sn.progress.Units)),
		Steps: sn.run.Steps, LastLoss: sn.run.LastLoss, PreemptedEpochs: uint32(sn.stats.PreemptedEpochs),
		PreemptedCommitted: uint32(sn.stats.PreemptedCommitted), ChipSeconds: map[string]float64{}}
	if sn.hold != nil {
		out.Hold = c.holdInfo(*sn.hold)
	}
	if r, err := c.acct.Report(c.now()); err == nil {
		if j, ok := c.acct.Summary(r); ok {
			out.SchedulingGoodput, out.RuntimeGoodput, out.ProgramGoodput, out.Mpg = j.Total.SG, j.Total.RG, j.Total.PG, j.Total.MPG
			for cat, v := range j.Total.ChipSeconds {
				if v != 0 {
					out.ChipSeconds[goodput.Category(cat).String()] = v
				}
			}
		}
	}
	return out
}

// registerMetrics exports goodput (trainer/accounting/goodput's collector) and the
// run's counters on reg.
func (c *Controller) registerMetrics(reg prometheus.Registerer) error {
	if err := goodput.RegisterMetrics(reg, func() (goodput.Report, error) { return c.acct.Report(c.now()) }); err != nil {
		return err
	}
	gauge := func(name, help string, f func(s snapshot) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: prometheus.Labels{"training_job": c.cfg.Job}},
			func() float64 { return f(c.snapshot()) })
	}
	for _, col := range []prometheus.Collector{
		stallCollector{c},
		gauge("sig_trainer_steps", "Training steps run by this controller process.", func(s snapshot) float64 { return float64(s.run.Steps) }),
		gauge("sig_trainer_loss", "Training loss of the last step.", func(s snapshot) float64 { return s.run.LastLoss }),
		gauge("sig_trainer_committed_epochs", "Epochs in the last committed checkpoint.", func(s snapshot) float64 { return float64(s.progress.Epochs) }),
		gauge("sig_trainer_chips", "Chips the job holds.", func(s snapshot) float64 { return float64(s.chips) }),
		gauge("sig_trainer_on_hold", "1 while the job is on a training hold.", func(s snapshot) float64 {
			if s.hold != nil {
				return 1
			}
			return 0
		}),
		gauge("sig_trainer_preempted_epochs", "Epochs cut short by a preemption notice.", func(s snapshot) float64 { return float64(s.stats.PreemptedEpochs) }),
		gauge("sig_trainer_preempted_epochs_committed", "Preempted epochs whose checkpoint committed before the deadline.", func(s snapshot) float64 { return float64(s.stats.PreemptedCommitted) }),
	} {
		if err := reg.Register(col); err != nil {
			return err
		}
	}
	return nil
}

// maxStallCauses is the most lines a status report carries (sigd's
// trainers.MaxStallCauses).
const maxStallCauses = 21

// stallToProto is the ledger's lines, at most max, the rest summed into
// one line of kind "other".
func stallToProto(led stall.Ledger, max int) []*sigv1.StallCause {
	var out []*sigv1.StallCause
	for i, ln := range led.Lines {
		if i == max-1 && len(led.Lines) > max {
			var rest time.Duration
			for _, o := range led.Lines[i:] {
				rest += o.Charged
			}
			out = append(out, &sigv1.StallCause{Kind: "other", Seconds: rest.Seconds(),
				Sentence: fmt.Sprintf("%v in %d other causes", rest.Round(time.Millisecond), len(led.Lines)-i)})
			break
		}
		c := ln.Cause
		out = append(out, &sigv1.StallCause{Kind: string(c.Kind), Component: c.Component, Block: c.Block, Client: c.Client,
			Priority: c.Priority, Seconds: ln.Charged.Seconds(), Ahead: uint32(ln.Ahead), AheadOf: uint32(ln.AheadOf),
			Sentence: ln.Sentence()})
	}
	return out
}

// stallCollector exports sig_trainer_input_stall_seconds_total by cause
// kind: the job's ledger (stall.go) computed at each scrape.
type stallCollector struct{ c *Controller }

var stallDesc = prometheus.NewDesc("sig_trainer_input_stall_seconds_total",
	"Input stall of the job charged to what it waited on, by cause kind (issue 30; trainer/accounting/stall).",
	[]string{"training_job", "cause"}, nil)

func (s stallCollector) Describe(ch chan<- *prometheus.Desc) { ch <- stallDesc }

func (s stallCollector) Collect(ch chan<- prometheus.Metric) {
	by := s.c.StallLedger(s.c.now()).ByKind()
	for _, k := range stall.Kinds {
		ch <- prometheus.MustNewConstMetric(stallDesc, prometheus.CounterValue, by[k].Seconds(), s.c.cfg.Job, string(k))
	}
}

// reportStatus sends the job's state and goodput to sigd's operator
// overview (best effort).
func (c *Controller) reportStatus(ctx context.Context) {
	st := c.Status()
	ts := &sigv1.TrainerStatus{Job: st.Job, Client: st.Client, Pipeline: st.Pipeline, Phase: st.Phase,
		At: timestamppb.New(c.now()), Chips: st.Chips, SchedulingGoodput: st.SchedulingGoodput,
		RuntimeGoodput: st.RuntimeGoodput, ProgramGoodput: st.ProgramGoodput, Mpg: st.Mpg,
		ChipSeconds: st.ChipSeconds, Loss: st.LastLoss, Steps: st.Steps}
	// The step-time figures behind PG, so the overview can say why it is
	// what it is (steptime.ExplainProgramGoodput).
	ts.TensorcoreNsPerStep, ts.SparsecoreNsPerStep, ts.DeviceNsPerStep = c.snapshot().run.PerChipStep()
	if st.Hold != nil {
		ts.Hold = st.Hold.Kind + ": " + st.Hold.Reason
	}
	led := c.StallLedger(c.now())
	ts.InputStallSeconds, ts.Stall = led.Stall.Seconds(), stallToProto(led, maxStallCauses)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := c.sig.ReportTrainerStatus(rctx, ts); err != nil {
		c.log.Debug("report status to sigd", "err", err)
	}
}
