package run

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/fleet/gen"
	"github.com/sigdata/sig/fleet/results"
	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/reader"
	"github.com/sigdata/sig/transform"
	evgen "github.com/sigdata/sig/warehouse/gen"
	"github.com/sigdata/sig/warehouse/ingest"
	"github.com/sigdata/sig/warehouse/record"
)

// Config is a fleet run; zero fields take the defaults (EnsureDefaults).
type Config struct {
	// Fleet is the generator's configuration.
	Fleet gen.Config
	// RowsPerBlock events make a raw block (sigd --rows-per-block); a
	// slot is BlocksPerSlot blocks. Defaults 10000 and 2.
	RowsPerBlock  int
	BlocksPerSlot int
	// SigdBin and ReaderBin are the sigd and reader binaries. Required.
	SigdBin, ReaderBin string
	// Dir holds sigd's data; empty: a temporary directory, removed after.
	Dir string
	// WorkersMax bounds the `sigd worker` processes (default 2), each of
	// WorkerConcurrency workers (default 1); ReadConcurrency units of a
	// pipeline are read at once (default 2).
	WorkersMax, WorkerConcurrency, ReadConcurrency int
	// SigdArgs and WorkerArgs are extra flags for `sigd dev` and each
	// `sigd worker` (sigctl fleet --sigd-flag, --worker-flag), for runs
	// that compare a setting (--repack=false, --batch-tasks 1); the
	// results record them.
	SigdArgs, WorkerArgs []string
	// SIGReaderArgs are extra flags for the SIG reader (sigctl fleet
	// --sig-reader-flag; e.g. --guard-sample-rows=0), recorded too.
	SIGReaderArgs []string
	// Constants are the modelled inputs of Table I and Figure 6
	// (default results.DefaultConstants()).
	Constants *results.Constants
	// Progress receives a line per epoch and every ProgressEvery (default
	// 15s) within one; nil: none.
	Progress      io.Writer
	ProgressEvery time.Duration
}

// EnsureDefaults fills zero fields.
func (c *Config) EnsureDefaults() {
	c.Fleet = c.Fleet.EnsureDefaults()
	if c.RowsPerBlock == 0 {
		c.RowsPerBlock = 10_000
	}
	if c.BlocksPerSlot == 0 {
		c.BlocksPerSlot = 2
	}
	if c.WorkersMax == 0 {
		c.WorkersMax = 2
	}
	if c.WorkerConcurrency == 0 {
		c.WorkerConcurrency = 1
	}
	if c.ReadConcurrency == 0 {
		c.ReadConcurrency = 2
	}
	if c.Constants == nil {
		k := results.DefaultConstants()
		c.Constants = &k
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.ProgressEvery == 0 {
		c.ProgressEvery = 15 * time.Second
	}
}

// Validate reports a configuration that cannot run, naming the setting.
func (c *Config) Validate() error {
	var errs []error
	if err := c.Fleet.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.RowsPerBlock < 10 || c.RowsPerBlock > 10_000_000 {
		errs = append(errs, fmt.Errorf("rows-per-block %d: want 10 to 10000000", c.RowsPerBlock))
	}
	if c.BlocksPerSlot < 1 || c.BlocksPerSlot > 1000 {
		errs = append(errs, fmt.Errorf("blocks-per-slot %d: want 1 to 1000", c.BlocksPerSlot))
	}
	if c.WorkersMax < 1 || c.WorkerConcurrency < 1 || c.ReadConcurrency < 1 {
		errs = append(errs, fmt.Errorf("workers-max %d, worker-concurrency %d, read-concurrency %d: each at least 1",
			c.WorkersMax, c.WorkerConcurrency, c.ReadConcurrency))
	}
	for _, b := range []struct{ flag, path string }{{"sigd", c.SigdBin}, {"reader", c.ReaderBin}} {
		if b.path == "" {
			errs = append(errs, fmt.Errorf("no %s binary", b.flag))
		} else if _, err := exec.LookPath(b.path); err != nil {
			errs = append(errs, fmt.Errorf("%s binary: %w (make build puts it in bin/)", b.flag, err))
		}
	}
	return errors.Join(errs...)
}

// Run runs the fleet on a real SIG and measures it (doc.go).
func Run(ctx context.Context, cfg Config) (*results.Results, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	f, err := gen.Generate(cfg.Fleet)
	if err != nil {
		return nil, err
	}
	dir := cfg.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "sig-fleet-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
	}
	r := &runner{cfg: &cfg, f: f, ledger: gen.NewLedger(), pairCost: map[[2]string]float64{},
		res: &results.Results{Schema: results.SchemaVersion, Started: time.Now().UTC(), Fleet: f.Config,
			Constants: *cfg.Constants, Machine: machine()}}
	r.progress("fleet: %d pipelines over %d clients, %d epochs, %d components in the population; %d slots of %d blocks of %d rows",
		len(f.Pipelines), len(f.Clients), f.Config.Epochs, len(f.Components), f.Slots(), cfg.BlocksPerSlot, cfg.RowsPerBlock)
	r.sys, err = startSystem(ctx, &cfg, dir)
	if err != nil {
		return nil, err
	}
	defer r.sys.stop()
	actx, stopScale := context.WithCancel(ctx)
	scaleErrs := make(chan error, 1)
	var scaling sync.WaitGroup
	scaling.Add(1)
	go func() { defer scaling.Done(); r.sys.autoscale(actx, scaleErrs) }()
	defer func() { stopScale(); scaling.Wait() }()
	r.scaleErrs = scaleErrs

	if err := r.ingest(ctx); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, r.sys.logs())
	}
	if err := r.keys(); err != nil {
		return nil, err
	}
	if err := r.timeline(ctx); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, r.sys.logs())
	}
	if err := r.finish(ctx); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, r.sys.logs())
	}
	return r.res, nil
}

