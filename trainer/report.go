package trainer

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sigdata/sig/trainer/accounting/goodput"
	"github.com/sigdata/sig/trainer/accounting/jobgoodput"
	"github.com/sigdata/sig/trainer/accounting/runstats"
	"github.com/sigdata/sig/trainer/accounting/stall"
	"github.com/sigdata/sig/trainer/embedding/fdp"
	"github.com/sigdata/sig/trainer/embedding/paramservers"
	"github.com/sigdata/sig/trainer/embedding/placement"
	"github.com/sigdata/sig/trainer/steptime"
)

// The run's report: what the runtime, each wing and the goodput recorder
// say about the run, assembled at exit (Run) and written as JSON and text.

// ReaderTotals is what a job's in-process readers did: the units they
// served, the rows in them, and the object store requests their reads made
// (reader.ServerStats; issue 28 counts requests per unit).
type ReaderTotals struct {
	Units          int64 `json:"units"`
	Rows           int64 `json:"rows"`
	ObjectRequests int64 `json:"object_requests"`
}

// PhaseReport is one phase of a run (trainer/accounting/runstats), named
// here for RunJob's callers.
type PhaseReport = runstats.PhaseReport

// Report is what a trainer run did: written as JSON and text at exit. Each
// wing reports its part: the steps' statistics (trainer/accounting/runstats),
// the plans and feedback-directed partitioning
// (trainer/embedding/placement), the parameter servers
// (trainer/embedding/paramservers) and goodput
// (trainer/accounting/goodput).
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
	StepsRun    uint64               `json:"steps_run"`
	ExamplesRun int64                `json:"examples_run"`
	Phases      []PhaseReport        `json:"phases"`
	LossCurve   []runstats.LossPoint `json:"loss_curve"`
	// InputStallFraction is input-stall chip-time over the chip-time of
	// epoch attempts (stalls + steps).
	InputStallFraction float64 `json:"input_stall_fraction"`
	// Readers counts the work of the job's in-process readers (RunJob
	// without Readers); nil when its readers are other processes.
	Readers *ReaderTotals `json:"readers,omitempty"`
	Stats   struct {
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
	Partition []placement.PlanReport `json:"partition"`
	FDP       placement.FDPReport    `json:"fdp"`
	// ParameterServers is what the caught-up phase's parameter servers did
	// (nil: the job kept its tables on the slice).
	ParameterServers *paramservers.Report `json:"parameter_servers,omitempty"`
	Goodput          goodput.Report       `json:"goodput"`
	// Stall is the job's input stall charged to causes: the SIG work or
	// the reader phase each stalled second waited on (issue 30,
	// trainer/accounting/stall).
	Stall stall.Ledger `json:"stall"`
}

// report assembles the run's report as of end.
func (c *Controller) report(end time.Time) Report {
	run := c.stats.Totals()
	r := Report{Job: c.cfg.Job, Client: c.cfg.Client, Pipeline: c.cfg.Pipeline, Exit: "stopped",
		StepsRun: run.Steps, ExamplesRun: run.Examples, LossCurve: c.stats.LossCurve(),
		Failures: c.failures, Holds: c.holdLog}
	if c.exit != nil {
		r.Exit, r.Committed = c.exit.reason, c.exit.committed
	}
	p := c.m.Committed()
	r.Epochs, r.Units, r.Steps = p.Epochs, len(p.Units), p.Steps
	if c.committedLedger != nil {
		r.EventIDs = c.committedLedger.Rows()
	}
	// A phase's load imbalance is the embedding wing's Eq. 1.
	r.Phases = c.stats.Phases(fdp.LoadImbalance)
	r.Partition, r.FDP = c.plans, c.fdpRep
	c.dev.mu.Lock() // Run waited for the device: this does not block
	r.ParameterServers = c.dev.ps.Report()
	c.dev.mu.Unlock()
	st := c.m.Stats()
	r.Stats.Attempts, r.Stats.FailedAttempts, r.Stats.CommittedEpochs = st.Attempts, st.FailedAttempts, st.CommittedEpochs
	r.Stats.PreemptedEpochs, r.Stats.PreemptedCommitted = st.PreemptedEpochs, st.PreemptedCommitted
	r.Stats.PermanentHolds, r.Stats.TransientHolds = st.PermanentHolds, st.TransientHolds
	if g, err := c.acct.Report(end); err == nil {
		r.Goodput = g
		if j, ok := c.acct.Summary(g); ok {
			r.InputStallFraction = jobgoodput.StallFraction(j.Total)
		}
	} else {
		c.log.Warn("goodput report", "err", err)
	}
	r.Stall = c.StallLedger(end)
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

// StepNS returns the mean modelled step of this run in nanoseconds
// (unscaled, steptime): TensorCore, SparseCore, the wait on parameter
// servers and device time, over all phases, each step weighted by the
// chips it ran on as PG weighs it (a step on 4 chips is 4 times the
// chip-time of one on 1).
func (r Report) StepNS() steptime.MeanStep {
	tc, sc, srv, dev := runstats.StepNS(r.Phases)
	return steptime.MeanStep{TensorCore: tc, SparseCore: sc, Servers: srv, Device: dev}
}

// ProgramGoodputWhy says in one line why the job's PG is what it is
// (steptime.MeanStep.Explain).
func (r Report) ProgramGoodputWhy() string {
	return r.StepNS().Explain(r.JobGoodput().PG)
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
		b.WriteString(p.Text())
	}
	for _, p := range r.Partition {
		b.WriteString(p.Text())
	}
	b.WriteString(r.FDP.Text())
	if p := r.ParameterServers; p != nil {
		b.WriteString(p.Text())
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
	if r.Stall.Stall > 0 {
		b.WriteString(r.Stall.Text())
	}
	b.WriteString("\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	return goodput.WriteText(w, r.Goodput)
}
