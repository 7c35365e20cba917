package trainer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/internal/clock"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/trainer/accounting/goodput"
	"github.com/sigdata/sig/trainer/buffer"
	"github.com/sigdata/sig/trainer/checkpoint"
	"github.com/sigdata/sig/trainer/control"
	"github.com/sigdata/sig/trainer/embedding/fdp"
	"github.com/sigdata/sig/trainer/embedding/paramservers"
	"github.com/sigdata/sig/trainer/steptime"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/objstore"
)

// Allocator hands out chips of an emulated fleet (paper VI.A: holds release
// chips "so they can be assigned to another queued service"). Acquire blocks
// until the job holds chips chips (whole slices: all or nothing) or ctx
// ends; Release gives them back. trainer/accounting/fleet's Shared implements it for
// jobs sharing a fleet; the default grants every request at once.
type Allocator interface {
	Acquire(ctx context.Context, job string, chips int) error
	Release(job string)
}

// Unlimited is the Allocator of a job that has its chips to itself.
type Unlimited struct{}

// Acquire grants at once.
func (Unlimited) Acquire(ctx context.Context, job string, chips int) error { return ctx.Err() }

// Release does nothing.
func (Unlimited) Release(string) {}

// DefaultTimeScale stretches the emulated model's device time into wall
// time. The model is tiny — under a million parameters and a few thousand
// FLOPs per example, where a production recommendation model has billions
// and hundreds of millions — so its modelled steps on TPU v4 chips take tens
// of nanoseconds. Stretched a million times they take tens of milliseconds,
// well above what the emulator's CPU needs to compute them, so the
// step-time model, not the CPU running the emulation, decides step time and
// Program Goodput (steptime package doc).
const DefaultTimeScale = 1e6

// Faults are fault-injection hooks for tests and demos.
type Faults struct {
	// NaNAtStep poisons the model before global step NaNAtStep (counted
	// over the controller process's life, once), so that step's loss is NaN
	// and the controller places a permanent hold (paper VI.A).
	NaNAtStep uint64
}

// Bucket is what a job needs of object storage: its checkpoints
// (checkpoint.Bucket) and, when RunJob serves it from readers in process,
// the reads of blocks (objstore.Reader). *objstore.Store is one.
type Bucket interface {
	checkpoint.Bucket
	objstore.Reader
}

