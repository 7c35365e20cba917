package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/examples"
	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/internal/cli"
	"github.com/sigdata/sig/internal/units"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/trainer"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/gen"
	"github.com/sigdata/sig/warehouse/ingest"
	"github.com/sigdata/sig/warehouse/record"
)

func init() {
	commands.Register(cli.Command{Name: "demo", Usage: "[--events N] [--serve] [--data-dir D] [--fleet DIR]: the main job end to end on embedded defaults", Run: runDemo})
}

// fleetModel is one model of the demo fleet.
type fleetModel struct {
	name  string
	src   []byte
	canon *canon.Canonical
}

// loadFleet reads *.sig graphs from dir, or the embedded fleet when dir is
// empty.
func loadFleet(dir string, s *transform.Schema) ([]fleetModel, error) {
	var fsys fs.FS = examples.Fleet
	root := "fleet"
	if dir != "" {
		fsys, root = os.DirFS(dir), "."
	}
	names, err := fs.Glob(fsys, path.Join(root, "*.sig"))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no *.sig graphs in %s", dir)
	}
	sort.Strings(names)
	var models []fleetModel
	for _, n := range names {
		src, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		g, _, err := transform.ParseAndCheck(src, n, s, transform.Default(), transform.Limits{})
		if err != nil {
			return nil, err
		}
		c, err := canon.Canonicalize(g, s, transform.Default(), transform.Limits{})
		if err != nil {
			return nil, err
		}
		models = append(models, fleetModel{name: strings.TrimSuffix(path.Base(n), ".sig"), src: src, canon: c})
	}
	return models, nil
}

