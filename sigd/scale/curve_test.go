package scale_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/cli"
	"github.com/sigdata/sig/matching"
	"github.com/sigdata/sig/matching/insertion"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/scale"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/catalog"
	"github.com/sigdata/sig/workers"
)

func TestMain(m *testing.M) {
	code := m.Run()
	sigdtest.RemoveBuilds()
	os.Exit(code)
}

// ------------------------------------------------------------ population

// families are the shared cores of the cached components: component c is
// hash(truncate(families[c%5], max=(c/5)%20+1), buckets=1000+c), so every
// component is distinct (its bucket count), each truncate(family, max=M)
// is a subgraph of 1% of the components, and each family of 20%, as a
// fleet of related models shares nested subexpressions.
var families = []string{
	`unigrams(lower(col("query")))`,
	`unigrams(lower(col("ad_title")))`,
	`intersect(unigrams(lower(col("query"))), unigrams(lower(col("ad_title"))))`,
	`ngrams(lower(col("query")), n=2)`,
	`unigrams(strip_punct(lower(col("ad_title"))))`,
}

// familyNodes are the nodes of each family as written.
var familyNodes = []int{3, 3, 7, 3, 4}

const (
	nFamilies = 5
	nTruncs   = 20
	// freshBuckets is where the bucket counts of never-seen components
	// start, past any cached component's.
	freshBuckets = 1 << 40
)

// expr is the model input expression of a component numbered i with
// bucket count buckets, and its nodes as written.
func expr(i, buckets int) (string, int) {
	f := i % nFamilies
	return fmt.Sprintf("hash(truncate(%s, max=%d), buckets=%d)", families[f], (i/nFamilies)%nTruncs+1, buckets), familyNodes[f] + 2
}

// cached is the expression of cached component c.
func cached(c int) (string, int) { return expr(c, 1000+c) }

// fresh is the expression of the i-th never-seen component.
func fresh(i int) (string, int) { return expr(i, freshBuckets+i) }

// evictSubgraph is the subgraph evicted at point i: truncate(family,
// max=M), contained by the components c with c%5 == f and (c/5)%20 == M-1,
// a different one at each point.
func evictSubgraph(i int) (dsl string, f, m int) {
	f, m = i%nFamilies, nTruncs-i%nTruncs
	return fmt.Sprintf("truncate(%s, max=%d)", families[f], m), f, m
}

var clients = []string{"ctr", "cvr", "ranking", "explore"}

// searches are the measured SearchComponents queries, as an operator:
// subgraphs in 60%, 40%, 1% and one of the components, one in none, one
// with a client filter (which reads that client's pipelines) and a later
// page.
func searches(n int) []matching.Query {
	one, _ := cached(n / 2)
	return []matching.Query{
		{Subgraph: `lower(col("query"))`},
		{Subgraph: `unigrams(lower(col("ad_title")))`},
		{Subgraph: `truncate(unigrams(lower(col("ad_title"))), max=7)`},
		{Subgraph: one},
		{Subgraph: `lower(col("country"))`},
		{Subgraph: `unigrams(lower(col("query")))`, Client: "cvr"},
		{Subgraph: `unigrams(lower(col("query")))`, After: strings.Repeat("7", 64)},
	}
}

// ------------------------------------------------------------ the run

// env is one run of the curve: a warehouse (MinIO with the raw blocks,
// kfake), a sigd data directory that grows point by point, and the
// components cached so far.
type env struct {
	tb   testing.TB
	cfg  scale.Config
	w    *sigdtest.Warehouse
	dir  string // sigd's --data-dir
	toks sigdtest.Tokens
	tokF string
	bin  string
	rng  *sigv1.EventRange

	keys      []canon.Key // of cached component c
	fillPipes int
	fresh     int // never-seen components submitted so far
	restore   []canon.Key
	mu        sync.Mutex
	backlog   map[canon.Key]bool // the components the fill left pending
	// grpcPipes and inprocPipes are the measured pipelines registered so
	// far, for reads.
	grpcPipes, inprocPipes [][2]string
	r                      *rand.Rand
	profDir                string // SIG_SCALE_PROFILE_DIR
}

func newEnv(tb testing.TB, cfg scale.Config) *env {
	minioDir := cfg.MinIODir
	if minioDir != "" {
		d, err := os.MkdirTemp(minioDir, "sig-scale-minio-")
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { os.RemoveAll(d) })
		minioDir = d
	}
	w := sigdtest.NewWarehouse(tb, sigdtest.WarehouseConfig{Blocks: cfg.Blocks, RowsPerBlock: 100, MinIODir: minioDir, Seed: cfg.Seed})
	dir := tb.TempDir()
	w.Catalog(tb, dir)
	tokF, toks := sigdtest.WriteTokens(tb, tb.TempDir())
	return &env{tb: tb, cfg: cfg, w: w, dir: dir, toks: toks, tokF: tokF, bin: sigdtest.BuildCommand(tb, "cmd/sigd"),
		rng: w.All(), r: rand.New(rand.NewPCG(cfg.Seed, 1)), backlog: map[canon.Key]bool{}, profDir: os.Getenv("SIG_SCALE_PROFILE_DIR")}
}

// stores are sigd's stores opened in the benchmark's process while sigd is
// stopped, wired as sigd wires them.
type stores struct {
	cat   *catalog.Catalog
	cache *matching.Cache
	queue *workers.Queue
	f     *matching.Frontend
}

