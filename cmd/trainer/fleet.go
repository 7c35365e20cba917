package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sigdata/sig/internal/cli"
	"github.com/sigdata/sig/internal/figure"
	"github.com/sigdata/sig/trainer/accounting/fleet"
	"github.com/sigdata/sig/trainer/accounting/goodput"
	"github.com/sigdata/sig/trainer/accounting/stall"
)

// trainer fleet [--config FILE.json] [--seed N] [--seeds K] [--days D]
// [--measured FILE] [--sweeps=false] [--json] [--report FILE]
//
// Simulates a fleet of training jobs in virtual time (trainer/accounting/fleet)
// for K seeds and prints the Ads paper's Table II (chips training, queued,
// on hold), the preempted epochs that committed next to their closed form,
// the fleet's goodput by phase, and its input stall charged by the stall
// ledger: by cause kind, and by waiting job's client and the client whose
// SIG work was ahead (trainer/accounting/fleet, "Stall by cause"; set
// hold_after in the config for SIG-side stall). Every figure is modelled: it is printed
// with the constants that decide it, their sources, and a sweep of the
// deciding ones. The config is a JSON trainer/accounting/fleet.SimConfig
// (durations as "36h"); absent fields take the documented defaults.
// --measured reads the measurements of this system that replace constants
// (bench/preemption.json: program goodput, input stall, notice-to-checkpoint
// times of real preemptions).
func init() {
	commands.Register(cli.Command{Name: "fleet", Run: runFleet,
		Usage: "[--config FILE.json] [--seed N] [--seeds K] [--days D] [--measured FILE] [--json] [--report FILE]: simulate a shared fleet: Table II, preemptions, goodput, each figure with its constants and sweeps"})
}

// fleetRun is one seed's simulation.
type fleetRun struct {
	Seed               uint64            `json:"seed"`
	Jobs               int               `json:"jobs"`
	Finished           int               `json:"finished"`
	TableII            fleet.TableII     `json:"table_ii"`
	Preemptions        int               `json:"preemptions"`
	PreemptedEpochs    int               `json:"preempted_epochs"`
	PreemptedCommitted int               `json:"preempted_committed"`
	CommittedFraction  float64           `json:"committed_fraction"`
	Failures           int               `json:"failures"`
	PermanentHolds     int               `json:"permanent_holds"`
	TransientHolds     int               `json:"transient_holds"`
	Goodput            goodput.Summary   `json:"goodput"`
	Phases             []goodput.Summary `json:"phases"`
	// Jobs are each job's goodput over its phases (the MPG per job that
	// the fleet's figures average over chip-time).
	JobGoodput []fleetJob `json:"job_goodput"`
	// Stall is the run's input stall by cause and by client ahead.
	Stall fleet.StallByCause `json:"stall"`
}

// fleetJob is one simulated job's goodput.
type fleetJob struct {
	Job string  `json:"job"`
	SG  float64 `json:"sg"`
	RG  float64 `json:"rg"`
	PG  float64 `json:"pg"`
	MPG float64 `json:"mpg"`
}

// fleetOutput is the JSON report: the config, each seed's run and the
// figures (internal/figure).
type fleetOutput struct {
	Config  fleet.SimConfig `json:"config"`
	Runs    []fleetRun      `json:"runs"`
	Figures figure.Set      `json:"figures"`
	// Stall is every run's stall by cause, pooled, labelled as the
	// figures are.
	Stall fleetStall `json:"stall"`
}

// fleetStall is the fleet's input stall by cause kind and by (waiting
// client, client ahead), seeds pooled: modelled, with the constants that
// decide it (those of the figure fleet_input_stall_sig_share).
type fleetStall struct {
	Kind      figure.Kind                `json:"kind"`
	How       string                     `json:"how"`
	Figure    string                     `json:"figure"`
	Constants map[string]figure.Constant `json:"constants"`
	fleet.StallByCause
}

