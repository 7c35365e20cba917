package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/sigdata/sig/fleet/gen"
	"github.com/sigdata/sig/fleet/results"
	"github.com/sigdata/sig/fleet/run"
	"github.com/sigdata/sig/internal/cli"
)

// sigctl fleet [--pipelines N --clients N --epochs N --seed S ...] [--out FILE.json] [--summary FILE.txt]
//
// Runs a generated fleet (fleet/gen) on the real binaries (fleet/run: sigd
// dev with MinIO and kfake, `sigd worker` processes as sigd's autoscaler
// asks, a SIG and a LIG reader) and writes the results
// (sig.fleet.results/v1, fleet/results) and a text summary. Progress goes
// to stderr: a line per epoch (pipelines, hit rate, reuse and CPU so far)
// and one every --progress-every within an epoch.
func init() {
	commands.Register(cli.Command{Name: "fleet", Run: runFleet,
		Usage: "[--pipelines N --clients N --epochs N --seed S --rows-per-block R ...] [--out FILE.json] [--summary FILE.txt]: run a generated fleet on sigd, workers and readers and measure hit rate, reuse, CPU and object-store requests"})
}

func runFleet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := commands.NewFlags("fleet", stderr)
	def := gen.Config{}.EnsureDefaults()
	var cfg run.Config
	f := &cfg.Fleet
	fs.Uint64Var(&f.Seed, "seed", 1, "selects the fleet (the same flags and seed give the same fleet)")
	fs.IntVar(&f.Pipelines, "pipelines", def.Pipelines, "model pipelines over the whole run")
	fs.IntVar(&f.Clients, "clients", def.Clients, "clients (teams), a third each at production, staging and exploration priorities")
	fs.IntVar(&f.Epochs, "epochs", def.Epochs, "epochs of the timeline; the present moves one slot per epoch and arrivals spread over them")
	fs.IntVar(&f.FirstEpoch, "first", def.FirstEpoch, "pipelines arriving at epoch 0 (the smallest fleet of the curves)")
	fs.IntVar(&f.InputsMin, "inputs-min", def.InputsMin, "fewest model inputs of a pipeline")
	fs.IntVar(&f.InputsMax, "inputs-max", def.InputsMax, "most model inputs of a pipeline")
	fs.Float64Var(&f.ZipfS, "zipf-s", def.ZipfS, "component popularity exponent (a guess: fleet/gen's doc)")
	fs.IntVar(&f.Variants, "variants", def.Variants, "parameter variants per component family (the population's size)")
	fs.IntVar(&f.HistoryMin, "history-min", def.HistoryMin, "shortest initial training range, in slots")
	fs.IntVar(&f.HistoryMax, "history-max", def.HistoryMax, "longest initial training range, in slots")
	fs.Float64Var(&f.RetireRate, "retire-rate", def.RetireRate, "probability that an active pipeline retires at each later epoch (0: none)")
	fs.IntVar(&cfg.RowsPerBlock, "rows-per-block", 10_000, "events per raw block (one event per second of event time)")
	fs.IntVar(&cfg.BlocksPerSlot, "blocks-per-slot", 2, "raw blocks per slot (one ingestion window)")
	fs.IntVar(&cfg.WorkersMax, "workers-max", 2, "most sigd worker processes (sigd's autoscaler decides how many run)")
	fs.IntVar(&cfg.WorkerConcurrency, "worker-concurrency", 1, "tasks each worker process runs at once")
	fs.Var((*cli.List)(&cfg.SigdArgs), "sigd-flag", "extra flags for sigd dev, comma-separated (e.g. --repack=false), recorded in the results")
	fs.Var((*cli.List)(&cfg.WorkerArgs), "worker-flag", "extra flags for each sigd worker, comma-separated (e.g. --batch-tasks=1), recorded in the results")
	fs.Var((*cli.List)(&cfg.SIGReaderArgs), "sig-reader-flag", "extra flags for the SIG reader, comma-separated (e.g. --guard-sample-rows=0), recorded in the results")
	fs.IntVar(&cfg.ReadConcurrency, "read-concurrency", 2, "units of a pipeline each reader serves at once")
	k := results.DefaultConstants()
	hostCores := fs.Float64("host-cores", k.HostCores.Value, "modelled: CPU cores a TPU host offers its input readers (Table I's budget)")
	eps := fs.Float64("examples-per-second", k.ExamplesPerSecond.Value, "modelled: examples per second one host's accelerators consume")
	chips := fs.Float64("chips-per-host", k.ChipsPerHost.Value, "modelled: accelerator chips per host (Figure 6)")
	chipUSD := fs.Float64("chip-hour-usd", k.ChipHourUSD.Value, "modelled: price of a chip-hour (Figure 6)")
	coreUSD := fs.Float64("core-hour-usd", k.CoreHourUSD.Value, "modelled: price of a core-hour (Figure 6)")
	sigdBin := fs.String("sigd-bin", "", "the sigd binary (default: sigd next to sigctl, else on PATH)")
	readerBin := fs.String("reader-bin", "", "the reader binary (default: reader next to sigctl, else on PATH)")
	dataDir := fs.String("data-dir", "", "sigd's data directory (default: a temporary directory, removed at the end)")
	out := fs.String("out", "", "write the results (JSON, schema "+results.SchemaVersion+") to this file")
	summary := fs.String("summary", "", "also write the text summary to this file (it is always printed)")
	every := fs.Duration("progress-every", 15*time.Second, "a progress line at least this often within an epoch")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: sigctl fleet [flags]