// printSharing prints which components the models of a fleet share.
func printSharing(w io.Writer, models []fleetModel) {
	type use struct {
		nodes int
		users []string
	}
	uses := map[canon.Key]*use{}
	var order []canon.Key
	inputs := 0
	for _, m := range models {
		for i := range m.canon.Components {
			comp := &m.canon.Components[i]
			inputs++
			u, ok := uses[comp.Key]
			if !ok {
				u = &use{nodes: len(comp.Nodes)}
				uses[comp.Key] = u
				order = append(order, comp.Key)
			}
			u.users = append(u.users, m.name+"."+comp.Input)
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return len(uses[order[i]].users) > len(uses[order[j]].users) })
	fmt.Fprintf(w, "Fleet: %d models, %d model inputs, %d distinct components\n\n", len(models), inputs, len(uses))
	tw := table(w, "COMPONENT\tNODES\tUSED BY")
	shared := 0
	for _, k := range order {
		u := uses[k]
		if len(u.users) > 1 {
			shared++
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", k.Short(), u.nodes, strings.Join(u.users, ", "))
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d components are shared. Per raw block, local input generation computes %d components; SIG computes %d (%.2fx less).\n",
		shared, inputs, len(uses), float64(inputs)/float64(len(uses)))
}

// demoEnv is a running sigd in development mode plus its clients.
type demoEnv struct {
	srv    *sigd.Server
	tokens map[string]string // principal name -> token
	conns  []*grpc.ClientConn
}

// client connects to sigd as the principal name (a development token).
func (d *demoEnv) client(name string) (sigv1.SIGClient, error) {
	tok, ok := d.tokens[name]
	if !ok {
		return nil, fmt.Errorf("no token for %s", name)
	}
	cc, err := cli.Dial(d.srv.Addr(), tok, false)
	if err != nil {
		return nil, err
	}
	d.conns = append(d.conns, cc)
	return sigv1.NewSIGClient(cc), nil
}

func (d *demoEnv) close() {
	for _, c := range d.conns {
		c.Close()
	}
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := commands.NewFlags("demo", stderr)
	dir := fs.String("fleet", "", "directory of *.sig model graphs (default: the embedded examples/fleet)")
	events := fs.Int("events", 300_000, "events to generate")
	serve := fs.Bool("serve", false, "keep sigd and its web UI running at the end (Ctrl-C stops)")
	dataDir := fs.String("data-dir", "", "sigd data directory (default: a temporary directory, removed at the end unless --serve)")
	verbose := fs.Bool("v", false, "show sigd's logs")
	pos, err := cli.ParseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if err := cli.NoArgs(pos); err != nil {
		return err
	}
	s := transform.AdsSchema()
	models, err := loadFleet(*dir, s)
	if err != nil {
		return err
	}
	step := func(n int, title string) { fmt.Fprintf(stdout, "\n== %d. %s\n", n, title) }
	step(1, "Canonicalize the fleet's transformation graphs and match their components")
	printSharing(stdout, models)

	step(2, "Start sigd in development mode (embedded MinIO from bin/ and a kfake Kafka cluster)")
	dd := *dataDir
	if dd == "" {
		dd, err = os.MkdirTemp("", "sig-demo-")
		if err != nil {
			return err
		}
		if !*serve {
			defer os.RemoveAll(dd)
		}
	}
	logw := io.Discard
	if *verbose {
		logw = stderr
	}
	srv, err := sigd.New(ctx, sigd.Config{DataDir: dd, Listen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0",
		WorkersMin: 1, WorkersMax: 4, TargetDrain: 5 * time.Second, ScaleDownCooldown: 10 * time.Second,
		Ingest: []string{"ads"}, RowsPerBlock: 25_000, SealAfter: 2 * time.Second, Window: time.Hour,
		Insertion: sigd.InsertionCost},
		sigd.Options{Logger: slog.New(slog.NewTextHandler(logw, nil))})
	if err != nil {
		return err
	}
	defer srv.Close()
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	ready := make(chan struct{})
	go func() { served <- srv.Serve(sctx, ready) }()
	defer func() { stop(); <-served }()
	select {
	case <-ready:
	case err := <-served:
		return err
	}
	cfg := srv.Config()
	env := &demoEnv{srv: srv, tokens: map[string]string{}}
	defer env.close()
	if err := env.loadTokens(cfg.TokensFile); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "sigd: gRPC %s, web UI http://%s/ui/, MinIO %s, Kafka %v, data %s\n",
		srv.Addr(), srv.HTTPAddr(), cfg.S3Endpoint, cfg.KafkaBrokers, dd)

	step(3, fmt.Sprintf("Generate %d Ads events into Kafka raw.ads and ingest them into warehouse blocks", *events))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	eps := float64(*events) / (2 * 3600) // two hourly windows
	if err := produce(ctx, cfg.KafkaBrokers, *events, start, eps); err != nil {
		return err
	}
	blocks, err := waitIngested(ctx, srv, int64(*events), stdout)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "ingested %d events into %d raw blocks; the catalog:\n", *events, blocks)
	if err := printCatalog(stdout, srv); err != nil {
		return err
	}
	from, to := start.UnixMicro(), start.Add(3*time.Hour).UnixMicro()

	step(4, "Submit every model's graph to sigd; misses become tasks for the autoscaled workers")
	fmt.Fprintln(stdout, "(sigd runs the cost-aware insertion policy; these models ask for the paper's, every input memoized whole; step 7 shows the policy)")
	// Each model belongs to a client (paper IV.A, "Prioritization"): the
	// development tokens have clients ctr, cvr, ranking and explore.
	clientOf := func(model string) string {
		for _, c := range []string{"ctr", "cvr", "ranking", "explore"} {
			if strings.HasPrefix(model, c) {
				return c
			}
		}
		return "explore"
	}
	prios := []int32{50, 10, 30, 20, 5}
	var pipes []demoPipe
	for i, m := range models {
		client := clientOf(m.name)
		sc, err := env.client(client)
		if err != nil {
			return err
		}
		resp, err := sc.SubmitGraph(ctx, &sigv1.SubmitGraphRequest{Client: client, Pipeline: m.name, Priority: prios[i%len(prios)],
			Range:   &sigv1.EventRange{StartMicros: from, EndMicros: to},
			Graph:   &sigv1.GraphSpec{Spec: &sigv1.GraphSpec_Dsl{Dsl: string(m.src)}},
			Memoize: memoizeAll(m)})
		if err != nil {
			return fmt.Errorf("submit %s: %w", m.name, err)
		}
		fmt.Fprintf(stdout, "%-10s client %-8s priority %3d: %d components (%d already cached), %d blocks ready, %d tasks enqueued\n",
			m.name, client, prios[i%len(prios)], resp.Components, resp.ComponentHits, resp.BlockHits, resp.TasksEnqueued)
		pipes = append(pipes, demoPipe{client: client, name: m.name, sc: sc})
	}

	step(5, "Workers memoize the components; watch the read solutions fill")
	op, err := env.client("operator")
	if err != nil {
		return err
	}
	if err := waitComplete(ctx, op, pipes, stdout); err != nil {
		return err
	}

	step(6, "Submit the fleet again (a second training run of every model): everything is a hit")
	var rc, rch, rb, rbh uint32
	for _, p := range pipes {
		m := modelByName(models, p.name)
		resp, err := p.sc.SubmitGraph(ctx, &sigv1.SubmitGraphRequest{Client: p.client, Pipeline: p.name + "-rerun", Priority: 1,
			Range:   &sigv1.EventRange{StartMicros: from, EndMicros: to},
			Graph:   &sigv1.GraphSpec{Spec: &sigv1.GraphSpec_Dsl{Dsl: string(m.src)}},
			Memoize: memoizeAll(m)})
		if err != nil {
			return err
		}
		rc, rch, rb, rbh = rc+resp.Components, rch+resp.ComponentHits, rb+resp.BlockHits+resp.BlockMisses, rbh+resp.BlockHits
	}
	fmt.Fprintf(stdout, "second run: %d/%d components and %d/%d blocks were hits\n", rch, rc, rbh, rb)
	st, err := op.Stats(ctx, &sigv1.StatsRequest{})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "overall hit rate: components %.1f%%, blocks %.1f%% over %d block requests from %d submits\n",
		100*st.ComponentHitRate, 100*st.BlockHitRate, st.BlockRequests, st.Submits)
	fmt.Fprintf(stdout, "reuse: %d memo blocks (%s) of %d components, used by %.2f pipelines on average (max %d)\n",
		st.MemoBlocks, units.Bytes(st.MemoBytes), st.Components, st.PipelinesPerBlockMean, st.PipelinesPerBlockMax)
	if *events > 0 {
		fmt.Fprintf(stdout, "storage: %.1f memo bytes per example (%s over %d events, every memoized component's column, stored narrow)\n",
			float64(st.MemoBytes)/float64(*events), units.Bytes(st.MemoBytes), *events)
	}
	fmt.Fprintf(stdout, "workers: %d tasks completed, %d quarantined; task latency p50 %.3fs p99 %.3fs\n",
		st.TasksCompleted, st.Quarantined, st.TaskLatencyP50Seconds, st.TaskLatencyP99Seconds)

	step(7, "Beyond the paper: memoize any subgraph, and only what is worth it (cost-aware insertion)")
	if err := demoCovers(ctx, env, op, from, to, stdout); err != nil {
		return err
	}

	step(8, "Train: each job's controller and TPU host workers read its work units through stateless readers")
	if err := demoTrain(ctx, env, pipes[:min(2, len(pipes))], from, to, dd, stdout); err != nil {
		return err
	}

	step(9, "An operator finds a faulty subgraph and evicts everything it produced")
	if err := demoEvict(ctx, op, pipes, stdout); err != nil {
		return err
	}

	if *serve {
		fmt.Fprintf(stdout, "\nsigd keeps running: web UI http://%s/ui/ (operator token in %s). Ctrl-C stops.\n", srv.HTTPAddr(), cfg.TokensFile)
		<-ctx.Done()
	}
	return nil
}