// ControllerConfig configures a Controller. Zero fields take defaults
// (EnsureDefaults); Client, Pipeline, SIG (or SigdAddr) and Store are
// required.
type ControllerConfig struct {
	// Job names the training job in goodput reports and sigd's operator
	// overview. Default: the pipeline.
	Job string
	// Client and Pipeline identify the pipeline in SIG.
	Client, Pipeline string
	// Graph, when set, is submitted to SIG at setup (SubmitGraph, DSL text),
	// so the job registers its own pipeline; otherwise the pipeline must
	// have been submitted already. Priority goes with it.
	Graph    string
	Priority int32
	// RawSource is the raw event source ("ads" when empty).
	RawSource string
	// From and To bound the event range in microseconds since the epoch
	// ([From, To)); To 0 follows the stream without end.
	From, To int64

	// SIG is the SIG service; nil dials SigdAddr with Token.
	SIG sigv1.SIGClient
	// FeatureStats is the statistics store of feedback-directed
	// partitioning (paper V.C), served by sigd; nil uses the connection to
	// SigdAddr, or none when SIG is given without it (then the job neither
	// reads nor publishes statistics).
	FeatureStats sigv1.FeatureStatsClient
	SigdAddr     string
	Token        string
	TLS          bool
	// Store holds checkpoints (checkpoints/<pipeline>/...) and, for
	// RunJob's in-process readers, the blocks they read.
	Store Bucket
	// KafkaBrokers, when set, are watched for sig.memo.ready completion
	// events during a transient hold (besides WatchReadSolution).
	KafkaBrokers []string
	// Readers are the reader addresses handed to hosts.
	Readers []string

	// Hosts is the number of TPU host workers of the slice. Default 1.
	Hosts int
	// Chips and CaughtUpChips size the slice per phase (paper III.A).
	// Defaults 4 and 1.
	Chips, CaughtUpChips int
	// EpochUnits and CaughtUpEpochUnits: work units (blocks) per epoch.
	// Defaults 4 and 1.
	EpochUnits, CaughtUpEpochUnits int
	// Follow keeps the caught-up job waiting for new blocks.
	Follow bool
	// Retrain is what the controller does with a block that changed after
	// it was trained (control.RetrainPolicy; default RetrainChanged).
	Retrain control.RetrainPolicy
	// CaughtUpInputs is how caught-up training reads its inputs:
	// CaughtUpSIG (the default) reads a memoized block whenever it is
	// ready at the epoch's snapshot and computes locally only what is
	// pending, per input per block; CaughtUpLIG computes every input
	// locally, as the paper's caught-up training does (IV.B).
	CaughtUpInputs CaughtUpInputs
	// MaxAttempts of one epoch before a permanent hold. Default 5.
	MaxAttempts int

	// BatchSize is the per-host batch; a step trains Hosts × BatchSize
	// examples. Default 256.
	BatchSize int
	// BufferExamples is each host's buffer capacity, at least BatchSize.
	// Default 8 × BatchSize.
	BufferExamples int
	// InFlight bounds the work units a host keeps in flight, scaled by
	// buffer fullness (paper IV.B). Defaults 1 and 8.
	InFlight buffer.Scaling
	// Credits is how many batches a host may send ahead of the steps.
	// Default 2.
	Credits int
	// ReadBatchRows is the reader's record batch size. Default 1024.
	ReadBatchRows int
	// LabelColumn is the raw column trained as the label. Default "click".
	LabelColumn string

	// Model: embedding vocabulary and width, hidden width, learning rates,
	// seed (model.Config defaults).
	Vocab                               int64
	Dim, Hidden                         int
	LearningRate, EmbeddingLearningRate float64
	Seed                                uint64
	// Device is the emulated chip and step-time model (steptime): chip
	// peak and bandwidth, serialized or pipelined execution (pipelined also
	// makes the model apply embedding gradients one step stale, paper V.C),
	// the contention factor, the lookup and shard overheads (which the
	// partitioner prices too), and the time scale. Device.Chips is ignored
	// (the phase decides). Device.TimeScale defaults to DefaultTimeScale.
	Device steptime.Model
	// ProfileRate is the fraction of steps whose batches are profiled for
	// feedback-directed partitioning (trainer/embedding/fdp; paper V.C: 3%). Default
	// fdp.DefaultRate; negative disables profiling.
	ProfileRate float64
	// HBMBytesPerChip bounds the embedding tables per chip for the
	// partitioner; too small is out of memory, a permanent hold. Default
	// 32 GiB.
	HBMBytesPerChip int64
	// CompileTime is how long compiling a slice takes (wall time). Default
	// 50ms.
	CompileTime time.Duration

	// ParameterServers, when it names servers, holds the embedding tables
	// in the caught-up phase (paper III.B; trainer/embedding/paramservers):
	// at the switch they move from the slice onto that many `trainer ps`
	// processes, which the controller starts with the job and restarts if
	// one dies. Zero keeps them on the slice in both phases. Its Client
	// and Token default to the job's: servers the job starts admit only a
	// secret the job makes for them, servers run by hand (Addrs) are
	// called with Token.
	ParameterServers paramservers.Config

	// Allocator hands out chips. Default Unlimited.
	Allocator Allocator
	// FleetChips is the capacity the goodput report's fleet scheduling
	// goodput is taken over. Default max(Chips, CaughtUpChips).
	FleetChips int
	// Recorder, when set, is a goodput recorder shared by the jobs of one
	// fleet (its capacity is the fleet's): each controller records its job
	// into it, and any job's Report.Goodput then covers the whole fleet.
	// Default: a recorder of FleetChips for this job alone.
	Recorder *goodput.Recorder

	// Tokens authenticate the controller's gRPC service; nil disables
	// authentication (in-process use).
	Tokens *auth.Tokens
	// Registry receives the trainer's metrics; nil registers none.
	Registry prometheus.Registerer
	// StatusInterval is how often status goes to sigd
	// (ReportTrainerStatus). Default 5s; negative disables.
	StatusInterval time.Duration
	// HoldPollInterval re-reads the read solution during a transient hold
	// in case a completion event was missed. Default 10s.
	HoldPollInterval time.Duration
	// HoldAfter keeps the slice, stalled, for up to this long when the
	// next epoch's block is pending in SIG, before a transient hold
	// releases it (trainer/control, "Stalls on SIG"; `--hold-after`).
	// Zero: the hold at once.
	HoldAfter time.Duration
	// ExplainInterval is how often, while the job stalls on SIG, the
	// controller asks sigd why the entries it waits on are not ready
	// (ExplainPending; stalls.go). Default 1s.
	ExplainInterval time.Duration
	// GoodputJournalInterval is how often, between checkpoints, the
	// controller writes its job's goodput history to the pipeline's journal
	// (checkpoint.Store.PutJournal), so that a controller restarted after
	// a crash knows what the crash cost (doc.go, "Goodput"). It is also
	// written after every commit and at exit. Default 1s; negative
	// disables the journal (a restart then accounts from the last
	// checkpoint's history alone).
	GoodputJournalInterval time.Duration
	// Tick drives deadlines and retries. Default 100ms.
	Tick time.Duration
	// RetryDelay before retrying failed setup, checkpoint loads and the
	// like. Default 1s.
	RetryDelay time.Duration

	Faults Faults
	Clock  clock.Clock
	Logger *slog.Logger
}

