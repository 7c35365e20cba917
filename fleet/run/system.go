package run

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/sigdata/sig/fleet/results"
	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/internal/cli"
	"github.com/sigdata/sig/internal/devenv"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/reader"
)

// system is the running SIG the fleet is served by: `sigd dev` (which
// starts MinIO and a kfake Kafka) with no in-process workers, `sigd
// worker` processes as many as sigd's autoscaler asks for, and two
// `reader` processes, one serving SIG units and one LIG units, so that
// each side's CPU is its own processes'.
type system struct {
	cfg  *Config
	dir  string
	sigd *proc
	// minio is the pid of the MinIO sigd started (its CPU is read from
	// the kernel like the others', though it is not our child).
	minio int

	addr             string
	operator, worker string // tokens
	tokensFile       string
	s3               devState
	brokers          []string
	conn             *grpc.ClientConn
	sig              sigv1.SIGClient

	sigReader, ligReader *proc
	sigAddr, ligAddr     string
	// sigMetrics and ligMetrics are the readers' /metrics addresses
	// (wanted bytes: readerWanted).
	sigMetrics, ligMetrics string
	workers                *workerPool
}

// devState is sigd dev's dev.json (sigd.devState).
type devState struct {
	S3Endpoint   string `json:"s3_endpoint"`
	S3AccessKey  string `json:"s3_access_key"`
	S3SecretKey  string `json:"s3_secret_key"`
	KafkaBrokers string `json:"kafka_brokers"`
}

// startSystem starts sigd, the readers and one worker.
func startSystem(ctx context.Context, cfg *Config, dir string) (_ *system, err error) {
	s := &system{cfg: cfg, dir: dir}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	free := func() string {
		a, ferr := devenv.FreeAddr()
		if ferr != nil && err == nil {
			err = ferr
		}
		return a
	}
	listen, http := free(), free()
	if err != nil {
		return nil, err
	}
	window := cfg.RowsPerBlock * cfg.BlocksPerSlot
	s.sigd, err = startProc("sigd", cfg.SigdBin, append([]string{"dev", "--data-dir", filepath.Join(dir, "sigd"),
		"--listen", listen, "--http", http,
		// Only `sigd worker` processes memoize, so that their CPU is
		// theirs; the autoscaler still decides how many (workerPool).
		"--remote-workers", "--workers-min", "1", "--workers-max", strconv.Itoa(cfg.WorkersMax),
		"--target-drain", "5s", "--scale-down-cooldown", "10s",
		// A slot is one ingestion window of BlocksPerSlot blocks: the
		// generator writes one event per second of event time, so a
		// window of RowsPerBlock*BlocksPerSlot seconds seals into
		// BlocksPerSlot blocks of RowsPerBlock rows.
		"--rows-per-block", strconv.Itoa(cfg.RowsPerBlock), "--window", fmt.Sprintf("%ds", window),
		"--seal-after", "2s",
		// Blocks of exactly RowsPerBlock rows, as the run's plan counts
		// them: no bound by bytes, and no compaction of quiet windows
		// (issue 28; sigd's defaults cut by bytes and compact).
		"--block-bytes", "-1", "--compact-quiet", "-1s"}, cfg.SigdArgs...))
	if err != nil {
		return nil, err
	}
	if _, err = s.sigd.waitLine(ctx, 2*time.Minute, func(l string) string {
		if i := strings.Index(l, "sigd: listening grpc="); i >= 0 {
			return "ok"
		}
		return ""
	}); err != nil {
		return nil, err
	}
	s.addr = listen
	s.tokensFile = filepath.Join(dir, "sigd", "tokens.json")
	if err = s.loadTokens(); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "sigd", "dev.json"))
	if err != nil {
		return nil, err
	}
	if err = json.Unmarshal(b, &s.s3); err != nil {
		return nil, fmt.Errorf("dev.json: %w", err)
	}
	s.brokers = strings.Split(s.s3.KafkaBrokers, ",")
	if ms := childrenOf(s.sigd.pid, "minio"); len(ms) == 1 {
		s.minio = ms[0]
	} else {
		return nil, fmt.Errorf("sigd (pid %d) has %d MinIO children, want 1", s.sigd.pid, len(ms))
	}
	// The run counts MinIO's requests per phase: a server whose counters
	// cannot be read fails now, not after the first step.
	if _, err = s.traffic(ctx); err != nil {
		return nil, fmt.Errorf("MinIO's request counters: %w", err)
	}
	if s.conn, err = cli.Dial(s.addr, s.operator, false); err != nil {
		return nil, err
	}
	s.sig = sigv1.NewSIGClient(s.conn)

	s3 := []string{"--s3-endpoint", s.s3.S3Endpoint, "--s3-access-key", s.s3.S3AccessKey, "--s3-secret-key", s.s3.S3SecretKey}
	for _, r := range []struct {
		name    string
		p       **proc
		addr    *string
		metrics *string
	}{{"reader-sig", &s.sigReader, &s.sigAddr, &s.sigMetrics}, {"reader-lig", &s.ligReader, &s.ligAddr, &s.ligMetrics}} {
		*r.addr, *r.metrics = free(), free()
		if err != nil {
			return nil, err
		}
		args := append([]string{"--listen", *r.addr, "--metrics", *r.metrics, "--tokens", s.tokensFile}, s3...)
		if r.name == "reader-sig" {
			args = append(args, cfg.SIGReaderArgs...)
		}
		if *r.p, err = startProc(r.name, cfg.ReaderBin, args); err != nil {
			return nil, err
		}
		if _, err = (*r.p).waitLine(ctx, time.Minute, func(l string) string {
			if strings.HasPrefix(l, "listening on ") {
				return "ok"
			}
			return ""
		}); err != nil {
			return nil, err
		}
	}
	s.workers = &workerPool{bin: cfg.SigdBin, max: cfg.WorkersMax,
		args: append([]string{"worker", "--sigd", s.addr, "--token", s.worker,
			"--concurrency", strconv.Itoa(cfg.WorkerConcurrency)}, append(s3, cfg.WorkerArgs...)...)}
	if err = s.workers.resize(1); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *system) loadTokens() error {
	b, err := os.ReadFile(s.tokensFile)
	if err != nil {
		return err
	}
	var f auth.File
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("%s: %w", s.tokensFile, err)
	}
	for _, t := range f.Tokens {
		switch {
		case t.Role == auth.RoleOperator && s.operator == "":
			s.operator = t.Token
		case t.Role == auth.RoleWorker && s.worker == "":
			s.worker = t.Token
		}
	}
	if s.operator == "" || s.worker == "" {
		return fmt.Errorf("%s: no operator or worker token", s.tokensFile)
	}
	return nil
}