func runFleet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := commands.NewFlags("fleet", stderr)
	config := fs.String("config", "", "simulation config `FILE.json` (trainer/accounting/fleet.SimConfig); default: the defaults")
	seed := fs.Uint64("seed", 1, "first random seed (overrides the config's)")
	seeds := fs.Int("seeds", 3, "seeds to simulate (seed, seed+1, ...); figures are means over them")
	days := fs.Float64("days", 0, "simulated days (overrides the config's duration)")
	measured := fs.String("measured", "", "replace constants with this system's measurements from `FILE` (bench/preemption.json)")
	sweeps := fs.Bool("sweeps", true, "sweep each figure's deciding constants")
	asJSON := fs.Bool("json", false, "print JSON")
	report := fs.String("report", "", "also write the JSON report to `FILE`")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if *seeds <= 0 {
		return fmt.Errorf("%w: --seeds must be positive", cli.ErrUsage)
	}
	var cfg fleet.SimConfig
	if *config != "" {
		if err := decodeStrict(*config, &cfg); err != nil {
			return err
		}
	}
	cfg.Seed = *seed
	if *days > 0 {
		cfg.Duration = fleet.Duration(time.Duration(*days * 24 * float64(time.Hour)))
	}
	var sources map[string]string
	if *measured != "" {
		var f struct {
			Measured *fleet.Measured `json:"measured"`
		}
		b, err := os.ReadFile(*measured)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &f); err != nil {
			return fmt.Errorf("%s: %w", *measured, err)
		}
		if f.Measured == nil {
			return fmt.Errorf("%s: no \"measured\" object (write it with bench/trainer.sh)", *measured)
		}
		sources = f.Measured.Apply(&cfg)
	}
	st, err := fleet.RunStudy(cfg, fleet.StudyOptions{Seeds: *seeds, Sources: sources, NoSweeps: !*sweeps})
	if err != nil {
		return err
	}
	sf := st.Figures[fleet.FigSIGStallShare]
	out := fleetOutput{Config: st.Config, Figures: st.Figures, Stall: fleetStall{Kind: sf.Kind, How: sf.How,
		Figure: fleet.FigSIGStallShare, Constants: sf.Constants, StallByCause: st.Stall}}
	for _, r := range st.Runs {
		run := fleetRun{Seed: r.Config.Seed, Jobs: r.Jobs, Finished: r.Finished, TableII: r.TableII,
			Preemptions: r.Preemptions, PreemptedEpochs: r.PreemptedEpochs, PreemptedCommitted: r.PreemptedCommitted,
			CommittedFraction: r.CommittedFraction(), Failures: r.Failures, PermanentHolds: r.PermanentHolds,
			TransientHolds: r.TransientHolds, Goodput: r.Goodput.Fleet, Phases: r.Goodput.Phases, Stall: r.Stall}
		for _, j := range r.Goodput.Jobs {
			t := j.Total
			run.JobGoodput = append(run.JobGoodput, fleetJob{Job: j.Job, SG: t.SG, RG: t.RG, PG: t.PG, MPG: t.MPG})
		}
		out.Runs = append(out.Runs, run)
	}
	writeJSON := func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if *report != "" {
		if err := writeFile(*report, writeJSON); err != nil {
			return err
		}
	}
	if *asJSON {
		return writeJSON(stdout)
	}
	return writeFleetText(stdout, out)
}