type runner struct {
	cfg       *Config
	f         *gen.Fleet
	sys       *system
	res       *results.Results
	ledger    *gen.Ledger
	scaleErrs chan error

	start      time.Time // event time of slot 0
	slotBlocks [][]string
	compKeys   [][]string // per pipeline, its distinct component keys (hex)
	pairCost   map[[2]string]float64
	began      time.Time
	lastNote   time.Time
}

func (r *runner) progress(format string, args ...any) {
	fmt.Fprintf(r.cfg.Progress, format+"\n", args...)
}

// slotMicros is the event time where slot j starts.
func (r *runner) slotMicros(j int) int64 {
	w := int64(r.cfg.RowsPerBlock * r.cfg.BlocksPerSlot)
	return r.start.Add(time.Duration(int64(j)*w) * time.Second).UnixMicro()
}

// ingest generates the fleet's events into Kafka and waits until sigd has
// ingested them into BlocksPerSlot blocks per slot.
func (r *runner) ingest(ctx context.Context) error {
	cfg := r.cfg
	w := int64(cfg.RowsPerBlock * cfg.BlocksPerSlot)
	// Windows are aligned to the Unix epoch: start on a window boundary.
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	r.start = time.Unix((base+w-1)/w*w, 0).UTC()
	n := r.f.Slots() * cfg.BlocksPerSlot * cfg.RowsPerBlock
	rc := &r.res.Run
	rc.RowsPerBlock, rc.BlocksPerSlot, rc.Slots, rc.Events = cfg.RowsPerBlock, cfg.BlocksPerSlot, r.f.Slots(), int64(n)
	rc.WorkersMax, rc.WorkerConcurrency, rc.ReadConcurrency = cfg.WorkersMax, cfg.WorkerConcurrency, cfg.ReadConcurrency
	rc.SigdArgs, rc.WorkerArgs, rc.SIGReaderArgs = cfg.SigdArgs, cfg.WorkerArgs, cfg.SIGReaderArgs
	rc.CPUSource = "per process, user+system: the kernel's CPU clock of the pid (clock_gettime of clock_getcpuclockid, getrusage's accounting, checked against /proc/<pid>/stat at the end), Wait4's rusage for worker processes that exited"
	r.progress("ingest: %d events into %d slots (sigd window %ds, %d rows per block)", n, r.f.Slots(), w, cfg.RowsPerBlock)
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.sys.brokers...), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		return err
	}
	g := evgen.New(evgen.Config{Seed: r.f.Config.Seed + 1, Start: r.start, EventsPerSecond: 1, LateFraction: -1})
	err = g.Produce(ctx, cl, ingest.TopicFor("ads"), n, record.ContentTypeRow)
	cl.Close()
	if err != nil {
		return err
	}
	want := r.f.Slots() * cfg.BlocksPerSlot
	deadline := time.Now().Add(10 * time.Minute)
	var blocks []*sigv1.RawBlock
	for {
		if blocks, err = r.listBlocks(ctx); err != nil {
			return err
		}
		var rows int64
		for _, b := range blocks {
			rows += b.Rows
		}
		if len(blocks) >= want && rows >= int64(n) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ingestion stalled at %d of %d events in %d blocks", rows, n, len(blocks))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	// Each slot's blocks, by their events' times (the catalog's rows, not
	// sigd's range walk: the Ledger's count is independent of it).
	r.slotBlocks = make([][]string, r.f.Slots())
	for _, b := range blocks {
		ev := b.GetEvents()
		j := int((ev.GetStartMicros() - r.slotMicros(0)) / (w * 1e6))
		if j < 0 || j >= len(r.slotBlocks) || ev.GetEndMicros() > r.slotMicros(j+1) {
			return fmt.Errorf("block %s [%d, %d) is in no slot", b.BlockId, ev.GetStartMicros(), ev.GetEndMicros())
		}
		r.slotBlocks[j] = append(r.slotBlocks[j], b.BlockId)
	}
	for j, bs := range r.slotBlocks {
		if len(bs) != cfg.BlocksPerSlot {
			return fmt.Errorf("slot %d has %d blocks, want %d", j, len(bs), cfg.BlocksPerSlot)
		}
	}
	rc.Blocks = len(blocks)
	r.progress("ingest: %d blocks in the catalog", len(blocks))
	return nil
}