// cpu reads every process's CPU time, in seconds.
func (s *system) cpu() (worker, sigReader, ligReader, sigd, minio float64) {
	sec := func(d time.Duration) float64 { return d.Seconds() }
	m, _ := cpuOf(s.minio)
	return sec(s.workers.cpu()), sec(s.sigReader.cpu()), sec(s.ligReader.cpu()), sec(s.sigd.cpu()), sec(m)
}

// minioCPU is MinIO's CPU so far (0 if it cannot be read: the run then
// attributes nothing to storage rather than fail).
func (s *system) minioCPU() time.Duration {
	d, _ := cpuOf(s.minio)
	return d
}

// storeSource says how the run counts the object store's traffic.
const storeSource = "MinIO's own request counters (metrics v3 " + devenv.MetricsPath +
	": requests by S3 API, errors, bytes sent and received), read before and after each phase with MinIO's CPU; " +
	"a phase's traffic is the difference, its side's (the run does one thing at a time: sigd's own requests meanwhile count with the side)"

// traffic is what MinIO has served since it started.
func (s *system) traffic(ctx context.Context) (devenv.S3Traffic, error) {
	return devenv.ScrapeS3Traffic(ctx, s.s3.S3Endpoint, s.s3.S3AccessKey, s.s3.S3SecretKey)
}

// requests is t in the results' terms.
func requests(t devenv.S3Traffic) results.Requests {
	q := results.Requests{SentBytes: t.SentBytes, ReceivedBytes: t.ReceivedBytes}
	if len(t.Requests) > 0 {
		q.ByAPI = t.Requests
	}
	for _, n := range t.Errors {
		q.Errors += n
	}
	return q
}

// mark is MinIO at a phase's boundary: its CPU and what it has served.
type mark struct {
	cpu time.Duration
	t   devenv.S3Traffic
}

// since is MinIO's CPU seconds and traffic from m0 to m.
func (m mark) since(m0 mark) (float64, results.Requests) {
	return (m.cpu - m0.cpu).Seconds(), requests(m.t.Sub(m0.t))
}

// begin marks a phase's start: the counters, then the CPU; end marks its
// end: the CPU, then the counters. A scrape costs MinIO a little CPU (the
// answer is computed when asked), which so falls between phases.
func (s *system) begin(ctx context.Context) (mark, error) {
	t, err := s.traffic(ctx)
	return mark{cpu: s.minioCPU(), t: t}, err
}

func (s *system) end(ctx context.Context) (mark, error) {
	cpu := s.minioCPU()
	t, err := s.traffic(ctx)
	return mark{cpu: cpu, t: t}, err
}

