package trainer

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sigdata/sig/trainer/accounting/goodput"
	"github.com/sigdata/sig/trainer/embedding/fdp"
	"github.com/sigdata/sig/trainer/steptime"
)

// LossPoint is one step's training loss (before its update).
type LossPoint struct {
	Step  uint64  `json:"step"`
	Loss  float64 `json:"loss"`
	Phase string  `json:"phase"`
}

// PhaseReport is one phase of the run (paper III.A).
type PhaseReport struct {
	Phase    string `json:"phase"`
	Steps    uint64 `json:"steps"`
	Examples int64  `json:"examples"`
	// FirstLoss and LastLoss are the mean training loss of the phase's
	// first and last 20 steps.
	FirstLoss float64 `json:"first_loss"`
	LastLoss  float64 `json:"last_loss"`
	// Feature values looked up and unique rows gathered per step after
	// deduplication (paper V.A).
	ValuesPerStep float64 `json:"values_per_step"`
	UniquePerStep float64 `json:"unique_per_step"`
	// LoadImbalance is paper Eq. 1 over the bytes each SparseCore moved in
	// the phase's real lookups under the plan; TensorCoreNSPerStep (the
	// ideal, PG's numerator), SparseCoreNSPerStep and DeviceNSPerStep are
	// the mean modelled TensorCore, SparseCore and device time of a step
	// (unscaled, steptime).
	LoadImbalance float64 `json:"load_imbalance"`
	// Chips is the mean number of chips a step ran on.
	Chips               float64 `json:"chips"`
	TensorCoreNSPerStep float64 `json:"tensorcore_ns_per_step"`
	SparseCoreNSPerStep float64 `json:"sparsecore_ns_per_step"`
	DeviceNSPerStep     float64 `json:"device_ns_per_step"`
}

// Report is what a trainer run did: written as JSON and text at exit.
type Report struct {
	Job      string `json:"job"`
	Client   string `json:"client"`
	Pipeline string `json:"pipeline"`
	// Exit is done (every block committed), preempted, or stopped (the
	// context ended); Committed tells whether a preempted run's last epoch
	// committed.
	Exit      string `json:"exit"`
	Committed bool   `json:"committed"`
	// The last committed checkpoint.
	Epochs   int    `json:"epochs"`
	Units    int    `json:"units"`
	EventIDs int64  `json:"event_ids"`
	Steps    uint64 `json:"steps"`
	// What this process ran, committed or not.
	StepsRun    uint64        `json:"steps_run"`
	ExamplesRun int64         `json:"examples_run"`
	Phases      []PhaseReport `json:"phases"`
	LossCurve   []LossPoint   `json:"loss_curve"`
	// InputStallFraction is input-stall chip-time over the chip-time of
	// epoch attempts (stalls + steps).
	InputStallFraction float64 `json:"input_stall_fraction"`
	Stats              struct {
		Attempts           int `json:"attempts"`
		FailedAttempts     int `json:"failed_attempts"`
		CommittedEpochs    int `json:"committed_epochs"`
		PreemptedEpochs    int `json:"preempted_epochs"`
		PreemptedCommitted int `json:"preempted_committed"`
		PermanentHolds     int `json:"permanent_holds"`
		TransientHolds     int `json:"transient_holds"`
	} `json:"stats"`
	Failures []string     `json:"failures,omitempty"`
	Holds    []HoldRecord `json:"holds,omitempty"`
	// Partition lists the plans compiled (one per slice the job ran on)
	// and FDP what feedback-directed partitioning did (paper V.C).
	Partition []PlanReport `json:"partition"`
	FDP       FDPReport    `json:"fdp"`
	// ParameterServers is what the caught-up phase's parameter servers did
	// (nil: the job kept its tables on the slice).
	ParameterServers *ParameterServerReport `json:"parameter_servers,omitempty"`
	Goodput          goodput.Report         `json:"goodput"`
}