func (r *runner) listBlocks(ctx context.Context) ([]*sigv1.RawBlock, error) {
	var out []*sigv1.RawBlock
	tok := ""
	for {
		resp, err := r.sys.sig.ListBlocks(ctx, &sigv1.ListBlocksRequest{Source: "ads", PageToken: tok})
		if err != nil {
			return nil, err
		}
		out = append(out, resp.Blocks...)
		if tok = resp.NextPageToken; tok == "" {
			return out, nil
		}
	}
}

// keys canonicalizes every pipeline's graph: its distinct component keys
// are what the Ledger counts (canon, not sigd).
func (r *runner) keys() error {
	s := transform.AdsSchema()
	for _, p := range r.f.Pipelines {
		g, _, err := transform.ParseAndCheck([]byte(p.DSL), p.Name, s, transform.Default(), transform.Limits{})
		if err != nil {
			return err
		}
		c, err := canon.Canonicalize(g, s, transform.Default(), transform.Limits{})
		if err != nil {
			return err
		}
		var ks []string
		for _, comp := range c.Components {
			ks = append(ks, comp.Key.String())
		}
		r.compKeys = append(r.compKeys, ks)
	}
	return nil
}

// blocksOf lists the blocks of slots [from, to).
func (r *runner) blocksOf(from, to int) []string {
	var out []string
	for j := from; j < to; j++ {
		out = append(out, r.slotBlocks[j]...)
	}
	return out
}