func queueOptions() workers.Options {
	return workers.Options{MaxQueuedPerClient: sigd.DefaultMaxQueuedPerClient}
}

func (e *env) open() *stores {
	s := &stores{}
	var err error
	if s.cat, err = catalog.Open(filepath.Join(e.dir, "catalog")); err != nil {
		e.tb.Fatal(err)
	}
	if s.cache, err = matching.OpenCache(filepath.Join(e.dir, "cache"), matching.CacheOptions{}); err != nil {
		e.tb.Fatal(err)
	}
	if s.queue, err = workers.Open(filepath.Join(e.dir, "queue"), queueOptions()); err != nil {
		e.tb.Fatal(err)
	}
	s.wire()
	return s
}

func (s *stores) wire() {
	// sigd's default insertion policy (--insertion=all): every component
	// memoized whole, as the fill's ready entries are.
	s.f = matching.NewFrontend(matching.FrontendConfig{Cache: s.cache, Blocks: catalogBlocks{s.cat},
		Scheduler: queueScheduler{s.queue}, Schema: adsOnly, Insertion: insertion.Config{MemoizeAll: true}})
}

func (s *stores) close(tb testing.TB) {
	for _, err := range []error{s.queue.Close(), s.cache.Close(), s.cat.Close()} {
		if err != nil {
			tb.Fatal(err)
		}
	}
}

func adsOnly(src string) (*transform.Schema, error) {
	if src != "ads" {
		return nil, fmt.Errorf("unknown source %q", src)
	}
	return transform.AdsSchema(), nil
}

// catalogBlocks and queueScheduler are sigd's adapters (sigd/blocks.go,
// sigd/server.go), which it does not export.
type catalogBlocks struct{ cat *catalog.Catalog }

func (c catalogBlocks) Range(source string, from, to int64) ([]matching.Block, error) {
	metas, err := c.cat.Range(source, from, to)
	if err != nil {
		return nil, err
	}
	out := make([]matching.Block, len(metas))
	for i, m := range metas {
		out[i] = matching.Block{Ref: m.Ref(), RawObject: m.Key, MinEvent: m.MinEventTime, MaxEvent: m.MaxEventTime, Rows: m.Rows}
	}
	return out, nil
}

type queueScheduler struct{ q *workers.Queue }

func (a queueScheduler) Enqueue(k canon.Key, block blockref.Memo, client, pipeline string, prio int32) error {
	_, err := a.q.Enqueue(workers.Request{Task: workers.TaskID{Component: k, Block: block}, Client: client, Pipeline: pipeline, Priority: prio})
	return err
}

func (a queueScheduler) Room(client string) int { return a.q.Room(client) }

func (a queueScheduler) Admit(client string, tasks []matching.Task) error {
	ids := make([]workers.TaskID, len(tasks))
	for i, t := range tasks {
		ids[i] = workers.TaskID{Component: t.Component, Block: t.Block}
	}
	return a.q.Admit(client, ids)
}

// backlogged reports whether cached component c is left pending: one in
// BacklogEvery, spread over the families and the fill's pipelines, but
// none of the 100 most popular (the measured submits draw components by
// rank c): a component requested that often was memoized long ago.
func (e *env) backlogged(c int) bool {
	return c >= 100 && (uint64(c)*0x9E3779B97F4A7C15>>32)%uint64(e.cfg.BacklogEvery) == 0
}

