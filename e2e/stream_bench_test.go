package e2e

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sigdata/sig/internal/cpuclock"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/trainer/checkpoint"
	"github.com/sigdata/sig/warehouse/gen"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/warehouse/record"
)

// The stream BenchmarkCaughtUpStream produces, per second of wall time.
// These are chosen constants, not measurements: the report names them
// beside the figures, and bench/caughtup.sh runs the benchmark at more than
// one late share (CAUGHTUP_LATE) to show how the figures move with it.
const (
	// streamEvents new events a second at the head of the stream; each
	// advances event time by 3600/streamWindowEvents s, so a window (one
	// block) closes every streamWindowEvents/streamEvents s.
	streamEvents       = 200
	streamWindowEvents = 4000
	// defaultLate is the late share: late events, and as many feature
	// (query) and label (click) updates each, as a fraction of
	// streamEvents, for the two windows before the head.
	defaultLate = 0.05
)

// BenchmarkCaughtUpStream measures what SIG saves caught-up readers under
// a steady stream of late events and updates (issue 21, item 4), on the
// real system: `sigd dev` ingesting from Kafka and memoizing, and two
// caught-up jobs of the same graph (ctr_small) over the same stream, each a
// `trainer controller`, a `trainer host` and its own `reader` process; one
// reads what SIG has ready and computes what is pending (--caught-up-inputs
// sig), the other computes every input (lig, the paper's caught-up phase).
// Both follow the stream from its newest closed window with an initial
// epoch larger than the blocks there (--epoch-units 64), so they are caught
// up at their first epoch and train in the caught-up phase only, including
// the changed blocks they retrain.
//
// After both have committed an epoch, the readers' CPU (utime+stime from
// /proc, measured) and their served rows and input columns by mode (their
// /metrics) are sampled, and again after CAUGHTUP_SECONDS (default 60).
// The readers guard memo objects as cmd/reader does by default (16 sampled
// rows per memo input; CAUGHTUP_GUARD_ROWS sets --guard-sample-rows, 0
// off).
// Reported: CPU ns per example of each reader, the share of pure LIG's
// reader CPU the SIG reader saves, what bounds that share (the CPU of the
// LIG reader's transform programs per example, its
// sig_reader_transform_seconds_total, over its CPU: the most reading memo
// columns could save; the SIG reader's guard CPU; and the CPU of a third,
// idle reader per example), and the pending share p the stream left
// (input columns the SIG reader computed over all it served; compare with
// BenchmarkCaughtUpMix in package reader, which measures the same curve on
// fixed units).
func BenchmarkCaughtUpStream(b *testing.B) {
	late := defaultLate
	if s := os.Getenv("CAUGHTUP_LATE"); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v < 0 || v > 1 {
			b.Fatalf("CAUGHTUP_LATE=%q: want a share in [0, 1]", s)
		}
		late = v
	}
	seconds := 60
	if s := os.Getenv("CAUGHTUP_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("CAUGHTUP_SECONDS=%q", s)
		}
		seconds = n
	}
	guard := os.Getenv("CAUGHTUP_GUARD_ROWS")
	if guard == "" {
		guard = "16"
	}
	// CAUGHTUP_BLOCKS=window: blocks are cut when their window closes
	// (up to 20,000 rows, sealed at the latest 30 s after their first row)
	// and change buffers seal as late; default: `sigd dev` as
	// TestCaughtUpVersions runs it, 1,000-row blocks sealed 1 s after their
	// first row, so a block is cut every second or so.
	var devFlags []string
	if os.Getenv("CAUGHTUP_BLOCKS") == "window" {
		devFlags = []string{"--rows-per-block", "20000", "--seal-after", "30s"}
	}
	for i := 0; i < b.N; i++ {
		runStream(b, late, time.Duration(seconds)*time.Second, guard, devFlags)
	}
}