// memoizeAll asks for every model input of m memoized whole (the paper's
// insertion policy), whatever sigd's policy.
func memoizeAll(m fleetModel) map[string]string {
	out := map[string]string{}
	for _, c := range m.canon.Components {
		out[c.Input] = "always"
	}
	return out
}

// demoTrain runs a training job per pipeline, concurrently, and prints
// their loss, input stalls and goodput; the full reports go to files.
func demoTrain(ctx context.Context, env *demoEnv, pipes []demoPipe, from, to int64, dir string, w io.Writer) error {
	srv := env.srv
	type result struct {
		p   demoPipe
		rep trainer.Report
		err error
	}
	results := make(chan result, len(pipes))
	for _, p := range pipes {
		sc, err := env.client("trainer-" + p.client)
		if err != nil {
			return err
		}
		go func() {
			rep, err := trainer.RunJob(ctx, trainer.JobConfig{ControllerConfig: trainer.ControllerConfig{
				Job: p.name, Client: p.client, Pipeline: p.name, From: from, To: to,
				SIG: sc, Store: srv.Store(), KafkaBrokers: srv.Config().KafkaBrokers,
				Hosts: 2, Chips: 4, CaughtUpChips: 1, EpochUnits: 6, StatusInterval: time.Second,
			}})
			results <- result{p, rep, err}
		}()
	}
	var done []trainedJob
	var firstErr error
	for range pipes {
		r := <-results
		path := filepath.Join(dir, "trainer-"+r.p.name+".txt")
		if r.err == nil {
			r.err = writeReport(path, r.rep)
		}
		if r.err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("training %s: %w", r.p.name, r.err)
			}
			continue
		}
		done = append(done, trainedJob{r.rep, path})
	}
	sort.Slice(done, func(i, j int) bool { return done[i].rep.Job < done[j].rep.Job })
	printTraining(w, done)
	return firstErr
}

