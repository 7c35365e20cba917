package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/sigdata/sig/internal/cli"
	"github.com/sigdata/sig/trainer/accounting/fleet"
	"github.com/sigdata/sig/trainer/accounting/goodput"
)

// trainer fleet [--config FILE.json] [--seed N] [--days D] [--json]
//
// Simulates a fleet of training jobs in virtual time (trainer/accounting/fleet) and
// prints the Ads paper's Table II (chips training, queued, on hold), the
// preempted epochs that committed, and the fleet's goodput by phase. The
// config is a JSON trainer/accounting/fleet.SimConfig (durations as "36h"); absent
// fields take the documented defaults, which are printed.
func init() {
	commands.Register(cli.Command{Name: "fleet", Run: runFleet,
		Usage: "[--config FILE.json] [--seed N] [--days D] [--json]: simulate a shared fleet: Table II, preemptions, goodput"})
}

type fleetOutput struct {
	Config             fleet.SimConfig `json:"config"`
	Jobs               int             `json:"jobs"`
	Finished           int             `json:"finished"`
	TableII            fleet.TableII   `json:"table_ii"`
	Preemptions        int             `json:"preemptions"`
	PreemptedEpochs    int             `json:"preempted_epochs"`
	PreemptedCommitted int             `json:"preempted_committed"`
	CommittedFraction  float64         `json:"committed_fraction"`
	Failures           int             `json:"failures"`
	PermanentHolds     int             `json:"permanent_holds"`
	TransientHolds     int             `json:"transient_holds"`
	Goodput            goodput.Report  `json:"goodput"`
}

func runFleet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := commands.NewFlags("fleet", stderr)
	config := fs.String("config", "", "simulation config `FILE.json` (trainer/accounting/fleet.SimConfig); default: the defaults")
	seed := fs.Uint64("seed", 1, "random seed (overrides the config's)")
	days := fs.Float64("days", 0, "simulated days (overrides the config's duration)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	var cfg fleet.SimConfig
	if *config != "" {
		b, err := os.ReadFile(*config)
		if err != nil {
			return err
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return fmt.Errorf("%s: %w", *config, err)
		}
	}
	cfg.Seed = *seed
	if *days > 0 {
		cfg.Duration = fleet.Duration(time.Duration(*days * 24 * float64(time.Hour)))
	}
	r, err := fleet.Simulate(cfg)
	if err != nil {
		return err
	}
	out := fleetOutput{Config: r.Config, Jobs: r.Jobs, Finished: r.Finished, TableII: r.TableII,
		Preemptions: r.Preemptions, PreemptedEpochs: r.PreemptedEpochs, PreemptedCommitted: r.PreemptedCommitted,
		CommittedFraction: r.CommittedFraction(), Failures: r.Failures, PermanentHolds: r.PermanentHolds,
		TransientHolds: r.TransientHolds, Goodput: r.Goodput}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	c := r.Config
	fmt.Fprintf(stdout, "fleet of %d chips, %v simulated (seed %d); a job every %v on average, slices %v then %v when caught up\n",
		c.Chips, time.Duration(c.Duration), c.Seed, time.Duration(c.ArrivalMean), c.Slices, c.CaughtUpSlices)
	fmt.Fprintf(stdout, "epochs of %v; errors: temporary every %v, permanent every %v (released after %v), data pending at %.0f%% of epochs (%v); maintenance every %v; notices %v, drains %v (means)\n\n",
		time.Duration(c.Epoch), time.Duration(c.FailureMTBF), time.Duration(c.PermanentMTBF), time.Duration(c.HumanResponse),
		100*c.TransientProb, time.Duration(c.TransientMean), time.Duration(c.MaintenanceMTBF), time.Duration(c.NoticeMean), time.Duration(c.DrainMean))
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TPU chip demand (Table II)\tTraining\tQueued\tOn hold")
	fmt.Fprintf(tw, "relative to training\t1\t%.2f\t%.2f\n", r.TableII.QueuedPerTraining, r.TableII.OnHoldPerTraining)
	fmt.Fprintf(tw, "fraction of capacity\t%.3f\t%.3f\t%.3f\n", r.TableII.Training, r.TableII.Queued, r.TableII.OnHold)
	fmt.Fprintf(tw, "paper (relative)\t1\t1.03\t2.49\n")
	tw.Flush()
	fmt.Fprintf(stdout, "\njobs %d (%d finished both phases); failures %d; permanent holds %d, transient holds %d\n",
		r.Jobs, r.Finished, r.Failures, r.PermanentHolds, r.TransientHolds)
	fmt.Fprintf(stdout, "preemptions %d: %d cut an epoch, %d of those committed an early epoch end (%.0f%%; paper: 61%%)\n\n",
		r.Preemptions, r.PreemptedEpochs, r.PreemptedCommitted, 100*r.CommittedFraction())
	tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scope\tSG\tRG\tPG\tMPG\tproductive chip-h\tlost chip-h\thold chip-h\tinput stall chip-h\tunallocated chip-h")
	row := func(name string, s goodput.Summary) {
		cs := s.ChipSeconds
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t%.3f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\n", name, s.SG, s.RG, s.PG, s.MPG,
			fleet.ChipHours(cs[goodput.Productive]), fleet.ChipHours(cs[goodput.LostWork]), fleet.ChipHours(cs[goodput.Hold]),
			fleet.ChipHours(cs[goodput.InputStall]), fleet.ChipHours(cs[goodput.Unallocated]))
	}
	row("fleet", r.Goodput.Fleet)
	for _, p := range r.Goodput.Phases {
		row("  "+p.Phase, p)
	}
	return tw.Flush()
}