// EnsureDefaults fills zero fields.
func (c *ControllerConfig) EnsureDefaults() {
	if c.Job == "" {
		c.Job = c.Pipeline
	}
	if c.RawSource == "" {
		c.RawSource = "ads"
	}
	if c.Hosts <= 0 {
		c.Hosts = 1
	}
	if c.Chips <= 0 {
		c.Chips = 4
	}
	if c.CaughtUpChips <= 0 {
		c.CaughtUpChips = 1
	}
	if c.EpochUnits <= 0 {
		c.EpochUnits = 4
	}
	if c.CaughtUpEpochUnits <= 0 {
		c.CaughtUpEpochUnits = 1
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 256
	}
	if c.BufferExamples <= 0 {
		c.BufferExamples = 8 * c.BatchSize
	}
	c.InFlight.EnsureDefaults()
	if c.Credits <= 0 {
		c.Credits = 2
	}
	if c.ReadBatchRows <= 0 {
		c.ReadBatchRows = 1024
	}
	if c.LabelColumn == "" {
		c.LabelColumn = "click"
	}
	if c.ProfileRate == 0 {
		c.ProfileRate = fdp.DefaultRate
	}
	if c.HBMBytesPerChip <= 0 {
		c.HBMBytesPerChip = 32 << 30
	}
	if c.CompileTime <= 0 {
		c.CompileTime = 50 * time.Millisecond
	}
	if c.Allocator == nil {
		c.Allocator = Unlimited{}
	}
	if c.FleetChips <= 0 {
		c.FleetChips = max(c.Chips, c.CaughtUpChips)
	}
	if c.StatusInterval == 0 {
		c.StatusInterval = 5 * time.Second
	}
	if c.HoldPollInterval <= 0 {
		c.HoldPollInterval = 10 * time.Second
	}
	if c.ExplainInterval <= 0 {
		c.ExplainInterval = time.Second
	}
	if c.GoodputJournalInterval == 0 {
		c.GoodputJournalInterval = time.Second
	}
	if c.Tick <= 0 {
		c.Tick = 100 * time.Millisecond
	}
	if c.RetryDelay <= 0 {
		c.RetryDelay = time.Second
	}
	// The parameter servers' token (paramservers.Config): servers the job
	// starts admit a secret of its own, naming its client; servers run by
	// hand are called with the job's trainer token.
	if c.ParameterServers.Client == "" {
		c.ParameterServers.Client = c.Client
	}
	if c.ParameterServers.Token == "" {
		c.ParameterServers.Token = c.Token
	}
	if c.Device.TimeScale <= 0 {
		c.Device.TimeScale = DefaultTimeScale
	}
	c.Device.EnsureDefaults()
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// validate checks what has no default.
func (c *ControllerConfig) validate() error {
	var errs []error
	if c.Client == "" || c.Pipeline == "" {
		errs = append(errs, errors.New("client and pipeline are required"))
	}
	if c.SIG == nil && c.SigdAddr == "" {
		errs = append(errs, errors.New("a SIG client or sigd address is required"))
	}
	if c.Store == nil {
		errs = append(errs, errors.New("an object store for checkpoints is required"))
	}
	if c.To != 0 && c.To <= c.From {
		errs = append(errs, fmt.Errorf("empty event range [%d, %d)", c.From, c.To))
	}
	// sigd refuses a range outside the event times it stores; say so
	// before dialing, in the flags' terms.
	if err := transform.CheckEventTime(c.From); err != nil {
		errs = append(errs, fmt.Errorf("event range start: %w", err))
	}
	if c.To > transform.EndEventTime {
		errs = append(errs, fmt.Errorf("event range end %d is past %s, the end of the event times SIG stores", c.To, transform.FormatMicros(transform.EndEventTime)))
	}
	if err := c.ParameterServers.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.BufferExamples < c.BatchSize {
		errs = append(errs, fmt.Errorf("host buffer of %d examples cannot hold a batch of %d", c.BufferExamples, c.BatchSize))
	}
	if c.FleetChips < max(c.Chips, c.CaughtUpChips) {
		errs = append(errs, fmt.Errorf("fleet of %d chips cannot hold a slice of %d", c.FleetChips, max(c.Chips, c.CaughtUpChips)))
	}
	return errors.Join(errs...)
}

func (c *ControllerConfig) machineConfig() control.Config {
	return control.Config{Hosts: c.Hosts, EpochUnits: c.EpochUnits, CaughtUpEpochUnits: c.CaughtUpEpochUnits,
		Chips: c.Chips, CaughtUpChips: c.CaughtUpChips, MaxAttempts: c.MaxAttempts, RetryDelay: c.RetryDelay,
		Follow: c.Follow || c.To == 0, Retrain: c.Retrain, HoldAfter: c.HoldAfter}
}

// CaughtUpInputs is how the caught-up phase reads its inputs.
type CaughtUpInputs int

const (
	// CaughtUpSIG: memoized blocks where ready, local generation where
	// pending (issue 21: the head of the stream never waits for SIG).
	CaughtUpSIG CaughtUpInputs = iota
	// CaughtUpLIG: local input generation for every input (paper IV.B).
	CaughtUpLIG
)

func (m CaughtUpInputs) String() string {
	if m == CaughtUpLIG {
		return "lig"
	}
	return "sig"
}

// ParseCaughtUpInputs reads "sig" (or "") or "lig".
func ParseCaughtUpInputs(s string) (CaughtUpInputs, error) {
	switch s {
	case "sig", "":
		return CaughtUpSIG, nil
	case "lig":
		return CaughtUpLIG, nil
	}
	return 0, fmt.Errorf("caught-up inputs %q: want sig or lig", s)
}

// endMicros is the range's end; an open range ends far in the future.
func (c *ControllerConfig) endMicros() int64 {
	if c.To == 0 {
		return time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	}
	return c.To
}