// timeline submits every step in order, each memoized whole and then
// read in SIG mode and in LIG mode before the next is submitted: one
// thing happens at a time, so each process's CPU delta around a phase is
// that phase's, MinIO's included (the workers', the SIG reader's and the
// LIG reader's storage).
func (r *runner) timeline(ctx context.Context) error {
	steps := r.f.Steps()
	for i := range r.f.Pipelines {
		p := &r.f.Pipelines[i]
		r.res.Pipelines = append(r.res.Pipelines, results.Pipeline{Pipeline: p.Client + "/" + p.Name, Inputs: len(r.compKeys[i]),
			Priority: p.Priority, Arrive: p.Arrive, Retire: p.Retire})
	}
	r.res.Steps = make([]results.Step, len(steps))
	sigClient, err := reader.NewClient(reader.ClientConfig{Addresses: []string{r.sys.sigAddr}, Token: r.sys.operator})
	if err != nil {
		return err
	}
	defer sigClient.Close()
	ligClient, err := reader.NewClient(reader.ClientConfig{Addresses: []string{r.sys.ligAddr}, Token: r.sys.operator})
	if err != nil {
		return err
	}
	defer ligClient.Close()

	r.began, r.lastNote = time.Now(), time.Now()
	for i, st := range steps {
		select {
		case err := <-r.scaleErrs:
			return err
		default:
		}
		if err := r.submit(ctx, i, st); err != nil {
			return err
		}
		if err := r.read(ctx, sigClient, ligClient, i, st); err != nil {
			return err
		}
		if i == len(steps)-1 || steps[i+1].Epoch != st.Epoch {
			if err := r.endEpoch(ctx, st.Epoch); err != nil {
				return err
			}
		} else if time.Since(r.lastNote) > r.cfg.ProgressEvery {
			r.lastNote = time.Now()
			r.progress("  epoch %d: step %d of %d, %s", st.Epoch, i+1, len(steps), time.Since(r.began).Round(time.Second))
		}
	}
	return nil
}

// submit submits one step and waits until its read solution is complete,
// counting the step with the Ledger and the workers' CPU meanwhile.
func (r *runner) submit(ctx context.Context, i int, st gen.Step) error {
	p := &r.f.Pipelines[st.Pipeline]
	name := p.Client + "/" + p.Name
	w0 := r.sys.workers.cpu()
	m0, err := r.sys.begin(ctx)
	if err != nil {
		return err
	}
	resp, err := r.sys.sig.SubmitGraph(ctx, &sigv1.SubmitGraphRequest{Client: p.Client, Pipeline: p.Name, Priority: p.Priority,
		Graph: &sigv1.GraphSpec{Spec: &sigv1.GraphSpec_Dsl{Dsl: p.DSL}},
		Range: &sigv1.EventRange{StartMicros: r.slotMicros(st.From), EndMicros: r.slotMicros(st.To)}})
	if err != nil {
		return fmt.Errorf("submit %s (epoch %d, %s): %w", name, st.Epoch, st.Phase, err)
	}
	lc := r.ledger.Submit(gen.Submission{Pipeline: name, Components: r.compKeys[st.Pipeline], Blocks: r.blocksOf(st.From, st.To)})
	added := r.ledger.Added()
	s := &r.res.Steps[i]
	s.Epoch, s.Pipeline, s.Phase = st.Epoch, name, st.Phase
	s.Sigd = results.Counts{Components: int(resp.Components), ComponentHits: int(resp.ComponentHits),
		Blocks: int(resp.BlockHits + resp.BlockMisses), BlockHits: int(resp.BlockHits)}
	s.Ledger = results.Counts(lc)
	s.TasksDone = int(resp.BlockMisses)
	if err := r.waitComplete(ctx, p); err != nil {
		return err
	}
	s.WorkerSeconds = (r.sys.workers.cpu() - w0).Seconds()
	m1, err := r.sys.end(ctx)
	if err != nil {
		return err
	}
	var worker results.Requests
	s.MinIOWorkerSeconds, worker = m1.since(m0)
	s.Store = &results.Sides{Worker: worker}
	// The step's worker CPU went to the pairs it computed: each gets an
	// equal part (components of one graph cost differently; the run does
	// not time tasks one by one).
	for _, pr := range added {
		r.pairCost[pr] = s.WorkerSeconds / float64(len(added))
	}
	return nil
}

