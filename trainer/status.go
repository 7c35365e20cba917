package trainer

import (
	"context"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/timestamppb"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	trainerv1 "github.com/sigdata/sig/proto/trainer/v1"
	"github.com/sigdata/sig/trainer/accounting/goodput"
	"github.com/sigdata/sig/trainer/accounting/runstats"
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
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := c.sig.ReportTrainerStatus(rctx, ts); err != nil {
		c.log.Debug("report status to sigd", "err", err)
	}
}