// trainedJob is a training run's report and where it was written.
type trainedJob struct {
	rep  trainer.Report
	path string
}

// printTraining prints a line per run: loss, input stall and goodput, each
// goodput figure named by its scope (the job's, as the web UI shows it, or
// its emulated fleet's); then why each job's PG is what it is.
func printTraining(w io.Writer, jobs []trainedJob) {
	tw := table(w, "JOB	EXIT	EPOCHS	EVENTS	STEPS	LOSS FIRST→LAST	INPUT STALL	SG (JOB)	RG	PG	MPG (JOB)	SG (FLEET)	MPG (FLEET)	REPORT")
	for _, j := range jobs {
		r := j.rep
		// The report's phases already average the first and last steps'
		// losses (every step, where the loss curve is thinned out).
		first, last := 0.0, 0.0
		if ph := r.Phases; len(ph) > 0 {
			first, last = ph[0].FirstLoss, ph[len(ph)-1].LastLoss
		}
		g, f := r.JobGoodput(), r.Goodput.Fleet
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.4f→%.4f\t%.1f%%\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%s\n", r.Job, r.Exit, r.Epochs,
			r.EventIDs, r.Steps, first, last, 100*r.InputStallFraction, g.SG, g.RG, g.PG, g.MPG, f.SG, f.MPG, j.path)
	}
	tw.Flush()
	fmt.Fprintln(w, "SG (job) is the chip-time a job held all the chips it asked for over the chip-time it asked for, as the web UI's Trainers")
	fmt.Fprintln(w, "table shows it; SG (fleet) divides by the capacity of the job's emulated fleet, chips it gave back once caught up included.")
	for _, j := range jobs {
		if why := j.rep.ProgramGoodputWhy(); why != "" {
			fmt.Fprintf(w, "%s: %s.\n", j.rep.Job, why)
		}
	}
	// Why the job that stalled most waited (issue 30): its input stall,
	// every second charged to the SIG work or the reader it waited on.
	var most *trainer.Report
	for i := range jobs {
		if r := &jobs[i].rep; most == nil || r.Stall.Stall > most.Stall.Stall {
			most = r
		}
	}
	if most != nil && most.Stall.Stall > 0 {
		fmt.Fprintf(w, "%s: %s", most.Job, most.Stall.Text())
	}
	for _, j := range jobs {
		if rd := j.rep.Readers; rd != nil && rd.Units > 0 && rd.Rows > 0 {
			fmt.Fprintf(w, "%s: its readers served %d units (%d examples) with %d object-store requests, %.2f per unit (issue 28: packed memo objects, coalesced reads)\n",
				j.rep.Job, rd.Units, rd.Rows, rd.ObjectRequests, float64(rd.ObjectRequests)/float64(rd.Units))
		}
	}
}

// writeReport writes a training report as text to path.
func writeReport(path string, rep trainer.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := rep.WriteText(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// demoEvict evicts everything computed from lower-cased query tokens: a
// dry run first, then the eviction, then the affected pipelines read again
// and the workers recompute.
func demoEvict(ctx context.Context, op sigv1.SIGClient, pipes []demoPipe, w io.Writer) error {
	const faulty = `unigrams(lower(col("query")))`
	dry, err := op.Evict(ctx, &sigv1.EvictRequest{Target: &sigv1.EvictRequest_SubgraphDsl{SubgraphDsl: faulty}, DryRun: true})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "dry run of %s: %d components used by %d pipelines (%s), %d blocks, %s\n",
		faulty, len(dry.Components), len(dry.Pipelines), strings.Join(dry.Pipelines, ", "), dry.Blocks, units.Bytes(dry.Bytes))
	ev, err := op.Evict(ctx, &sigv1.EvictRequest{Target: &sigv1.EvictRequest_SubgraphDsl{SubgraphDsl: faulty},
		Reason: "demo: the query tokenizer was found to mishandle punctuation"})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "evicted: %d objects deleted, audit entry %s\n", ev.ObjectsDeleted, ev.AuditId)
	for _, p := range pipes {
		sol, err := p.sc.GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: p.client, Pipeline: p.name})
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  %-10s now %d ready, %d pending\n", p.name, sol.BlocksReady, sol.BlocksPending)
	}
	fmt.Fprintln(w, "reading again schedules the recomputation:")
	return waitComplete(ctx, op, pipes, w)
}