// waitComplete polls a pipeline's read solution until every block is
// ready.
func (r *runner) waitComplete(ctx context.Context, p *gen.Pipeline) error {
	wait := 5 * time.Millisecond
	deadline := time.Now().Add(10 * time.Minute)
	for {
		sol, err := r.sys.sig.GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: p.Client, Pipeline: p.Name})
		if err != nil {
			return fmt.Errorf("read solution of %s/%s: %w", p.Client, p.Name, err)
		}
		if sol.BlocksFailed > 0 {
			return fmt.Errorf("%s/%s: %d blocks failed (quarantined)", p.Client, p.Name, sol.BlocksFailed)
		}
		if sol.Complete {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s/%s: %d blocks still pending after 10 minutes", p.Client, p.Name, sol.BlocksPending)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-r.scaleErrs:
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// read reads a step's units in SIG mode on the SIG reader and in LIG mode
// on the LIG reader, at once, each process's CPU delta its own, and
// compares the bytes unit by unit.
func (r *runner) read(ctx context.Context, sigClient, ligClient *reader.Client, i int, st gen.Step) error {
	p := &r.f.Pipelines[st.Pipeline]
	sol, err := r.sys.sig.GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: p.Client, Pipeline: p.Name,
		Range: &sigv1.EventRange{StartMicros: r.slotMicros(st.ReadFrom), EndMicros: r.slotMicros(st.To)}})
	if err != nil {
		return fmt.Errorf("read solution of %s/%s: %w", p.Client, p.Name, err)
	}
	if !sol.Complete {
		return fmt.Errorf("%s/%s: solution of [%d, %d) incomplete after its memoization", p.Client, p.Name, st.ReadFrom, st.To)
	}
	sigUnits, err := reader.UnitsFromSolution(sol, reader.UnitOptions{})
	if err != nil {
		return err
	}
	ligUnits, err := reader.UnitsFromSolution(sol, reader.UnitOptions{Mode: func(*sigv1.InputSolution, *sigv1.BlockRead) readerv1.InputMode {
		return readerv1.InputMode_INPUT_MODE_LOCAL
	}})
	if err != nil {
		return err
	}
	// One side after the other: MinIO's CPU and the requests it served
	// meanwhile are that side's.
	m0, err := r.sys.begin(ctx)
	if err != nil {
		return err
	}
	sig := r.readAll(ctx, sigClient, sigUnits, r.sys.sigReader)
	m1, err := r.sys.end(ctx)
	if err != nil {
		return err
	}
	m2, err := r.sys.begin(ctx)
	if err != nil {
		return err
	}
	lig := r.readAll(ctx, ligClient, ligUnits, r.sys.ligReader)
	m3, err := r.sys.end(ctx)
	if err != nil {
		return err
	}
	if err := errors.Join(sig.err, lig.err); err != nil {
		return fmt.Errorf("reading %s/%s: %w", p.Client, p.Name, err)
	}
	for u := range sigUnits {
		if sig.hashes[u] != lig.hashes[u] || sig.rows != lig.rows {
			return fmt.Errorf("%s: SIG and LIG sent different bytes", sigUnits[u].UnitId)
		}
	}
	s := &r.res.Steps[i]
	s.Examples, s.SIGSeconds, s.LIGSeconds = sig.rows, sig.cpu, lig.cpu
	s.Units = len(sigUnits)
	s.MinIOSIGSeconds, s.Store.SIGReader = m1.since(m0)
	s.MinIOLIGSeconds, s.Store.LIGReader = m3.since(m2)
	reads := results.Reads{Units: len(sigUnits), Examples: sig.rows, SIGSeconds: sig.cpu, LIGSeconds: lig.cpu}
	pr := &r.res.Pipelines[st.Pipeline]
	if st.Phase == gen.Initial {
		pr.Initial = pr.Initial.Add(reads)
	} else {
		pr.CaughtUp = pr.CaughtUp.Add(reads)
	}
	return nil
}

type readAll struct {
	hashes [][32]byte
	rows   int64
	cpu    float64
	err    error
}