func (c *Controller) report(end time.Time) Report {
	r := Report{Job: c.cfg.Job, Client: c.cfg.Client, Pipeline: c.cfg.Pipeline, Exit: "stopped",
		StepsRun: c.stats.steps, ExamplesRun: c.stats.examples, LossCurve: c.stats.curve,
		Failures: c.stats.failures, Holds: c.holdLog}
	if c.exit != nil {
		r.Exit, r.Committed = c.exit.reason, c.exit.committed
	}
	p := c.m.Committed()
	r.Epochs, r.Units, r.Steps = p.Epochs, len(p.Units), p.Steps
	if c.committedLedger != nil {
		r.EventIDs = c.committedLedger.Rows()
	}
	for _, ps := range c.stats.phases {
		pr := PhaseReport{Phase: ps.phase.String(), Steps: ps.steps, Examples: ps.examples,
			FirstLoss: mean(ps.first), LastLoss: mean(ps.last)}
		if ps.steps > 0 {
			pr.ValuesPerStep = float64(ps.values) / float64(ps.steps)
			pr.UniquePerStep = float64(ps.unique) / float64(ps.steps)
			pr.Chips = float64(ps.chipSteps) / float64(ps.steps)
			pr.TensorCoreNSPerStep = float64(ps.tcTime.Nanoseconds()) / float64(ps.steps)
			pr.SparseCoreNSPerStep = float64(ps.scTime.Nanoseconds()) / float64(ps.steps)
			pr.DeviceNSPerStep = float64(ps.dev.Nanoseconds()) / float64(ps.steps)
		}
		pr.LoadImbalance = fdp.LoadImbalance(ps.scBytes)
		r.Phases = append(r.Phases, pr)
	}
	r.Partition, r.FDP = c.plans, c.fdpRep
	c.dev.mu.Lock() // Run waited for the device: this does not block
	if st := c.dev.ps; st != nil {
		r.ParameterServers = st.report()
		if st.client != nil {
			r.ParameterServers.RPCs += st.client.RPCs()
		}
	}
	c.dev.mu.Unlock()
	st := c.m.Stats()
	r.Stats.Attempts, r.Stats.FailedAttempts, r.Stats.CommittedEpochs = st.Attempts, st.FailedAttempts, st.CommittedEpochs
	r.Stats.PreemptedEpochs, r.Stats.PreemptedCommitted = st.PreemptedEpochs, st.PreemptedCommitted
	r.Stats.PermanentHolds, r.Stats.TransientHolds = st.PermanentHolds, st.TransientHolds
	if g, err := c.rec.Report(end); err == nil {
		r.Goodput = g
		if j, ok := c.jobGoodput(g); ok {
			r.InputStallFraction = stallFraction(j.Total)
		}
	} else {
		c.log.Warn("goodput report", "err", err)
	}
	return r
}

// JobGoodput is the job's own goodput over all its phases: its SG divides
// by the chip-time it asked for (the figures sigd's overview shows), where
// the fleet's (Goodput.Fleet) divides by the fleet's capacity.
func (r Report) JobGoodput() goodput.Summary {
	for _, j := range r.Goodput.Jobs {
		if j.Job == r.Job {
			return j.Total
		}
	}
	return goodput.Summary{}
}

// StepNS returns the mean modelled TensorCore, SparseCore and device time
// of this run's steps in nanoseconds (unscaled, steptime), over all phases,
// each step weighted by the chips it ran on as PG weighs it (a step on 4
// chips is 4 times the chip-time of one on 1).
func (r Report) StepNS() (tensorCore, sparseCore, device float64) {
	var steps float64
	for _, p := range r.Phases {
		n := float64(p.Steps) * max(p.Chips, 1)
		tensorCore += p.TensorCoreNSPerStep * n
		sparseCore += p.SparseCoreNSPerStep * n
		device += p.DeviceNSPerStep * n
		steps += n
	}
	if steps == 0 {
		return 0, 0, 0
	}
	return tensorCore / steps, sparseCore / steps, device / steps
}