func runStream(b *testing.B, late float64, measure time.Duration, guardRows string, devFlags []string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := startDev(b, devFlags...)
	store, err := objstore.New(d.s3)
	if err != nil {
		b.Fatal(err)
	}
	kc, err := kgo.NewClient(kgo.SeedBrokers(d.broker))
	if err != nil {
		b.Fatal(err)
	}
	defer kc.Close()
	waitFor(b, time.Minute, "ingestion to start", func() bool {
		td, err := kadm.NewClient(kc).ListTopics(ctx, topic+".dlq")
		return err == nil && td[topic+".dlq"].Err == nil
	})

	// History: three closed windows, produced at once.
	start := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	gcfg := gen.Config{Seed: 31, Start: start, EventsPerSecond: float64(streamWindowEvents) / 3600, LateFraction: -1}
	head := gen.New(gcfg)   // produces
	shadow := gen.New(gcfg) // names the same events, for updates
	const history = 2
	if err := head.Produce(ctx, kc, topic, history*streamWindowEvents, record.ContentTypeRow); err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var produced []gen.Event // events produced, in order
	for range history * streamWindowEvents {
		produced = append(produced, shadow.Next())
	}

	// The stream: every second streamEvents new events at the head, and
	// late events and updates for the two windows before it.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(31, 1))
		lateID := int64(50_000_000)
		nChange := int(late*streamEvents + 0.5)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if err := head.Produce(ctx, kc, topic, streamEvents, record.ContentTypeRow); err != nil {
				return
			}
			mu.Lock()
			for range streamEvents {
				produced = append(produced, shadow.Next())
			}
			// The two windows before the head: the events of
			// [n-3w, n-w), w = streamWindowEvents.
			n := len(produced)
			lo, hi := max(0, n-3*streamWindowEvents), max(0, n-streamWindowEvents)
			var recs []*kgo.Record
			for range nChange {
				if hi <= lo {
					break
				}
				ev := produced[lo+r.IntN(hi-lo)]
				if rec, err := gen.UpdateRecord(topic, ev, map[string]any{"query": fmt.Sprintf("late query %d", r.IntN(1000))}); err == nil {
					recs = append(recs, rec)
				}
				ev = produced[lo+r.IntN(hi-lo)]
				if rec, err := gen.UpdateRecord(topic, ev, map[string]any{"click": 1 - ev.Click}); err == nil {
					recs = append(recs, rec)
				}
			}
			var lateAt int64
			if hi > lo {
				lateAt = produced[lo+r.IntN(hi-lo)].EventTime
			}
			mu.Unlock()
			if len(recs) > 0 && kc.ProduceSync(ctx, recs...).FirstErr() != nil {
				return
			}
			if nChange > 0 && lateAt > 0 {
				lg := gen.New(gen.Config{Seed: uint64(lateID), Start: time.UnixMicro(lateAt), EventsPerSecond: 1000, LateFraction: -1, FirstEventID: lateID})
				if lg.Produce(ctx, kc, topic, nChange, record.ContentTypeRow) != nil {
					return
				}
				lateID += int64(nChange)
			}
		}
	}()
	defer func() {
		close(stop)
		wg.Wait()
	}()

	trainerBin := sigdtest.BuildCommand(b, "cmd/trainer")
	readerBin := sigdtest.BuildCommand(b, "cmd/reader")
	dir := b.TempDir()
	graph := filepath.Join(dir, "graph.sig")
	if err := os.WriteFile(graph, []byte(sigdtest.DSL(b, "ctr_small")), 0o600); err != nil {
		b.Fatal(err)
	}
	tokens := filepath.Join(d.dir, "tokens.json")
	s3 := []string{"--s3-endpoint", d.s3.Endpoint, "--s3-access-key", d.s3.AccessKey, "--s3-secret-key", d.s3.SecretKey, "--s3-bucket", d.s3.Bucket}
	from := start.Add((history - 1) * time.Hour).UnixMicro()
	type job struct {
		mode           string
		reader         *sigdtest.Process
		metrics        string
		cs             *checkpoint.Store
		cpu0, cpu1     time.Duration
		rows0, rows1   float64
		memo0, memo1   float64
		local0, local1 float64
		units0, units1 float64
		// local and guard: the CPU time of its transform programs
		// (reader.MetricTransform).
		local0T, local1T float64
		guard0T, guard1T float64
	}
	var jobs []*job
	for _, mode := range []string{"sig", "lig"} {
		j := &job{mode: mode, metrics: sigdtest.FreeAddr(b)}
		raddr, caddr := sigdtest.FreeAddr(b), sigdtest.FreeAddr(b)
		j.reader = sigdtest.StartProcess(b, readerBin, append([]string{"--listen", raddr, "--tokens", tokens, "--metrics", j.metrics, "--guard-sample-rows", guardRows}, s3...))
		pipeline := "stream-" + mode
		sigdtest.StartProcess(b, trainerBin, append([]string{"controller", "--listen", caddr, "--tokens", tokens,
			"--client", "ctr", "--pipeline", pipeline, "--graph", graph, "--range", fmt.Sprintf("%d:", from), "--follow",
			"--caught-up-inputs", mode, "--sigd", d.addr, "--token", d.tokens["trainer-ctr"], "--kafka-brokers", d.broker,
			"--readers", raddr, "--hosts", "1", "--chips", "2", "--caught-up-chips", "1", "--epoch-units", "64", "--caught-up-epoch-units", "2",
			"--batch-size", "128", "--vocab", "4096", "--compile-time", "10ms",
			"--hold-poll", "300ms", "--status-interval", "0", "--report-json", filepath.Join(dir, mode+".json"), "--report-text", ""}, s3...))
		sigdtest.StartProcess(b, trainerBin, []string{"host", "--controller", caddr, "--id", "h0", "--token", d.tokens["trainer-ctr"], "--log-level", "debug"})
		if j.cs, err = checkpoint.NewStore(store, pipeline); err != nil {
			b.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	// An idle reader, started and scraped as the others are and serving
	// nothing: the CPU a reader process takes whatever it serves (its
	// runtime, health and metrics), which both sides pay per second.
	idleMetrics := sigdtest.FreeAddr(b)
	idle := sigdtest.StartProcess(b, readerBin, append([]string{"--listen", sigdtest.FreeAddr(b), "--tokens", tokens, "--metrics", idleMetrics, "--guard-sample-rows", guardRows}, s3...))
	for _, j := range jobs {
		waitFor(b, 3*time.Minute, j.mode+" job's first epoch", func() bool {
			m, err := j.cs.Latest(ctx)
			return err == nil && m != nil
		})
	}
	sample := func(j *job) (cpu time.Duration, rows, memo, local, units, localT, guardT float64) {
		cpu = procCPU(b, j.reader.Cmd.Process.Pid)
		m := scrapeMetrics(b, "http://"+j.metrics+"/metrics")
		return cpu, m["sig_reader_rows_total"], m[`sig_reader_inputs_total{mode="memo"}`], m[`sig_reader_inputs_total{mode="local"}`], m["sig_reader_units_total"],
			m[`sig_reader_transform_seconds_total{use="local"}`], m[`sig_reader_transform_seconds_total{use="guard"}`]
	}
	idleCPU := func() time.Duration {
		scrapeMetrics(b, "http://"+idleMetrics+"/metrics")
		return procCPU(b, idle.Cmd.Process.Pid)
	}
	for _, j := range jobs {
		j.cpu0, j.rows0, j.memo0, j.local0, j.units0, j.local0T, j.guard0T = sample(j)
	}
	idle0 := idleCPU()
	b.ResetTimer()
	time.Sleep(measure)
	b.StopTimer()
	for _, j := range jobs {
		j.cpu1, j.rows1, j.memo1, j.local1, j.units1, j.local1T, j.guard1T = sample(j)
	}
	idle1 := idleCPU()
	perEx := map[string]float64{}
	for _, j := range jobs {
		rows := j.rows1 - j.rows0
		if rows <= 0 {
			b.Fatalf("the %s reader served no rows in %v", j.mode, measure)
		}
		perEx[j.mode] = float64((j.cpu1 - j.cpu0).Nanoseconds()) / rows
		b.ReportMetric(perEx[j.mode], j.mode+"-cpu-ns/ex")
		b.ReportMetric(rows, j.mode+"-examples")
	}
	sig := jobs[0]
	if in := (sig.memo1 - sig.memo0) + (sig.local1 - sig.local0); in > 0 {
		b.ReportMetric((sig.local1-sig.local0)/in, "pending-share")
	}
	b.ReportMetric(1-perEx["sig"]/perEx["lig"], "saved")
	// What bounds "saved": reading a memo column instead of computing it
	// saves at most the CPU of the LIG reader's transform programs;
	// everything else a unit costs (its call, the raw read, decoding, the
	// batches sent) and an idle reader's CPU both sides pay.
	lig := jobs[1]
	ligRows := lig.rows1 - lig.rows0
	b.ReportMetric(1e9*(lig.local1T-lig.local0T)/ligRows, "lig-transform-ns/ex")
	b.ReportMetric(1e9*(lig.local1T-lig.local0T)/ligRows/perEx["lig"], "saved-bound")
	b.ReportMetric(1e9*(sig.guard1T-sig.guard0T)/(sig.rows1-sig.rows0), "sig-guard-ns/ex")
	b.ReportMetric(float64((idle1-idle0).Nanoseconds())/ligRows, "idle-cpu-ns/ex")
	if os.Getenv("CAUGHTUP_LOGS") != "" {
		b.Error("CAUGHTUP_LOGS: failing to print the processes' logs")
	}
	// The chosen constants that decide the figures, beside them.
	b.ReportMetric(streamEvents, "events/s")
	b.ReportMetric(streamWindowEvents, "window-events")
	blockRows := 1000.0
	if len(devFlags) > 0 {
		blockRows = 20000
	}
	b.ReportMetric(blockRows, "max-block-rows")
	b.ReportMetric(late, "late-share")
	b.ReportMetric(float64(sig.rows1-sig.rows0)/max(1, sig.units1-sig.units0), "rows/unit")
	if g, err := strconv.Atoi(guardRows); err == nil {
		b.ReportMetric(float64(g), "guard-rows")
	}
	b.ReportMetric(0, "ns/op")
}

// procCPU is the user and system CPU time of process pid so far, from its
// CPU clock (internal/cpuclock: /proc's 10 ms ticks made the window
// blocks' few units 4 or 5 ticks).
func procCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	d, err := cpuclock.Process(pid)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// scrapeMetrics GETs a /metrics page and returns each sample's value keyed
// by its series as exposed.
func scrapeMetrics(tb testing.TB, url string) map[string]float64 {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}