// readAll reads units through c, ReadConcurrency at a time, hashing each
// unit's bytes, and returns the reader process's CPU delta around them.
func (r *runner) readAll(ctx context.Context, c *reader.Client, units []*readerv1.WorkUnit, pr *proc) readAll {
	out := readAll{hashes: make([][32]byte, len(units))}
	c0 := pr.cpu()
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan int)
	for range r.cfg.ReadConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range next {
				h := sha256.New()
				var rows int64
				var err error
				for b, berr := range c.ReadBatches(ctx, units[u]) {
					if berr != nil {
						err = berr
						break
					}
					h.Write(b.IPC)
					rows += b.Record.NumRows()
				}
				mu.Lock()
				if err != nil && out.err == nil {
					out.err = fmt.Errorf("unit %s: %w", units[u].UnitId, err)
				}
				copy(out.hashes[u][:], h.Sum(nil))
				out.rows += rows
				mu.Unlock()
			}
		}()
	}
	for u := range units {
		next <- u
	}
	close(next)
	wg.Wait()
	out.cpu = (pr.cpu() - c0).Seconds()
	return out
}

// endEpoch records an epoch: its counts, and the cumulative CPU and
// reuse once every step of it is read.
func (r *runner) endEpoch(ctx context.Context, e int) error {
	ep := results.Epoch{Epoch: e, Active: r.f.Active(e), WallSeconds: time.Since(r.began).Seconds()}
	for _, p := range r.f.Pipelines {
		if p.Arrive <= e {
			ep.Submitted++
		}
	}
	for _, s := range r.res.Steps {
		if s.Epoch != e || s.Pipeline == "" {
			continue
		}
		if s.Phase == gen.Initial {
			ep.Initial = ep.Initial.Add(s.Sigd)
		} else {
			ep.CaughtUp = ep.CaughtUp.Add(s.Sigd)
		}
	}
	ep.Cumulative = r.cpuNow()
	st, err := r.sys.sig.Stats(ctx, &sigv1.StatsRequest{})
	if err != nil {
		return err
	}
	ep.ReuseMean, ep.ReuseMax = st.PipelinesPerBlockMean, int(st.PipelinesPerBlockMax)
	r.res.Epochs = append(r.res.Epochs, ep)
	c := ep.Cumulative
	r.progress("epoch %d/%d: %d pipelines submitted (%d active); block hit rate %.1f%% (initial %.1f%%, caught-up %.1f%%); reuse mean %.2f max %d; CPU SIG %.1fs (workers %.1f + readers %.1f) LIG %.1fs, SIG/LIG %.3f; %s",
		e+1, r.f.Config.Epochs, ep.Submitted, ep.Active, 100*ep.All().BlockHitRate(), 100*ep.Initial.BlockHitRate(),
		100*ep.CaughtUp.BlockHitRate(), ep.ReuseMean, ep.ReuseMax, c.SIG(), c.Worker, c.SIGReader, c.LIG(), c.Ratio(),
		time.Since(r.began).Round(time.Second))
	r.lastNote = time.Now()
	return nil
}

// cpuNow reads every process's CPU and the examples read so far.
func (r *runner) cpuNow() results.CPU {
	var c results.CPU
	c.Worker, c.SIGReader, c.LIGReader, c.Sigd, c.MinIO = r.sys.cpu()
	for _, s := range r.res.Steps {
		c.Examples += s.Examples
		c.MinIOWorker += s.MinIOWorkerSeconds
		c.MinIOSIGReader += s.MinIOSIGSeconds
		c.MinIOLIGReader += s.MinIOLIGSeconds
	}
	return c
}