// ProgramGoodputWhy says in one line why the job's PG is what it is
// (steptime.ExplainProgramGoodput).
func (r Report) ProgramGoodputWhy() string {
	tc, sc, dev := r.StepNS()
	return steptime.ExplainProgramGoodput(r.JobGoodput().PG, tc, sc, dev)
}

// WriteJSON writes the report as indented JSON.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes a summary, then the goodput tables.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "job %s (client %s, pipeline %s): exit %s", r.Job, r.Client, r.Pipeline, r.Exit)
	if r.Exit == "preempted" {
		fmt.Fprintf(&b, ", last epoch committed: %v", r.Committed)
	}
	fmt.Fprintf(&b, "\ncommitted: %d epochs, %d units, %d events, %d steps\n", r.Epochs, r.Units, r.EventIDs, r.Steps)
	fmt.Fprintf(&b, "this run: %d steps over %d examples; attempts %d (%d failed); input stall %.1f%% of training time\n",
		r.StepsRun, r.ExamplesRun, r.Stats.Attempts, r.Stats.FailedAttempts, 100*r.InputStallFraction)
	fmt.Fprintf(&b, "preempted epochs %d, committed %d; holds: %d permanent, %d transient\n",
		r.Stats.PreemptedEpochs, r.Stats.PreemptedCommitted, r.Stats.PermanentHolds, r.Stats.TransientHolds)
	for _, p := range r.Phases {
		fmt.Fprintf(&b, "phase %-9s %6d steps %9d examples  loss %.4f -> %.4f  values/step %.0f unique/step %.0f  load imbalance %.3f  TensorCore %.3g ns/step  SparseCore %.0f ns/step  device %.0f ns/step\n",
			p.Phase, p.Steps, p.Examples, p.FirstLoss, p.LastLoss, p.ValuesPerStep, p.UniquePerStep, p.LoadImbalance, p.TensorCoreNSPerStep, p.SparseCoreNSPerStep, p.DeviceNSPerStep)
	}
	for _, p := range r.Partition {
		fmt.Fprintf(&b, "plan %-9s %d chips: %d of %d tables from measured statistics, modelled load imbalance %.3f, %.0f ns/step; %s\n",
			p.Phase, p.Chips, p.TablesWithStatistics, len(p.Layouts), p.LoadImbalance, p.CostNS, layoutsText(p.Layouts))
	}
	fmt.Fprintf(&b, "feedback-directed partitioning: statistics for %d features read, %d batches profiled, %d feature statistics published\n",
		r.FDP.StatisticsRead, r.FDP.ProfiledBatches, r.FDP.Published)
	if p := r.ParameterServers; p != nil {
		fmt.Fprintf(&b, "parameter servers: %d (stacking %v), %d restarts; tables moved on %d times, rolled back %d times; %d steps, %d RPCs, %.2f s in step RPCs; %d checkpoints (step %d), %.2f s saving, %.2f s placing\n",
			p.Servers, p.Stacking, p.Restarts, p.Moves, p.Restores, p.Steps, p.RPCs, p.RPCSeconds, p.Checkpoints, p.CommittedStep, p.SaveSeconds, p.MoveSeconds)
	}
	for _, h := range r.Holds {
		lift := "still held"
		if !h.Lifted.IsZero() {
			lift = fmt.Sprintf("lifted after %v by %s", h.Lifted.Sub(h.Placed).Round(time.Millisecond), h.LiftedBy)
		}
		fmt.Fprintf(&b, "hold #%d %s: %s (%s)\n", h.ID, h.Kind, h.Reason, lift)
	}
	if why := r.ProgramGoodputWhy(); why != "" {
		fmt.Fprintf(&b, "program goodput: %s\n", why)
	}
	b.WriteString("\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	return goodput.WriteText(w, r.Goodput)
}