// logs returns the tail of every process's output, for a failed run.
func (s *system) logs() string {
	var b strings.Builder
	for _, p := range []*proc{s.sigd, s.sigReader, s.ligReader} {
		if p != nil {
			fmt.Fprintf(&b, "--- %s:\n%s\n", p.name, lastLines(p.log.String(), 40))
		}
	}
	if s.workers != nil {
		for _, p := range s.workers.all() {
			fmt.Fprintf(&b, "--- %s:\n%s\n", p.name, lastLines(p.log.String(), 20))
		}
	}
	return b.String()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// stop stops the readers, the workers and sigd (which stops MinIO).
func (s *system) stop() {
	if s.conn != nil {
		s.conn.Close()
	}
	var wg sync.WaitGroup
	for _, p := range []*proc{s.sigReader, s.ligReader} {
		if p != nil {
			wg.Add(1)
			go func() { defer wg.Done(); p.stop(10 * time.Second) }()
		}
	}
	if s.workers != nil {
		wg.Add(1)
		go func() { defer wg.Done(); s.workers.resize(0) }()
	}
	wg.Wait()
	if s.sigd != nil {
		s.sigd.stop(20 * time.Second)
	}
}

// workerPool runs `sigd worker` processes; the run resizes it to what
// sigd's autoscaler asks for (Stats.workers_desired), as an orchestrator
// would. Stopped workers' CPU is kept.
type workerPool struct {
	bin  string
	args []string
	max  int

	mu      sync.Mutex
	live    []*proc
	stopped []*proc
	started int
	peak    int
}

func (w *workerPool) resize(n int) error {
	w.mu.Lock()
	n = min(n, w.max)
	for len(w.live) < n {
		w.started++
		p, err := startProc(fmt.Sprintf("worker-%d", w.started), w.bin,
			append(append([]string{}, w.args...), "--name", fmt.Sprintf("fleet-worker-%d", w.started)))
		if err != nil {
			w.mu.Unlock()
			return err
		}
		w.live = append(w.live, p)
	}
	w.peak = max(w.peak, len(w.live))
	var stopping []*proc
	for len(w.live) > n {
		p := w.live[len(w.live)-1]
		w.live = w.live[:len(w.live)-1]
		w.stopped = append(w.stopped, p) // its CPU counts while it stops
		stopping = append(stopping, p)
	}
	w.mu.Unlock()
	// A worker stopping finishes its leased tasks (the pool's graceful
	// close).
	for _, p := range stopping {
		p.stop(40 * time.Second)
	}
	return nil
}

func (w *workerPool) cpu() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var d time.Duration
	for _, p := range w.live {
		d += p.cpu()
	}
	for _, p := range w.stopped {
		d += p.cpu()
	}
	return d
}

func (w *workerPool) all() []*proc {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append(append([]*proc{}, w.live...), w.stopped...)
}

// failed reports a worker that exited on its own.
func (w *workerPool) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.live {
		if p.exited() {
			return fmt.Errorf("%s exited: %v\n%s", p.name, p.waitErr, lastLines(p.log.String(), 20))
		}
	}
	return nil
}

// autoscale resizes the pool to sigd's desired worker count every second
// until ctx ends.
func (s *system) autoscale(ctx context.Context, errs chan<- error) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.workers.failed(); err != nil {
			errs <- err
			return
		}
		st, err := s.sig.Stats(ctx, &sigv1.StatsRequest{})
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
				errs <- fmt.Errorf("stats: %w", err)
			}
			return
		}
		if err := s.workers.resize(max(1, int(st.WorkersDesired))); err != nil {
			errs <- err
			return
		}
	}
}

// readerCounts reads a reader's counts of its units' reads from its
// /metrics: the wanted bytes by object, the requests by object and kind
// and the footer cache's lookups (results.ReaderCounts).
func readerCounts(ctx context.Context, addr string) (results.ReaderCounts, error) {
	c := results.ReaderCounts{Requests: map[string]int64{}, Fetched: map[string]int64{}, Footers: map[string]int64{}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return c, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return c, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c, fmt.Errorf("reader metrics %s: %s", addr, resp.Status)
	}
	wanted := 0
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 16<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, value, err := devenv.ParseSample(line)
		if err != nil {
			return c, fmt.Errorf("reader metrics %s: %w", addr, err)
		}
		switch name {
		case reader.MetricObjectWantedBytes:
			switch labels["object"] {
			case "raw":
				c.WantedRaw, wanted = int64(value), wanted+1
			case "memo":
				c.WantedMemo, wanted = int64(value), wanted+1
			}
		case reader.MetricObjectRequests:
			c.Requests[labels["object"]+"/"+labels["kind"]] = int64(value)
		case reader.MetricObjectFetchedBytes:
			c.Fetched[labels["object"]+"/"+labels["kind"]] = int64(value)
		case reader.MetricFooterCache:
			c.Footers[labels["outcome"]] = int64(value)
		}
	}
	if err := sc.Err(); err != nil {
		return c, fmt.Errorf("reader metrics %s: %w", addr, err)
	}
	if wanted != 2 {
		return c, fmt.Errorf("reader metrics %s: %s by object raw and memo not found", addr, reader.MetricObjectWantedBytes)
	}
	return c, nil
}