// printCatalog prints the raw blocks of the ads source in event order.
func printCatalog(w io.Writer, srv *sigd.Server) error {
	metas, err := srv.Catalog().Blocks("ads")
	if err != nil {
		return err
	}
	tw := table(w, "  BLOCK	WINDOW	EVENTS	ROWS	SIZE	LATE")
	for _, m := range metas {
		fmt.Fprintf(tw, "  %s	%s	%s..%s	%d	%s	%v\n", m.ID, time.UnixMicro(m.WindowStart).UTC().Format("15:04"),
			time.UnixMicro(m.MinEventTime).UTC().Format("15:04:05"), time.UnixMicro(m.MaxEventTime).UTC().Format("15:04:05"),
			m.Rows, units.Bytes(m.Size), m.Late)
	}
	return tw.Flush()
}

type demoPipe struct {
	client, name string
	sc           sigv1.SIGClient
}

func modelByName(ms []fleetModel, name string) fleetModel {
	for _, m := range ms {
		if m.name == name {
			return m
		}
	}
	return fleetModel{}
}

func (d *demoEnv) loadTokens(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var f auth.File
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	for _, t := range f.Tokens {
		d.tokens[t.Name] = t.Token
	}
	return nil
}

func produce(ctx context.Context, brokers []string, n int, start time.Time, eps float64) error {
	// sigd created raw.ads when it started.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		return err
	}
	defer cl.Close()
	g := gen.New(gen.Config{Seed: 1, Start: start, EventsPerSecond: eps})
	return g.Produce(ctx, cl, ingest.TopicFor("ads"), n, record.ContentTypeRow)
}

// waitIngested waits until the catalog holds n events.
func waitIngested(ctx context.Context, srv *sigd.Server, n int64, w io.Writer) (int, error) {
	deadline := time.Now().Add(5 * time.Minute)
	last := int64(-1)
	for {
		metas, err := srv.Catalog().Blocks("ads")
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return 0, err
		}
		var rows int64
		for _, m := range metas {
			rows += m.Rows
		}
		if rows != last {
			fmt.Fprintf(w, "  %d events in %d blocks\n", rows, len(metas))
			last = rows
		}
		if rows >= n {
			return len(metas), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("ingestion stalled at %d of %d events", rows, n)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// waitComplete polls the read solutions and the queues until every
// pipeline's solution is complete, printing progress.
func waitComplete(ctx context.Context, op sigv1.SIGClient, pipes []demoPipe, w io.Writer) error {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var ready, total uint32
		done := 0
		for _, p := range pipes {
			sol, err := p.sc.GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: p.client, Pipeline: p.name})
			if err != nil {
				return err
			}
			ready += sol.BlocksReady
			total += sol.BlocksReady + sol.BlocksPending + sol.BlocksFailed
			if sol.BlocksFailed > 0 {
				return fmt.Errorf("pipeline %s/%s has %d failed blocks", p.client, p.name, sol.BlocksFailed)
			}
			if sol.Complete {
				done++
			}
		}
		st, err := op.Stats(ctx, &sigv1.StatsRequest{})
		if err != nil {
			return err
		}
		var queued uint32
		for _, q := range st.Queues {
			queued += q.Queued
		}
		fmt.Fprintf(w, "  %4d/%d input blocks ready, %d/%d pipelines complete, %d tasks queued, workers %d (desired %d)\n",
			ready, total, done, len(pipes), queued, st.WorkersActual, st.WorkersDesired)
		if done == len(pipes) {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("memoization did not finish in 10 minutes")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