func decodeStrict(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func writeFleetText(w io.Writer, out fleetOutput) error {
	c, figs := out.Config, out.Figures
	var b strings.Builder
	fmt.Fprintf(&b, "fleet simulation (trainer/accounting/fleet), virtual time: %d chips, %v, seeds %d-%d; slices %v, then %v when caught up\n",
		c.Chips, time.Duration(c.Duration), c.Seed, c.Seed+uint64(len(out.Runs))-1, c.Slices, c.CaughtUpSlices)
	b.WriteString("Every figure below is MODELLED (the constants decide it) unless marked MEASURED. Each is printed with its deciding constants\n" +
		"and a sweep of them; the constants' values and sources are listed here (\"guess\": no publication gives the value;\n" +
		"\"measured:\": a measurement of this system replaced it).\n")
	all := map[string]figure.Constant{}
	for _, f := range figs {
		maps.Copy(all, f.Constants)
	}
	for _, name := range slices.Sorted(maps.Keys(all)) {
		k := all[name]
		fmt.Fprintf(&b, "  %-20s %10.4g %-8s %s\n", name, k.Value, k.Unit, k.Source)
	}
	b.WriteString("\n")

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TPU chip demand (Table II)\tTraining\tQueued\tOn hold\t\tfraction of capacity: training\tqueued\ton hold")
	for _, r := range out.Runs {
		t := r.TableII
		fmt.Fprintf(tw, "seed %d\t1\t%.2f\t%.2f\t\t%.3f\t%.3f\t%.3f\n", r.Seed, t.QueuedPerTraining, t.OnHoldPerTraining, t.Training, t.Queued, t.OnHold)
	}
	fmt.Fprintf(tw, "mean (modelled)\t1\t%.2f\t%.2f\t\t\t\t\n", figs[fleet.FigQueuedPerTraining].Value, figs[fleet.FigOnHoldPerTraining].Value)
	fmt.Fprintf(tw, "paper (VII.F)\t1\t1.03\t2.49\t\t\t\t\n")
	tw.Flush()
	figureLine(&b, "queued per training", figs[fleet.FigQueuedPerTraining], "%.2f")
	figureLine(&b, "on hold per training", figs[fleet.FigOnHoldPerTraining], "%.2f")
	b.WriteString("\n")

	var pre, com int
	for _, r := range out.Runs {
		fmt.Fprintf(&b, "seed %d: %d jobs (%d finished both phases); failures %d; permanent holds %d, transient holds %d; preemptions %d, %d cut an epoch, %d of those committed\n",
			r.Seed, r.Jobs, r.Finished, r.Failures, r.PermanentHolds, r.TransientHolds, r.Preemptions, r.PreemptedEpochs, r.PreemptedCommitted)
		pre, com = pre+r.PreemptedEpochs, com+r.PreemptedCommitted
	}
	sim, closed := figs[fleet.FigCommitted], figs[fleet.FigCommittedClosed]
	fmt.Fprintf(&b, "preempted epochs that commit: simulated %.0f%% (%d of %d, seeds pooled), closed form %.0f%% (%s); paper 61%% (VII.G)\n",
		100*sim.Value, com, pre, 100*closed.Value, strings.TrimPrefix(closed.How, "closed form of the same model, no simulation: "))
	fmt.Fprintf(&b, "  %s\n", sim.Label())
	if n, ok := fleet.NoticeForCommitted(out.Config, 0.61); ok {
		fmt.Fprintf(&b, "  the closed form reaches the paper's 61%% at notice_mean = %.4g s (configured: %.4g s)\n", n.Seconds(), time.Duration(out.Config.NoticeMean).Seconds())
	}
	for _, k := range sweptConstants(sim) {
		fmt.Fprintf(&b, "  sweep %s (%s), simulated / closed form:", k, sim.Constants[k].Unit)
		cl := closed.SweepOf(k)
		for i, p := range sim.SweepOf(k) {
			fmt.Fprintf(&b, " %.4g: %.2f/%.2f", p.At, p.Value, cl[i].Value)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")

	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "goodput (MPG paper)\tSG\tRG\tPG\tMPG\tproductive chip-h\tlost chip-h\tinput stall chip-h\tunallocated chip-h")
	row := func(name string, s goodput.Summary) {
		cs := s.ChipSeconds
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t%.3f\t%.0f\t%.0f\t%.0f\t%.0f\n", name, s.SG, s.RG, s.PG, s.MPG,
			fleet.ChipHours(cs[goodput.Productive]), fleet.ChipHours(cs[goodput.LostWork]),
			fleet.ChipHours(cs[goodput.InputStall]), fleet.ChipHours(cs[goodput.Unallocated]))
	}
	for _, r := range out.Runs {
		row(fmt.Sprintf("seed %d fleet", r.Seed), r.Goodput)
	}
	fmt.Fprintf(tw, "mean (modelled)\t%.3f\t%.3f\t%.3f\t%.3f\t\t\t\t\n", figs[fleet.FigSG].Value, figs[fleet.FigRG].Value, figs[fleet.FigPG].Value, figs[fleet.FigMPG].Value)
	tw.Flush()
	figureLine(&b, "SG", figs[fleet.FigSG], "%.3f")
	figureLine(&b, "RG", figs[fleet.FigRG], "%.3f")
	figureLine(&b, "PG", figs[fleet.FigPG], "%.3f")
	figureLine(&b, "MPG", figs[fleet.FigMPG], "%.3f")
	b.WriteString("\n")
	writeFleetStall(&b, out)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeFleetStall prints the fleet's input stall by cause kind and by
// (waiting client, client ahead), and the waits on SIG by client.
func writeFleetStall(b *strings.Builder, out fleetOutput) {
	st := out.Stall
	fmt.Fprintf(b, "input stall by cause (stall ledger, trainer/accounting/stall), simulated chip-hours, seeds pooled: %s;\n"+
		"  a job whose epoch's data is pending in SIG stalls on its kept slice for up to hold_after = %v, then holds; SIG's work ahead of it is\n"+
		"  the jobs in initial training at a higher priority, else the earlier ones at its priority, weighed by slice chips; the readers'\n"+
		"  constant input_stall is charged to reader_fetch. Sum of causes %.0f chip-h, input stall (goodput) %.0f chip-h.\n",
		strings.ToUpper(string(st.Kind)), time.Duration(out.Config.HoldAfter), st.Charged(), st.InputStall)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "cause kind\tchip-h\tshare\t")
	for _, k := range stall.Kinds {
		if v, ok := st.ByKind[k]; ok {
			fmt.Fprintf(tw, "%s\t%.0f\t%.1f%%\t\n", k, v, 100*v/max(st.Charged(), 1e-300))
		}
	}
	tw.Flush()
	figureLine(b, "SIG share of input stall", out.Figures[fleet.FigSIGStallShare], "%.3f")
	matrix := func(title string, m map[string]map[string]float64) {
		cols := fleet.Columns(m)
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "%s\t%s\ttotal\t\n", title, strings.Join(cols, "\t"))
		for _, row := range slices.Sorted(maps.Keys(m)) {
			fmt.Fprintf(tw, "%s", row)
			var sum float64
			for _, c := range cols {
				fmt.Fprintf(tw, "\t%.0f", m[row][c])
				sum += m[row][c]
			}
			fmt.Fprintf(tw, "\t%.0f\t\n", sum)
		}
		tw.Flush()
	}
	b.WriteString("input stall chip-h by waiting job's client (rows) and the client whose SIG work was ahead (columns; (none): nothing ahead, (reader): readers):\n")
	matrix("waiting \\ ahead", st.ByClient)
	b.WriteString("SIG waits, job-hours (stalled or on a transient hold), by waiting client and the client ahead when the wait began:\n")
	matrix("waiting \\ ahead", st.Waited)
}