Runs a generated fleet of model pipelines (fleet/gen: Zipf-popular components
with shared subexpressions and near-duplicates, arrivals and retirements over
epochs, overlapping ranges) on the real binaries: sigd dev (MinIO, kfake),
sigd worker processes as sigd's autoscaler asks, and two readers serving every
pipeline's units, one SIG and one LIG. It measures the hit rate per epoch,
reuse per memo block, each process's CPU (SIG: workers + SIG reader; LIG: the
LIG reader) as the fleet grows, the object-store requests and bytes of each
side (MinIO's own counters) and what they would cost at S3's published
per-request prices beside the CPU at an EC2 core-hour, Table I and a Figure 6
analog, checks sigd's accounting against its own count, and writes the
results (--out, schema sig.fleet.results/v1) and a summary. The defaults (300 pipelines, 24 clients,
12 epochs, 460k events) take about 9 minutes on 2 busy cores; the work grows
with pipelines x inputs x slots x rows-per-block. sigd and reader are found
next to sigctl (make build puts them in bin/), else on PATH.

flags:
`)
		fs.PrintDefaults()
	}
	pos, err := cli.ParseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if err := cli.NoArgs(pos); err != nil {
		return err
	}
	// The flags carry the defaults, so a zero here was given: refuse it
	// rather than let the packages' zero-means-default take over.
	for _, c := range []struct {
		flag string
		v    int
	}{{"pipelines", f.Pipelines}, {"clients", f.Clients}, {"epochs", f.Epochs}, {"first", f.FirstEpoch},
		{"inputs-min", f.InputsMin}, {"inputs-max", f.InputsMax}, {"variants", f.Variants}, {"history-min", f.HistoryMin},
		{"history-max", f.HistoryMax}, {"rows-per-block", cfg.RowsPerBlock}, {"blocks-per-slot", cfg.BlocksPerSlot},
		{"workers-max", cfg.WorkersMax}, {"worker-concurrency", cfg.WorkerConcurrency}, {"read-concurrency", cfg.ReadConcurrency}} {
		if c.v < 1 {
			return fmt.Errorf("%w: --%s %d: want at least 1", cli.ErrUsage, c.flag, c.v)
		}
	}
	if !(f.ZipfS > 0) {
		return fmt.Errorf("%w: --zipf-s %v: want above 0 (0.001 is nearly uniform popularity)", cli.ErrUsage, f.ZipfS)
	}
	if f.RetireRate == 0 {
		f.RetireRate = -1 // none retire (zero would take the default)
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	for _, c := range []struct {
		flag string
		v    float64
		c    *results.Constant
	}{{"host-cores", *hostCores, &k.HostCores}, {"examples-per-second", *eps, &k.ExamplesPerSecond},
		{"chips-per-host", *chips, &k.ChipsPerHost}, {"chip-hour-usd", *chipUSD, &k.ChipHourUSD}, {"core-hour-usd", *coreUSD, &k.CoreHourUSD}} {
		if !(c.v > 0) {
			return fmt.Errorf("%w: --%s %v: want a positive number", cli.ErrUsage, c.flag, c.v)
		}
		if set[c.flag] && c.v != c.c.Value {
			c.c.Value, c.c.Source = c.v, fmt.Sprintf("set with --%s (default %g: %s)", c.flag, c.c.Value, c.c.Source)
		}
	}
	cfg.Constants = &k
	cfg.SigdBin, cfg.ReaderBin = binary(*sigdBin, "sigd"), binary(*readerBin, "reader")
	cfg.Dir, cfg.Progress, cfg.ProgressEvery = *dataDir, stderr, *every
	if err := cfg.Fleet.EnsureDefaults().Validate(); err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	// A file that cannot be written fails now, not after a run of minutes.
	for _, p := range []string{*out, *summary} {
		if p == "" {
			continue
		}
		if st, err := os.Stat(filepath.Dir(p)); err != nil || !st.IsDir() {
			return fmt.Errorf("%w: %s: no such directory", cli.ErrUsage, filepath.Dir(p))
		}
	}

	res, err := run.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if *out != "" {
		if err := res.Write(*out); err != nil {
			return err
		}
	}
	if err := res.WriteSummary(stdout); err != nil {
		return err
	}
	if *summary != "" {
		sf, err := os.Create(*summary)
		if err != nil {
			return err
		}
		if err := res.WriteSummary(sf); err != nil {
			sf.Close()
			return err
		}
		if err := sf.Close(); err != nil {
			return err
		}
	}
	for _, c := range res.Checks {
		if !c.OK {
			return fmt.Errorf("check failed: %s: %s", c.Name, c.Detail)
		}
	}
	return nil
}

// binary is flag if set, else name next to this executable, else name (on
// PATH; run.Config.Validate says when it is not).
func binary(flag, name string) string {
	if flag != "" {
		return flag
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), name)
		if _, err := exec.LookPath(p); err == nil {
			return p
		}
	}
	return name
}