// grow fills the cache up to n components, through the frontend: pipelines
// of FillInputs components, each memoized over every block (its ready
// entries written with Cache.SetMemo before the pipeline is submitted, so
// the submit finds them), except one component in BacklogEvery, whose
// entries the submit creates pending and whose tasks it queues. It also
// restores what the previous point's eviction removed.
func (e *env) grow(s *stores, n int) {
	blocks := e.w.Blocks
	ready := func(k canon.Key) error {
		for _, b := range blocks {
			if err := s.cache.SetMemo(matching.MemoEntry{Component: k, Block: b.Ref().Memo(1), State: matching.MemoReady,
				Object: block.MemoKey(k, b.Ref().Memo(1)), Rows: 100, Bytes: 4096, Updated: time.Now(), Gen: rand.Uint64() | 1}); err != nil {
				return err
			}
		}
		return nil
	}
	for _, k := range e.restore {
		if err := ready(k); err != nil {
			e.tb.Fatal(err)
		}
	}
	e.restore = nil
	from := len(e.keys)
	if n <= from {
		return
	}
	e.keys = append(e.keys, make([]canon.Key, n-from)...)
	type job struct{ p, first, last int }
	jobs := make(chan job)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range max(2, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if err := e.fillPipeline(s, j.p, j.first, j.last, ready); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for c := from; c < n; c += e.cfg.FillInputs {
		select {
		case err := <-errs:
			close(jobs)
			wg.Wait()
			e.tb.Fatal(err)
		case jobs <- job{e.fillPipes, c, min(n, c+e.cfg.FillInputs)}:
			e.fillPipes++
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		e.tb.Fatal(err)
	default:
	}
}

func (e *env) fillPipeline(s *stores, p, first, last int, ready func(canon.Key) error) error {
	var src strings.Builder
	for c := first; c < last; c++ {
		x, _ := cached(c)
		fmt.Fprintf(&src, "input c%d = %s\n", c, x)
	}
	g, err := transform.Parse([]byte(src.String()), "", transform.Limits{})
	if err != nil {
		return err
	}
	cn, err := canon.Canonicalize(g, transform.AdsSchema(), transform.Default(), transform.Limits{}.EnsureDefaults())
	if err != nil {
		return err
	}
	backlog := 0
	for i, comp := range cn.Components {
		e.keys[first+i] = comp.Key
		if e.backlogged(first + i) {
			backlog++
			e.mu.Lock()
			e.backlog[comp.Key] = true
			e.mu.Unlock()
			continue
		}
		if err := ready(comp.Key); err != nil {
			return err
		}
	}
	r, err := s.f.Submit(matching.SubmitRequest{Client: clients[p%len(clients)], Pipeline: fmt.Sprintf("fill-%07d", p),
		Priority: 10, Graph: g, From: e.rng.StartMicros, To: e.rng.EndMicros})
	if err != nil {
		return fmt.Errorf("fill pipeline %d: %w", p, err)
	}
	n, want := last-first, backlog*len(e.w.Blocks)
	if r.Components != n || r.ComponentHits != 0 || r.TasksEnqueued != want {
		return fmt.Errorf("fill pipeline %d: %d components, %d hits, %d tasks; want %d new and %d tasks", p, r.Components, r.ComponentHits, r.TasksEnqueued, n, want)
	}
	return nil
}

// drain does what workers would have done since the previous point: it
// leases every queued task and completes those of the measured submits
// (marking their memo entries ready, as the completion hook does), giving
// back those of the fill's backlog, so that the backlog stays proportional
// to the cache rather than growing with the measurements.
func (e *env) drain(s *stores) {
	ctx := context.Background()
	var keep []string
	for {
		l, ok, err := s.queue.TryLease("drain")
		if err != nil {
			e.tb.Fatal(err)
		}
		if !ok {
			break
		}
		id := l.Task.ID
		if e.backlog[id.Component] {
			keep = append(keep, l.ID)
			continue
		}
		if gen, ok, err := s.f.Begin(id.Component, id.Block); err != nil {
			e.tb.Fatal(err)
		} else if ok {
			if err := s.f.MarkReady(id.Component, id.Block, gen, 100, 4096); err != nil {
				e.tb.Fatal(err)
			}
		}
		if err := s.queue.Complete(ctx, l.ID, workers.Result{}); err != nil {
			e.tb.Fatal(err)
		}
	}
	for _, id := range keep {
		if err := s.queue.Return(id); err != nil {
			e.tb.Fatal(err)
		}
	}
}

// submit is one measured submit: its graph and what it must find.
type submit struct {
	client, pipeline string
	prio             int32
	dsl              string
	nodes            int
	components, hits int // distinct components, of which cached
}

// nextSubmit draws a graph of MinNodes to MaxNodes nodes as written: model
// inputs drawn from the cached components by Zipf popularity, or, with
// probability MissFraction, never seen.
func (e *env) nextSubmit(zipf *rand.Zipf, name string, i int) submit {
	budget := e.cfg.MinNodes + e.r.IntN(e.cfg.MaxNodes-e.cfg.MinNodes+1)
	var src strings.Builder
	seen := map[int]bool{}
	s := submit{client: clients[i%len(clients)], pipeline: name, prio: int32(1 + e.r.IntN(100))}
	for in := 0; ; in++ {
		var x string
		var nodes int
		isFresh := e.r.Float64() < e.cfg.MissFraction
		c := int(zipf.Uint64())
		if isFresh {
			x, nodes = fresh(e.fresh)
		} else {
			x, nodes = cached(c)
		}
		if s.nodes+nodes > budget && in > 0 {
			break
		}
		s.nodes += nodes
		if isFresh {
			e.fresh++
			s.components++
		} else if !seen[c] {
			seen[c] = true
			s.components++
			s.hits++
		}
		fmt.Fprintf(&src, "input f%d = %s\n", in, x)
	}
	s.dsl = src.String()
	return s
}

func (e *env) zipf() *rand.Zipf {
	return rand.NewZipf(e.r, e.cfg.ZipfS, 1, uint64(len(e.keys)-1))
}

// inProcess measures the frontend in the benchmark's process on sigd's
// stores: submits, read solutions, searches.
func (e *env) inProcess(s *stores, p *scale.Point) {
	runtime.GC() // the fill's garbage is not the measurements'
	z := e.zipf()
	run := func(n int, tag string) []time.Duration {
		var lat []time.Duration
		for i := range n {
			sub := e.nextSubmit(z, fmt.Sprintf("in-%d-%s-%d", len(e.keys), tag, i), i)
			t0 := time.Now()
			g, err := transform.Parse([]byte(sub.dsl), "", transform.Limits{})
			if err != nil {
				e.tb.Fatal(err)
			}
			r, err := s.f.Submit(matching.SubmitRequest{Client: sub.client, Pipeline: sub.pipeline, Priority: sub.prio, Graph: g,
				From: e.rng.StartMicros, To: e.rng.EndMicros})
			lat = append(lat, time.Since(t0))
			if err != nil {
				e.tb.Fatal(err)
			}
			if r.Components != sub.components || r.ComponentHits != sub.hits {
				e.tb.Fatalf("in-process submit %s: %d components, %d hits; want %d, %d", sub.pipeline, r.Components, r.ComponentHits, sub.components, sub.hits)
			}
			e.inprocPipes = append(e.inprocPipes, [2]string{sub.client, sub.pipeline})
		}
		return lat
	}
	run(e.cfg.Submits/20, "warm")
	stop := e.profile("submit")
	p.SubmitFrontend = scale.Summarize(run(e.cfg.Submits, "m"))
	stop()

	var lat []time.Duration
	for range e.cfg.Reads {
		pp := e.inprocPipes[e.r.IntN(len(e.inprocPipes))]
		t0 := time.Now()
		if _, err := s.f.ReadSolution(pp[0], pp[1], 0, 0); err != nil {
			e.tb.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	p.ReadSolutionFrontend = scale.Summarize(lat)

	lat = lat[:0]
	qs := searches(len(e.keys))
	for i := range e.cfg.Searches {
		q := qs[i%len(qs)]
		q.Limit = 100
		t0 := time.Now()
		if _, _, err := s.f.Search(q); err != nil {
			e.tb.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	p.SearchFrontend = scale.Summarize(lat)

	// The reuse figures: what Stats and a /metrics scrape recompute after
	// any submit. Three walks, fewer when one takes seconds.
	lat = lat[:0]
	stop = e.profile("reuse")
	for len(lat) < 3 {
		t0 := time.Now()
		if _, err := s.f.Reuse(); err != nil {
			e.tb.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		if lat[len(lat)-1] > 3*time.Second {
			break
		}
	}
	stop()
	p.Reuse = scale.Summarize(lat)
}

// profile starts a CPU profile of the benchmark's process, written to
// SIG_SCALE_PROFILE_DIR/<components>-<what>.cpu.pprof when stop is called;
// it does nothing without that directory. The in-process figures run the
// code sigd runs (matching.Frontend on its stores), so their profile is
// where a submit's time goes, without gRPC.
func (e *env) profile(what string) (stop func()) {
	if e.profDir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(e.profDir, fmt.Sprintf("%d-%s.cpu.pprof", len(e.keys), what)))
	if err != nil {
		e.tb.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		e.tb.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			e.tb.Fatal(err)
		}
	}
}

// queueCycles reopens the queue (timed: the backlog is rebuilt in memory)
// and runs enqueue, lease, complete cycles above the backlog's priority.
func (e *env) queueCycles(s *stores, p *scale.Point) {
	if err := s.queue.Close(); err != nil {
		e.tb.Fatal(err)
	}
	t0 := time.Now()
	q, err := workers.Open(filepath.Join(e.dir, "queue"), queueOptions())
	if err != nil {
		e.tb.Fatal(err)
	}
	p.Queue.OpenSeconds = time.Since(t0).Seconds()
	s.queue = q
	s.wire()
	p.Queue.Backlog = q.Stats().Queued
	ctx := context.Background()
	t0 = time.Now()
	for i := range e.cfg.QueueCycles {
		var k canon.Key
		copy(k[:], fmt.Sprintf("cycle-%d-%d", len(e.keys), i))
		id := workers.TaskID{Component: k, Block: blockref.ParseMemo("b")}
		if _, err := q.Enqueue(workers.Request{Task: id, Client: clients[i%len(clients)], Pipeline: "cycle", Priority: matching.MaxPriority}); err != nil {
			e.tb.Fatal(err)
		}
		l, ok, err := q.TryLease("scale")
		if err != nil || !ok {
			e.tb.Fatal(ok, err)
		}
		if l.Task.ID != id {
			e.tb.Fatalf("leased %v, want the task just queued above the backlog", l.Task.ID)
		}
		if err := q.Complete(ctx, l.ID, workers.Result{}); err != nil {
			e.tb.Fatal(err)
		}
	}
	secs := time.Since(t0).Seconds()
	p.Queue.CyclesPerSecond = float64(e.cfg.QueueCycles) / secs
	p.Queue.OpsPerSecond = 3 * p.Queue.CyclesPerSecond
}

// dirBytes is the size of every file under dir.
func dirBytes(tb testing.TB, dir string) int64 {
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // an obsolete file Pebble deleted during the walk
		}
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// ------------------------------------------------------------ sigd

// proc is a running `sigd serve` on the point's stores and its clients.
type proc struct {
	p     *sigdtest.Process
	conns []*grpc.ClientConn
	sig   map[string]sigv1.SIGClient // by principal
}

func (e *env) startSigd() (*proc, time.Duration) {
	args := append([]string{"serve", "--data-dir", e.dir, "--tokens", e.tokF, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--kafka-brokers", strings.Join(e.w.Kafka.Brokers, ","), "--remote-workers"}, e.w.S3Args()...)
	t0 := time.Now()
	p := sigdtest.StartProcess(e.tb, e.bin, args)
	took := time.Since(t0)
	pr := &proc{p: p, sig: map[string]sigv1.SIGClient{}}
	for _, who := range append(clients[:len(clients):len(clients)], "operator") {
		cc, err := cli.Dial(p.Addr, e.toks[who], false)
		if err != nil {
			e.tb.Fatal(err)
		}
		pr.conns = append(pr.conns, cc)
		pr.sig[who] = sigv1.NewSIGClient(cc)
	}
	return pr, took
}

// stop stops sigd gracefully (SIGTERM), as an operator would.
func (pr *proc) stop(tb testing.TB) {
	for _, cc := range pr.conns {
		cc.Close()
	}
	_ = pr.p.Cmd.Process.Signal(syscall.SIGTERM)
	deadline := time.Now().Add(60 * time.Second)
	for !pr.p.Exited() {
		if time.Now().After(deadline) {
			tb.Logf("sigd did not stop within 60s of SIGTERM; killing it")
			pr.p.Kill()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// procStatus returns a /proc/<pid>/status field in bytes (kB fields).
func procStatus(tb testing.TB, pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == field+":" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n << 10
		}
	}
	tb.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}

// procCPU is the process's user+system CPU time (/proc/<pid>/stat).
func procCPU(tb testing.TB, pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / time.Duration(clockTicks())
}

// clockTicks is sysconf(_SC_CLK_TCK), from getconf; 100 on Linux.
var clockTicks = sync.OnceValue(func() int64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if n, perr := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err == nil && perr == nil && n > 0 {
		return n
	}
	return 100
})

// metric reads one unlabelled metric from sigd's /metrics.
func metric(tb testing.TB, httpAddr, name string) float64 {
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			v, _ := strconv.ParseFloat(f[1], 64)
			return v
		}
	}
	tb.Fatalf("sigd's /metrics has no %s", name)
	return 0
}

// overGRPC measures the sigd process: submits, read solutions, searches,
// Stats, its memory and CPU, and an eviction.
func (e *env) overGRPC(pr *proc, p *scale.Point, point int) {
	ctx := context.Background()
	pid := pr.p.Cmd.Process.Pid
	z := e.zipf()
	var shape scale.SubmitShape
	run := func(n int, tag string, measure bool) []time.Duration {
		var lat []time.Duration
		for i := range n {
			sub := e.nextSubmit(z, fmt.Sprintf("g-%d-%s-%d", len(e.keys), tag, i), i)
			req := sigdtest.Submit(sub.client, sub.pipeline, sub.prio, sub.dsl, e.rng)
			t0 := time.Now()
			r, err := pr.sig[sub.client].SubmitGraph(ctx, req)
			lat = append(lat, time.Since(t0))
			if err != nil {
				e.tb.Fatal(err)
			}
			if int(r.Components) != sub.components || int(r.ComponentHits) != sub.hits {
				e.tb.Fatalf("submit %s: %d components, %d hits; want %d, %d", sub.pipeline, r.Components, r.ComponentHits, sub.components, sub.hits)
			}
			e.grpcPipes = append(e.grpcPipes, [2]string{sub.client, sub.pipeline})
			if measure {
				shape.Nodes += float64(sub.nodes)
				shape.Components += float64(r.Components)
				shape.ComponentHits += float64(r.ComponentHits)
				shape.BlockHits += float64(r.BlockHits)
				shape.BlockMisses += float64(r.BlockMisses)
				shape.TasksEnqueued += float64(r.TasksEnqueued)
			}
		}
		return lat
	}
	run(e.cfg.Submits/20, "warm", false)
	cpu0 := procCPU(e.tb, pid)
	p.Submit = scale.Summarize(run(e.cfg.Submits, "m", true))
	p.Sigd.CPUMsPerSubmit = float64(procCPU(e.tb, pid)-cpu0) / float64(time.Millisecond) / float64(e.cfg.Submits)
	if req := shape.BlockHits + shape.BlockMisses; req > 0 {
		shape.BlockHitRate = shape.BlockHits / req
	}
	n := float64(e.cfg.Submits)
	shape.Nodes, shape.Components, shape.ComponentHits = shape.Nodes/n, shape.Components/n, shape.ComponentHits/n
	shape.BlockHits, shape.BlockMisses, shape.TasksEnqueued = shape.BlockHits/n, shape.BlockMisses/n, shape.TasksEnqueued/n
	p.SubmitShape = shape

	var lat []time.Duration
	for range e.cfg.Reads {
		pp := e.grpcPipes[e.r.IntN(len(e.grpcPipes))]
		t0 := time.Now()
		if _, err := pr.sig[pp[0]].GetReadSolution(ctx, &sigv1.GetReadSolutionRequest{Client: pp[0], Pipeline: pp[1]}); err != nil {
			e.tb.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	p.ReadSolution = scale.Summarize(lat)

	lat = lat[:0]
	qs := searches(len(e.keys))
	byQuery := make([][]time.Duration, len(qs))
	for i := range e.cfg.Searches {
		q := qs[i%len(qs)]
		t0 := time.Now()
		if _, err := pr.sig["operator"].SearchComponents(ctx, &sigv1.SearchComponentsRequest{SubgraphDsl: q.Subgraph, Client: q.Client,
			PageToken: q.After, Limit: 100}); err != nil {
			e.tb.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		byQuery[i%len(qs)] = append(byQuery[i%len(qs)], time.Since(t0))
	}
	p.Search = scale.Summarize(lat)
	for i, q := range qs {
		name := "subgraph " + q.Subgraph
		if q.Client != "" {
			name += " client " + q.Client
		}
		if q.After != "" {
			name += " after " + q.After[:8] + "..."
		}
		p.SearchByQuery = append(p.SearchByQuery, scale.QueryLatency{Query: name, Latency: scale.Summarize(byQuery[i])})
	}

	// Stats after a submit: the submit makes sigd's reuse figures stale,
	// so Stats scans the cache.
	lat = lat[:0]
	var st *sigv1.StatsResponse
	for i := range 3 {
		run(1, fmt.Sprintf("stats%d", i), false)
		t0 := time.Now()
		var err error
		if st, err = pr.sig["operator"].Stats(ctx, &sigv1.StatsRequest{}); err != nil {
			e.tb.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	p.Stats = scale.Summarize(lat)
	p.ReadyBlocks, p.Pipelines = int64(st.MemoBlocks), int(st.Pipelines)

	p.Sigd.RSSBytes = procStatus(e.tb, pid, "VmRSS")
	p.Sigd.PeakRSSBytes = procStatus(e.tb, pid, "VmHWM")
	p.Sigd.GoHeapBytes = int64(metric(e.tb, pr.p.HTTPAddr, "go_memstats_heap_inuse_bytes"))

	e.evict(pr, p, point)
}

// evict writes a small memo object for every block of the components that
// contain the point's subgraph (untimed), then evicts the subgraph with the
// Evict RPC.
func (e *env) evict(pr *proc, p *scale.Point, point int) {
	ctx := context.Background()
	dsl, f, m := evictSubgraph(point)
	var keys []canon.Key
	for c := f; c < len(e.keys); c += nFamilies {
		if (c/nFamilies)%nTruncs == m-1 {
			keys = append(keys, e.keys[c])
		}
	}
	payload := bytes.Repeat([]byte("m"), 512)
	objs := make(chan string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var werr error
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range objs {
				if _, err := e.w.Store.Put(ctx, o, payload, nil); err != nil {
					mu.Lock()
					werr = errors.Join(werr, err)
					mu.Unlock()
				}
			}
		}()
	}
	for _, k := range keys {
		for _, b := range e.w.Blocks {
			objs <- block.MemoKey(k, blockref.ParseMemo(b.ID))
		}
	}
	close(objs)
	wg.Wait()
	if werr != nil {
		e.tb.Fatal(werr)
	}
	t0 := time.Now()
	r, err := pr.sig["operator"].Evict(ctx, &sigv1.EvictRequest{Target: &sigv1.EvictRequest_SubgraphDsl{SubgraphDsl: dsl}, Reason: "scale benchmark"})
	secs := time.Since(t0).Seconds()
	if err != nil {
		e.tb.Fatal(err)
	}
	// The never-seen components the measured submits registered contain
	// it too (pending entries, no objects).
	comps := len(keys)
	for i := f; i < e.fresh; i += nFamilies {
		if (i/nFamilies)%nTruncs == m-1 {
			comps++
		}
	}
	if len(r.Components) != comps || int(r.ObjectsDeleted) != len(keys)*len(e.w.Blocks) {
		e.tb.Fatalf("evict %s: %d components, %d objects; want %d, %d", dsl, len(r.Components), r.ObjectsDeleted, comps, len(keys)*len(e.w.Blocks))
	}
	p.Evict = scale.Evict{Components: len(r.Components), Blocks: int(r.Blocks), Objects: int(r.ObjectsDeleted), Seconds: secs,
		ComponentsPerSecond: float64(len(r.Components)) / secs, BlocksPerSecond: float64(r.Blocks) / secs}
	e.restore = keys
}

func loadAvg() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// run measures every point of cfg.Sizes.
func (e *env) run(res *scale.Results) {
	for i, n := range e.cfg.Sizes {
		p := scale.Point{Components: n}
		p.LoadAvg[0] = loadAvg()
		s := e.open()
		e.drain(s)
		t0 := time.Now()
		stop := e.profile(fmt.Sprintf("fill-to-%d", n))
		e.grow(s, n)
		stop()
		p.FillSeconds = time.Since(t0).Seconds()
		t0 = time.Now()
		if err := s.cache.Compact(context.Background()); err != nil {
			e.tb.Fatal(err)
		}
		p.CompactSeconds = time.Since(t0).Seconds()
		p.Store.CacheBytes = dirBytes(e.tb, filepath.Join(e.dir, "cache"))
		e.queueCycles(s, &p)
		e.inProcess(s, &p)
		p.Store.QueueBytes = dirBytes(e.tb, filepath.Join(e.dir, "queue"))
		p.Store.CatalogBytes = dirBytes(e.tb, filepath.Join(e.dir, "catalog"))
		s.close(e.tb)

		pr, took := e.startSigd()
		p.Sigd.StartSeconds = took.Seconds()
		e.overGRPC(pr, &p, i)
		pr.stop(e.tb)
		p.LoadAvg[1] = loadAvg()
		p.Summarize()
		res.Points = append(res.Points, p)
		e.tb.Logf("%d components: submit p50 %.2f p99 %.2f ms (in process %.2f, %.2f), rss %.0f MiB, cache %.0f MiB, fill %.0f s",
			n, p.Submit.P50Ms, p.Submit.P99Ms, p.SubmitFrontend.P50Ms, p.SubmitFrontend.P99Ms,
			float64(p.Sigd.RSSBytes)/(1<<20), float64(p.Store.CacheBytes)/(1<<20), p.FillSeconds)
	}
}

// ------------------------------------------------------------ entry points

// envInt reads an integer knob from the environment.
func envInt(tb testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(strings.ReplaceAll(v, "_", ""))
	if err != nil || n <= 0 {
		tb.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// defaultConfig is the benchmark's: bench/scale.sh's knobs change it.
func defaultConfig() scale.Config {
	return scale.Config{Sizes: []int{1000, 10_000, 100_000}, Blocks: 8, FillInputs: 200, BacklogEvery: 40,
		Submits: 2000, Reads: 1000, Searches: 140, MinNodes: 10, MaxNodes: 200, MissFraction: 0.05, ZipfS: 1.1,
		QueueCycles: 10_000, EvictShare: 1.0 / (nFamilies * nTruncs), GCPercent: sigd.DefaultGCPercent, Seed: 18}
}

// BenchmarkScaleCurve grows a real matching cache point by point (Pebble
// on disk, through the frontend) and at each point measures sigd as a
// process over gRPC, the frontend in process on the same stores, the queue
// with its backlog, the stores' size, sigd's memory and an eviction
// (package doc). Run it once (-benchtime 1x); the knobs are environment
// variables:
//
//	SIG_SCALE_SIZES      cached components at each point (1000,10000,100000)
//	SIG_SCALE_SUBMITS    measured submits per point, each way (2000)
//	SIG_SCALE_OUT        write OUT.json and OUT.txt (bench/scale.sh)
//	SIG_SCALE_NOTES      a file of notes for the results, one a line
//	SIG_SCALE_PROFILE_DIR  CPU profiles of the fills, the in-process
//	                     submits and the reuse walks
//	SIG_SCALE_MINIO_DIR  where MinIO keeps its data (default: a temporary
//	                     directory on disk)
func BenchmarkScaleCurve(b *testing.B) {
	cfg := defaultConfig()
	if v := os.Getenv("SIG_SCALE_SIZES"); v != "" {
		cfg.Sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(f), "_", ""))
			if err != nil || n < cfg.FillInputs || (len(cfg.Sizes) > 0 && n <= cfg.Sizes[len(cfg.Sizes)-1]) {
				b.Fatalf("SIG_SCALE_SIZES=%q: want increasing sizes of at least %d", v, cfg.FillInputs)
			}
			cfg.Sizes = append(cfg.Sizes, n)
		}
	}
	cfg.Submits = envInt(b, "SIG_SCALE_SUBMITS", cfg.Submits)
	cfg.MinIODir = os.Getenv("SIG_SCALE_MINIO_DIR")
	// The files are checked before the run, not after its half hour (go
	// test runs in this package's directory: relative paths are from it).
	out, notesFile := os.Getenv("SIG_SCALE_OUT"), os.Getenv("SIG_SCALE_NOTES")
	if notesFile != "" {
		if _, err := os.Stat(notesFile); err != nil {
			b.Fatalf("SIG_SCALE_NOTES: %v", err)
		}
	}
	if out != "" {
		if fi, err := os.Stat(filepath.Dir(out)); err != nil || !fi.IsDir() {
			b.Fatalf("SIG_SCALE_OUT=%s: no directory %s (%v)", out, filepath.Dir(out), err)
		}
	}
	res := runCurve(b, cfg)
	last := res.Points[len(res.Points)-1]
	b.ReportMetric(float64(last.Components), "components")
	b.ReportMetric(last.Submit.P50Ms, "submit-p50-ms")
	b.ReportMetric(last.Submit.P99Ms, "submit-p99-ms")
	b.ReportMetric(last.SubmitFrontend.P99Ms, "frontend-p99-ms")
	b.ReportMetric(float64(last.Sigd.RSSBytes)/(1<<20), "sigd-rss-MiB")
	if out != "" {
		if notesFile != "" {
			text, err := os.ReadFile(notesFile)
			if err != nil {
				b.Fatal(err)
			}
			for _, line := range strings.Split(string(text), "\n") {
				if line = strings.TrimSpace(line); line != "" {
					res.Notes = append(res.Notes, line)
				}
			}
		}
		writeResults(b, res, out)
	}
}

// notes are what the figures themselves say about scaling: the target at
// the largest point, and how each figure grew from the smallest point to
// the largest against the cache (x the components).
func notes(res *scale.Results) []string {
	if len(res.Points) == 0 {
		return nil
	}
	a, z := res.Points[0], res.Points[len(res.Points)-1]
	met := "met"
	if z.SubmitP99Ms >= 5 {
		met = "NOT met"
	}
	out := []string{fmt.Sprintf("target submit p99 < 5 ms at 1M components: at %d components p99 is %.2f ms over gRPC (%.2f ms in process, p50 %.2f/%.2f), %s; load average %.1f-%.1f during that point on %d CPUs",
		z.Components, z.SubmitP99Ms, z.SubmitFrontend.P99Ms, z.SubmitP50Ms, z.SubmitFrontend.P50Ms, met, z.LoadAvg[0], z.LoadAvg[1], res.MachineDetail.CPUs)}
	if z.Components < 1_000_000 {
		out = append(out, fmt.Sprintf("the curve stops at %d components: 1M was not measured in this run", z.Components))
	}
	if len(res.Points) < 2 {
		return out
	}
	x := func(v0, v1 float64) string {
		if v0 <= 0 {
			return "n/a"
		}
		return fmt.Sprintf("x%.2f", v1/v0)
	}
	out = append(out, fmt.Sprintf("from %d to %d components (x%.0f): submit p50 %s, p99 %s (in process p50 %s); read solution p50 %s; "+
		"reuse walk (Stats, /metrics) %s; search p50 %s; queue ops/s %s; pebble bytes %s; sigd RSS %s (Go heap in use %s); sigd start %s; eviction blocks/s %s",
		a.Components, z.Components, float64(z.Components)/float64(a.Components),
		x(a.SubmitP50Ms, z.SubmitP50Ms), x(a.SubmitP99Ms, z.SubmitP99Ms), x(a.SubmitFrontend.P50Ms, z.SubmitFrontend.P50Ms),
		x(a.ReadSolution.P50Ms, z.ReadSolution.P50Ms), x(a.Reuse.P50Ms, z.Reuse.P50Ms), x(a.Search.P50Ms, z.Search.P50Ms),
		x(a.QueueOpsPerS, z.QueueOpsPerS), x(float64(a.PebbleBytes), float64(z.PebbleBytes)), x(float64(a.SigdRSSBytes), float64(z.SigdRSSBytes)),
		x(float64(a.Sigd.GoHeapBytes), float64(z.Sigd.GoHeapBytes)), x(a.Sigd.StartSeconds, z.Sigd.StartSeconds), x(a.EvictPerS, z.EvictPerS)))
	return out
}

func runCurve(tb testing.TB, cfg scale.Config) *scale.Results {
	old := debug.SetGCPercent(cfg.GCPercent)
	tb.Cleanup(func() { debug.SetGCPercent(old) })
	m := scale.Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH, MemoryBytes: memTotal()}
	res := &scale.Results{Started: time.Now().UTC(), Config: cfg, Machine: m.String(), MachineDetail: m}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		res.Commit = strings.TrimSpace(string(out))
	}
	e := newEnv(tb, cfg)
	e.run(res)
	res.Seconds = time.Since(res.Started).Seconds()
	res.Notes = notes(res)
	return res
}

func memTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n << 10
		}
	}
	return 0
}

func writeResults(tb testing.TB, res *scale.Results, out string) {
	var j, t bytes.Buffer
	if err := res.Write(&j); err != nil {
		tb.Fatal(err)
	}
	if err := res.WriteText(&t); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(out+".json", j.Bytes(), 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(out+".txt", t.Bytes(), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// TestScaleCurveSmall runs the curve end to end on a few thousand
// components (the benchmark's machinery at make-test size: seconds), and
// checks what the benchmark's readers rely on: every summary figure
// measured, the stores growing with the cache, and the JSON's contract
// (schema, machine, the point fields `sigctl report` reads).
func TestScaleCurveSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts MinIO, kfake and a sigd process")
	}
	cfg := defaultConfig()
	cfg.Sizes = []int{1000, 3000}
	cfg.Blocks, cfg.Submits, cfg.Reads, cfg.Searches, cfg.QueueCycles, cfg.MaxNodes = 4, 60, 20, 7, 300, 100
	res := runCurve(t, cfg)
	for i, p := range res.Points {
		if p.Components != cfg.Sizes[i] || p.Submits != cfg.Submits || p.SubmitP50Ms <= 0 || p.SubmitP99Ms < p.SubmitP50Ms {
			t.Errorf("point %d: %d components, %d submits, p50 %v p99 %v ms; want %d, %d, 0 < p50 <= p99",
				i, p.Components, p.Submits, p.SubmitP50Ms, p.SubmitP99Ms, cfg.Sizes[i], cfg.Submits)
		}
		if p.QueueOpsPerS <= 0 || p.SigdRSSBytes <= 0 || p.EvictPerS <= 0 || p.Reuse.N == 0 || p.Evict.Components == 0 {
			t.Errorf("point %d: queue %v ops/s, rss %d, evict %v blocks/s (%d components), %d reuse walks: want each measured",
				i, p.QueueOpsPerS, p.SigdRSSBytes, p.EvictPerS, p.Evict.Components, p.Reuse.N)
		}
		if want := p.Store.CacheBytes + p.Store.QueueBytes + p.Store.CatalogBytes; p.PebbleBytes != want || want == 0 {
			t.Errorf("point %d: pebble_bytes %d, stores %+v", i, p.PebbleBytes, p.Store)
		}
		// Every cached component but those the fill left pending is
		// ready over every block, as sigd's own Stats counts them (the
		// point's eviction came after Stats).
		backlog := 0
		for c := range p.Components {
			if (&env{cfg: cfg}).backlogged(c) {
				backlog++
			}
		}
		if min := int64((p.Components - backlog) * cfg.Blocks); p.ReadyBlocks < min {
			t.Errorf("point %d: sigd counts %d ready blocks, want at least %d", i, p.ReadyBlocks, min)
		}
	}
	if a, b := res.Points[0].Store.CacheBytes, res.Points[1].Store.CacheBytes; b <= a {
		t.Errorf("the cache store did not grow with the cache: %d then %d bytes", a, b)
	}

	var buf bytes.Buffer
	if err := res.Write(&buf); err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Schema  string           `json:"schema"`
		Machine string           `json:"machine"`
		Points  []map[string]any `json:"points"`
		Notes   []string         `json:"notes"`
	}
	if err := json.Unmarshal(buf.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	if raw.Schema != "sig.scale/v1" || raw.Machine == "" || len(raw.Points) != 2 {
		t.Fatalf("schema %q, machine %q, %d points", raw.Schema, raw.Machine, len(raw.Points))
	}
	for _, k := range []string{"components", "submit_p50_ms", "submit_p99_ms", "submits", "queue_ops_per_s", "pebble_bytes", "sigd_rss_bytes", "evict_per_s"} {
		if v, ok := raw.Points[1][k].(float64); !ok || v <= 0 {
			t.Errorf("point 1's %q is %v, want a positive number", k, raw.Points[1][k])
		}
	}
	back, err := scale.Read(bytes.NewReader(buf.Bytes()))
	if err != nil || len(back.Points) != 2 || back.Points[1].SubmitP99Ms != res.Points[1].SubmitP99Ms {
		t.Fatalf("read back: %v, %+v", err, back)
	}
	if _, err := scale.Read(strings.NewReader(`{"schema":"sig.fleet/v1"}`)); !errors.Is(err, scale.ErrSchema) {
		t.Errorf("reading another report: %v, want ErrSchema", err)
	}
	var txt bytes.Buffer
	if err := res.WriteText(&txt); err != nil || !strings.Contains(txt.String(), "submit-p99") {
		t.Errorf("text: %v\n%s", err, txt.String())
	}
}