// figureLine prints a figure with its kind, the constants it sweeps (value
// and source), how many other constants decide it, and the sweeps.
func figureLine(b *strings.Builder, name string, f figure.Figure, format string) {
	fmt.Fprintf(b, "%s "+format+": %s", name, f.Value, strings.ToUpper(string(f.Kind)))
	swept := sweptConstants(f)
	if f.Kind == figure.Measured {
		fmt.Fprintf(b, " (%s)", f.How)
	}
	for i, k := range swept {
		sep := "; "
		if i > 0 {
			sep = ", "
		}
		c := f.Constants[k]
		fmt.Fprintf(b, "%s%s %.4g %s (%s)", sep, k, c.Value, c.Unit, c.Source)
	}
	if f.Kind == figure.Modelled && len(swept) == 0 {
		b.WriteString("; " + strings.TrimPrefix(f.Label(), "modelled; "))
	} else if rest := len(f.Constants) - len(swept); rest > 0 && f.Kind == figure.Modelled {
		fmt.Fprintf(b, "; and %d more constants (listed above)", rest)
	}
	b.WriteString("\n")
	for _, k := range swept {
		fmt.Fprintf(b, "  sweep %s (%s):", k, f.Constants[k].Unit)
		for _, p := range f.SweepOf(k) {
			fmt.Fprintf(b, " %.4g: "+format, p.At, p.Value)
		}
		b.WriteString("\n")
	}
}

// sweptConstants are the constants f's sweep varies, in sweep order.
func sweptConstants(f figure.Figure) []string {
	var out []string
	for _, p := range f.Sweep {
		if !slices.Contains(out, p.Constant) {
			out = append(out, p.Constant)
		}
	}
	return out
}