// finish takes the end-of-run measurements, checks sigd against the
// Ledger and the plan, and computes the figures.
func (r *runner) finish(ctx context.Context) error {
	res := r.res
	res.CPU = r.cpuNow()
	res.Checks = append(res.Checks, r.checkClocks())
	st, err := r.sys.sig.Stats(ctx, &sigv1.StatsRequest{})
	if err != nil {
		return err
	}
	var h []int64
	for _, n := range st.MemoBlocksByPipelines {
		h = append(h, int64(n))
	}
	pairs, users := r.ledger.Users()
	res.Reuse = results.Reuse{Sigd: results.NewDistribution(h), Ledger: results.NewDistribution(gen.Histogram(users)),
		Pipelines: int(st.Pipelines), Active: r.f.Active(r.f.Config.Epochs - 1)}
	res.SteadyState = results.NewSteadyState(res.Epochs)
	res.HitRates, res.Amortization = results.NewHitRates(res.Epochs), results.NewAmortization(res.Epochs)
	if res.ReuseSweep, err = results.NewReuseSweep(r.f.Config); err != nil {
		return err
	}

	// Checks: sigd's accounting against the Ledger's, submission by
	// submission, and the reuse distribution; the whole run against
	// the plan the fleet implies (slots for blocks).
	var sigdAll, ledgerAll results.Counts
	bad := 0
	for _, s := range res.Steps {
		sigdAll, ledgerAll = sigdAll.Add(s.Sigd), ledgerAll.Add(s.Ledger)
		if s.Sigd != s.Ledger {
			if bad < 3 {
				res.Checks = append(res.Checks, results.Check{Name: "submission", Detail: fmt.Sprintf("%s (epoch %d): sigd %+v, ledger %+v", s.Pipeline, s.Epoch, s.Sigd, s.Ledger)})
			}
			bad++
		}
	}
	res.Checks = append(res.Checks, results.Check{Name: "sigd's component and block hits equal the Ledger's at every submission", OK: bad == 0,
		Detail: fmt.Sprintf("%d submissions, %d differ; block hits %d of %d (sigd), %d of %d (ledger)", len(res.Steps), bad,
			sigdAll.BlockHits, sigdAll.Blocks, ledgerAll.BlockHits, ledgerAll.Blocks)})
	okStats := st.Submits == uint64(len(res.Steps)) && st.BlockRequests == uint64(sigdAll.Blocks) &&
		math.Abs(st.BlockHitRate-sigdAll.BlockHitRate()) < 1e-9 && math.Abs(st.ComponentHitRate-sigdAll.ComponentHitRate()) < 1e-9
	res.Checks = append(res.Checks, results.Check{Name: "sigd's Stats hit rates are the sums of its answers", OK: okStats,
		Detail: fmt.Sprintf("Stats: %d submits, %d block requests, block hit rate %.6f, component hit rate %.6f", st.Submits,
			st.BlockRequests, st.BlockHitRate, st.ComponentHitRate)})
	res.Checks = append(res.Checks, results.Check{Name: "sigd's reuse distribution equals the Ledger's",
		OK:     fmt.Sprint(res.Reuse.Sigd.Histogram) == fmt.Sprint(res.Reuse.Ledger.Histogram) && len(pairs) == int(st.MemoBlocks),
		Detail: fmt.Sprintf("sigd: %d ready blocks, mean %.4f, max %d; ledger: %d pairs, mean %.4f, max %d", st.MemoBlocks, st.PipelinesPerBlockMean, st.PipelinesPerBlockMax, len(pairs), res.Reuse.Ledger.Mean, res.Reuse.Ledger.Max)})
	res.Checks = append(res.Checks, r.checkPlan())

	// Each pipeline's share of the workers' CPU.
	use := map[[2]string]int{}
	for k, p := range pairs {
		use[p] = users[k]
	}
	for i := range res.Pipelines {
		comps, blocks := r.ledger.Registered(res.Pipelines[i].Pipeline)
		for _, c := range comps {
			for _, b := range blocks {
				pr := [2]string{c, b}
				if n := use[pr]; n > 0 {
					res.Pipelines[i].WorkerShare += r.pairCost[pr] / float64(n)
				}
			}
		}
	}
	// The store's traffic: the phases' by side, and all it served since
	// it started.
	whole, err := r.sys.traffic(ctx)
	if err != nil {
		return err
	}
	res.Store = results.NewStore(storeSource, res.Steps, requests(whole))
	var rs results.ReaderSides
	if rs.SIG, err = readerCounts(ctx, r.sys.sigMetrics); err != nil {
		return err
	}
	if rs.LIG, err = readerCounts(ctx, r.sys.ligMetrics); err != nil {
		return err
	}
	res.Store.Readers = &rs
	res.Costs = results.NewCosts(res, results.Prices())
	res.TableI = results.NewTableI(res.Pipelines, res.Constants)
	res.Figure6 = results.NewFigure6(res.Pipelines, res.Constants)
	res.Targets = results.NewTargets(res)
	res.Finished = time.Now().UTC()
	res.Machine.LoadEnd = loadAvg()
	r.progress("done: %d submissions in %s; checks: %s", len(res.Steps), time.Since(r.began).Round(time.Second), checkSummary(res.Checks))
	return nil
}

