package results

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"time"

	"github.com/sigdata/sig/fleet/gen"
	"github.com/sigdata/sig/internal/figure"
)

// SchemaVersion is the version of the results format (doc.go).
const SchemaVersion = "sig.fleet.results/v1"

// Results is one fleet run.
type Results struct {
	Schema   string    `json:"schema"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Machine is where it ran: the CPU model, cores, Go and commit.
	Machine Machine `json:"machine"`
	// Fleet is the generator's configuration (after defaults): with the
	// seed, the whole fleet.
	Fleet gen.Config `json:"fleet"`
	// Run is how the run laid the data out and ran the processes.
	Run RunConfig `json:"run"`
	// Constants are the modelled inputs of Table I and Figure 6.
	Constants Constants `json:"constants"`

	// Epochs are per-epoch counts and cumulative measurements: the hit
	// rate over time, and the CPU of SIG and LIG as the fleet grows.
	Epochs []Epoch `json:"epochs"`
	// Steps are the submissions, in order, with what sigd answered and
	// the Ledger counted.
	Steps []Step `json:"steps"`
	// SteadyState is the hit rate over the last third of the epochs.
	SteadyState SteadyState `json:"steady_state"`
	// HitRates is the hit rate over time, an epoch a point, and
	// Amortization the CPU of SIG against LIG as the fleet grows (both
	// from Epochs: NewHitRates, NewAmortization).
	HitRates     []HitRatePoint      `json:"hit_rates"`
	Amortization []AmortizationPoint `json:"amortization"`
	// Reuse is how many pipelines use each memoized block at the end.
	Reuse Reuse `json:"reuse"`
	// ReuseSweep is the fleet's plan with the knobs that decide reuse
	// changed one at a time (counted, not run: NewReuseSweep).
	ReuseSweep []PlanPoint `json:"reuse_sweep"`
	// CPU totals at the end.
	CPU CPU `json:"cpu"`
	// Store is the object store's requests and bytes per side (nil in
	// runs from before they were measured), and Costs prices them beside
	// the CPU (modelled: NewCosts).
	Store *Store     `json:"store,omitempty"`
	Costs figure.Set `json:"costs,omitempty"`
	// Pipelines are per-pipeline measurements.
	Pipelines []Pipeline `json:"pipelines"`
	// TableI mirrors paper Table I; Figure6 paper Figure 6.
	TableI  TableI  `json:"table_i"`
	Figure6 Figure6 `json:"figure_6"`
	// Checks are the run's own verifications (sigd against the Ledger,
	// SIG bytes against LIG bytes); a run with a failed check says so.
	Checks []Check `json:"checks"`
	// Targets are the targets against what the run measured.
	Targets []Target `json:"targets"`
}

// Machine describes where the run ran.
type Machine struct {
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	GoVersion string `json:"go_version"`
	Commit    string `json:"commit,omitempty"`
	// LoadStart and LoadEnd are the 1, 5 and 15 minute load averages
	// (/proc/loadavg) when the run started and ended: other work on the
	// machine slows the run but not its CPU figures, which are per
	// process.
	LoadStart []float64 `json:"load_start,omitempty"`
	LoadEnd   []float64 `json:"load_end,omitempty"`
}

// RunConfig is the run's own layout and process settings.
type RunConfig struct {
	// RowsPerBlock events make a raw block, BlocksPerSlot blocks a slot;
	// Slots slots make the warehouse (Events events, Blocks blocks).
	RowsPerBlock  int   `json:"rows_per_block"`
	BlocksPerSlot int   `json:"blocks_per_slot"`
	Slots         int   `json:"slots"`
	Events        int64 `json:"events"`
	Blocks        int   `json:"blocks"`
	// WorkersMax bounds the `sigd worker` processes the run starts as
	// sigd's autoscaler asks; WorkerConcurrency is each one's --concurrency.
	WorkersMax        int `json:"workers_max"`
	WorkerConcurrency int `json:"worker_concurrency"`
	// ReadConcurrency is the units of one pipeline in flight at a reader.
	ReadConcurrency int `json:"read_concurrency"`
	// SigdArgs and WorkerArgs are extra flags the run gave sigd and its
	// workers (sigctl fleet --sigd-flag, --worker-flag); none in a run of
	// the defaults.
	SigdArgs   []string `json:"sigd_args,omitempty"`
	WorkerArgs []string `json:"worker_args,omitempty"`
	// SIGReaderArgs are extra flags of the SIG reader (--sig-reader-flag).
	SIGReaderArgs []string `json:"sig_reader_args,omitempty"`
	// CPUSource says how CPU was measured.
	CPUSource string `json:"cpu_source"`
}

// Constant is a modelled input: its value, unit and where it comes from.
type Constant struct {
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	Source string  `json:"source"`
}

// Constants are every modelled input of the run's figures.
type Constants struct {
	// HostCores is the CPU a TPU host offers to input reading (Table I's
	// budget).
	HostCores Constant `json:"host_cores"`
	// ExamplesPerSecond is what one host's accelerators consume, per
	// pipeline (the input rate a reader must sustain).
	ExamplesPerSecond Constant `json:"examples_per_second"`
	// ChipsPerHost, ChipHourUSD and CoreHourUSD price Figure 6.
	ChipsPerHost Constant `json:"chips_per_host"`
	ChipHourUSD  Constant `json:"chip_hour_usd"`
	CoreHourUSD  Constant `json:"core_hour_usd"`
}

// Counts are a submission's (or a sum of submissions') components and
// (component, block) pairs, and the hits among them.
type Counts struct {
	Components    int `json:"components"`
	ComponentHits int `json:"component_hits"`
	Blocks        int `json:"blocks"`
	BlockHits     int `json:"block_hits"`
}

// Add returns c + d.
func (c Counts) Add(d Counts) Counts {
	return Counts{c.Components + d.Components, c.ComponentHits + d.ComponentHits, c.Blocks + d.Blocks, c.BlockHits + d.BlockHits}
}

// BlockHitRate is BlockHits/Blocks (0 without blocks).
func (c Counts) BlockHitRate() float64 { return ratio(float64(c.BlockHits), float64(c.Blocks)) }

// ComponentHitRate is ComponentHits/Components (0 without components).
func (c Counts) ComponentHitRate() float64 {
	return ratio(float64(c.ComponentHits), float64(c.Components))
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// Step is one submission.
type Step struct {
	Epoch    int    `json:"epoch"`
	Pipeline string `json:"pipeline"` // client/name
	Phase    string `json:"phase"`    // gen.Initial or gen.CaughtUp
	// Sigd is what SubmitGraph answered; Ledger the independent count.
	Sigd   Counts `json:"sigd"`
	Ledger Counts `json:"ledger"`
	// TasksDone is how many memo blocks became ready for it, and
	// WorkerSeconds the CPU of the worker processes meanwhile.
	TasksDone     int     `json:"tasks_done"`
	WorkerSeconds float64 `json:"worker_seconds"`
	// Examples read and the reader processes' CPU around its reads.
	Examples   int64   `json:"examples"`
	SIGSeconds float64 `json:"sig_seconds"`
	LIGSeconds float64 `json:"lig_seconds"`
	// MinIO's CPU while the workers memoized the step, while the SIG
	// reader read it and while the LIG reader did (one after the other).
	MinIOWorkerSeconds float64 `json:"minio_worker_seconds"`
	MinIOSIGSeconds    float64 `json:"minio_sig_seconds"`
	MinIOLIGSeconds    float64 `json:"minio_lig_seconds"`
	// Units read (each way), and the object store's traffic in each
	// phase (nil in runs from before it was measured).
	Units int    `json:"units,omitempty"`
	Store *Sides `json:"store,omitempty"`
}

// Epoch is one epoch of the timeline.
type Epoch struct {
	Epoch int `json:"epoch"`
	// Submitted pipelines so far (the fleet's size on the curves) and
	// Active, training in this epoch.
	Submitted int `json:"submitted"`
	Active    int `json:"active"`
	// Initial and CaughtUp sum sigd's answers to the epoch's submissions.
	Initial  Counts `json:"initial"`
	CaughtUp Counts `json:"caught_up"`
	// Cumulative is every process's CPU from the start of the run to the
	// end of this epoch, and the examples read so far.
	Cumulative CPU `json:"cumulative"`
	// ReuseMean and ReuseMax are sigd's at the end of the epoch.
	ReuseMean float64 `json:"reuse_mean"`
	ReuseMax  int     `json:"reuse_max"`
	// WallSeconds since the first submission.
	WallSeconds float64 `json:"wall_seconds"`
}

// All is the epoch's counts.
func (e Epoch) All() Counts { return e.Initial.Add(e.CaughtUp) }

// SteadyState sums the counts of the last third of the epochs (at least
// one), once the fleet has grown to two thirds of its size.
type SteadyState struct {
	FromEpoch int    `json:"from_epoch"`
	Counts    Counts `json:"counts"`
	// BlockHitRate and ComponentHitRate of Counts.
	BlockHitRate     float64 `json:"block_hit_rate"`
	ComponentHitRate float64 `json:"component_hit_rate"`
}

// NewSteadyState computes the steady state of epochs.
func NewSteadyState(epochs []Epoch) SteadyState {
	if len(epochs) == 0 {
		return SteadyState{}
	}
	from := len(epochs) - max(1, len(epochs)/3)
	s := SteadyState{FromEpoch: epochs[from].Epoch}
	for _, e := range epochs[from:] {
		s.Counts = s.Counts.Add(e.All())
	}
	s.BlockHitRate, s.ComponentHitRate = s.Counts.BlockHitRate(), s.Counts.ComponentHitRate()
	return s
}

// Distribution summarizes pipelines per memoized block.
type Distribution struct {
	// Histogram[n] is the number of blocks used by n pipelines.
	Histogram []int64 `json:"histogram"`
	Blocks    int64   `json:"blocks"`
	Mean      float64 `json:"mean"`
	Max       int     `json:"max"`
	P50       int     `json:"p50"`
	P90       int     `json:"p90"`
	P99       int     `json:"p99"`
}

// NewDistribution summarizes a histogram.
func NewDistribution(h []int64) Distribution {
	d := Distribution{Histogram: h}
	var sum int64
	for n, c := range h {
		d.Blocks += c
		sum += int64(n) * c
		if c > 0 {
			d.Max = n
		}
	}
	if d.Blocks == 0 {
		return d
	}
	d.Mean = float64(sum) / float64(d.Blocks)
	at := func(p float64) int {
		rank := int64(math.Ceil(p * float64(d.Blocks))) // nearest rank
		var seen int64
		for n, c := range h {
			if seen += c; seen >= rank {
				return n
			}
		}
		return d.Max
	}
	d.P50, d.P90, d.P99 = at(0.5), at(0.9), at(0.99)
	return d
}

// Reuse is the end-of-run reuse, from sigd and from the Ledger.
type Reuse struct {
	Sigd   Distribution `json:"sigd"`
	Ledger Distribution `json:"ledger"`
	// Pipelines registered at the end (retired ones included: SIG keeps
	// them) and Active ones in the last epoch.
	Pipelines int `json:"pipelines"`
	Active    int `json:"active"`
}

// CPU is CPU time in seconds per process kind, and examples read.
type CPU struct {
	// Worker is every `sigd worker` process; SIGReader and LIGReader the
	// reader processes serving SIG and LIG units; Sigd and MinIO the
	// service and its store (not part of either side: both pay them).
	Worker    float64 `json:"worker"`
	SIGReader float64 `json:"sig_reader"`
	LIGReader float64 `json:"lig_reader"`
	Sigd      float64 `json:"sigd"`
	MinIO     float64 `json:"minio"`
	// Examples read in each mode (the same units both ways).
	Examples int64 `json:"examples"`
	// MinIO's CPU attributed to each side's processes: the sums of the
	// steps' (the run does one thing at a time, so MinIO's CPU during a
	// phase is the phase's); the rest of MinIO is ingestion, idle work and
	// the moments between phases.
	MinIOWorker    float64 `json:"minio_worker"`
	MinIOSIGReader float64 `json:"minio_sig_reader"`
	MinIOLIGReader float64 `json:"minio_lig_reader"`
}

// SIG is the CPU of shared input generation: the workers and the SIG
// readers.
func (c CPU) SIG() float64 { return c.Worker + c.SIGReader }

// LIG is the CPU of local input generation: the LIG readers.
func (c CPU) LIG() float64 { return c.LIGReader }

// Ratio is SIG()/LIG() (0 without LIG CPU).
func (c CPU) Ratio() float64 { return ratio(c.SIG(), c.LIG()) }

// ReaderRatio is SIGReader/LIGReader: the floor Ratio falls towards as the
// workers' CPU is shared by more pipelines (each example is still served
// once per pipeline on either side).
func (c CPU) ReaderRatio() float64 { return ratio(c.SIGReader, c.LIGReader) }

// SIGWithStorage is SIG() plus the MinIO CPU its processes caused;
// LIGWithStorage likewise; RatioWithStorage is their ratio.
func (c CPU) SIGWithStorage() float64   { return c.SIG() + c.MinIOWorker + c.MinIOSIGReader }
func (c CPU) LIGWithStorage() float64   { return c.LIG() + c.MinIOLIGReader }
func (c CPU) RatioWithStorage() float64 { return ratio(c.SIGWithStorage(), c.LIGWithStorage()) }

// Sub returns c - d, for deltas.
func (c CPU) Sub(d CPU) CPU {
	return CPU{c.Worker - d.Worker, c.SIGReader - d.SIGReader, c.LIGReader - d.LIGReader, c.Sigd - d.Sigd,
		c.MinIO - d.MinIO, c.Examples - d.Examples, c.MinIOWorker - d.MinIOWorker, c.MinIOSIGReader - d.MinIOSIGReader,
		c.MinIOLIGReader - d.MinIOLIGReader}
}

// Pipeline is one pipeline's measurements.
type Pipeline struct {
	Pipeline string `json:"pipeline"` // client/name
	Inputs   int    `json:"inputs"`
	Priority int32  `json:"priority"`
	Arrive   int    `json:"arrive"`
	Retire   int    `json:"retire"`
	// Initial and CaughtUp: examples read and reader CPU in each mode,
	// per phase (gen.Initial: the history; gen.CaughtUp: new slots).
	Initial  Reads `json:"initial"`
	CaughtUp Reads `json:"caught_up"`
	// WorkerShare is its share of the workers' CPU: each memo block's CPU
	// (its submission's worker CPU divided among the blocks it computed)
	// divided among the pipelines that use the block at the end.
	WorkerShare float64 `json:"worker_share"`
}

// Reads are examples read and the readers' CPU for them.
type Reads struct {
	Units      int     `json:"units"`
	Examples   int64   `json:"examples"`
	SIGSeconds float64 `json:"sig_seconds"`
	LIGSeconds float64 `json:"lig_seconds"`
}

// Add returns r + s.
func (r Reads) Add(s Reads) Reads {
	return Reads{r.Units + s.Units, r.Examples + s.Examples, r.SIGSeconds + s.SIGSeconds, r.LIGSeconds + s.LIGSeconds}
}

// Check is one verification of the run.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Percentiles of a per-pipeline figure (nearest rank).
type Percentiles struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	Mean float64 `json:"mean"`
}

// NewPercentiles computes the percentiles of xs (which it sorts).
func NewPercentiles(xs []float64) Percentiles {
	p := Percentiles{N: len(xs)}
	if len(xs) == 0 {
		return p
	}
	sort.Float64s(xs)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(xs)))) - 1
		return xs[max(0, min(i, len(xs)-1))]
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	p.P50, p.P90, p.P95, p.P99, p.Mean = at(0.5), at(0.9), at(0.95), at(0.99), sum/float64(len(xs))
	return p
}

// Write writes r as indented JSON to path.
func (r *Results) Write(path string) error {
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Read reads results from path, refusing another schema version.
func Read(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.Schema != SchemaVersion {
		return nil, fmt.Errorf("%s: schema %q, this build reads %q", path, r.Schema, SchemaVersion)
	}
	return &r, nil
}