// checkPlan compares sigd's answers, epoch by epoch, and its reuse with
// what the fleet implies by itself (gen.Plan: component names for keys,
// slots for blocks, so every block count is BlocksPerSlot times the
// plan's).
func (r *runner) checkPlan() results.Check {
	plan := r.f.Plan()
	k := r.cfg.BlocksPerSlot
	scale := func(c gen.Count) results.Counts {
		return results.Counts{Components: c.Components, ComponentHits: c.ComponentHits, Blocks: k * c.Blocks, BlockHits: k * c.BlockHits}
	}
	var diffs []string
	for i, e := range r.res.Epochs {
		pe := plan.Epochs[i]
		if e.Initial != scale(pe.Initial) || e.CaughtUp != scale(pe.CaughtUp) || e.Submitted != pe.Submitted {
			diffs = append(diffs, fmt.Sprintf("epoch %d: sigd %+v %+v, plan %+v %+v", e.Epoch, e.Initial, e.CaughtUp, scale(pe.Initial), scale(pe.CaughtUp)))
		}
	}
	var h []int64
	for _, c := range plan.Reuse {
		h = append(h, int64(k)*c)
	}
	if fmt.Sprint(h) != fmt.Sprint(r.res.Reuse.Sigd.Histogram) {
		diffs = append(diffs, "reuse histograms differ")
	}
	return results.Check{Name: "sigd's answers per epoch and its reuse equal the fleet's plan (gen.Plan)", OK: len(diffs) == 0,
		Detail: strings.Join(append(diffs, fmt.Sprintf("plan reuse mean %.4f max %d", plan.ReuseMean, plan.ReuseMax)), "; ")}
}

// checkClocks compares each live process's CPU clock with /proc/<pid>/stat
// (10 ms ticks): the two are the kernel's one accounting.
func (r *runner) checkClocks() results.Check {
	ok := true
	var parts []string
	pids := map[string]int{"sigd": r.sys.sigd.pid, "reader-sig": r.sys.sigReader.pid, "reader-lig": r.sys.ligReader.pid, "minio": r.sys.minio}
	for _, w := range r.sys.workers.all() {
		if !w.exited() {
			pids[w.name] = w.pid
		}
	}
	names := make([]string, 0, len(pids))
	for n := range pids {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c, err1 := cpuOf(pids[n])
		s, err2 := statCPU(pids[n])
		if err := errors.Join(err1, err2); err != nil {
			ok = false
			parts = append(parts, fmt.Sprintf("%s: %v", n, err))
			continue
		}
		d := (c - s).Abs()
		if d > 50*time.Millisecond+c/50 {
			ok = false
		}
		parts = append(parts, fmt.Sprintf("%s %.2fs/%.2fs", n, c.Seconds(), s.Seconds()))
	}
	return results.Check{Name: "CPU clocks agree with /proc/<pid>/stat", OK: ok, Detail: strings.Join(parts, ", ")}
}

func checkSummary(cs []results.Check) string {
	ok := 0
	var failed []string
	for _, c := range cs {
		if c.OK {
			ok++
		} else if c.Name != "submission" {
			failed = append(failed, c.Name)
		}
	}
	if len(failed) == 0 {
		return fmt.Sprintf("all %d passed", ok)
	}
	return fmt.Sprintf("%d passed, FAILED: %s", ok, strings.Join(failed, "; "))
}

func machine() results.Machine {
	m := results.Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), LoadStart: loadAvg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				if i := strings.IndexByte(l, ':'); i >= 0 {
					m.CPU = strings.TrimSpace(l[i+1:])
				}
				break
			}
		}
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	return m
}

// loadAvg is the 1, 5 and 15 minute load averages (nil where there is no
// /proc/loadavg).
func loadAvg() []float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	var l [3]float64
	if _, err := fmt.Sscan(string(b), &l[0], &l[1], &l[2]); err != nil {
		return nil
	}
	return l[:]
}
